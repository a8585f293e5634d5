"""Tracing a sticky device error to the case that left it behind (parent side).

A sticky error (an illegal memory access, a device-side assert, an unspecified launch
failure: a dead context, :data:`flagos_doctor.survey.child.worker.POISON_RE`) is reported
by whatever touches the device next, not by the kernel that caused it: CUDA reports a
kernel's fault asynchronously, at the next synchronisation, which may be the next case's.
So a case that fails that way in the survey and passes when run again in fresh workers
(the confirmation's repeats) may be innocent, poisoned by a case its worker ran before.

:func:`trace` finds out, for each such case (:func:`suspects`: FLAKY, its first run
poisoned): it replays, in order, in a fresh worker, the cases that worker had run before
it (every case record names its ``worker`` and its ``worker_order`` there), then the case.
If the error comes back, it narrows the earlier cases down by halves (keeping the half
that still brings the error back, the later half tried first) to one case, and checks that
that case alone, run before the suspect, brings it back. Then:

* the suspect is not the stack's failure: its status is what its runs in fresh workers
  said (:func:`flagos_doctor.results.verdicts.settle` of its repeats, PASS when they passed),
  it keeps its first run in ``first_run`` and names the case in ``poisoned_by``
  {overload, profile} (``{"overload": null, "cases": n}`` when the error came back only
  with several earlier cases together);
* the culprit carries the failure: ERROR, its own run kept in ``first_run``, the cases it
  poisoned in ``poisoned`` [[overload, profile]].

If the replay does not bring the error back, the suspect stays FLAKY (the stack gave
differing answers under the same conditions, as far as the survey can reproduce them) and
carries the evidence in ``replay`` {runs, cases, came_back}. A suspect with ``replay``
was traced by an earlier run of the same results file and is left alone.

Each replay is a worker started for it (as the confirmation's passes), running at most
:data:`MAX_REPLAY_CASES` earlier cases (the latest ones), one replay at a time.
"""

from __future__ import annotations

import dataclasses
import shutil

from flagos_doctor.results import model
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.results.verdicts import settle
from flagos_doctor.survey import scratch
from flagos_doctor.survey.pool import StackFailed, WorkerConfig, WorkerProcess

#: The most earlier cases one replay runs (the latest of them): a worker of a long survey
#: runs hundreds, and the cause of a sticky error is seldom far before it shows.
MAX_REPLAY_CASES = 400

Case = tuple  # (overload, profile)


def suspects(finished: dict[str, list[dict]]) -> list[tuple[str, dict]]:
    """FLAKY cases whose first run reported a sticky error, not traced yet."""
    return [(name, case) for name, cases in sorted(finished.items()) for case in cases
            if case["status"] == model.FLAKY and case.get("poison") and case.get("worker")
            and "replay" not in case]


def earlier_cases(finished: dict[str, list[dict]], case: dict) -> list[Case]:
    """The cases the worker of ``case`` ran before it, in the order it ran them."""
    worker, order = case.get("worker"), case.get("worker_order") or 0
    found = [(other["worker_order"], name, other["profile"]) for name, cases in finished.items() for other in cases
             if other.get("worker") == worker and (other.get("worker_order") or 0) < order and other["profile"] != "-"]
    return [(name, profile) for _, name, profile in sorted(found)]


def replay(config: WorkerConfig, sequence: list[Case]) -> bool:
    """Run ``sequence`` in order in one fresh worker; True when a case of it reported a
    sticky error (the error came back). A worker that cannot start, crashes or hangs ends
    the replay: False."""
    folder = scratch.create()
    worker = None
    poisoned = []
    try:
        worker = WorkerProcess(dataclasses.replace(config, scratch=folder), 0)

        def seen(event) -> None:
            if event.kind == "case" and event.data.get("poison"):
                poisoned.append((event.overload, event.data["profile"]))

        for name, profile in sequence:
            if worker.attempt(name, [profile], seen) != "done" or poisoned:
                break
    except StackFailed:
        return False
    finally:
        if worker is not None:
            worker.close()
        shutil.rmtree(folder, ignore_errors=True)
    return bool(poisoned)


def narrow(config: WorkerConfig, earlier: list[Case], target: Case, log: list) -> Case | None:
    """The one earlier case that, run before ``target``, brings its sticky error back; None
    when none does alone. ``log`` gets each replay's {cases, came_back}."""
    def tried(sequence: list[Case]) -> bool:
        came_back = replay(config, sequence + [target])
        log.append({"cases": len(sequence) + 1, "came_back": came_back})
        return came_back

    candidates = list(earlier)
    proven = candidates  # the caller's replay of all of them brought the error back
    while len(candidates) > 1:
        later = candidates[len(candidates) // 2:]
        if tried(later):
            candidates = proven = later
        else:
            candidates = candidates[: len(candidates) // 2]
    if candidates and (proven == candidates or tried(candidates)):
        return candidates[0]
    return None


def trace(config: WorkerConfig, record: ResultsFile, note=None) -> dict:
    """Trace every suspect of ``record``'s finished overloads (recorded through it); the
    figures for the run's ``confirm.replay``: {suspects, traced, untraced (came back only
    with several cases), not_reproduced, runs}."""
    finished = record.finished

    figures = {"suspects": 0, "traced": 0, "untraced": 0, "not_reproduced": 0, "runs": 0}
    for name, case in suspects(finished):
        figures["suspects"] += 1
        target = (name, case["profile"])
        earlier = earlier_cases(finished, case)[-MAX_REPLAY_CASES:]
        if note:
            note(f"replaying the {len(earlier)} case(s) run before {name} [{case['profile']}] in its worker "
                 f"(it failed with {case['poison']!r} there and passed in fresh workers)")
        # No earlier case: nothing could have left it behind (the repeats ran it alone).
        came_back = bool(earlier) and replay(config, earlier + [target])
        log = [{"cases": len(earlier) + 1, "came_back": came_back}] if earlier else []
        culprit = narrow(config, earlier, target, log) if came_back else None
        figures["runs"] += len(log)
        record.record_replay(case, len(log), len(earlier), came_back)
        if not came_back:
            figures["not_reproduced"] += 1
            continue  # FLAKY, with the evidence
        later = list(case.get("repeats") or [case["status"]])[1:] or [model.PASS]
        status = settle(later)
        details = [d.get("detail", "") for d in case.get("repeat_details") or []]
        record.record_settled(case, status, details[later.index(status)] if len(details) == len(later) else "")
        if culprit is None:
            figures["untraced"] += 1
            record.record_poisoned_by(case, {"overload": None, "profile": None, "cases": len(earlier)})
            continue
        figures["traced"] += 1
        record.record_poisoned_by(case, {"overload": culprit[0], "profile": culprit[1]})
        _blame(record, culprit, target, case["poison"])
    return figures


def _blame(record: ResultsFile, culprit: Case, victim: Case, poison: str) -> None:
    """The culprit's record carries the failure it left behind."""
    for case in record.finished.get(culprit[0], []):
        if case["profile"] != culprit[1]:
            continue
        record.record_poisoned(case, victim)
        if case["status"] in (model.PASS, model.FLAKY):
            record.record_settled(case, model.ERROR, (
                f"leaves the device context poisoned: {victim[0]} [{victim[1]}], run after it in "
                f"the same worker, failed with {poison!r} (replayed)"))
        return
