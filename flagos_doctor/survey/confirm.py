"""Confirming a survey's failures: run them again, and on the stack's native path (parent side).

A failure a survey reports must belong to the stack. Two things make one that does not:

* the case is *flaky*: run again, it gives another outcome (a race, a kernel autotuned
  differently, a context a neighbour disturbed). Every WRONG, ERROR, CRASH or TIMEOUT case
  runs ``repeats`` more times (``--repeats``, default 2), each time in workers of the
  repeat's own lane, so never in the process that failed. When it passed in one run and failed
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

They run while the main phase still runs (:class:`Confirmation`): the survey hands each
case it records to :meth:`Confirmation.consider`, and a failure's repeats and its
native-path run are queued at once, each in a *lane* of its own (repeat 1, repeat 2, ...,
native): a streaming :class:`~flagos_doctor.survey.pool.Pool` whose workers (niced, so the
main phase keeps the cores it needs) start only for a task waiting that no worker of the
lane is free to take, and only when the work waiting (each case's seconds in the main
phase, less its compiling: :func:`expected_seconds`) would outlast a worker's start
(:func:`~flagos_doctor.survey.pool.worth_a_start`), the run's worker count shared among the lanes.
A main worker that has no main task left is lent to a repeat lane (:meth:`Confirmation.spare`),
each to one lane, where it takes the repeats of cases it did not run itself: on the H200 a warm
torch_fl run's lanes had their own workers ready 4-6 s after the main phase ended, its 13 lent
workers had run the repeats by then. A case's repeats run
side by side in distinct fresh workers, as the passes did before lanes (chained, each
waiting for the one before, they put a worker start and a case per repeat on the run's
critical path: torch_fl warm on the H200 73 s -> 101 s). A run with fewer workers than
repeats (``--workers 1``: one process at a time is what the device holds) chains them: a
case's next repeat is queued in the next lane when one ends, never beside it, so a case
whose outcome depends on its calls' order sees them in the order of passes run in turn.
Once the main phase has ended,
:func:`confirm` applies each lane's records as it runs out of tasks, in the order passes
had one after another: the records and the census are those of passes run in turn.

A case whose main run reported a sticky error, and a culprit the store knows for leaving
one (:class:`flagos_doctor.store.Culprits`), runs alone in each repeat lane from the start
(a fresh worker for it alone), never in a lane's shared worker. Otherwise a lane's worker
runs many cases, so a case can meet a sticky error another case of that worker left (a
kernel writing out of bounds without failing: CUDA says so at the next synchronisation, in
the next case). A case that reports one after other cases of its
worker runs again as the first case of a fresh worker, where nothing ran before it, and
that run is its record in the pass (a repeat keeps ``"alone"`` in ``repeat_details``: what
the shared worker's run said, {``poison``, ``after``: the cases that worker ran before
it}). Otherwise which case follows the culprit (the order in a lane is the order its cases
failed in, which the main phase's timing decides) would decide its status: on the H200 a cold
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
import threading
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


class AloneAgain:
    """Cases that reported a sticky error after other cases of their worker, each run again
    as the first case of a fresh worker (a streaming :class:`Pool` that ends its worker
    after each task), started as soon as the lane reports it, beside the rest of the lane
    (module doc)."""

    def __init__(self, config: WorkerConfig, workers: int, first=None):
        self.pool = Pool(dataclasses.replace(config, scratch="", purpose=f"{config.purpose}, alone"), workers,
                         per_overload=True)
        self.runs: dict = {}  # (overload, profile) -> the lane's record
        self._found: dict = {}  # (overload, profile) -> the fresh worker's record
        self._first = first  # hears the record of a case queued alone from the start (:meth:`start`)
        self._started: set = set()
        self._lock = threading.Lock()
        self.pool.stream(self._event)

    def start(self, key: tuple) -> None:
        """Run ``key`` alone from the start, never in the lane's shared workers: its own run in
        the main phase reported a sticky error (module doc)."""
        with self._lock:
            self._started.add(key)
        self.pool.add([(key[0], [key[1]])])

    def consider(self, key: tuple, record: dict) -> None:
        if record.get("poison") and (record.get("worker_order") or 1) > 1:
            with self._lock:
                self.runs[key] = record
            self.pool.add([(key[0], [key[1]])])

    def _event(self, event) -> None:
        # the first case of its worker; a worker that died or hung before starting it left
        # no record of it (the lane's run then stands)
        if event.kind == "case" and event.data.get("worker_order") == 1:
            key = (event.overload, event.data["profile"])
            with self._lock:
                self._found[key] = event.data
                first = key in self._started and key not in self.runs
            if first and self._first is not None:
                self._first(key, event.data)

    def abandon(self) -> None:
        self.pool.close()

    def finish(self, found: dict | None, note=None, seen=None) -> None:
        """Wait for the runs; each one's record replaces the lane's in ``found``, naming in
        ``alone`` what the lane's run said (None: a lane that failed, nothing replaced)."""
        self.pool.drain()
        self.pool.close()
        for key, earlier in sorted(self.runs.items()):
            record = self._found.get(key)
            if found is None or record is None:
                continue
            record["alone"] = {"poison": earlier["poison"], "after": earlier["worker_order"] - 1}
            found[key] = record
            if note:
                note(f"{key[0]} [{key[1]}]: {earlier['poison']} after {record['alone']['after']} other case(s) "
                     f"of its worker; alone in a fresh worker: {record['status']}")
            if seen:
                seen(key, record)


def expected_seconds(case: dict) -> float | None:
    """The seconds a case's run in a lane is expected to take: its last run's, less what it
    spent compiling and autotuning (found in Triton's caches by then); None when unknown."""
    seconds = case.get("seconds")
    if not isinstance(seconds, (int, float)):
        return None
    triton = case.get("triton") or {}
    spent = sum(triton.get(field) or 0 for field in ("compile_seconds", "autotune_seconds"))
    return max(0.0, seconds - spent)


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


#: The niceness of a confirmation's worker: started while the main phase runs, its start
#: (the stack's import) takes only the cycles the main phase's compiles leave idle.
NICE = 5


class Lane:
    """One stream of the confirmation: the cases' n-th repeat, or their native-path run, in
    a streaming :class:`Pool` of fresh workers of its own (never the process that ran the
    case before), each worker started for a task that waits. ``heard(lane, key, record,
    alone)`` hears each record as it ends, from the lane's threads."""

    def __init__(self, config: WorkerConfig, workers: int, heard):
        self.config, self.heard = config, heard
        self.found: dict = {}  # (overload, profile) -> the lane's record
        self.failure: str | None = None  # why the lane's workers stopped (they could not start)
        self._queued: set = set()
        self._lock = threading.Lock()
        self.pool = Pool(dataclasses.replace(config, scratch="", nice=NICE), workers)
        self.alone = AloneAgain(dataclasses.replace(config, nice=NICE), workers, first=self._record)
        self.pool.stream(self._event)

    def add(self, key: tuple, alone: bool = False, work: float | None = None) -> None:
        """Queue ``key``; ``alone``: in a fresh worker of its own (a sticky error in its main
        run); ``work``: the seconds it is expected to take (:func:`expected_seconds`)."""
        with self._lock:
            if key in self._queued:
                return
            self._queued.add(key)
        if alone:
            self.alone.start(key)
        else:
            self.pool.add([(key[0], [key[1]])], work)

    def queued(self) -> int:
        with self._lock:
            return len(self._queued)

    def _record(self, key: tuple, record: dict) -> None:
        with self._lock:
            self.found[key] = record
        self.heard(self, key, record, False)

    def _event(self, event) -> None:
        if event.kind == "case":
            key = (event.overload, event.data["profile"])
            self._record(key, event.data)
            self.alone.consider(key, event.data)
        elif event.kind == "fatal":
            with self._lock:
                self.failure = self.failure or event.data.get("message")
            self.pool.stop()

    def drain(self, note=None) -> tuple[dict, str | None]:
        """Wait for the lane's last task (none will be added) and its alone runs; (found, failure)."""
        self.pool.drain()
        self.pool.close()
        self.alone.finish(self.found if self.failure is None else None, note,
                          lambda key, record: self.heard(self, key, record, True))
        return self.found, self.failure

    def stop(self) -> None:
        """Ctrl-C, SIGTERM, a fatal main phase, or done: no fresh worker is waited for."""
        self.alone.abandon()
        self.pool.close()


class Confirmation:
    """The confirmation's work, streamed beside the main phase (module doc): as the survey
    records a failing case (:meth:`consider`), its repeats and its native-path run are
    queued, each in a lane of its own; with fewer workers than repeats (``chained``) its
    first repeat only, each later one when the one before it ends."""

    def __init__(self, config: WorkerConfig, workers: int, repeats: int, native: WorkerConfig | None,
                 known: list = ()):
        self.config, self.times, self.workers = config, repeats, max(1, workers)
        #: culprits the store knows on this stack: alone in each repeat lane, and their
        #: replays before a case they may have poisoned run from the main phase on
        self.known = {tuple(c) for c in known}
        self.pairs = replay.PairsAhead(dataclasses.replace(config, nice=NICE), list(known)) if repeats and known else None
        configs = [dataclasses.replace(config, purpose=f"repeat {index + 1}") for index in range(repeats)]
        configs += [native] if native is not None else []
        shares = _shares(self.workers, [self.workers] * len(configs))
        self.lanes = [Lane(lane_config, count, self._heard) for lane_config, count in zip(configs, shares)]
        self.native = self.lanes[-1] if native is not None else None
        self.chained = self.workers < repeats
        self._lacking: dict = {}  # (overload, profile) -> repeats it still lacks (chained)
        self._passed: list = []  # repeats that passed, for the replays (:class:`.replay.Ahead`)
        self._tracer = None
        self._alone: set = set()  # cases whose main run reported a sticky error: alone in every repeat lane
        self._work: dict = {}  # (overload, profile) -> seconds its run in a lane is expected to take
        self._ran_in: dict = {}  # (overload, profile) -> the worker that ran it in the main phase
        self._lent: list[int] = [0] * repeats  # main workers lent to each repeat lane
        self._lock = threading.Lock()

    def consider(self, name: str, case: dict) -> None:
        """A case the survey recorded (or found finished in the results file): queue what
        its confirmation still lacks (:func:`to_repeat`, :func:`to_baseline`)."""
        if self.pairs is not None:
            self.pairs.seen(name, case)
        if case["status"] not in model.FAILURES + (model.FLAKY,) or case["profile"] == "-":
            return
        key = (name, case["profile"])
        if case.get("poison") or key in self.known:
            with self._lock:
                self._alone.add(key)
        lacking = self.times + 1 - len(case.get("repeats") or [case["status"]])
        repeat_lanes = self.lanes[:max(0, min(lacking, self.times))]  # pass i: the cases lacking more than i
        if self.chained and repeat_lanes:
            with self._lock:
                self._lacking.setdefault(key, len(repeat_lanes))
            repeat_lanes = repeat_lanes[:1]
        with self._lock:
            self._work[key] = expected_seconds(case)
            self._ran_in[key] = case.get("worker")
        for lane in repeat_lanes:
            self._queue(lane, key)
        if self.native is not None and "baseline" not in case:
            self.native.add(key, work=self._work[key])

    def _queue(self, lane: Lane, key: tuple) -> None:
        with self._lock:
            alone, work = key in self._alone, self._work.get(key)
        lane.add(key, alone=alone, work=work)

    def _heard(self, lane: Lane, key: tuple, record: dict, alone: bool) -> None:
        if lane is self.native:
            return
        index = self.lanes.index(lane)
        passed = record.get("status") == model.PASS
        with self._lock:
            # an alone rerun replaces a record whose arrival already queued the next repeat
            after = self.chained and not alone and index + 1 < self._lacking.get(key, 0)
            if passed:
                self._passed.append(key)
            tracer = self._tracer
        if after:
            self._queue(self.lanes[index + 1], key)
        if tracer is not None and passed:
            tracer.passed(key)

    def spare(self, worker) -> "callable | None":
        """A main worker with no main task left (:attr:`.Pool.spare`): lent to the repeat lane
        lent the fewest so far, each worker to one lane only (a case's repeats run in distinct
        processes), where it takes only cases it did not run itself. None with no repeat lane,
        or repeats chained (``--workers`` fewer than repeats)."""
        if not self.times or self.chained:
            return None
        with self._lock:
            index = min(range(self.times), key=lambda i: (self._lent[i], i))
            self._lent[index] += 1
        ran_in = self._ran_in

        def fits(task: tuple) -> bool:
            name, profiles = task
            return ran_in.get((name, profiles[0] if profiles else None)) != worker.id

        return self.lanes[index].pool.lend(worker, fits)

    def trace_with(self, tracer: "replay.Ahead") -> None:
        """Hand the repeats that passed, so far and from now on, to ``tracer``."""
        with self._lock:
            self._tracer, passed = tracer, list(self._passed)
        for key in passed:
            tracer.passed(key)

    def queued(self) -> list[int]:
        """Tasks each lane was given so far."""
        return [lane.queued() for lane in self.lanes]

    def end_input(self, passes: int) -> None:
        """The main phase has ended: nothing more comes to a lane (but to a chained repeat's,
        until the lane before it is drained), so its workers end when done."""
        waiting = self.lanes[1:passes] if self.chained else []
        for lane in self.lanes:
            if lane not in waiting:
                lane.pool.end_input()

    def stop(self) -> None:
        for lane in self.lanes:
            lane.stop()

    def close_pairs(self) -> dict | None:
        """Wait for the known culprits' replays run ahead; their figures, None when none ran."""
        if self.pairs is None:
            return None
        self.pairs.close()
        return self.pairs.figures() if self.pairs.figures()["ahead"] else None


def confirm(stream: Confirmation, record: ResultsFile, *, baseline_label: str | None, note=None,
            culprits=None) -> dict:
    """Settle the failures of ``record``'s finished overloads with what ``stream`` ran for
    them, and trace the sticky errors; called once the main phase has ended.

    Records what it finds through ``record``; returns what was done, for the run's
    provenance. Each lane's records are applied once it has run its last task, in the order
    passes had one after another (repeats in order, the baseline last, which counts a case
    as ``native_also`` against its status after its repeats), and the results file is saved
    (``record.save()``) as each one is applied; a repeat lane whose workers failed, or that
    brought nothing back, ends the repeats there, and the later ones' records are dropped.
    So the census, the verdicts and every case record are those of passes run one after
    another. A suspect's replays start as soon as a repeat of it passes
    (:class:`.replay.Ahead`).
    """
    clock = time.monotonic()
    finished, repeats, workers = record.finished, stream.times, stream.workers
    for name, cases in sorted(finished.items()):  # queued as recorded already: idempotent
        for case in cases:
            stream.consider(name, case)
    repeat_passes = _plan_repeats(finished, repeats)
    base_pairs = to_baseline(finished) if baseline_label else []
    rep_figures = {"repeated": len(to_repeat(finished, repeats)), "times": repeats, "flaky": 0}
    base_figures = {"cases": len(base_pairs), "native_also": 0}
    known = culprits.known() if culprits else []
    tracer = replay.Ahead(stream.config, finished, workers, known, stream.pairs)
    stream.trace_with(tracer)
    lanes = stream.lanes[:len(repeat_passes)] + ([stream.native] if base_pairs else [])
    queued = stream.queued()  # by the main phase's end
    starting = _pass_announcer(note, repeat_passes, base_pairs, repeats)
    applier = _in_order_applier(record, repeat_passes, base_pairs, rep_figures, base_figures)
    ended_at: list = []  # seconds after the main phase each lane had run its last task
    stream.end_input(len(repeat_passes))
    try:
        for index, lane in enumerate(lanes):
            starting(index)
            outcome = lane.drain(note)
            if stream.chained and index + 1 < len(repeat_passes):  # it queued its last repeat there
                lanes[index + 1].pool.end_input()
            ended_at.append(round(time.monotonic() - clock, 1))
            applier(index, outcome)
        done: dict = {"repeats": rep_figures}
        if replay.suspects(finished):  # FLAKY by a sticky error: left by an earlier case of its worker?
            # side by side, as many replays at once as the run has workers; culprits this stack
            # left before (the store's, :class:`flagos_doctor.store.Culprits`) tried first
            done["replay"] = replay.trace(stream.config, record, note, width=workers, known=known,
                                          remember=culprits.remember if culprits else None, ahead=tracer,
                                          pairs=stream.pairs)
            record.save()
    finally:
        stream.stop()
        tracer.close()
        pairs = stream.close_pairs()
    if pairs:
        done.setdefault("replay", {})["pairs"] = pairs
    if baseline_label:
        done["baseline"] = {"label": baseline_label, **base_figures}
    done["passes"] = _pass_figures(lanes, workers, ended_at, queued)
    return {**done, **_timing_figures(clock, tracer)}


def _pass_figures(lanes: list, workers: int, ended_at: list, queued: list) -> dict:
    """The lanes (``count`` of them, run ``at_once``): when each ended, the tasks queued by
    the main phase's end, the workers each started and was lent."""
    return {"count": len(lanes), "at_once": len(lanes), "workers": workers, "ended_s": ended_at, "queued": queued,
            "started": [lane.pool.slots() for lane in lanes], "lent": [lane.pool.lent() for lane in lanes]}


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
