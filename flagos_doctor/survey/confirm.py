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
  :mod:`flagos_doctor.stacks`) in baseline workers; the result goes in ``"baseline": {"status",
  "detail"}``. A failure the baseline shares does not count against the verdict
  (:func:`.verdicts.is_native_also`).

Cases whose ``"repeats"`` are complete (or that have a ``"baseline"``) were confirmed by an
earlier run of the same results file and are left alone. The caller saves the results file
after each pass (``save``), so a survey stopped while confirming (a time limit, Ctrl-C)
carries on from the last pass when run again; a pass cut short is run again whole.
"""

from __future__ import annotations

import dataclasses
import time

from flagos_doctor.survey import model
from flagos_doctor.survey.pool import Pool, WorkerConfig

#: Keys of a repeat's record kept beside its status (the first run's details stay on the case).
_KEPT = ("detail", "signal", "poison")


def to_repeat(finished: dict[str, list[dict]], times: int) -> list[tuple[str, dict]]:
    """The (overload, case) pairs of failures (FLAKY ones included) not yet run ``times`` more times."""
    wanted = model.FAILURES + (model.FLAKY,)
    return [(name, case) for name, cases in sorted(finished.items()) for case in cases
            if case["status"] in wanted and case["profile"] != "-"
            and len(case.get("repeats") or [case["status"]]) < times + 1]


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


def repeat(config: WorkerConfig, workers: int, finished: dict[str, list[dict]], times: int, note=None,
           save=None) -> dict:
    """Run every failure until it has run ``times`` more times; mark the FLAKY ones.

    Each pass appends one status to each case's ``"repeats"`` (the first is the survey's
    own) and its detail to ``"repeat_details"``; a case whose statuses differ becomes FLAKY.
    ``save()`` is called after each pass. Returns figures.
    """
    figures = {"repeated": len(to_repeat(finished, times)), "times": times, "flaky": 0}
    while times > 0:
        pairs = to_repeat(finished, times)
        if not pairs:
            break
        if note:
            done = min(len(case.get("repeats") or [case["status"]]) for _, case in pairs)
            note(f"running {len(pairs)} failing case(s) again ({done} of {times}), in fresh workers")
        found, failure = run_cases(config, workers, pairs, note)
        if failure:
            figures["failure"] = failure
            break
        progressed = False
        for name, case in pairs:
            record = found.get((name, case["profile"]))
            if record is None:
                continue
            progressed = True
            statuses = case.setdefault("repeats", [case["status"]])
            statuses.append(record["status"])
            case.setdefault("repeat_details", []).append({k: record[k] for k in _KEPT if k in record})
            if len(set(statuses)) > 1 and case["status"] != model.FLAKY:
                case["status"] = model.FLAKY
                figures["flaky"] += 1
        if save:
            save()
        if not progressed:  # nothing came back (stopped): do not spin
            break
    return figures


def baseline(config: WorkerConfig, workers: int, finished: dict[str, list[dict]], overloads: list[str],
             native_route: str | None, note=None, save=None) -> dict:
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
    if save:
        save()
    return figures


def confirm(config: WorkerConfig, workers: int, finished: dict[str, list[dict]], *, repeats: int,
            baseline_label: str | None, overloads: list[str], native_route: str | None, note=None,
            save=None) -> dict:
    """Repeat the failures, then run them on the native path when the stack has one.

    Edits the case records of ``finished`` in place; returns what was done, for the run's
    provenance.
    """
    clock = time.monotonic()
    done: dict = {"repeats": repeat(config, workers, finished, repeats, note, save)}
    if baseline_label:
        done["baseline"] = {"label": baseline_label,
                            **baseline(config, workers, finished, overloads, native_route, note, save)}
    done["seconds"] = round(time.monotonic() - clock, 3)
    return done
