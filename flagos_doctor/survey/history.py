"""Timing hints: how long each case took in an earlier survey of the same setup.

A survey's wall time ends with its slowest cases: on an H200, FlagGems autotunes ``mm``
for up to 99 s a shape, and a case that starts last keeps every other worker waiting.
Surveys are run again and again (each commit of a compare), so the last run of the same
setup says which cases are slow; the survey hands those out first. Hints only order the
work: the cases, their verdicts and the census are the same in any order.

Sources, later wins: the newest run in the results store with the same fingerprint (the
comparable fields without the commit), or when there is none the newest run of the same
stack, route set and device under another harness version, spec or torch (a new harness
version would otherwise start with no hints at all, although its slow cases are the same
kernels autotuning); then a results file given with ``--hints`` (a run on another machine,
a committed one: ``surveys/results/flag_gems-5.0.2-h200.json``); then the results file
being resumed or rerun. Hints only order work, so a looser match can cost time, never
change a case. The run's provenance says which sources were used.
Standard library only (the parent reads this).
"""

from __future__ import annotations

import json
import os

from flagos_doctor.results.comparable import SAME_WORK
from flagos_doctor.store import Store
from flagos_doctor.survey import compile_cost

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


def sticky_cases(document: dict) -> set[tuple[str, str]]:
    """(overload, profile) of every case that met a sticky device error in its worker in that
    survey (``poison``) or was found to leave one (``poisoned``): a case the next run should
    start first (:func:`slow_first`)."""
    found = set()
    for name, entry in (document.get("overloads") or {}).items():
        for case in entry.get("cases") or []:
            if isinstance(case, dict) and (case.get("poison") or case.get("poisoned")):
                found.add((name, case.get("profile")))
    return found


def _newest_first(entries: list) -> list:
    def modified(entry) -> float:
        try:
            return os.path.getmtime(entry.path)
        except OSError:  # removed meanwhile
            return float("-inf")

    return sorted(entries, key=modified, reverse=True)


def read_document(path: str) -> dict | None:
    """The results document at ``path``; None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as handle:
            document = json.load(handle)
    except (OSError, ValueError, RecursionError):
        return None
    return document if isinstance(document, dict) else None


def from_store(store: Store, fingerprint: str, comparable: dict | None = None) -> tuple[dict, set, str | None, str | None]:
    """The hints of the newest survey filed in ``store`` with ``fingerprint``; when there is
    none and ``comparable`` (this survey's record) is given, of the newest one that shares
    its :data:`~flagos_doctor.results.comparable.SAME_WORK` fields. Returns (hints, its
    :func:`sticky_cases`, path, how: "fingerprint" or "same work"), the file read once.

    A store file that cannot be read gives no hints (they are an optimisation, never a
    reason to stop a survey).
    """
    entries = store.entries("survey")
    for entry in _newest_first([e for e in entries if e.fingerprint == fingerprint]):
        document = read_document(entry.path)
        try:
            if document is not None:
                return from_document(document), sticky_cases(document), entry.path, "fingerprint"
        except (AttributeError, TypeError):
            continue
    if comparable is None:
        return {}, set(), None, None
    for entry in _newest_first([e for e in entries if e.fingerprint != fingerprint]):
        document = read_document(entry.path)
        record = document.get("comparable") if document is not None else None
        if not isinstance(record, dict) or any(record.get(k) != comparable.get(k) for k in SAME_WORK):
            continue
        try:
            found, sticky = from_document(document), sticky_cases(document)
        except (AttributeError, TypeError):
            continue
        if found:
            return found, sticky, entry.path, "same work"
    return {}, set(), None, None


def task_seconds(task: tuple, hints: dict[tuple[str, str], float]) -> float:
    """What ``task`` ((overload, profiles or None)) took last time, summed over its cases."""
    name, profiles = task
    if profiles is None:
        return sum(value for (overload, _), value in hints.items() if overload == name)
    return sum(hints.get((name, profile), 0.0) for profile in profiles)


def hinted(task: tuple, hints: dict[tuple[str, str], float]) -> bool:
    """Whether an earlier run timed any case of ``task``."""
    name, profiles = task
    if profiles is None:
        return any(overload == name for overload, _ in hints)
    return any((name, profile) in hints for profile in profiles)


def slow_first(tasks: list[tuple], hints: dict[tuple[str, str], float],
               sticky: set[tuple[str, str]] = frozenset()) -> tuple[list[tuple], int]:
    """``tasks`` with those that met or left a sticky device error last time first
    (``sticky``, :func:`sticky_cases`), then those that took SLOW_CASE_SECONDS or more,
    slowest first, the others after them in their own order; and how many went first.

    A task no earlier run timed costs what :func:`.compile_cost.predicted` says its family
    costs on a cold cache: a first survey, with no history, starts its long poles first.
    A sticky case goes first because what it starts is on the run's last stretch: its
    worker's replacement, and its repeats in fresh workers of their own (survey/confirm.py),
    which on the H200 started as late as 31 s into a 34 s main phase and took 15-18 s each."""
    cost = [task_seconds(task, hints) if hinted(task, hints) else compile_cost.predicted(task) for task in tasks]
    first = [i for i, task in enumerate(tasks) if any((task[0], p) in sticky for p in task[1] or ())
             or (task[1] is None and any(name == task[0] for name, _ in sticky))]
    chosen = set(first)
    slow = sorted((i for i, c in enumerate(cost) if c >= SLOW_CASE_SECONDS and i not in chosen),
                  key=lambda i: cost[i], reverse=True)
    chosen |= set(slow)
    ahead = first + slow
    return [tasks[i] for i in ahead] + [t for i, t in enumerate(tasks) if i not in chosen], len(ahead)


def predicted_count(tasks: list[tuple], hints: dict[tuple[str, str], float]) -> int:
    """How many of ``tasks`` were put first by their predicted cold cost, not a timing hint."""
    return sum(1 for task in tasks if not hinted(task, hints))
