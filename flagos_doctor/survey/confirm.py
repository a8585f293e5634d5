"""Confirming a survey's failures: run them again, and on the stack's native path (parent side).

A failure a survey reports must belong to the stack. Two things make one that does not:

* the case is *flaky*: run again, it gives another outcome (a race, a kernel autotuned
  differently, a context a neighbour disturbed). Every WRONG, ERROR, CRASH or TIMEOUT case
  runs ``repeats`` more times (``--repeats``, default 2), each time in workers started for
  that pass alone, so never in the process that failed. When it passed in one run and failed
  in another the case becomes FLAKY and keeps them all in ``"repeats"``; when they agree it
  keeps its status and ``"repeats"`` says how often it was seen; when every run failed, but
  not in one way, it fails under the way it failed most (:func:`settle`; the first run's
  status and detail stay in ``"first_run"``).
* the case asks a question the stack's native path answers the same wrong way (stock
  torch's CUDA kernel differs from its CPU kernel too, or the case is ill-posed). Every case
  still failing, and every FLAKY one, runs once on the native path (``--baseline native``,
  :mod:`flagos_doctor.stacks`) in baseline workers; the result goes in ``"baseline": {"status",
  "detail"}``. A failure the baseline shares does not count against the verdict
  (:func:`.verdicts.is_native_also`).

The repeat passes and the baseline pass run at the same time, each in workers started for
it, at most the run's worker count in all (:func:`confirm`); what each one runs and records
is what it did one after another.

A pass's worker runs many cases, so a case can meet a sticky error another case of that
worker left (a kernel writing out of bounds without failing: CUDA says so at the next
synchronisation, in the next case). A case that reports one after other cases of its
worker runs again as the first case of a fresh worker, where nothing ran before it, and
that run is its record in the pass (a repeat keeps ``"alone"`` in ``repeat_details``: what
the shared worker's run said, {``poison``, ``after``: the cases that worker ran before
it}). Otherwise which case follows the culprit (the order in a pass follows each case's
seconds, which a cold run's compiles change) would decide its status: on the H200 a cold
torch_fl run settled ``pow_.Tensor [2d-i64]`` ERROR (WRONG, then twice an illegal memory
access) where the warm run found it WRONG three times.

Cases whose ``"repeats"`` are complete (or that have a ``"baseline"``) were confirmed by an
earlier run of the same results file and are left alone. Each pass's records are applied
in the order the passes had one after another, through the survey's
:class:`~flagos_doctor.results.resultsfile.ResultsFile`, which saves the results file after
each, so a survey stopped while confirming (a time limit, Ctrl-C) carries on from
the last pass applied when run again; a pass cut short, or ended but not yet applied, is
run again whole.
"""

from __future__ import annotations

import dataclasses
import time

from flagos_doctor.results import model
from flagos_doctor.results.case import first_run
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.results.verdicts import settle
from flagos_doctor.survey import replay
from flagos_doctor.survey.pool import Pool, WorkerConfig

#: Keys of a repeat's record kept beside its status (the first run's details stay on the case).
_KEPT = ("detail", "signal", "poison", "alone")


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


def run_cases(config: WorkerConfig, workers: int, pairs: list[tuple[str, dict]], note=None,
              pools: list | None = None, seen=None) -> tuple[dict, str | None]:
    """Run the cases of ``pairs`` once in a fresh pool; ({(overload, profile): record}, failure).

    ``failure`` says why the pool stopped early (its workers could not start), else None.
    The pool is added to ``pools`` while it runs (so another thread can stop it); ``seen(key,
    record)`` hears of each case as it ends. A case that met a sticky error after other
    cases of its worker runs again alone (:class:`AloneAgain`, module doc).
    """
    tasks = [(name, [case["profile"]]) for name, case in pairs]
    found: dict = {}
    failure = None
    pool = Pool(dataclasses.replace(config, scratch=""), workers)
    alone = AloneAgain(config, workers)
    if pools is not None:
        pools.append(pool)
    try:
        slots = pool.run(tasks)
        while slots:
            event = pool.events.get()
            if event.kind == "case":
                found[(event.overload, event.data["profile"])] = event.data
                alone.consider((event.overload, event.data["profile"]), event.data)
                if seen:
                    seen((event.overload, event.data["profile"]), event.data)
            elif event.kind == "fatal":
                failure = failure or event.data.get("message")
                pool.stop()
            elif event.kind == "replaced" and note:
                note(f"worker {event.data['slot']} replaced after {event.overload}: {event.data['why']}")
            elif event.kind == "slot_end":
                slots -= 1
    except BaseException:  # Ctrl-C, SIGTERM: no fresh worker is waited for
        alone.abandon()
        raise
    finally:
        pool.close()
    alone.finish(found if failure is None else None, note, seen)
    return found, failure


class AloneAgain:
    """Cases that reported a sticky error after other cases of their worker, each run again
    as the first case of a fresh worker, started as soon as the pass reports it, beside the rest of the pass (module doc)."""

    def __init__(self, config: WorkerConfig, workers: int):
        from concurrent.futures import ThreadPoolExecutor

        self.config = dataclasses.replace(config, purpose="alone")
        self.threads = ThreadPoolExecutor(max_workers=max(1, workers))
        self.runs: dict = {}  # (overload, profile) -> (the pass's record, future of the fresh worker's records)

    def consider(self, key: tuple, record: dict) -> None:
        if record.get("poison") and (record.get("worker_order") or 1) > 1:
            self.runs[key] = (record, self.threads.submit(replay.in_fresh_worker, self.config, [key]))

    def abandon(self) -> None:
        self.threads.shutdown(wait=False, cancel_futures=True)

    def finish(self, found: dict | None, note=None, seen=None) -> None:
        """Wait for the runs; each one's record replaces the pass's in ``found``, naming in
        ``alone`` what the pass's run said (None: a pass that failed, nothing replaced)."""
        self.threads.shutdown(wait=True)
        for key, (earlier, future) in sorted(self.runs.items()):
            records = future.result()
            if found is None or not records:  # the fresh worker died or hung first: the pass's run stands
                continue
            _, record = records[0]
            record["alone"] = {"poison": earlier["poison"], "after": earlier["worker_order"] - 1}
            found[key] = record
            if note:
                note(f"{key[0]} [{key[1]}]: {earlier['poison']} after {record['alone']['after']} other case(s) "
                     f"of its worker; alone in a fresh worker: {record['status']}")
            if seen:
                seen(key, record)


def _plan_repeats(finished: dict[str, list[dict]], times: int) -> list[list[tuple[str, dict]]]:
    """The repeat passes still to run, in order: pass ``i`` holds the failures that lack
    more than ``i`` repeats (what :func:`to_repeat` gives before pass ``i`` when every pass
    before it came back whole)."""
    pending = to_repeat(finished, times)
    lacking = {id(case): times + 1 - len(case.get("repeats") or [case["status"]]) for _, case in pending}
    passes = []
    for index in range(max(lacking.values(), default=0)):
        passes.append([(name, case) for name, case in pending if lacking[id(case)] > index])
    return passes


def _apply_repeat(record: ResultsFile, pairs: list[tuple[str, dict]], found: dict, figures: dict) -> bool:
    """One repeat pass's records onto its cases, through ``record``; False when nothing came back."""
    progressed = False
    for name, case in pairs:
        run = found.get((name, case["profile"]))
        if run is None:
            continue
        progressed = True
        kept = {k: run[k] for k in _KEPT if k in run}
        if stopped_compiling(run["status"], run):  # what settle needs of it, not its seconds
            kept["stopped_in"] = run["spent"]["stopped_in"]
        statuses = record.record_repeat(case, run["status"], kept)
        runs = [case] + case["repeat_details"]  # each run's record (the first: the case's own keys)
        settled = settle(statuses, [i for i, one in enumerate(runs) if stopped_compiling(statuses[i], one)])
        if settled == case["status"]:
            continue
        if settled == model.FLAKY:
            figures["flaky"] += 1
            record.record_flaky(case)
        elif settled == model.PASS:  # every run but those the compile cap stopped passed
            record.record_settled(case, settled, "")
        else:
            # Failing every time, in more than one way: a failure, under the way it failed most.
            details = [first_run(case)["detail"]] + [d.get("detail", "") for d in case["repeat_details"]]
            if record.record_settled(case, settled, details[statuses.index(settled)]):
                figures["varied"] = figures.get("varied", 0) + 1  # counted once a case, when it leaves its first status
    return progressed


def stopped_compiling(status: str, run: dict) -> bool:
    """A run (``status``, its record) that was a TIMEOUT stopped by the compile cap while
    Triton compiled or autotuned (:mod:`.case_clock`): the compiler's time, not an answer
    of the kernel's."""
    where = run.get("stopped_in") or (run.get("spent") or {}).get("stopped_in")  # a repeat keeps only stopped_in
    return status == model.TIMEOUT and where in ("compile", "autotune")


def _apply_baseline(record: ResultsFile, pairs: list[tuple[str, dict]], found: dict, figures: dict) -> None:
    for name, case in pairs:
        run = found.get((name, case["profile"]))
        if run is None:
            continue
        record.record_baseline(case, run["status"], run.get("detail", ""))
        figures["native_also"] += case["status"] == run["status"]


def _shares(workers: int, sizes: list[int]) -> list[int]:
    """Workers for passes of ``sizes`` cases run at once: ``workers`` in all, at least one
    each, none more than its cases, the rest spread from the first pass on."""
    share = [1] * len(sizes)
    spare = workers - len(sizes)
    while spare > 0:
        grown = False
        for index, size in enumerate(sizes):
            if spare and share[index] < size:
                share[index] += 1
                spare -= 1
                grown = True
        if not grown:
            break
    return share


def _run_concurrently(passes: list[tuple], workers: int, note=None, done=None, starting=None) -> list:
    """Run ``passes`` ((config, pairs, seen): :func:`run_cases`) in pools of their
    own, at most ``workers`` workers at once in all: in waves of up to ``workers`` passes,
    the passes of a wave side by side.

    ``done(index, (found, failure))`` is called as each pass ends (from the caller's
    thread, in any order). Returns each pass's (found, failure), in order.
    """
    import queue
    import threading

    outcomes: list = [None] * len(passes)
    pools: list = []
    for first in range(0, len(passes), max(1, workers)):
        wave = list(range(first, min(len(passes), first + max(1, workers))))
        shares = _shares(workers, [len(passes[i][1]) for i in wave])
        if starting:
            for index in wave:
                starting(index)
        if len(wave) == 1:  # one pass: run it here (a Ctrl-C reaches its pool at once)
            config, pairs, seen = passes[wave[0]]
            outcomes[wave[0]] = run_cases(config, shares[0], pairs, note, None, seen)
            if done:
                done(wave[0], outcomes[wave[0]])
            continue
        ended: queue.Queue = queue.Queue()

        def one(index: int, count: int) -> None:
            try:
                config, pairs, seen = passes[index]
                ended.put((index, run_cases(config, count, pairs, note, pools, seen)))
            except Exception as exc:  # a bug of ours must not hang the wave
                ended.put((index, ({}, f"internal: {type(exc).__name__}: {exc}")))

        threads = [threading.Thread(target=one, args=(index, count), daemon=True)
                   for index, count in zip(wave, shares)]
        for thread in threads:
            thread.start()
        try:
            for _ in wave:
                index, outcome = ended.get()
                outcomes[index] = outcome
                if done:
                    done(index, outcome)
        except BaseException:  # Ctrl-C, SIGTERM: no pass goes on in the background
            for pool in list(pools):
                pool.stop()
            for thread in threads:
                thread.join(timeout=30)
            raise
    return outcomes


def confirm(config: WorkerConfig, workers: int, record: ResultsFile, *, repeats: int,
            baseline_label: str | None, overloads: list[str], native_route: str | None, note=None,
            culprits=None) -> dict:
    """Repeat the failures of ``record``'s finished overloads, and run them on the native
    path when the stack has one.

    Records what it finds through ``record``; returns what was done, for the run's
    provenance.

    The repeat passes and the baseline pass run at the same time, each in a pool of workers
    started for it (never the process that failed), at most ``workers`` workers in all. What each pass runs is what it ran one after another: the passes of
    the repeats differ only in when they run, and the baseline runs every main-pass
    failure, each of which is still failing or FLAKY after its repeats. Their records are
    applied in the order the passes had run one after another (repeats in order, the
    baseline last, which counts a case as ``native_also`` against its status after its
    repeats), and the results file is saved (``record.save()``) as each one is applied; a
    repeat pass whose pool failed, or that brought nothing back, ends the repeats there as
    before, and the later ones' records are dropped. So the census, the verdicts and every
    case record are those of the passes run one after another. A suspect's replays start as
    soon as a repeat of it passes (:class:`.replay.Ahead`), its repeats run first.
    """
    clock = time.monotonic()
    finished = record.finished
    repeat_passes = _plan_repeats(finished, repeats)
    base_pairs = to_baseline(finished) if baseline_label else []
    rep_figures = {"repeated": len(to_repeat(finished, repeats)), "times": repeats, "flaky": 0}
    base_figures = {"cases": len(base_pairs), "native_also": 0}
    known = culprits.known() if culprits else []
    tracer = replay.Ahead(config, finished, workers, known)
    passes = [(dataclasses.replace(config, purpose=f"repeat {index + 1}"), _run_order(pairs, tracer.candidates),
               _passed_to(tracer)) for index, pairs in enumerate(repeat_passes)]
    if base_pairs:
        passes.append((native_config(config, overloads, native_route), _run_order(base_pairs, {}), None))
    starting = _pass_announcer(note, repeat_passes, base_pairs, repeats)
    applier = _in_order_applier(record, repeat_passes, base_pairs, rep_figures, base_figures)
    ended_at: list = [None] * len(passes)  # seconds into the confirmation each pass ended

    def ended(index: int, outcome: tuple) -> None:
        ended_at[index] = round(time.monotonic() - clock, 1)
        applier(index, outcome)
    try:
        _run_concurrently(passes, workers, note, ended, starting)
        done: dict = {"repeats": rep_figures}
        if replay.suspects(finished):  # FLAKY by a sticky error: left by an earlier case of its worker?
            # side by side, as many replays at once as the run has workers; culprits this stack
            # left before (the store's, :class:`flagos_doctor.store.Culprits`) tried first
            done["replay"] = replay.trace(config, record, note, width=workers, known=known,
                                          remember=culprits.remember if culprits else None, ahead=tracer)
            record.save()
    finally:
        tracer.close()
    if baseline_label:
        done["baseline"] = {"label": baseline_label, **base_figures}
    done["passes"] = {"count": len(passes), "at_once": min(len(passes), max(1, workers)), "workers": workers,
                      "ended_s": ended_at}
    return {**done, **_timing_figures(clock, tracer)}


def _timing_figures(clock: float, tracer: "replay.Ahead") -> dict:
    """When the replays started early ran, seconds into the confirmation (``clock``)."""
    figures: dict = {}
    if tracer.spans:
        figures["replay_ahead_s"] = [[round(a - clock, 1), round(b - clock, 1)] for a, b in tracer.spans]
    figures["seconds"] = round(time.monotonic() - clock, 3)
    return figures


def native_config(config: WorkerConfig, overloads: list[str], native_route: str | None) -> WorkerConfig:
    """The baseline pass's workers: the stack's native path (module doc)."""
    return dataclasses.replace(config, baseline=True, baseline_overloads=list(overloads), native_route=native_route,
                               purpose="native")


def _run_order(pairs: list[tuple[str, dict]], candidates: dict) -> list[tuple[str, dict]]:
    """The order a pass runs ``pairs`` in (its records are applied in ``pairs``' own): the
    cases that may become replay suspects first (their replays start once a repeat of them
    passes), then the longest first, as they took in the survey (a pass lasts at least its
    longest case; started last, it would be added to the others')."""
    return sorted(pairs, key=lambda pair: ((pair[0], pair[1]["profile"]) not in candidates,
                                           -float(pair[1].get("seconds") or 0)))


def _passed_to(tracer: "replay.Ahead"):
    def seen(key: tuple, run: dict) -> None:
        if run.get("status") == model.PASS:
            tracer.passed(key)
    return seen


def _pass_announcer(note, repeat_passes: list[list[tuple[str, dict]]], base_pairs: list[tuple[str, dict]],
                    repeats: int):
    """The callback that notes what pass ``index`` runs as it starts (the repeats first, the
    baseline last)."""
    # counted now, before any pass is applied: a repeat applied changes what a case has run
    runs_before = [times_done(pairs, repeats) for pairs in repeat_passes]

    def starting(index: int) -> None:
        if not note:
            return
        if index < len(repeat_passes):
            pairs = repeat_passes[index]
            note(f"running {len(pairs)} failing case(s) again ({runs_before[index] + index} of {repeats}), "
                 "in fresh workers")
        else:
            note(f"running {len(base_pairs)} failing or flaky case(s) on the native path")
    return starting


def _in_order_applier(record: ResultsFile, repeat_passes: list[list[tuple[str, dict]]],
                      base_pairs: list[tuple[str, dict]], rep_figures: dict, base_figures: dict):
    """The callback a pass's outcome is handed to as it ends: it records the outcomes in the
    order the passes had one after another (the repeats in order, the baseline last), each
    as soon as every earlier one is recorded, saving the results file after each.

    A repeat pass whose pool failed, or that brought nothing back, stops the repeats: the
    later repeats' outcomes are dropped, as if they had never run."""
    outcomes: dict[int, tuple] = {}
    applied = {"next": 0, "stopped": False}
    count = len(repeat_passes) + (1 if base_pairs else 0)

    def apply_ready() -> None:
        # apply, in order, every pass whose predecessors are applied
        while applied["next"] < count and applied["next"] in outcomes:
            index = applied["next"]
            found, failure = outcomes[index]
            applied["next"] += 1
            if index < len(repeat_passes):
                if applied["stopped"]:
                    continue
                if failure:
                    rep_figures["failure"] = failure
                    applied["stopped"] = True
                    continue
                if not _apply_repeat(record, repeat_passes[index], found, rep_figures):
                    applied["stopped"] = True  # nothing came back (stopped)
                    continue
            else:
                if failure:
                    base_figures["failure"] = failure
                _apply_baseline(record, base_pairs, found, base_figures)
            record.save()

    def ended(index: int, outcome: tuple) -> None:
        outcomes[index] = outcome
        apply_ready()
    return ended


def times_done(pairs: list[tuple[str, dict]], times: int) -> int:
    """How many runs the least run of ``pairs`` had before the confirmation, the survey's own
    included (for the note)."""
    return min(len(case.get("repeats") or [case["status"]]) for _, case in pairs) if pairs else times
