"""The CLI's edges: survey refuses options that apply only with --compare; user strings
(an output path holding Rich markup) are printed as text; a second survey of a complete file
says "nothing run" without a run's time, statuses in the same order; --help piped takes the
terminal's width (a real pty), else 100 columns."""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios

import pytest

from conftest import REPO_ROOT, checkout_first, run_cli


@pytest.mark.parametrize("option", [["--force"], ["--fail-on", "any"], ["--markdown", "x.md"], ["--max-chars", "9000"],
                                    ["--all"], ["--repo", "."], ["--build-cmd", "make"], ["--attribute"]])
def test_survey_refuses_an_option_that_applies_only_with_compare(tmp_path, option):
    done = run_cli("survey", "--stack", "demo", *option, cwd=str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == f"flagos-doctor: error: {option[0]}: applies only with --compare A B\n"
    assert os.listdir(tmp_path) == []  # refused before any work


def test_an_output_path_with_markup_is_text_and_a_second_survey_ran_nothing(tmp_path):
    (tmp_path / "a[").mkdir()
    args = ("survey", "--stack", "demo", "--ops", "abs", "--workers", "1", "--no-store", "-o", "a[/b].json")
    first = run_cli(*args, cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert f"results: {tmp_path}/a[/b].json" in first.stdout + first.stderr
    second = run_cli(*args, cwd=str(tmp_path))
    assert second.returncode == 0, second.stderr
    shown = second.stdout + second.stderr
    assert "nothing run" in shown and "this run:" not in shown
    assert "this run:" in first.stdout + first.stderr

    def statuses(text):
        return next(line for line in text.splitlines() if line.startswith("cases: "))

    assert statuses(shown) == statuses(first.stdout + first.stderr) == "cases: PASS=6  INVALID_CASE=1"


def help_widths(stderr=None) -> int:
    env = dict(os.environ, PYTHONPATH=checkout_first(os.environ.get("PYTHONPATH")))
    env.pop("COLUMNS", None)
    env.pop("TERMINAL_WIDTH", None)
    done = subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--help"], stdout=subprocess.PIPE,
                          stderr=stderr if stderr is not None else subprocess.DEVNULL, stdin=subprocess.DEVNULL,
                          env=env, text=True, timeout=120)
    assert done.returncode == 0
    return max(len(line) for line in done.stdout.splitlines())


def test_help_piped_takes_the_terminals_width_else_100_columns():
    assert help_widths() == 100
    leader, follower = os.openpty()
    try:
        fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 83, 0, 0))
        assert help_widths(stderr=follower) == 83
    finally:
        os.close(leader)
        os.close(follower)


@pytest.mark.parametrize("attribute", [[], ["--attribute"]])
def test_compare_labels_with_markup_are_text(tmp_path, attribute):
    from test_render_pins import GEMS_ON_TORCH_FL_ROUTES, TORCH_FL

    import shutil

    (tmp_path / "a[").mkdir()
    shutil.copy(os.path.join(REPO_ROOT, TORCH_FL), tmp_path / "a[" / "b].json")
    done = run_cli("survey", "--compare", "a[/b].json", os.path.join(REPO_ROOT, GEMS_ON_TORCH_FL_ROUTES),
                   *attribute, "--force",
                   cwd=str(tmp_path))
    # the verdict (these arms regressed, docs/compare.md), not Rich's MarkupError (exit 3)
    assert done.returncode == 1, done.stderr
    assert "a[/b].json" in done.stdout + done.stderr


def test_the_top_level_help_says_what_each_command_is_for_and_routes_names_stack():
    import re

    import typer

    from flagos_doctor.cli import app

    done = subprocess.run([sys.executable, "-m", "flagos_doctor", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    summary = done.stdout.split("Options")[0]
    commands = [name for name, c in typer.main.get_command(app).commands.items() if not c.hidden]
    assert len(commands) >= 7 and all(re.search(rf"^ ?{re.escape(c)}: ", summary, re.M) for c in commands), summary
    done = subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--help"], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "COLUMNS": "200"})
    [routes] = [line for line in done.stdout.splitlines() if "--routes " in line and "│" in line]
    assert "'flag_gems'" in routes and "'stack'" in routes
