"""Timing hints: how long each case took in an earlier survey of the same setup.

A survey's wall time ends with its slowest cases: on an H200, FlagGems autotunes ``mm``
for up to 99 s a shape, and a case that starts last keeps every other worker waiting.
Surveys are run again and again (each commit of a compare), so the last run of the same
setup says which cases are slow; the survey hands those out first. Hints only order the
work: the cases, their verdicts and the census are the same in any order.

Sources, newest wins: the newest run in the results store with the same fingerprint (the
comparable fields without the commit), then the results file being resumed or rerun.
Standard library only (the parent reads this).
"""

from __future__ import annotations

import json
import os

from flagos_doctor.store import Store

#: Cases that took at least this long last time are handed out first, slowest first;
#: the rest keep the route-set order.
SLOW_CASE_SECONDS = 1.0


def from_document(document: dict) -> dict[tuple[str, str], float]:
    """(overload, profile) -> seconds, for every timed case of a results document."""
    seconds = {}
    for name, entry in (document.get("overloads") or {}).items():
        for case in list(entry.get("cases") or []) + list(entry.get("partial_cases") or []):
            value = case.get("seconds")
            if isinstance(value, (int, float)):
                seconds[(name, case.get("profile"))] = float(value)
    return seconds


def from_store(store: Store, fingerprint: str) -> tuple[dict[tuple[str, str], float], str | None]:
    """The hints of the newest survey filed in ``store`` with ``fingerprint``, and its path.

    A store file that cannot be read gives no hints (they are an optimisation, never a
    reason to stop a survey).
    """
    def modified(entry) -> float:
        try:
            return os.path.getmtime(entry.path)
        except OSError:  # removed meanwhile
            return float("-inf")

    entries = [e for e in store.entries("survey") if e.fingerprint == fingerprint]
    for entry in sorted(entries, key=modified, reverse=True):
        try:
            with open(entry.path, encoding="utf-8") as handle:
                return from_document(json.load(handle)), entry.path
        except (OSError, ValueError, AttributeError, TypeError, RecursionError):
            continue
    return {}, None


def task_seconds(task: tuple, hints: dict[tuple[str, str], float]) -> float:
    """What ``task`` ((overload, profiles or None)) took last time, summed over its cases."""
    name, profiles = task
    if profiles is None:
        return sum(value for (overload, _), value in hints.items() if overload == name)
    return sum(hints.get((name, profile), 0.0) for profile in profiles)


def slow_first(tasks: list[tuple], hints: dict[tuple[str, str], float]) -> tuple[list[tuple], int]:
    """``tasks`` with those that took SLOW_CASE_SECONDS or more last time first, slowest
    first, the others after them in their own order; and how many went first."""
    cost = [task_seconds(task, hints) if hints else 0.0 for task in tasks]
    slow = sorted((i for i, c in enumerate(cost) if c >= SLOW_CASE_SECONDS), key=lambda i: cost[i], reverse=True)
    chosen = set(slow)
    return [tasks[i] for i in slow] + [t for i, t in enumerate(tasks) if i not in chosen], len(slow)
