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
