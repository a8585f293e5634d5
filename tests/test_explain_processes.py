"""``explain`` follows the program's Python subprocesses (pytest-xdist workers, multiprocessing,
subprocess), each under its own process; caps its events and says what it dropped; says a
full temp folder as such; keeps a secret given on the command line out of every output; and
a --json that cannot be written costs neither the Markdown nor the terminal view.
Real processes, real pytest-xdist, a real full tmpfs."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, run_cli, small_tmpfs, unmount
from flagos_doctor.errors import EXIT_CAUSE

EXPLAIN = os.path.join(FIXTURES, "explain")
STACKS = os.path.join(FIXTURES, "probe_stacks")


def explain(tmp_path, *command, options=(), env=None, cwd=None):
    out = tmp_path / "why.json"
    done = run_cli("explain", "--json", str(out), *options, "--", *command, env=env, cwd=cwd or str(tmp_path))
    return done, (json.loads(out.read_text()) if out.exists() else None)


def test_pytest_xdist_workers_failures_get_their_causes_each_under_its_worker(tmp_path):
    pytest.importorskip("xdist")
    done, document = explain(tmp_path, "python", "-m", "pytest", "-n", "2", "-q", "-p", "no:cacheprovider",
                             "seed_tests.py", options=("--stack", "seedreplica"), env={"PYTHONPATH": STACKS},
                             cwd=EXPLAIN)
    assert done.returncode == EXIT_CAUSE, done.stderr
    assert "2 failed, 1 passed" in done.stdout
    workers = {p["pid"]: p for p in document["processes"] if p["role"].startswith("pytest-xdist worker gw")}
    assert len(workers) == 2 and document["processes"][0]["role"] == "program"
    by_test = {f["test"].rsplit("::", 1)[1]: f for f in document["failures"]}
    compiled, unrelated = by_test["test_compiled_model_on_flagos"], by_test["test_unrelated_arithmetic"]
    assert compiled["process"] in workers and unrelated["process"] in workers
    assert compiled["role"] == workers[compiled["process"]]["role"]
    [cause] = [c for c in document["causes"] if c["failure"] == compiled["id"]]
    assert cause["process"] == compiled["process"] and compiled["causes"] == [cause["id"]]
    assert "(CudaDriver.is_active) asked torch.cuda.is_available()" in cause["message"]
    # The read it names is among that worker's own events, made in that test.
    [read] = [e for e in workers[compiled["process"]]["events"] if e["seq"] == cause["read"]]
    assert read["step"] == f"test {compiled['test']}"
    assert unrelated["causes"] == []
    assert f"in {compiled['role']} (pid {compiled['process']})" in done.stderr


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_a_multiprocessing_child_and_a_python_subprocess_are_recorded_under_their_process(tmp_path, method):
    done, document = explain(tmp_path, "python", os.path.join(EXPLAIN, "spawns.py"), method)
    assert done.returncode == 0, done.stderr  # the program's own: no cause, it exited 0
    roles = {p["pid"]: p["role"] for p in document["processes"]}
    [child] = [f for f in document["failures"] if f["type"] == "builtins.ValueError"]
    assert roles[child["process"]] == "multiprocessing child" and child["process_name"] == "fixture-child"
    assert child["traceback"][-1]["function"] == "child_fails"
    [sub] = [f for f in document["failures"] if f["type"] == "builtins.KeyError"]
    assert roles[sub["process"]] == "subprocess" and "the python subprocess failed" in sub["error"]
    program = document["processes"][0]
    assert program["role"] == "program" and program["pid"] == document["program"]["pid"]
    assert all(p["ppid"] == program["pid"] for p in document["processes"][1:])
    # report --explain carries each process without its events (counted).
    from flagos_doctor.report.bundle import explain_piece_or_raise

    piece = explain_piece_or_raise(str(tmp_path / "why.json"))
    assert [p["pid"] for p in piece["processes"]] == [p["pid"] for p in document["processes"]]
    assert all("events" not in p and p["event_count"] >= 0 for p in piece["processes"])


def test_events_past_the_cap_are_counted_and_said(tmp_path):
    # The cap lowered from its 5,000 (each write of a new variable costs the watch a little).
    done, document = explain(tmp_path, "python", os.path.join(EXPLAIN, "many_writes.py"), "800",
                             env={"FLAGOS_DOCTOR_EXPLAIN_MAX_EVENTS": "500"})
    assert done.returncode == 0, done.stderr
    writes = [e for e in document["events"] if e["kind"] == "write" and e["probe"].startswith("$FLAGOS_CAP_")]
    assert len(writes) <= 500 and document["doctor"]["max_events"] == 500
    dropped = document["processes"][0]["dropped"]["write"]
    assert dropped >= 300 and len(writes) + dropped >= 800
    assert any(f"{dropped:,} writes were counted, not recorded" in n for n in document["notices"])


def mounted_full(tmp_path, size="256k", fill=False):
    folder = small_tmpfs(tmp_path, size, fill, name="tmp")
    if folder is None:
        pytest.skip("mounting a tmpfs is not allowed here")
    return folder


def test_a_temp_folder_that_fills_is_said_as_such(tmp_path):
    folder = mounted_full(tmp_path)
    try:
        done, document = explain(tmp_path, "python", os.path.join(EXPLAIN, "many_writes.py"), "4000",
                                 env={"TMPDIR": str(folder)})
        assert done.returncode == 0, done.stderr
        assert document["notices"][0].startswith(f"the temp folder {folder} is full")
        assert not any("os._exit" in n for n in document["notices"])
        assert os.listdir(folder) == []  # the scratch is removed all the same
    finally:
        unmount(folder)


def test_a_secret_given_on_the_command_line_stays_out_of_every_output(tmp_path):
    secret = "argv-Secret-3e9d1"
    script = tmp_path / "takes_a_key.py"
    script.write_text("import sys\nraise RuntimeError('rejected: ' + sys.argv[-1])\n")
    done, document = explain(tmp_path, "python", str(script), "--api-key", secret,
                             options=("--markdown", str(tmp_path / "why.md")))
    assert done.returncode == 1
    assert document["program"]["command"][-1] == "<redacted>"
    assert secret not in json.dumps(document) and secret not in (tmp_path / "why.md").read_text()
    ours = done.stderr.split("flagos-doctor explain: ", 1)[1]  # (before it: the program's own traceback)
    assert secret not in ours and "--api-key '<redacted>'" in ours.splitlines()[0]


def test_a_json_that_cannot_be_written_keeps_the_markdown_and_the_view(tmp_path):
    folder = mounted_full(tmp_path, "64k", fill=True)
    try:
        done = run_cli("explain", "--json", str(folder / "why.json"), "--markdown", str(tmp_path / "why.md"), "--",
                       "python", os.path.join(EXPLAIN, "raises.py"), cwd=str(tmp_path))
        assert done.returncode == 2
        assert (tmp_path / "why.md").read_text().startswith("## flagos-doctor explain")
        assert "FAIL #1 uncaught exception: RuntimeError" in done.stderr  # the terminal view
        last = done.stderr.splitlines()[-1]
        assert last.startswith(f"flagos-doctor: error: {folder}/why.json: cannot write: No space left on device")
        assert last.endswith("; the other output was written")
    finally:
        unmount(folder)
