"""explain's attribution (flagos_doctor/explain/analysis.py), each promise of its docstring on
a real run of ``flagos-doctor explain`` over a real program on the seed replica stack (which
redirects torch.cuda.is_available): a failed test is judged on its own reads only, so it is
never blamed for a read another test made; an uncaught exception on every read of the run;
a bare non-zero exit has no traceback and so no cause."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import FIXTURES, run_cli
from flagos_doctor.errors import EXIT_CAUSE

EXPLAIN = os.path.join(FIXTURES, "explain")
SEED_ENV = {"PYTHONPATH": os.path.join(FIXTURES, "probe_stacks")}


def explain(tmp_path, *command, cwd=None):
    out = tmp_path / "explain.json"
    done = run_cli("explain", "--json", str(out), "--stack", "seedreplica", "--", *command, env=SEED_ENV,
                   cwd=cwd or str(tmp_path))
    assert out.exists(), done.stderr[-3000:]
    return done, json.loads(out.read_text())


@pytest.fixture(scope="module")
def two_tests(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attribution")
    return explain(tmp, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "attribution_tests.py",
                   cwd=EXPLAIN)


def test_a_test_is_never_blamed_for_a_read_another_test_made(two_tests):
    done, document = two_tests
    by_test = {f["test"].rsplit("::", 1)[1]: f for f in document["failures"]}
    asked, before = by_test["test_asks_and_fails"], by_test["test_fails_before_asking"]
    # Both tracebacks pass through pick_device, the reader of the redirected probe ...
    assert "pick_device" in [f["function"] for f in asked["traceback"]]
    assert before["traceback"][-1]["function"] == "pick_device"
    # ... and the only read there was made in test_asks_and_fails: it has the cause, the other none.
    reads = [e for e in document["events"] if e["kind"] == "read" and (e.get("where") or {}).get("function") == "pick_device"]
    assert [e["step"] for e in reads] == [f"test {asked['test']}"]
    [cause] = document["causes"]
    assert cause["failure"] == asked["id"] and cause["read"] == reads[0]["seq"]
    assert cause["probe"] == "torch.cuda.is_available" and cause["answer"] == "True"
    assert before["causes"] == []
    assert done.returncode == EXIT_CAUSE


def test_an_uncaught_exception_is_judged_on_every_read_of_the_run(tmp_path):
    # The read is made while importing, outside any step of the program's own, and still counts.
    script = tmp_path / "uncaught.py"
    script.write_text("import torch\nimport seedreplica  # noqa: F401\n\n"
                      "cuda = torch.cuda.is_available()\n\n\ndef run():\n"
                      "    torch.cuda.init() if cuda else torch.zeros(1)\n\n\nrun()\n")
    done, document = explain(tmp_path, sys.executable, str(script))
    [failure] = document["failures"]
    assert failure["kind"] == "exception" and not failure.get("test")
    causes = [c for c in document["causes"] if c["failure"] == failure["id"]]
    assert [c["reader"]["function"] for c in causes] == ["<module>"], causes
    assert causes[0]["reader"]["line"] == 4


def test_a_bare_non_zero_exit_has_no_cause(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text("import sys\nimport torch\nimport seedreplica  # noqa: F401\n\n"
                      "if torch.cuda.is_available():\n    sys.exit(3)\n")
    done, document = explain(tmp_path, sys.executable, str(script))
    assert document["program"]["returncode"] == 3
    [failure] = document["failures"]
    assert failure["kind"] != "exception" and not failure.get("traceback")
    assert document["causes"] == [] and failure["causes"] == []


def test_an_exception_raised_from_another_is_judged_on_the_frames_of_both(tmp_path):
    # The engine's failure shape (probe/causes.py): "causes", the chained exceptions, each with
    # the frame it was raised at. The redirected read decided the frame of the LookupError;
    # the RuntimeError's own traceback (<module>, run) never passes through pick.
    script = tmp_path / "chained.py"
    script.write_text("import torch\nimport seedreplica  # noqa: F401\n\n\ndef pick():\n"
                      "    if torch.cuda.is_available():\n        raise LookupError('no CUDA device to pick')\n\n\n"
                      "def run():\n    try:\n        pick()\n    except LookupError as exc:\n"
                      "        raise RuntimeError('setup failed') from exc\n\n\nrun()\n")
    done, document = explain(tmp_path, sys.executable, str(script))
    [failure] = document["failures"]
    assert "pick" not in [f["function"] for f in failure["traceback"]]
    assert failure["raised_from"][0]["at"]["function"] == "pick"
    [cause] = document["causes"]
    assert cause["failure"] == failure["id"] and cause["probe"] == "torch.cuda.is_available"
    assert cause["reader"] == {"file": "chained.py", "function": "pick", "line": 6}
    assert cause["frame"]["line"] == 7 and done.returncode == EXIT_CAUSE
    assert cause["id"] == 1 and failure["causes"] == [1]  # numbered from 1, as the failure names them


def test_a_forged_final_record_without_facts_is_a_run_without_decisions(tmp_path):
    # The program's side of the channel is the program's to write: a final record whose facts
    # is null (no decisions) is still explained, never a traceback of explain's own.
    out = tmp_path / "explain.json"
    done = run_cli("explain", "--json", str(out), "--", sys.executable, os.path.join(FIXTURES, "explain",
                   "forges_a_record.py"), '{"record": "final", "facts": null}', cwd=str(tmp_path))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    document = json.loads(out.read_text())
    assert document["facts"] is None and document["failures"] == [] and document["causes"] == []


# -- the no-device cause, on documents in the shapes explain writes --------------------------------
def device_run(error, frames, finding=True, registered="torch_fl/__init__.py", kind="exception"):
    events = [{"seq": 3, "kind": "write", "probe": "PrivateUse1 backend name",
               "where": {"file": registered, "line": 40, "function": "_register"}}] if registered else []
    findings = [{"kind": "no-device", "severity": "error", "probe": "torch.flagos", "events": [3],
                 "message": "no device"}] if finding else []
    failure = {"id": 1, "kind": kind, "error": error, "causes": [],
               "traceback": [{"file": file, "line": line, "function": "f"} for file, line in frames]}
    return {"program": {"command": ["python", "x.py"]}, "events": events, "findings": findings,
            "facts": {}, "failures": [failure]}


USER, STACK, TORCH = ("x.py", 5), ("torch_fl/__init__.py", 998), ("torch/nn/modules/module.py", 1369)


@pytest.mark.parametrize("error", ["RuntimeError: CachingDeviceAllocator: invalid device index",
                                   "RuntimeError: invalid device ordinal", "RuntimeError: no flagos devices found",
                                   "RuntimeError: No devices available", "RuntimeError: flagos:0 is busy"])
def test_a_failure_on_a_missing_device_gets_the_no_device_cause_at_the_stacks_innermost_frame(error):
    from flagos_doctor.explain import analysis

    (cause,) = analysis.causes(device_run(error, [USER, STACK, TORCH, ("torch_fl/ops.py", 7)]))
    assert cause["how"] == "no-device" and cause["probe"] == "torch.flagos" and cause["events"] == [3]
    assert cause["frame"] == {"file": "torch_fl/ops.py", "line": 7, "function": "f"} and cause["failure"] == 1
    assert cause["message"].startswith(f"python x.py failed: {error}; it ran on the device through torch_fl/ops.py:7 (f)")
    assert "torch.flagos.device_count() answers 0" in cause["message"]


@pytest.mark.parametrize("error, frames, finding, registered, kind", [
    ("RuntimeError: invalid device index", [USER, STACK], False, "torch_fl/__init__.py", "exception"),  # a device here
    ("RuntimeError: invalid device index", [USER, STACK], True, None, "exception"),  # nothing registered it
    ("RuntimeError: invalid device index", [USER, STACK], True, "setup.py", "exception"),  # no package to look in
    ("RuntimeError: invalid device index", [USER, TORCH], True, "torch_fl/__init__.py", "exception"),  # not through it
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied", [USER, STACK], True, "torch_fl/__init__.py", "exception"),
    ("RuntimeError: Tensor on device meta is not on the expected device cpu!", [USER, STACK], True,
     "torch_fl/__init__.py", "exception"),
    ("RuntimeError: flagosity", [USER, STACK], True, "torch_fl/__init__.py", "exception"),  # the name as a word
    ("the program exited with status 1", [USER, STACK], True, "torch_fl/__init__.py", "exit"),
])
def test_a_failure_not_on_the_missing_device_gets_no_cause(error, frames, finding, registered, kind):
    from flagos_doctor.explain import analysis

    assert analysis.causes(device_run(error, frames, finding, registered, kind)) == []
