"""The journal's promise (flagos_doctor/survey/journal.py): "a survey killed with SIGKILL loses
at most the case in flight". Proved by counting the cases the resumed run actually ran, not by
the census (a deterministic re-run of every case gives the same census): every case record
names the worker that ran it, and a worker's id starts with its parent survey's pid in hex
(survey/pool.py), so the resumed document says which process ran each case."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

from conftest import REPO_ROOT  # noqa: F401  (conftest puts this checkout first on PYTHONPATH)

SURVEY = [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--no-store", "-q",
          "--workers", "1", "-o", "k.json"]


def journal_cases(text: str) -> set[tuple[str, str]]:
    """The (overload, profile) of every whole case line of a journal (a torn last line is none)."""
    found = set()
    for line in text.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if record.get("kind") == "case":
            found.add((record["overload"], record["profile"]))
    return found


def kill_after(tmp_path, cases: int) -> tuple[int, set]:
    """Start the demo survey, SIGKILL it once its journal holds ``cases`` cases; its pid and
    the cases its journal kept."""
    proc = subprocess.Popen(SURVEY, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = tmp_path / "k.json.journal"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists() and journal.read_text().count('"kind": "case"') >= cases:
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.005)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL, "the survey ended before it could be killed"
    return proc.pid, journal_cases(journal.read_text())


def test_a_survey_killed_with_sigkill_loses_at_most_the_case_in_flight(tmp_path):
    first_pid, kept = kill_after(tmp_path, 40)
    assert len(kept) >= 40
    with open(tmp_path / "k.json.journal", "a", encoding="utf-8") as journal:
        journal.write('{"kind": "case", "overload": "torn')  # a line torn by the kill: skipped, no harm
    resumed = subprocess.run(SURVEY, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert resumed.returncode == 0, resumed.stderr
    second_pid = None
    with open(tmp_path / "k.json", encoding="utf-8") as handle:
        document = json.load(handle)
    assert document["complete"]
    by_run = {}
    for name, entry in document["overloads"].items():
        for case in entry["cases"]:
            if case.get("worker"):
                by_run.setdefault(case["worker"].split("-", 1)[0], set()).add((name, case["profile"]))
    first, rest = by_run.pop(f"{first_pid:x}", set()), set().union(*by_run.values())
    assert len(by_run) == 1, by_run.keys()  # the resumed run's workers, one parent
    (second_pid,) = by_run
    # Every case the journal kept is in the results as the killed run ran it ...
    assert kept <= first, sorted(kept - first)[:5]
    # ... and the resume ran only the others: none it had recorded
    assert not (rest & kept), sorted(rest & kept)[:5]
    assert rest and len(first) + len(rest) == sum(1 for e in document["overloads"].values()
                                                  for c in e["cases"] if c.get("worker"))
    assert second_pid != f"{first_pid:x}"
