"""``flagos-doctor explain -- CMD``: the probe's watch in the user's own program.

Every test runs the real CLI in a real subprocess, which runs a real program (a script,
pytest) with the watch installed through the interpreter's start-up hook; the stacks are
real packages under ``tests/fixtures`` importing real torch and Triton (CPU).
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import FIXTURES, REPO_ROOT, run_cli
from flagos_doctor.errors import EXIT_CAUSE

EXPLAIN = os.path.join(FIXTURES, "explain")


def explain(tmp_path, *command, options=(), env=None, input=None, cwd=None):
    """Run ``explain --json`` on ``command``; return (CompletedProcess, document or None)."""
    out = tmp_path / "explain.json"
    done = run_cli("explain", "--json", str(out), *options, "--", *command, env=env, input=input,
                   cwd=cwd or str(tmp_path))
    document = json.loads(out.read_text()) if out.exists() else None
    return done, document


def test_stdin_stdout_stderr_and_exit_code_pass_through_with_the_watch_on(tmp_path):
    # The user's own sitecustomize (on PYTHONPATH) must still run behind ours.
    env = {"PYTHONPATH": os.path.join(EXPLAIN, "usersite")}
    done, document = explain(tmp_path, "python", os.path.join(EXPLAIN, "passthrough.py"), "7",
                             env=env, input="shout")
    bare = run_cli_bare([sys.executable, os.path.join(EXPLAIN, "passthrough.py"), "7"], env, "shout")
    assert done.returncode == 7 == bare.returncode
    assert done.stdout == bare.stdout == "out: SHOUT\nuser sitecustomize ran: yes\n"
    # stderr is the program's, then the view (stdout stays the program's alone).
    assert done.stderr.startswith(bare.stderr) and bare.stderr == "err: to stderr\n"
    assert "flagos-doctor explain: python " in done.stderr
    assert document["schema"] == "flagos-doctor/explain/1"
    assert document["program"]["watched"] and document["program"]["finished"]
    assert document["program"]["returncode"] == 7
    # The watch saw the program's own write of a watched variable, at its line.
    [write] = [e for e in document["events"] if e["probe"] == "$FLAGOS_EXPLAIN_FIXTURE"]
    assert write["where"]["file"] == "passthrough.py" and write["where"]["line"] == 6
    # A non-zero exit with no exception is one failure, and nothing caused it.
    [failure] = document["failures"]
    assert failure["kind"] == "exit" and failure["causes"] == [] and document["causes"] == []
    assert "exited with status 7" in failure["error"]


def run_cli_bare(argv, env, input):
    import subprocess

    full = dict(os.environ)
    full.update(env)
    return subprocess.run(argv, capture_output=True, text=True, env=full, input=input, timeout=120)


def test_an_uncaught_exception_is_a_failure_with_its_frames_and_its_cause_chain(tmp_path):
    done, document = explain(tmp_path, "python", os.path.join(EXPLAIN, "raises.py"))
    assert done.returncode == 1
    assert "RuntimeError: cannot load /nonexistent/flagos-explain-fixture" in done.stderr  # Python's own traceback
    [failure] = document["failures"]
    assert failure["kind"] == "exception" and failure["type"] == "builtins.RuntimeError"
    assert [f["function"] for f in failure["traceback"]] == ["<module>", "main", "load"]
    assert failure["traceback"][-1]["line"] == 8
    assert failure["raised_from"][0]["error"].startswith("FileNotFoundError")
    assert "no cause found" in done.stderr


def test_a_real_crash_keeps_the_events_and_exits_as_a_shell_says(tmp_path):
    crash = "import os, ctypes; os.environ['FLAGOS_EXPLAIN_FIXTURE'] = 'before'; ctypes.string_at(0)"
    done, document = explain(tmp_path, "python", "-c", crash)
    assert done.returncode == 128 + 11 and document["program"]["signal"] == "SIGSEGV"
    assert not document["program"]["finished"] and "without running its exit hooks" in document["notices"][-1]
    assert [e["probe"] for e in document["events"]] == ["$FLAGOS_EXPLAIN_FIXTURE"]  # written before the crash
    [failure] = document["failures"]
    assert failure["kind"] == "exit" and failure["error"] == "the program was killed by SIGSEGV"


@pytest.mark.parametrize("command", [[], ["no-such-program-anywhere"]])
def test_nothing_to_run_is_bad_usage(tmp_path, command):
    done = run_cli("explain", "--", *command) if command else run_cli("explain")
    assert done.returncode == 2


def test_stdout_is_the_programs_so_json_to_stdout_is_refused(tmp_path):
    done = run_cli("explain", "--json", "-", "--", "python", "-c", "print(1)")
    assert done.returncode == 2 and "--json: stdout is the program's" in done.stderr


# -- the seed, on the CPU seed replica (real torch, real Triton, real Inductor) ---------------
STACKS = os.path.join(FIXTURES, "probe_stacks")
SEED_ENV = {"PYTHONPATH": STACKS}


def demo_line(text: str, after: str) -> int:
    """The line of ``text`` in the demo's ``__init__.py``, after the line holding ``after``."""
    with open(os.path.join(REPO_ROOT, "flagos_doctor", "demo", "__init__.py")) as handle:
        lines = list(handle)
    start = next(n for n, line in enumerate(lines) if after in line)
    return next(n for n, line in enumerate(lines, start=1) if n > start and text in line)


def assert_names_reader_probe_writer_branch(cause):
    assert cause["probe"] == "torch.cuda.is_available"
    # The reader: Triton's driver choice (or dynamo's preserve_global_state).
    assert (cause["reader"]["file"], cause["reader"]["function"]) in (
        ("triton/backends/nvidia/driver.py", "CudaDriver.is_active"),
        ("torch/_dynamo/convert_frame.py", "preserve_global_state.<locals>._fn"))
    # The writer: the stack's redirect, at its line.
    assert cause["writer"] == {"file": "flagos_doctor/demo/__init__.py", "function": "_alias_cuda_to_flagos",
                               "line": demo_line("torch.cuda.is_available = torch.flagos.is_available",
                                                 after="def _alias_cuda_to_flagos")}
    assert cause["answer"] == "True" and cause["original_answer"] == "False"
    assert "Triton chose its nvidia driver" in cause["branch"]


@pytest.fixture(scope="module")
def seed_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed")
    repro = os.path.join(EXPLAIN, "seed_repro.py")
    done, document = explain(tmp, "python", repro, options=("--stack", "seedreplica"), env=SEED_ENV)
    bare = run_cli_bare([sys.executable, repro], {"PYTHONPATH": os.pathsep.join([STACKS, REPO_ROOT])}, "")
    return done, document, bare


def test_the_seed_reproducer_is_explained_by_reader_probe_writer_and_branch(seed_run):
    done, document, _ = seed_run
    assert done.returncode == EXIT_CAUSE  # a cause was found
    [failure] = document["failures"]
    assert failure["kind"] == "exception" and "libcuda.so cannot found" in failure["error"]
    assert failure["traceback"][-1]["function"] == "libcuda_dirs"
    [cause] = document["causes"]
    assert cause["failure"] == failure["id"] and failure["causes"] == [cause["id"]]
    assert_names_reader_probe_writer_branch(cause)
    assert "CAUSE python " in done.stderr and "(CudaDriver.is_active) asked torch.cuda.is_available()" in done.stderr


def test_the_watched_compile_prints_what_it_prints_unwatched(seed_run):
    # The watch is invisible: no warning named after its hooks, no hook frame in the traceback.
    done, _, bare = seed_run
    assert bare.returncode == 1 and "libcuda.so cannot found" in bare.stderr
    assert done.stdout == bare.stdout
    program_stderr = done.stderr.split("\nflagos-doctor explain: ")[0]
    link = program_stderr.split("flagos_doctor/demo/")[0]  # the demo's path differs: our link folder
    assert "tracer.py" not in program_stderr
    assert program_stderr.count("\n") == bare.stderr.count("\n")
    assert program_stderr.splitlines()[-1] == bare.stderr.splitlines()[-1] and link


def test_a_program_leaving_by_os_exit_keeps_the_stale_guard_its_events_show(tmp_path):
    # No exit hooks, so no final state (no probes' answers, no decisions): the seed's stale
    # guard is found from the saved original and the read alone, with nothing claimed of its branch.
    done, document = explain(tmp_path, "python", "-c", "import os, seedbug; os._exit(3)", env=SEED_ENV)
    assert done.returncode == 3 and document["facts"] == {} and not document["program"]["finished"]
    (stale,) = [f for f in document["findings"] if f["kind"] == "stale-guard"]
    assert stale["message"].endswith(
        "it saw the redirected probe (seedbug/device.py:4). The original is saved as "
        "torch.cuda._seed_native_is_available (#5); read that instead.")
    assert "stale-guard" in done.stderr


def test_the_fixed_stack_fails_without_a_cause(tmp_path):
    repro = os.path.join(EXPLAIN, "seed_repro.py")
    done, document = explain(tmp_path, "python", repro, "seedreplica_fixed", options=("--stack", "seedreplica_fixed"),
                             env=SEED_ENV)
    [failure] = document["failures"]
    assert failure["kind"] == "exception" and "0 active drivers" in failure["error"]  # no Triton backend on CPU
    assert document["causes"] == [] and failure["causes"] == []
    assert done.returncode == 1 == document["program"]["returncode"]  # the program's own code
    assert "no cause found" in done.stderr


@pytest.fixture(scope="module")
def seed_tests(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("seed-tests")
    done, document = explain(tmp, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "seed_tests.py",
                             options=("--stack", "seedreplica", "--markdown", str(tmp / "why.md"), "--max-chars", "3000"),
                             env=SEED_ENV, cwd=EXPLAIN)
    document["markdown"] = (tmp / "why.md").read_text()  # (for the test of the page; not the document's)
    document["json_path"] = str(tmp / "explain.json")
    return done, document


def test_the_markdown_keeps_the_failures_and_causes_within_its_budget(seed_tests):
    # The clause (explain/markdown.py): each failure and its cause up front; tracebacks, the
    # watched probes and the events in <details> while the budget holds, and what is left out
    # named. Which parts fit depends on the paths inside the page (the JSON's, the
    # interpreter's, the temporary folders in events' values), so the test holds the clause
    # at each budget and for a short and a 200-character path, never one incidental layout.
    from flagos_doctor.explain.markdown import render
    from flagos_doctor.markdown import DEFAULT_MAX_CHARS

    done, document = seed_tests
    page = document["markdown"]  # the CLI's own page, --max-chars 3000
    assert len(page) <= 3000 and page.startswith("## flagos-doctor explain")
    assert page.endswith(f"The full record: `{document['json_path']}`.</sub>\n")
    parts = {"the traceback of failure #1": "<summary>Traceback of failure #1</summary>",
             "the traceback of failure #2": "<summary>Traceback of failure #2</summary>",
             "the watched probes": "<summary>Watched probes the run wrote</summary>",
             "events": "<summary>All events (", "the run's findings": "### Findings of the run"}
    for budget in (3_000, 5_000, 8_000, DEFAULT_MAX_CHARS):
        for record in ("`why.json`", f"`/{'long-folder/' * 16}why.json`"):
            page = render(document, max_chars=budget, full_record=record)
            assert len(page) <= budget, (budget, record)
            assert "**cause**: test " in page and "(CudaDriver.is_active) asked torch.cuda.is_available()" in page
            assert "no cause found" in page
            closing = page.split("<sub>Left out to stay under ")[1] if "<sub>Left out" in page else ""
            assert not closing or closing.startswith(f"{budget:,} characters: ") and record in closing
            for named, shown in parts.items():
                assert (shown in page) or (named in closing), (budget, named)
            if budget == DEFAULT_MAX_CHARS:  # the size users meet: every traceback and the probes folded in
                assert page.count("<details>") >= 4 and "the traceback" not in closing and "probes" not in closing


def test_each_failed_test_is_a_failure_and_only_the_probes_one_has_a_cause(seed_tests):
    done, document = seed_tests
    assert done.returncode == EXIT_CAUSE
    assert "2 failed, 1 passed" in done.stdout  # pytest's own summary, on stdout as ever
    outcomes = {k.rsplit("::", 1)[1]: v for k, v in document["tests"]["outcomes"].items()}
    assert outcomes == {"test_eager_on_flagos_passes": "passed", "test_compiled_model_on_flagos": "failed",
                        "test_unrelated_arithmetic": "failed"}
    by_test = {f["test"].rsplit("::", 1)[1]: f for f in document["failures"]}
    assert set(by_test) == {"test_compiled_model_on_flagos", "test_unrelated_arithmetic"}
    compiled, unrelated = by_test["test_compiled_model_on_flagos"], by_test["test_unrelated_arithmetic"]
    [cause] = [c for c in document["causes"] if c["failure"] == compiled["id"]]
    assert_names_reader_probe_writer_branch(cause)
    # The read it names was made in that test (the step is the test's node id).
    [read] = [e for e in document["events"] if e["seq"] == cause["read"]]
    assert read["step"] == f"test {compiled['test']}"
    assert unrelated["causes"] == [] and unrelated["traceback"][-1]["function"] == "test_unrelated_arithmetic"
    assert "the sum is wrong" in unrelated["error"]
    failures_view = done.stderr.split("flagos-doctor explain: ", 1)[1].split("Watched probes")[0]
    assert "test_unrelated_arithmetic: AssertionError" in failures_view and "no cause found" in failures_view
    assert "test_eager_on_flagos_passes" not in failures_view  # the passing test: no failure, no cause


def test_report_attaches_the_explain_document(seed_tests, tmp_path):
    _, document = seed_tests
    path = tmp_path / "why.json"
    path.write_text(json.dumps({k: v for k, v in document.items() if k not in ("markdown", "json_path")}))
    done = run_cli("report", "--stack", "plainstack", "--explain", str(path), "--max-chars", "8000",
                   env={"PYTHONPATH": STACKS})
    assert done.returncode == 0, done.stderr
    section = done.stdout.split("### Why the program failed (`flagos-doctor explain`)")[1]
    assert "2 failures, 1 with a cause" in section
    assert "(CudaDriver.is_active) asked torch.cuda.is_available()" in section
    assert "no cause found" in section and "<details>" in section
    assert len(done.stdout) <= 8000
    broken = tmp_path / "broken.json"
    broken.write_text("{}")
    refused = run_cli("report", "--explain", str(broken))
    assert refused.returncode == 2 and str(broken) in refused.stderr


def test_module_attribute_semantics_are_the_programs_own_under_the_watch(tmp_path):
    # A module __getattr__ the program adds, replaces or removes (by setattr, delattr and
    # through vars()), a module __dir__, hasattr and getattr defaults, on torch.cuda (no
    # __getattr__ of its own) and torch (one of its own), once their reads are watched.
    script = os.path.join(EXPLAIN, "module_attributes.py")
    bare = run_cli_bare([sys.executable, script], {}, None)
    done, document = explain(tmp_path, "python", script)
    assert bare.returncode == 1 == done.returncode
    assert done.stdout == bare.stdout and bare.stdout.startswith("42 False default\n['zzz']\n")
    assert done.stderr.startswith(bare.stderr)
    assert "attributes.py:23: UserWarning: asked for the answer" in bare.stderr
    assert "Did you mean: 'is_available'?" in bare.stderr
    assert document["program"]["watched"]
    assert {e["probe"] for e in document["events"] if e["kind"] == "write"} >= {"torch.cuda.is_available", "torch.empty"}
