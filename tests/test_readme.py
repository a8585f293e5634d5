"""The README's commands, run as written: every fenced ``bash`` block and every ``$`` line
of a ``console`` block, in a real shell, from a temporary folder (nothing is left in the
checkout), with ``flagos-doctor`` on PATH being this checkout's CLI.

What is not run here, and why:

- ``pip install`` steps of a ``&&`` chain are dropped (the rest of the chain runs):
  ``scripts/run-tests``, which CI runs, does those installs itself;
- ``scripts/run-tests`` itself: it is CI's command (it runs this file);
- a block whose first line is ``# needs a GPU: ...``: this test checks instead that the
  comment names its committed output and that the file exists.

A command may say its exit code in a comment (``# exit 1``); otherwise it must exit 0. The
output lines of a ``console`` block must appear in the command's output; a line ending in
``…`` is a prefix, and a line of ``...`` alone marks lines left out. Commands of ``--stack torch_fl`` import the real torch_fl build (see
``conftest.real_torch_fl``: skipped without it, failed in CI).
"""

from __future__ import annotations

import ast
import glob
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO_ROOT, real_torch_fl, shell_env

README = os.path.join(REPO_ROOT, "README.md")
README_BUDGET = 12_000
GPU_MARK = "# needs a GPU"
#: The checkout's folders a README command may name by a relative path (linked into the
#: temporary folder, read-only use).
LINKED = ("surveys", "docs", "tests")
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.M | re.S)


def fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, body)`` of every fenced block of ``text``, in order."""
    return [(m.group(1), m.group(2)) for m in FENCE.finditer(text)]


def shell_lines(body: str) -> list[str]:
    """The body's lines with backslash continuations joined."""
    lines, pending = [], ""
    for line in body.splitlines():
        if line.endswith("\\"):
            pending += line[:-1].strip() + " " if pending else line[:-1].rstrip() + " "
            continue
        lines.append(pending + line.lstrip() if pending else line)
        pending = ""
    return lines


def expected_exit(command: str) -> int:
    match = re.search(r"#\s*exit (\d+)", command)
    return int(match.group(1)) if match else 0


def without_installs(command: str) -> str:
    """The command with the ``pip install`` steps of its ``&&`` chain left out."""
    steps = [step.strip() for step in command.split("&&")]
    return " && ".join(step for step in steps if not step.startswith("pip install"))


def checks_of(text: str) -> tuple[list[tuple[str, list[str]]], list[str], list[str]]:
    """``(runs, gpu_blocks, skipped)``: each command to run with the output lines it must
    show, the bodies of GPU blocks, and the commands not run here."""
    runs, gpu, skipped = [], [], []
    for language, body in fenced_blocks(text):
        if language == "bash":
            if body.startswith(GPU_MARK):
                gpu.append(body)
                continue
            for line in shell_lines(body):
                if not line.strip() or line.lstrip().startswith("#"):
                    continue
                if line.strip() == "scripts/run-tests":
                    skipped.append(line)
                    continue
                command = without_installs(line)
                if command:
                    runs.append((command, []))
        elif language == "console":
            for line in shell_lines(body):
                if line.startswith("$ "):
                    runs.append((line[2:], []))
                elif line.strip() not in ("", "...", "…") and runs:
                    runs[-1][1].append(line.strip())
    return runs, gpu, skipped


def shown_in(expected: str, output: str) -> bool:
    """Whether an output line of the docs appears in ``output`` (``…`` at the end: a prefix)."""
    return expected.removesuffix("…").strip() in output


def checkout_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True).stdout


class Runner:
    """Runs each distinct command once, in a temporary folder beside links to the checkout's
    data, and keeps what it printed and its exit status."""

    def __init__(self, root):
        self.root = root
        self.bin = root / "bin"
        self.bin.mkdir()
        cli = self.bin / "flagos-doctor"
        cli.write_text(
            "#!/bin/sh\n"
            f'PYTHONPATH={shlex.quote(REPO_ROOT)}"${{PYTHONPATH:+:$PYTHONPATH}}" '
            f'exec {shlex.quote(sys.executable)} -m flagos_doctor "$@"\n'
        )
        cli.chmod(0o755)
        self.done: dict[str, subprocess.CompletedProcess] = {}
        self.checkout_before = checkout_status()

    def run(self, command: str) -> subprocess.CompletedProcess:
        if command in self.done:
            return self.done[command]
        cwd = pathlib.Path(tempfile.mkdtemp(prefix="run", dir=self.root))
        for name in LINKED:
            (cwd / name).symlink_to(os.path.join(REPO_ROOT, name))
        env = shell_env()
        if "--stack torch_fl" in command:
            env["PYTHONPATH"] = real_torch_fl()
        env["PATH"] = os.pathsep.join([str(self.bin), env.get("PATH", "")])
        env["FLAGOS_DOCTOR_STORE"] = str(cwd / "store")
        result = subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                                text=True, timeout=900)
        self.done[command] = result
        return result


RUNS, GPU_BLOCKS, SKIPPED = checks_of(open(README, encoding="utf-8").read())


@pytest.fixture(scope="session")
def runner(tmp_path_factory):
    """One runner for the README: a command it shows twice runs once."""
    return Runner(tmp_path_factory.mktemp("readme"))


def test_readme_fits_its_budget():
    assert len(open(README, encoding="utf-8").read()) <= README_BUDGET


def test_readme_has_commands_to_run_and_gpu_blocks_to_link():
    # A parser that found nothing would make every test below vacuous.
    assert len(RUNS) >= 5 and GPU_BLOCKS and SKIPPED == ["scripts/run-tests"]


@pytest.mark.parametrize("command, shown", RUNS, ids=[c for c, _ in RUNS])
def test_readme_command_runs_as_written(runner, command, shown):
    result = runner.run(command)
    output = result.stdout + result.stderr
    assert result.returncode == expected_exit(command), output[-3000:]
    missing = [line for line in shown if not shown_in(line, output)]
    assert not missing, f"not in the output of {command!r}: {missing}\n{output[-3000:]}"


@pytest.mark.parametrize("body", GPU_BLOCKS)
def test_gpu_block_links_its_committed_output(body):
    first = body.splitlines()[0]
    paths = re.findall(r"(surveys/h200/\S+|surveys/results/\S+)", first)
    assert paths, f"{first!r} names no committed output"
    for path in paths:
        assert os.path.isfile(os.path.join(REPO_ROOT, path)), path


def test_nothing_left_in_the_checkout(runner):
    # Runs after the commands above (pytest keeps this file's order); they ran in temporary
    # folders, so the checkout is as it was before the first of them.
    assert runner.done and checkout_status() == runner.checkout_before


def test_parser_reads_chains_console_lines_and_gpu_marks():
    text = ("```bash\npip install x && flagos-doctor survey --stack demo\nscripts/run-tests\n```\n"
            "```bash\n# needs a GPU: surveys/h200/x.md\nflagos-doctor survey --stack torch_fl\n```\n"
            "```console\n$ flagos-doctor probe \\\n  --stack demo  # exit 1\n  ERROR a …\n```\n")
    runs, gpu, skipped = checks_of(text)
    assert runs == [("flagos-doctor survey --stack demo", []),
                    ("flagos-doctor probe --stack demo  # exit 1", ["ERROR a …"])]
    assert expected_exit(runs[1][0]) == 1 and len(gpu) == 1 and skipped == ["scripts/run-tests"]
    assert shown_in("ERROR a …", "  ERROR a b c") and not shown_in("ERROR b", "ERROR a")


def test_ci_runs_the_readme_test_command_and_it_installs_what_the_readme_says():
    # CI is the README's command and nothing else: a user's green is CI's green.
    with open(os.path.join(REPO_ROOT, ".ci", "run"), encoding="utf-8") as handle:
        steps = [line.strip() for line in handle if line.strip() and not line.lstrip().startswith("#")]
    assert steps == ["set -euo pipefail", 'exec "$(dirname "$0")/../scripts/run-tests" "$@"']
    with open(os.path.join(REPO_ROOT, "scripts", "run-tests"), encoding="utf-8") as handle:
        script = handle.read()
    readme = open(README, encoding="utf-8").read()
    for pin in ("torch==2.13.0", "triton==3.9.0 flag-gems==5.0.2", "--target /tmp/fg4 --no-deps flag-gems==4.2.0",
                "-e '.[test]'", "flagos_doctor.torch_fl_build", 'export CI="${CI:-true}"',
                "pytest -n \"$WORKERS\" --dist loadfile --no-loadscope-reorder"):
        assert pin in script, pin
    # torch first, by exact pin, before anything that depends on it can pull another build.
    assert script.index("torch==2.13.0") < script.index("flag-gems==5.0.2") < script.index("-m pytest -n")
    for said in ("torch 2.13.0", "triton 3.9.0", "flag-gems 5.0.2", "flag-gems 4.2.0", "/tmp/fg4", "CI=true"):
        assert said in readme, said
    assert subprocess.run(["bash", "-n", os.path.join(REPO_ROOT, "scripts", "run-tests")]).returncode == 0


def test_readme_says_the_survey_exit_codes_its_command_documents():
    # The survey command's module docstring says its exit codes (survey/command.py today;
    # read wherever the module of the survey's "Exit status" lives).
    docstrings = []
    for path in glob.glob(os.path.join(REPO_ROOT, "flagos_doctor", "**", "*.py"), recursive=True):
        with open(path, encoding="utf-8") as handle:
            docstrings.append(ast.get_docstring(ast.parse(handle.read())) or "")
    docstring = next(" ".join(d.split()) for d in docstrings if "130 when interrupted" in d)
    readme = " ".join(open(README, encoding="utf-8").read().split())
    for phrase in ("0 when every selected overload got a verdict", "no case crashed or timed out",
                   "whatever the verdicts", "1 when a case crashed or timed out", "could not complete",
                   "the stack would not start", "workers kept dying at start", "130 when interrupted",
                   "including a results file made with another setup"):
        assert phrase in docstring, phrase
        assert phrase in readme.replace("**", ""), phrase
