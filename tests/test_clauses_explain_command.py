"""Each promise of flagos_doctor/explain/command.py's docstrings: the exit code (an interruption's
128 + N first, then ``--cause-status`` for a failure with a cause, else the program's own, a
signal's death as a shell says it) and what ``run`` checks before the program starts (the
interpreter, no document on stdout, files it can write). The codes are checked on the
function and again through the CLI on real programs (a real ``os.abort()``); scripts/mutation
runs these first."""

from __future__ import annotations

import json
import os
import signal
import sys

import pytest

from conftest import run_cli
from flagos_doctor.explain.command import exit_code


def document(returncode: int, causes=(), interrupted=None) -> dict:
    program = {"returncode": returncode}
    if interrupted is not None:
        program["interrupted"] = interrupted
    return {"program": program, "causes": list(causes)}


@pytest.mark.parametrize("name, code", [("SIGINT", 130), ("SIGTERM", 143), ("SIGHUP", 129)])
def test_an_interruption_of_explain_is_128_plus_its_signal_whatever_the_program_did(name, code):
    assert exit_code(document(-2, causes=[{"message": "x"}], interrupted={"signal": name}), 10) == code
    assert exit_code(document(0, interrupted={"signal": name}), 10) == code


def test_a_failure_with_a_cause_exits_with_cause_status_whatever_the_program_returned():
    for returncode in (0, 1, 3, -11):
        assert exit_code(document(returncode, causes=[{"message": "x"}]), 10) == 10
        assert exit_code(document(returncode, causes=[{"message": "x"}]), 77) == 77


@pytest.mark.parametrize("returncode, code", [(0, 0), (1, 1), (5, 5), (-6, 134), (-9, 137), (-11, 139), (-15, 143)])
def test_without_a_cause_the_programs_own_code_and_a_signals_death_as_a_shell_says_it(returncode, code):
    assert exit_code(document(returncode), 10) == code
    assert exit_code(document(returncode, interrupted=None), 10) == code  # a None interruption is none


def ran_marker(tmp_path) -> list[str]:
    """A program that leaves a file behind: the checks come before it starts, or it ran."""
    return ["--", sys.executable, "-c", f"open({str(tmp_path / 'ran')!r}, 'w').close()"]


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_document_for_stdout_is_refused_before_the_program_starts(tmp_path, option):
    result = run_cli("explain", option, "-", *ran_marker(tmp_path), cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert option in result.stderr and "stdout is the program's" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "ran").exists()


@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_a_file_that_cannot_be_written_is_refused_before_the_program_starts(tmp_path, option):
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "a-file").write_text("")
    for target in (tmp_path / "a-file" / "out", tmp_path / "a-folder"):
        result = run_cli("explain", option, str(target), *ran_marker(tmp_path), cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert option in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "ran").exists()


def test_an_interpreter_that_is_none_is_refused_before_the_program_starts(tmp_path):
    (tmp_path / "not-python").write_text("#!/bin/sh\necho hello\n")
    os.chmod(tmp_path / "not-python", 0o755)
    for python in (str(tmp_path / "missing"), str(tmp_path / "not-python"), str(tmp_path)):
        result = run_cli("explain", "--python", python, *ran_marker(tmp_path), cwd=tmp_path)
        assert result.returncode == 2, result.stderr
        assert "--python" in result.stderr and len(result.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "ran").exists()


def test_the_cli_exits_with_the_programs_code_writes_both_files_and_quiet_keeps_stderr_the_programs(tmp_path):
    out, page = tmp_path / "why.json", tmp_path / "why.md"
    # A long error under a deep stack: the page, at its smallest budget, must leave something out.
    program = "import sys\nprint('to stdout')\ndef f(n):\n    if n: f(n - 1)\n    raise ValueError('x' * 5000)\nf(40)"
    result = run_cli("explain", "--quiet", "--json", str(out), "--markdown", str(page), "--max-chars", "2000",
                     "--", sys.executable, "-c", program, cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert result.stdout == "to stdout\n"  # quiet: stderr only the program's own traceback
    assert result.stderr.startswith("Traceback") and result.stderr.strip().endswith("ValueError: " + "x" * 5000)
    recorded = json.loads(out.read_text())
    assert recorded["schema"].startswith("flagos-doctor/explain/") and recorded["program"]["returncode"] == 1
    text = page.read_text()
    assert len(text) <= 2000 and f"The full record: `{out}`" in text  # the page names where the rest is
    shown = run_cli("explain", "--", sys.executable, "-c", "import sys; sys.exit(3)", cwd=tmp_path)
    assert shown.returncode == 3 and "flagos-doctor explain" in shown.stderr  # not quiet: the view


def test_a_program_dying_by_a_real_abort_exits_134_through_the_cli(tmp_path):
    result = run_cli("explain", "--quiet", "--json", str(tmp_path / "why.json"), "--",
                     sys.executable, "-c", "import os; os.abort()", cwd=tmp_path)
    assert result.returncode == 128 + signal.SIGABRT
    assert json.loads((tmp_path / "why.json").read_text())["program"]["returncode"] == -signal.SIGABRT


def test_a_python_c_programs_frame_is_named_as_python_names_it(tmp_path):
    """The page says where a failure was raised by the frame's file as Python names it: a
    ``python -c`` program's is ``<string>`` (it once lost its ``>``)."""
    page = tmp_path / "why.md"
    result = run_cli("explain", "--quiet", "--markdown", str(page), "--",
                     sys.executable, "-c", "def f():\n    raise ValueError('boom')\nf()", cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "(raised in `<string>:f, line 2`)" in page.read_text()
