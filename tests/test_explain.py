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


@pytest.mark.parametrize("command", [[], ["no-such-program-anywhere"]])
def test_nothing_to_run_is_bad_usage(tmp_path, command):
    done = run_cli("explain", "--", *command) if command else run_cli("explain")
    assert done.returncode == 2


def test_stdout_is_the_programs_so_json_to_stdout_is_refused(tmp_path):
    done = run_cli("explain", "--json", "-", "--", "python", "-c", "print(1)")
    assert done.returncode == 2 and "--json: stdout is the program's" in done.stderr
