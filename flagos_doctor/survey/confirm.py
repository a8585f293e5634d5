"""Confirming a survey's failures: run them again, and on the stack's native path (parent side).

A failure a survey reports must belong to the stack. Two things make one that does not:

* the case is *flaky*: run again, it gives another outcome (a race, a kernel autotuned
  differently, a context a neighbour disturbed). Every WRONG, ERROR, CRASH or TIMEOUT case
  runs ``repeats`` more times (``--repeats``, default 2), each time in workers started for
  that pass alone, so never in the process that failed. When the outcomes differ the case
  becomes FLAKY and keeps them all in ``"repeats"``; when they agree it keeps its status and
  ``"repeats"`` says how often it was seen.
* the case asks a question the stack's native path answers the same wrong way (stock
  torch's CUDA kernel differs from its CPU kernel too, or the case is ill-posed). Every case
  still failing, and every FLAKY one, runs once on the native path (``--baseline native``,
  :mod:`.stacks`) in baseline workers; the result goes in ``"baseline": {"status",
  "detail"}``. A failure the baseline shares does not count against the verdict
  (:func:`.verdicts.is_native_also`).

Cases that already carry ``"repeats"`` (or ``"baseline"``) were confirmed by an earlier run
of the same results file and are left alone, so a resumed survey confirms only what is new.
Confirmation is not journalled: a survey killed while confirming confirms again on resume.
"""

from __future__ import annotations

import dataclasses
import time

from flagos_doctor.survey import model
from flagos_doctor.survey.pool import Pool, WorkerConfig

#: Keys of a repeat's record kept beside its status (the first run's details stay on the case).
_KEPT = ("detail", "signal", "poison")


def to_repeat(finished: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """The (overload, case) pairs whose failure has not been run again yet."""
    return [(name, case) for name, cases in sorted(finished.items()) for case in cases
            if case["status"] in model.FAILURES and case["profile"] != "-" and "repeats" not in case]


def to_baseline(finished: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """The (overload, case) pairs that fail or are flaky and have no baseline yet."""
    wanted = model.FAILURES + (model.FLAKY,)
    return [(name, case) for name, cases in sorted(finished.items()) for case in cases
            if case["status"] in wanted and case["profile"] != "-" and "baseline" not in case]


def run_cases(config: WorkerConfig, workers: int, pairs: list[tuple[str, dict]], note=None) -> tuple[dict, str | None]:
    """Run the cases of ``pairs`` once in a fresh pool; ({(overload, profile): record}, failure).

    ``failure`` says why the pool stopped early (its workers could not start), else None.
    """
    tasks = [(name, [case["profile"]]) for name, case in pairs]
    found: dict = {}
    failure = None
    pool = Pool(dataclasses.replace(config, scratch=""), workers)
    try:
        slots = pool.run(tasks)
        while slots:
            event = pool.events.get()
            if event.kind == "case":
                found[(event.overload, event.data["profile"])] = event.data
            elif event.kind == "fatal":
                failure = failure or event.data.get("message")
                pool.stop()
            elif event.kind == "replaced" and note:
                note(f"worker {event.data['slot']} replaced after {event.overload}: {event.data['why']}")
            elif event.kind == "slot_end":
                slots -= 1
    finally:
        pool.close()
    return found, failure


def repeat(config: WorkerConfig, workers: int, finished: dict[str, list[dict]], times: int, note=None) -> dict:
    """Run every unconfirmed failure ``times`` more times; mark the FLAKY ones. Returns figures."""
    pairs = to_repeat(finished)
    figures = {"repeated": len(pairs), "times": times, "flaky": 0}
    if not pairs or times < 1:
        return figures
    seen = {(name, case["profile"]): [case["status"]] for name, case in pairs}
    details: dict = {key: [] for key in seen}
    for number in range(times):
        if note:
            note(f"running {len(pairs)} failing case(s) again ({number + 1} of {times}), in fresh workers")
        found, failure = run_cases(config, workers, pairs, note)
        if failure:
            figures["failure"] = failure
        for key in seen:
            record = found.get(key)
            if record is not None:
                seen[key].append(record["status"])
                details[key].append({k: record[k] for k in _KEPT if k in record})
    for name, case in pairs:
        key = (name, case["profile"])
        statuses = seen[key]
        case["repeats"] = statuses
        if len(set(statuses)) > 1:
            case["status"] = model.FLAKY
            case["repeat_details"] = details[key]
            figures["flaky"] += 1
    return figures


def baseline(config: WorkerConfig, workers: int, finished: dict[str, list[dict]], overloads: list[str],
             native_route: str | None, note=None) -> dict:
    """Run every failing or flaky case once on the native path; returns figures."""
    pairs = to_baseline(finished)
    figures = {"cases": len(pairs), "native_also": 0}
    if not pairs:
        return figures
    if note:
        note(f"running {len(pairs)} failing or flaky case(s) on the native path")
    native = dataclasses.replace(config, baseline=True, baseline_overloads=list(overloads), native_route=native_route)
    found, failure = run_cases(native, workers, pairs, note)
    if failure:
        figures["failure"] = failure
    for name, case in pairs:
        record = found.get((name, case["profile"]))
        if record is None:
            continue
        case["baseline"] = {"status": record["status"], "detail": record.get("detail", "")}
        figures["native_also"] += case["status"] == record["status"]
    return figures


def confirm(config: WorkerConfig, workers: int, finished: dict[str, list[dict]], *, repeats: int,
            baseline_label: str | None, overloads: list[str], native_route: str | None, note=None) -> dict:
    """Repeat the failures, then run them on the native path when the stack has one.

    Edits the case records of ``finished`` in place; returns what was done, for the run's
    provenance.
    """
    clock = time.monotonic()
    done: dict = {"repeats": repeat(config, workers, finished, repeats, note)}
    if baseline_label:
        done["baseline"] = {"label": baseline_label,
                            **baseline(config, workers, finished, overloads, native_route, note)}
    done["seconds"] = round(time.monotonic() - clock, 3)
    return done
