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
:data:`MAX_REPLAY_CASES` earlier cases (the latest ones).

The replays run side by side (``width`` at a time, the run's worker count): a bisection's
next steps do not wait for each other. Each round runs the replays the next steps of the
bisection are likeliest to ask for, as many as run at once (:func:`_tests_ahead`; the
first round also the replay of all earlier cases), then walks
the bisection with those answers: the path, the culprit and the ``replay`` record are the
ones the bisection run one replay at a time gives (its replays are deterministic: a replay
that runs the same cases in a fresh worker gives the same answer); the replays run but not
on that path are counted apart (``speculative``). On the H200 a torch_fl survey's one
suspect took 9 replays in a row, each a worker start (15 s) and up to 241 cases.

A culprit the store has seen leave a sticky error on this stack before (``known``,
:class:`flagos_doctor.store.Culprits`) is tried first, alone before the suspect: when it
brings the error back it is the culprit (``replay`` says ``known: true``) and no bisection
runs; when it does not, the bisection runs as above. A culprit found is remembered
(``remember``). That replay starts as soon as the main phase records the case failing
after such a culprit in its worker (:class:`PairsAhead`), before its repeats make it a
suspect.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

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


def replayed_before(finished: dict[str, list[dict]], case: dict) -> list[Case]:
    """The earlier cases a replay of ``case`` runs before it: the latest
    :data:`MAX_REPLAY_CASES` of :func:`earlier_cases`."""
    return earlier_cases(finished, case)[-MAX_REPLAY_CASES:]


def in_fresh_worker(config: WorkerConfig, sequence: list[Case], slot: int = 0) -> list[tuple]:
    """Run ``sequence`` in order in one fresh worker, up to the first case that reports a
    sticky error; each case's (overload, record). A worker that cannot start, crashes or
    hangs ends the run there."""
    folder = scratch.create()
    worker = None
    records: list[tuple] = []
    try:
        worker = WorkerProcess(dataclasses.replace(config, scratch=folder), slot)

        def seen(event) -> None:
            if event.kind == "case":
                records.append((event.overload, event.data))

        for name, profile in sequence:
            if worker.attempt(name, [profile], seen) != "done" or any(r.get("poison") for _, r in records):
                break
    except StackFailed:
        pass
    finally:
        if worker is not None:
            worker.close()
        shutil.rmtree(folder, ignore_errors=True)
    return records


def replay(config: WorkerConfig, sequence: list[Case], slot: int = 0) -> bool:
    """Run ``sequence`` in order in one fresh worker (:func:`in_fresh_worker`); True when a
    case of it reported a sticky error (the error came back)."""
    replaying = dataclasses.replace(config, purpose="replay", baseline=False)
    return any(record.get("poison") for _, record in in_fresh_worker(replaying, sequence, slot))


def narrow(config: WorkerConfig, earlier: list[Case], target: Case, log: list) -> Case | None:
    """The one earlier case that, run before ``target``, brings its sticky error back; None
    when none does alone. ``log`` gets each replay's {cases, came_back}. One replay at a
    time (the reference :class:`Bisection` gives the same answers side by side)."""
    bisection = Bisection(earlier, proven=True)
    while not bisection.done:
        sequence = bisection.next_test()
        came_back = replay(config, sequence + [target])
        log.append({"cases": len(sequence) + 1, "came_back": came_back})
        bisection.answer(came_back)
    return bisection.culprit


class Bisection:
    """Halving ``candidates`` down to the earlier case that brings the error back (the later
    half tried first, kept when the error came back, else the earlier half), then, unless
    it was proven on its own way down, the last one tried alone (module doc)."""

    def __init__(self, candidates: list[Case], proven: bool, lo: int = 0, hi: int | None = None):
        self.candidates = candidates
        self.lo, self.hi = lo, len(candidates) if hi is None else hi
        self.proven = proven  # the replay of candidates[lo:hi] brought the error back
        self.done = False
        self.culprit: Case | None = None
        self._settle()

    def _settle(self) -> None:
        if self.hi - self.lo == 1 and self.proven:
            self.done, self.culprit = True, self.candidates[self.lo]
        elif self.hi - self.lo < 1:
            self.done = True

    def next_test(self) -> list[Case]:
        """The earlier cases the next replay runs before the suspect."""
        if self.hi - self.lo > 1:
            return self.candidates[self.lo + (self.hi - self.lo) // 2:self.hi]
        return self.candidates[self.lo:self.hi]  # the last one, alone

    def answer(self, came_back: bool) -> None:
        if self.hi - self.lo == 1:  # the last one tried alone
            self.done, self.culprit = True, self.candidates[self.lo] if came_back else None
            return
        middle = self.lo + (self.hi - self.lo) // 2
        if came_back:
            self.lo, self.proven = middle, True
        else:
            self.hi, self.proven = middle, False
        self._settle()

    def state(self) -> tuple:
        return (self.lo, self.hi, self.proven, self.done)

    def copy(self) -> "Bisection":
        other = Bisection.__new__(Bisection)
        other.__dict__.update(self.__dict__)
        return other


def _tests_ahead(bisection: Bisection, count: int) -> list[tuple[int, int]]:
    """The (start, end) of up to ``count`` replays the next steps of ``bisection`` may ask
    for, the likeliest first: a path with fewer answers "did not come back" before a
    shallower one. A sticky error shows in the next case that touches the device, so its
    culprit is most often the latest earlier case: the path of "came back" answers (the
    later halves, down to the last case alone) is taken whole in the first round, and the
    rest of the round covers the nearest other branches. Which replays run changes only
    how many rounds the bisection takes, never its answers (module doc)."""
    import heapq

    found: list[tuple[int, int]] = []
    order = 0
    frontier = [(0, 0, order, bisection)]  # (answers "not back" on the way, depth, tie, node)
    while frontier and len(found) < count:
        misses, depth, _, node = heapq.heappop(frontier)
        if node.done:
            continue
        if _span(node) not in found:
            found.append(_span(node))
        for came_back in (True, False):
            child = node.copy()
            child.answer(came_back)
            order += 1
            heapq.heappush(frontier, (misses + (not came_back), depth + 1, order, child))
    return found


def _span(node: Bisection) -> tuple[int, int]:
    sequence_start = node.lo + (node.hi - node.lo) // 2 if node.hi - node.lo > 1 else node.lo
    return (sequence_start, node.hi)


def replay_all(config: WorkerConfig, sequences: list[list[Case]], width: int) -> list[bool]:
    """:func:`replay` of each of ``sequences``, up to ``width`` side by side, each in its own
    fresh worker (on the run's devices in turn); their answers in order."""
    if len(sequences) == 1 or width <= 1:
        return [replay(config, sequence) for sequence in sequences]
    slots = iter(range(len(sequences)))
    lock = threading.Lock()

    def one(sequence: list[Case]) -> bool:
        with lock:
            slot = next(slots)
        return replay(config, sequence, slot)

    with ThreadPoolExecutor(max_workers=min(width, len(sequences)), thread_name_prefix="flagos-replay") as pool:
        return list(pool.map(one, sequences))


def bisect_side_by_side(config: WorkerConfig, earlier: list[Case], target: Case, width: int,
                        log: list, counts: dict) -> tuple[bool, Case | None]:
    """(came back, culprit): the replay of every earlier case, then :class:`Bisection`, in
    rounds of replays side by side (module doc). ``log`` gets the replays on the
    bisection's own path, as :func:`narrow` logs them; ``counts`` the replays and rounds run.
    Each round's workers start when the round does: a worker started ahead for a round the
    bisection may never ask for would sit unused."""
    bisection = Bisection(earlier, proven=True)
    first = True
    while first or not bisection.done:
        spans = _tests_ahead(bisection, max(1, width - 1) if first else max(1, width))
        sequences = ([earlier] if first else []) + [earlier[a:b] for a, b in spans]
        answers = replay_all(config, [sequence + [target] for sequence in sequences], width)
        counts["replays"] += len(sequences)
        counts["rounds"] += 1
        if first:
            first = False
            log.append({"cases": len(earlier) + 1, "came_back": answers[0]})
            if not answers[0]:
                return False, None
            answers = answers[1:]
        found = dict(zip(spans, answers))
        while not bisection.done and _span(bisection) in found:
            came_back = found[_span(bisection)]
            log.append({"cases": _span(bisection)[1] - _span(bisection)[0] + 1, "came_back": came_back})
            bisection.answer(came_back)
    return True, bisection.culprit


def trace(config: WorkerConfig, record: ResultsFile, note=None, width: int = 1,
          known: list[Case] = (), remember=None, ahead: "Ahead | None" = None,
          pairs: "PairsAhead | None" = None) -> dict:
    """Trace every suspect of ``record``'s finished overloads (recorded through it); the
    figures for the run's ``confirm.replay``: {suspects, traced, untraced (came back only
    with several cases), not_reproduced, runs (on the bisection's path), replays (run, side
    by side or not), rounds, known (suspects a known culprit explained)}.

    ``width``: replays at once; ``known``: culprits seen before on this stack, tried first;
    ``remember(culprit)``: called with each culprit found; ``ahead``: the replays already
    run for some suspects while the confirmation's passes ran (:class:`Ahead`); ``pairs``:
    known culprits' replays run from the main phase on (:class:`PairsAhead`)."""

    figures = {"suspects": 0, "traced": 0, "untraced": 0, "not_reproduced": 0, "runs": 0,
               "replays": 0, "rounds": 0, "known": 0}
    finished = record.finished
    for name, case in suspects(finished):
        figures["suspects"] += 1
        target = (name, case["profile"])
        earlier = replayed_before(finished, case)
        if note:
            note(f"replaying the {len(earlier)} case(s) run before {name} [{case['profile']}] in its worker "
                 f"(it failed with {case['poison']!r} there and passed in fresh workers)")
        found = ahead.outcome(target, earlier) if ahead is not None else None
        if found is None:
            found = trace_one(config, earlier, target, width, known, figures, pairs)
        came_back, culprit, log, from_known = found
        figures["runs"] += len(log)
        record.record_replay(case, len(log), len(earlier), came_back, known=from_known)
        _settle_suspect(record, case, target, came_back, culprit, len(earlier), figures)
        if culprit is not None and remember is not None:
            remember(culprit)
    if ahead is not None:
        for key in ("replays", "rounds", "known"):
            figures[key] += ahead.figures[key]
    return figures


def trace_one(config: WorkerConfig, earlier: list[Case], target: Case, width: int, known,
              figures: dict, pairs: "PairsAhead | None" = None) -> tuple[bool, Case | None, list, bool]:
    """(came back, culprit, the replays on the bisection's path, found from a known culprit)
    for one suspect: a known culprit first, else the bisection. Records nothing."""
    log: list = []
    culprit = _try_known(config, earlier, target, known, figures, pairs)
    if culprit is not None:
        return True, culprit, [{"cases": 2, "came_back": True}], True
    if not earlier:  # no earlier case: nothing could have left it behind (the repeats ran it alone)
        return False, None, log, False
    came_back, culprit = bisect_side_by_side(config, earlier, target, width, log, figures)
    return came_back, culprit, log, False


class Ahead:
    """A suspect's replays run while the confirmation's passes still run.

    A case whose first run failed with a sticky error becomes a suspect when a run of it in
    a fresh worker passes (FLAKY: :func:`suspects`). The confirmation tells this one
    (:meth:`passed`) as soon as a repeat of such a case passes, and its replays start
    then, instead of after every pass; their answers are those the same replays give after
    the passes (a replay runs the same cases in a fresh worker: module doc). A case whose
    repeats never pass is never replayed. :func:`trace` takes the outcomes (:meth:`outcome`),
    and traces itself any suspect not started here. Its threads are daemons: a survey that
    stops (an error, Ctrl-C) with replays still running ahead does not wait for them.
    """

    def __init__(self, config: WorkerConfig, finished: dict[str, list[dict]], width: int,
                 known: list[Case] = (), pairs: "PairsAhead | None" = None):
        self.config, self.width, self.known, self.pairs = config, width, list(known), pairs
        wanted = model.FAILURES
        #: the cases that may become suspects, and the earlier cases of their worker
        self.candidates = {(name, case["profile"]): replayed_before(finished, case)
                           for name, cases in finished.items() for case in cases
                           if case["status"] in wanted and case.get("poison") and case.get("worker")
                           and "replay" not in case}
        self.figures = {"replays": 0, "rounds": 0, "known": 0}
        self._lock = threading.Lock()
        self._threads: dict[Case, threading.Thread] = {}
        self._outcomes: dict[Case, tuple] = {}
        #: (start, end) of each suspect's replays run here (time.monotonic), for the run's figures
        self.spans: list[tuple[float, float]] = []

    def passed(self, target: Case) -> None:
        """A run of ``target`` in a fresh worker passed: start its replays if it is a candidate."""
        with self._lock:
            if target not in self.candidates or target in self._threads:
                return
            thread = threading.Thread(target=self._run, args=(target,), daemon=True, name="flagos-replay-ahead")
            self._threads[target] = thread
        thread.start()

    def _run(self, target: Case) -> None:
        figures = {"replays": 0, "rounds": 0, "known": 0}
        began = time.monotonic()
        try:
            outcome = trace_one(self.config, self.candidates[target], target, self.width, self.known, figures,
                                self.pairs)
        except Exception:  # noqa: BLE001  (trace then runs it itself, and reports what it finds)
            outcome = None
        with self._lock:
            self.spans.append((began, time.monotonic()))
            if outcome is not None:
                self._outcomes[target] = outcome
            for key in figures:
                self.figures[key] += figures[key]

    def outcome(self, target: Case, earlier: list[Case]) -> tuple | None:
        """``target``'s outcome once its replays end; None when they never started (or
        replayed other earlier cases than the suspect has now)."""
        with self._lock:
            thread = self._threads.get(target)
        if thread is None or self.candidates.get(target) != earlier:
            return None
        thread.join()
        with self._lock:
            return self._outcomes.get(target)

    def close(self) -> None:
        """Wait for every replay started."""
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join()


def known_before(earlier: list[Case], known) -> Case | None:
    """The culprit seen before on this stack that a replay of a case tries first: the
    latest of its earlier cases that is one of them (None: none is)."""
    seen = {tuple(c) for c in known}
    return next((c for c in reversed(earlier) if tuple(c) in seen), None)


def _try_known(config: WorkerConfig, earlier: list[Case], target: Case, known, figures: dict,
               pairs: "PairsAhead | None" = None) -> Case | None:
    """The first culprit seen before on this stack (latest earlier case first) that, alone
    before ``target``, brings its error back; None when none of them is an earlier case or
    none does. ``pairs``: that replay's answer when it ran ahead (:class:`PairsAhead`)."""
    culprit = known_before(earlier, known)
    if culprit is None:
        return None
    figures["replays"] += 1
    figures["rounds"] += 1
    came_back = pairs.answer(culprit, target) if pairs is not None else None
    if came_back is None:
        came_back = replay(config, [culprit, target])
    if came_back:
        figures["known"] += 1
        return culprit
    return None


class PairsAhead:
    """A known culprit's replay before a case, run as soon as the main phase records the
    case failing with a sticky error after that culprit in its worker: before its repeats
    have made it a suspect (FLAKY: :func:`suspects`), which takes a worker start and a case
    (on the H200 a warm torch_fl survey's tail was that, then this replay's own start).
    :func:`_try_known` takes the answer; the same replay run then would give it (module
    doc). A pair whose case never becomes a suspect ran for nothing: counted (``unused``).
    Each runs in a fresh worker of ``config``, on a daemon thread (as :class:`Ahead`'s)."""

    def __init__(self, config: WorkerConfig, known: list[Case]):
        self.config = dataclasses.replace(config, purpose="replay, ahead of its repeats", baseline=False)
        self.known = [tuple(c) for c in known]
        self._ran: dict[str, dict[int, Case]] = {}  # worker -> {worker_order: case} recorded
        self._answers: dict[tuple, bool] = {}
        self._threads: dict[tuple, threading.Thread] = {}
        self._asked: set = set()
        self._lock = threading.Lock()

    def seen(self, name: str, case: dict) -> None:
        """A case the main phase recorded: the replay starts when it met a sticky error after
        a known culprit in its worker."""
        worker, order = case.get("worker"), case.get("worker_order")
        if not worker or not order or not self.known:
            return
        target = (name, case["profile"])
        with self._lock:
            ran = self._ran.setdefault(worker, {})
            ran[order] = target
            if not case.get("poison"):
                return
            earlier = [ran[o] for o in sorted(ran) if o < order][-MAX_REPLAY_CASES:]
            culprit = known_before(earlier, self.known)
            if culprit is None or (culprit, target) in self._threads:
                return
            thread = threading.Thread(target=self._run, args=(culprit, target), daemon=True,
                                      name="flagos-replay-pair")
            self._threads[(culprit, target)] = thread
        thread.start()

    def _run(self, culprit: Case, target: Case) -> None:
        came_back = any(r.get("poison") for _, r in in_fresh_worker(self.config, [culprit, target]))
        with self._lock:
            self._answers[(culprit, target)] = came_back

    def answer(self, culprit: Case, target: Case) -> bool | None:
        """The pair's answer (waiting for it), or None when it was not run ahead."""
        with self._lock:
            thread = self._threads.get((tuple(culprit), tuple(target)))
            self._asked.add((tuple(culprit), tuple(target)))
        if thread is None:
            return None
        thread.join()
        with self._lock:
            return self._answers.get((tuple(culprit), tuple(target)))

    def figures(self) -> dict:
        """{ahead: pairs run ahead, unused: of them, those no suspect asked for}."""
        with self._lock:
            return {"ahead": len(self._threads), "unused": len(set(self._threads) - self._asked)}

    def close(self) -> None:
        """Wait for every pair started."""
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join()


def _settle_suspect(record: ResultsFile, case: dict, target: Case, came_back: bool, culprit: Case | None,
                    earlier: int, figures: dict) -> None:
    """The suspect's record (and the culprit's) after its replays (module doc)."""
    if not came_back:
        figures["not_reproduced"] += 1
        return  # FLAKY, with the evidence
    later = list(case.get("repeats") or [case["status"]])[1:] or [model.PASS]
    status = settle(later)
    details = [d.get("detail", "") for d in case.get("repeat_details") or []]
    # a FLAKY suspect (its fresh runs disagreed: settle's own status, none of theirs) keeps no detail
    record.record_settled(case, status, details[later.index(status)] if status in later and len(details) == len(later)
                          else "")
    if culprit is None:
        figures["untraced"] += 1
        record.record_poisoned_by(case, {"overload": None, "profile": None, "cases": earlier})
        return
    figures["traced"] += 1
    record.record_poisoned_by(case, {"overload": culprit[0], "profile": culprit[1]})
    _blame(record, culprit, target, case["poison"])


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
