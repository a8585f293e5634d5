"""Every command block of docs/*.md, run as written from a clean temporary folder, its output
compared with the lines the page shows (issue 36: examples cannot go stale again). The
README's commands are run by tests/test_readme.py, by the same rules.

The rules, as docs/README.md states them for readers:

- a ``bash`` block's lines, and the ``$`` lines of a ``console`` block or of a block with no
  language, run in order in one fresh folder holding links to the checkout's ``surveys/``,
  ``docs/`` and ``tests/``, with ``../shared`` beside it as beside a clone, and
  ``flagos-doctor`` / ``python`` finding this checkout's package as after ``pip install -e .``;
- after a ``$`` line, the lines up to the next ``$`` line are its output: each must appear in
  what the command printed (stdout and stderr); a line ending in ``…`` is a prefix, ``...``
  alone marks lines left out;
- a command exits 0 unless it says ``# exit N``;
- a block whose first line is ``# needs a GPU: FILE...`` is not run; the files it names
  (under ``surveys/``) must exist;
- a block whose first line is ``# excerpt of FILE`` is not run; each line it shows must be in
  that committed file;
- any other block (no language and no ``$`` line, ``yaml``, ``python``, ``markdown``) is a
  synopsis or data, not run.
"""

from __future__ import annotations

import glob
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

import pytest

from conftest import REPO_ROOT, SHARED, real_torch_fl, shell_env
from test_readme import GPU_MARK, expected_exit, fenced_blocks, shell_lines, shown_in, without_installs

EXCERPT_MARK = "# excerpt of "
SHELLS = ("bash", "sh", "shell")
#: The checkout's folders a command may name by a relative path (linked, read-only use).
LINKED = ("surveys", "docs", "tests", "benchmarks")
PAGES = sorted(os.path.relpath(p, REPO_ROOT) for p in glob.glob(os.path.join(REPO_ROOT, "docs", "*.md")))


def commands_of(language: str, body: str) -> list[tuple[str, list[str]]]:
    """``(command, shown output lines)`` of a block to run, in order; [] for one not run."""
    lines = shell_lines(body)
    if language in SHELLS:
        commands = [without_installs(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]
        return [(command, []) for command in commands if command]
    if language not in ("console", "") or not any(line.startswith("$ ") for line in lines):
        return []
    runs: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            runs.append((line[2:], []))
        elif line.strip() not in ("", "...", "…") and runs:
            runs[-1][1].append(line.strip())
    return runs


def blocks_of(text: str) -> tuple[list[list[tuple[str, list[str]]]], list[str], list[str]]:
    """``(runnable, gpu, excerpts)``: the command lists of the blocks to run, and the first
    lines and bodies of the marked blocks."""
    runnable, gpu, excerpts = [], [], []
    for language, body in fenced_blocks(text):
        first = body.split("\n", 1)[0]
        if first.startswith(GPU_MARK):
            gpu.append(first)
        elif first.startswith(EXCERPT_MARK):
            excerpts.append(body)
        elif commands := commands_of(language, body):
            runnable.append(commands)
    return runnable, gpu, excerpts


def read(page: str) -> str:
    with open(os.path.join(REPO_ROOT, page), encoding="utf-8") as handle:
        return handle.read()


#: Pages another branch is rewriting when this test came: their blocks are expected to fail
#: (strict: a block that passes fails here, so the entry goes once the page follows the rules).
REWRITE_PENDING: dict[str, str] = {}
RUNNABLE = [pytest.param(page, i, block, id=f"{page}#{i}: {block[0][0][:60]}",
                         marks=[pytest.mark.xfail(reason=REWRITE_PENDING[page], strict=True)]
                         if page in REWRITE_PENDING else [])
            for page in PAGES for i, block in enumerate(blocks_of(read(page))[0])]
GPU = [(page, first) for page in PAGES for first in blocks_of(read(page))[1]]
EXCERPTS = [(page, body) for page in PAGES for body in blocks_of(read(page))[2]]


def shims(folder: pathlib.Path) -> pathlib.Path:
    """``flagos-doctor``, ``python`` and ``python3`` finding this checkout's package after
    whatever ``PYTHONPATH`` a command sets, as an installed package would be found."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    tail = f'${{PYTHONPATH:+$PYTHONPATH:}}{shlex.quote(REPO_ROOT)}'
    for name, args in (("flagos-doctor", "-m flagos_doctor "), ("python", ""), ("python3", "")):
        shim = bin_dir / name
        shim.write_text(f'#!/bin/sh\nPYTHONPATH="{tail}" exec {shlex.quote(sys.executable)} {args}"$@"\n')
        shim.chmod(0o755)
    return bin_dir


def clean_folder(root: pathlib.Path) -> pathlib.Path:
    """A fresh folder standing for the clone's root, ``../shared`` beside it."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="block", dir=root))
    clone = base / "clone"
    clone.mkdir()
    for name in LINKED:
        (clone / name).symlink_to(os.path.join(REPO_ROOT, name))
    if os.path.isdir(SHARED):
        (base / "shared").symlink_to(SHARED)
    return clone


def checkout_status() -> str:
    return subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=True).stdout


def test_the_pages_have_blocks_to_run_and_marked_blocks():
    # A parser that found nothing would make every test below vacuous.
    assert len(RUNNABLE) >= 10 and GPU
    assert sum(len(param.values[2]) for param in RUNNABLE) >= 15


@pytest.mark.parametrize("page, index, block", RUNNABLE)
def test_block_runs_as_written(tmp_path, page, index, block):
    before = checkout_status()
    clone = clean_folder(tmp_path)
    env = shell_env()
    env["PATH"] = os.pathsep.join([str(shims(tmp_path)), env.get("PATH", "")])
    env["FLAGOS_DOCTOR_STORE"] = str(clone / "store")
    for command, shown in block:
        run_env = dict(env)
        if "../shared" in command and not os.path.isdir(SHARED):
            pytest.skip(f"no {SHARED}: {command!r} needs ../shared beside the clone")
        if "--stack torch_fl" in command:
            run_env["PYTHONPATH"] = real_torch_fl()
        done = subprocess.run(["bash", "-c", command], cwd=clone, env=run_env, capture_output=True,
                              text=True, timeout=900)
        output = done.stdout + done.stderr
        assert done.returncode == expected_exit(command), f"{command!r} in {page}:\n{output[-3000:]}"
        missing = [line for line in shown if not shown_in(line, output)]
        assert not missing, f"not in the output of {command!r} ({page}): {missing}\n{output[-3000:]}"
    assert checkout_status() == before, "a block wrote into the checkout"


@pytest.mark.parametrize("page, first", GPU, ids=[f"{p}: {f[:60]}" for p, f in GPU])
def test_gpu_block_names_its_committed_output(page, first):
    paths = re.findall(r"surveys/\S+", first)
    assert paths, f"{page}: {first!r} names no committed output under surveys/"
    for path in paths:
        assert os.path.isfile(os.path.join(REPO_ROOT, path)), f"{page}: {path}"


@pytest.mark.parametrize("page, body", EXCERPTS, ids=[f"{p}: {b.splitlines()[0]}" for p, b in EXCERPTS])
def test_excerpt_is_in_its_file(page, body):
    first, *lines = body.splitlines()
    source = read(first.removeprefix(EXCERPT_MARK).strip())
    missing = [line for line in lines if line.strip() not in ("", "...", "…") and not shown_in(line, source)]
    assert not missing, f"{page}: not in {first}: {missing}"


def test_the_rules_read_marks_output_and_synopses():
    text = ("```console\n$ printf 'a\\nb\\n' > f  \n$ cat f  # exit 0\na\n...\n```\n"
            "```\n# needs a GPU: surveys/h200/README.md\n$ flagos-doctor survey --stack torch_fl\n```\n"
            "```\n# excerpt of surveys/h200/README.md\n# Runs on NVIDIA H200s\n```\n"
            "```\nflagos-doctor survey --compare before.json after.json\n```\n"
            "```bash\npip install x && flagos-doctor --help\n# a comment\n```\n"
            "```\n$ flagos-doctor suite --compare a.xml b.xml  # exit 1\nVerdict: …\n```\n")
    runnable, gpu, excerpts = blocks_of(text)
    assert runnable == [[("printf 'a\\nb\\n' > f  ", []), ("cat f  # exit 0", ["a"])],
                        [("flagos-doctor --help", [])],
                        [("flagos-doctor suite --compare a.xml b.xml  # exit 1", ["Verdict: …"])]]
    assert gpu == ["# needs a GPU: surveys/h200/README.md"] and len(excerpts) == 1
    assert expected_exit(runnable[2][0][0]) == 1
