"""A field added to the case record in one place (results/case.py's FIELDS) reaches the
results file, the journal across a kill -9 and a resume, and the comparison, with no other
module touched: a copy of this flagos_doctor with one line appended to results/case.py,
running real surveys of the demo stack (its workers import the copy too), SIGKILLed twice
and resumed, then a real ``survey --compare``."""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import signal
import subprocess
import sys
import time

from conftest import REPO_ROOT

#: The one line a newcomer adds: how many words a case's detail has, derived by the worker,
#: shown in a comparison.
ADDED = ('\nFIELDS["detail_words"] = Field((int,), WORKER, compared=True,\n'
         '                                derive=lambda record, outcome: len(record["detail"].split()))\n')


def _copy_with_field(tmp_path) -> str:
    root = tmp_path / "pkg"
    shutil.copytree(os.path.join(REPO_ROOT, "flagos_doctor"), root / "flagos_doctor",
                    ignore=shutil.ignore_patterns("__pycache__"))
    with open(root / "flagos_doctor" / "results" / "case.py", "a", encoding="utf-8") as handle:
        handle.write(ADDED)
    return str(root)


def _changed_files(copy: str) -> list[str]:
    changed = []

    def walk(compared, where):
        changed.extend(os.path.join(where, name) for name in compared.diff_files + compared.left_only + compared.right_only)
        for name, sub in compared.subdirs.items():
            walk(sub, os.path.join(where, name))

    walk(filecmp.dircmp(os.path.join(REPO_ROOT, "flagos_doctor"), os.path.join(copy, "flagos_doctor"),
                        ignore=["__pycache__"]), "")
    return changed


def _lines(path) -> list[dict]:
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            pass  # the torn last line
    return found


def _start(copy: str, folder, *args):
    cmd = [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--no-store", "-q", *args]
    env = dict(os.environ, PYTHONPATH=copy)
    return subprocess.Popen(cmd, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _kill_when(proc, ready, what: str) -> None:
    """SIGKILL ``proc`` as soon as ``ready()`` holds (polled); fails if it ended first."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and proc.poll() is None:
        if ready():
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.002)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, f"the survey ended before {what}: {proc.stderr.read()}"


def _case_lines(lines):
    return [line for line in lines if line.get("kind") == "case"]


def test_a_field_declared_once_reaches_the_json_the_resumed_journal_and_the_compare(tmp_path):
    copy = _copy_with_field(tmp_path)
    assert _changed_files(copy) == [os.path.join("results", "case.py")]
    journal = tmp_path / "a.json.journal"

    # 1. Killed while a case of an unfinished overload is the last thing journalled.
    first = _start(copy, tmp_path, "-o", "a.json")

    def mid_overload() -> bool:
        if not journal.exists():
            return False
        lines = _lines(journal)
        return len(_case_lines(lines)) >= 40 and lines[-1].get("kind") == "case"

    _kill_when(first, mid_overload, "it could be killed")
    before = _lines(journal)
    ended = {line["overload"] for line in before if line.get("kind") == "end"}
    carried = {(line["overload"], line["profile"]): line for line in _case_lines(before) if line["overload"] not in ended}
    assert carried and all(line["detail_words"] == len(line["detail"].split()) for line in _case_lines(before))

    # 2. Resumed: the journal is read back and written afresh; killed as soon as it is.
    inode = journal.stat().st_ino
    second = _start(copy, tmp_path, "-o", "a.json")
    _kill_when(second, lambda: journal.exists() and journal.stat().st_ino != inode, "its journal was rewritten")
    rewritten = {(line["overload"], line["profile"]): line for line in _case_lines(_lines(journal))}
    for key, line in carried.items():  # read back, checked and written out again with the field
        assert rewritten[key]["detail_words"] == line["detail_words"], key

    # 3. Resumed to the end: every case of the results file has it.
    third = _start(copy, tmp_path, "-o", "a.json")
    assert third.wait(timeout=300) == 0, third.stderr.read()
    document = json.loads((tmp_path / "a.json").read_text())
    cases = [case for entry in document["overloads"].values() for case in entry["cases"]]
    assert document["complete"] and len(document["provenance"]["runs"]) == 3 and len(cases) == 329
    assert all(case["detail_words"] == len(case["detail"].split()) for case in cases)
    assert any(case["detail_words"] > 0 for case in cases)

    # 4. Another arm, two profiles only (--force: another spec): the cases only arm a has are
    # changed cases, shown with the field.
    spec = tmp_path / "two.yaml"
    text = (tmp_path / "pkg" / "flagos_doctor" / "survey" / "default.yaml").read_text()
    spec.write_text("\n".join(line for line in text.splitlines()
                              if "{name:" not in line or "2d-f32," in line or "1d-f32," in line) + "\n")
    other = _start(copy, tmp_path, "-o", "b.json", "--spec", str(spec), "--ops", "abs,neg,exp")
    assert other.wait(timeout=300) == 0, other.stderr.read()
    compared = subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--compare", "a.json", "b.json",
                               "--force", "--json", "cmp.json", "-q"], cwd=tmp_path, env=dict(os.environ, PYTHONPATH=copy),
                              capture_output=True, text=True, timeout=300)
    assert compared.returncode == 1, compared.stderr  # a PASS that is gone is a regression (docs/compare.md)
    changed = json.loads((tmp_path / "cmp.json").read_text())["cases_changed"]
    lost = [c for c in changed if c["overload"] == "abs" and c["profile"] == "2d-f16"]
    assert lost and lost[0]["to"] is None
    assert lost[0]["from"]["detail_words"] == next(
        case["detail_words"] for case in document["overloads"]["abs"]["cases"] if case["profile"] == "2d-f16")
