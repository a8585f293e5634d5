"""Each promise of flagos_doctor/survey/replay.py's docstrings about the replaying itself, one
test each: what a replay runs in its fresh worker and where it stops, the replays side by side
(the first round, the rounds after, what is logged and counted), what a trace records of a
suspect and its culprit, a known culprit tried first, the replays run ahead while the
confirmation's passes run (:class:`~flagos_doctor.survey.replay.Ahead`) and from the main
phase on (:class:`~flagos_doctor.survey.replay.PairsAhead`).

No worker process starts: ``replay.WorkerProcess`` is a :class:`Worker` of a :class:`Stack`
(a stack whose sticky error is left by the cases it names: each case run after one of them in
the same worker reports it, and the worker ends there, as pool.WorkerProcess does), which
records what each worker was started with and ran; ``replay.scratch.create`` makes its folders
in tmp_path. Records come back through ``attempt``'s report, as :class:`~flagos_doctor.survey.pool.Event`
objects shaped as the pool's; a trace records through a real
:class:`~flagos_doctor.results.resultsfile.ResultsFile` in tmp_path. The real workers of a
stack with a real sticky error are tests/test_replay_side_by_side.py's and
tests/test_survey_noise.py's. scripts/mutation runs these (``replay-clauses``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import REPO_ROOT
from flagos_doctor.results.model import CRASH, ERROR, FLAKY, PASS, WRONG
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.survey import replay
from flagos_doctor.survey.pool import Event, StackFailed, WorkerConfig

SETUP = {"harness_version": "flagos-doctor-survey/test", "stack": "demo"}
POISON = "CUDA error: an illegal memory access was encountered"
#: the cases the suspect's worker (w1) ran before it, in order (worker_order 1..6)
EARLIER = [("abs", "1d"), ("neg", "1d"), ("exp", "1d"), ("log", "1d"), ("sin", "1d"), ("cos", "1d")]
TARGET = ("tan", "2d")


def config(**more) -> WorkerConfig:
    return WorkerConfig(python=sys.executable, stack="demo", device=None, spec=None, conf=None,
                        backend="flagos_python", timeout=5, **more)


class Stack:
    """A stack whose sticky error is left behind by ``culprits`` (each alone) and by each group
    of ``together`` (only all of its cases): a case run after them in the same worker reports
    it (``poison``) and the worker ends (``ends``: as pool.WorkerProcess, "ended"). ``special``:
    case -> "crash" (a CRASH record, the worker ended), "idle" (the worker died before it),
    "gone" (StackFailed); ``start``: an exception each worker start raises."""

    def __init__(self, culprits=(), together=(), ends=True):
        self.culprits = {tuple(c) for c in culprits}
        self.together = [{tuple(c) for c in group} for group in together]
        self.ends = ends
        self.special: dict = {}
        self.start: Exception | None = None
        self.workers: list[Worker] = []
        self.lock = threading.Lock()
        self.gate = threading.Event()  # every case waits for it (set: they run at once)
        self.gate.set()
        self.scratch_gone = False  # each worker removes its scratch folder as it closes

    def poisoned(self, ran) -> bool:
        return any(c in self.culprits for c in ran) or any(group <= set(ran) for group in self.together)

    def runs(self) -> list[list]:
        """What each worker started ran, in the order they started."""
        return [w.ran for w in self.workers]


class Worker:
    """Stands for pool.WorkerProcess: records its config, slot and the cases it ran."""

    def __init__(self, stack: Stack, config: WorkerConfig, slot: int):
        if stack.start is not None:
            raise stack.start
        self.stack, self.config, self.slot = stack, config, slot
        self.ran: list = []
        self.closed = False
        self.thread = threading.current_thread().name
        with stack.lock:
            stack.workers.append(self)

    def attempt(self, name, profiles, report) -> str:
        assert len(profiles) == 1
        one = (name, profiles[0])
        what = self.stack.special.get(one)
        if what == "idle":
            return "idle"
        if what == "gone":
            raise StackFailed("the stack is gone")
        assert self.stack.gate.wait(timeout=30)
        report(Event("start", name, {"profile": one[1]}))
        poisoned = self.stack.poisoned(self.ran)
        self.ran.append(one)
        if what == "crash":
            report(Event("case", name, {"profile": one[1], "status": CRASH, "route": "kernel", "detail": "SIGSEGV"}))
            return "ended"
        record = {"profile": one[1], "status": ERROR if poisoned else PASS, "route": "kernel",
                  "detail": POISON if poisoned else "", **({"poison": POISON} if poisoned else {})}
        report(Event("case", name, record))
        return "ended" if poisoned and self.stack.ends else "done"

    def close(self) -> None:
        self.closed = True
        if self.stack.scratch_gone:
            os.rmdir(self.config.scratch)


@pytest.fixture
def stack(monkeypatch, tmp_path):
    """The :class:`Stack` every worker a replay starts belongs to (culprits set by the test);
    ``stack.folders``: the scratch folders made."""
    made = Stack()
    made.folders = []
    counter = iter(range(10_000))

    def create() -> str:
        with made.lock:
            folder = str(tmp_path / f"scratch-{next(counter)}")
            made.folders.append(folder)
        os.mkdir(folder)
        return folder
    monkeypatch.setattr(replay, "WorkerProcess", lambda config, slot: Worker(made, config, slot))
    monkeypatch.setattr(replay.scratch, "create", create)
    return made


class Opening:
    """Stands for the lock of an :class:`Ahead` or :class:`PairsAhead`: the test's thread
    taking it opens ``stack.gate`` (the replays run ahead go on from then)."""

    def __init__(self, lock, stack: Stack, thread: threading.Thread):
        self.lock, self.stack, self.thread = lock, stack, thread

    def __enter__(self):
        self.lock.acquire()
        if threading.current_thread() is self.thread:
            self.stack.gate.set()

    def __exit__(self, *exc):
        self.lock.release()


def case(profile: str, status: str, detail: str = "", **more) -> dict:
    return {"profile": profile, "status": status, "route": "kernel", "detail": detail, "seconds": 1.5, **more}


def survey(repeats=(ERROR, PASS, PASS), details=None, suspect_status=FLAKY, earlier=EARLIER) -> dict:
    """The overloads of a survey whose worker w1 ran ``earlier`` (all passed), then the suspect
    (TARGET), which failed with a sticky error; its ``repeats`` and their details as the
    confirmation leaves them."""
    overloads: dict = {}
    for order, (name, profile) in enumerate(earlier, start=1):
        overloads.setdefault(name, []).append(case(profile, PASS, worker="w1", worker_order=order))
    details = details if details is not None else [{"detail": ""} for _ in (repeats or [])[1:]]
    overloads.setdefault(TARGET[0], []).append(case(
        TARGET[1], suspect_status, POISON, worker="w1", worker_order=len(earlier) + 1, poison=POISON,
        **({"repeats": list(repeats), "repeat_details": details} if repeats else {})))
    return overloads


@pytest.fixture
def opened(finished_results):
    """``opened({overload: [case, ...]})``: a ResultsFile in tmp_path with those overloads
    finished (``finished_results`` in conftest.py)."""
    return lambda overloads: finished_results(SETUP, overloads)


def suspect_of(record: ResultsFile) -> dict:
    return record.finished[TARGET[0]][-1]


def one_case(record: ResultsFile, name: str) -> dict:
    (found,) = record.finished[name]
    return found


# -- in_fresh_worker, replay --------------------------------------------------------------

def test_a_replay_runs_its_sequence_in_order_in_one_fresh_worker_with_a_scratch_folder_of_its_own(stack):
    base = config()
    records = replay.in_fresh_worker(base, EARLIER[:3], slot=3)
    (worker,) = stack.workers
    assert worker.ran == EARLIER[:3] and worker.slot == 3
    assert worker.config.scratch == stack.folders[0] and worker.config == config(scratch=stack.folders[0])
    # each case's (overload, record), the case events only
    assert [(name, r["profile"], r["status"]) for name, r in records] == [(n, p, PASS) for n, p in EARLIER[:3]]


def test_a_replays_worker_is_closed_and_its_scratch_folder_removed_however_it_ends(stack):
    replay.in_fresh_worker(config(), EARLIER[:2])
    assert stack.workers[0].slot == 0  # the run's first device unless told
    stack.special[EARLIER[0]] = "gone"
    assert replay.in_fresh_worker(config(), EARLIER[:2]) == []  # StackFailed: the run ends, nothing raised
    assert [w.closed for w in stack.workers] == [True, True]
    assert len(stack.folders) == 2 and not any(os.path.exists(f) for f in stack.folders)
    stack.special.clear()
    stack.scratch_gone = True  # a worker that removed its scratch folder itself: the records still come back
    assert [name for name, _ in replay.in_fresh_worker(config(), EARLIER[:2])] == ["abs", "neg"]
    stack.scratch_gone = False
    del stack.folders[2], stack.workers[2]
    stack.start = StackFailed("cannot start")
    assert replay.in_fresh_worker(config(), EARLIER[:2]) == []  # a worker that cannot start: nothing run
    assert len(stack.workers) == 2 and len(stack.folders) == 3 and not os.path.exists(stack.folders[2])


def test_a_replay_stops_at_the_first_case_that_reports_a_sticky_error(stack):
    stack.culprits = {EARLIER[0]}
    records = replay.in_fresh_worker(config(), EARLIER)
    assert stack.runs() == [EARLIER[:2]]
    assert [(name, r.get("poison")) for name, r in records] == [("abs", None), ("neg", POISON)]
    # even from a worker that would take more
    stack.ends = False
    assert [name for name, _ in replay.in_fresh_worker(config(), EARLIER)] == ["abs", "neg"]
    assert stack.runs()[1] == EARLIER[:2]


def test_a_worker_that_crashes_or_dies_ends_the_replay_there(stack):
    stack.special[EARLIER[1]] = "crash"
    records = replay.in_fresh_worker(config(), EARLIER)
    assert [(name, r["status"]) for name, r in records] == [("abs", PASS), ("neg", CRASH)]
    assert stack.runs() == [EARLIER[:2]]
    stack.special[EARLIER[1]] = "idle"
    assert [name for name, _ in replay.in_fresh_worker(config(), EARLIER)] == ["abs"]
    assert stack.runs()[1] == EARLIER[:1]
    stack.special[EARLIER[1]] = "gone"  # a StackFailed in the middle: what it had so far
    assert [name for name, _ in replay.in_fresh_worker(config(), EARLIER)] == ["abs"]


def test_replay_is_true_when_a_case_reports_a_sticky_error_in_a_worker_started_for_a_replay(stack):
    stack.culprits = {EARLIER[2]}
    base = config(baseline=True, purpose="main")
    assert replay.replay(base, EARLIER[1:4], slot=2) is True
    assert replay.replay(base, EARLIER[:2] + [TARGET]) is False
    first, second = stack.workers
    assert first.config.purpose == second.config.purpose == "replay"
    assert first.config.baseline is False and first.slot == 2 and second.slot == 0
    assert second.ran == EARLIER[:2] + [TARGET]  # every case run: none brought the error back


# -- narrow, replay_all, bisect_side_by_side -------------------------------------------------

def test_narrow_replays_one_at_a_time_and_logs_each_replays_cases_and_answer(stack):
    stack.culprits = {EARLIER[4]}
    log: list = []
    assert replay.narrow(config(), EARLIER, TARGET, log) == EARLIER[4]
    # 3..5 back, 4..5 back, 5 not back, 4 alone back (each stopped at the case that reported it)
    assert log == [{"cases": 4, "came_back": True}, {"cases": 3, "came_back": True},
                   {"cases": 2, "came_back": False}, {"cases": 2, "came_back": True}]
    assert stack.runs() == [EARLIER[3:6], EARLIER[4:6], [EARLIER[5], TARGET], [EARLIER[4], TARGET]]
    stack.culprits = set()
    stack.together = [{EARLIER[0], EARLIER[5]}]
    log.clear()
    assert replay.narrow(config(), EARLIER, TARGET, log) is None  # only several together bring it back
    assert log[-1] == {"cases": 2, "came_back": False}
    # one earlier case: the replay of every earlier case (the caller's) brought the error back
    stack.workers.clear()
    log.clear()
    assert replay.narrow(config(), EARLIER[:1], TARGET, log) == EARLIER[0] and log == [] and stack.workers == []


def test_replay_all_runs_one_sequence_or_a_width_of_one_in_the_calling_thread_answers_in_order(stack):
    stack.culprits = {EARLIER[0]}
    sequences = [EARLIER[:2], EARLIER[1:3], EARLIER[:1] + [TARGET]]
    assert replay.replay_all(config(), sequences, 1) == [True, False, True]
    assert replay.replay_all(config(), sequences[1:2], 4) == [False]
    assert {w.thread for w in stack.workers} == {threading.current_thread().name}
    assert [w.slot for w in stack.workers] == [0, 0, 0, 0]
    assert stack.runs() == [*sequences, sequences[1]]


def test_replay_all_runs_up_to_width_side_by_side_each_on_a_slot_of_its_own(stack, monkeypatch):
    pools = []
    executor = replay.ThreadPoolExecutor

    def recorded(max_workers, thread_name_prefix):
        pools.append(max_workers)
        return executor(max_workers=max_workers, thread_name_prefix=thread_name_prefix)
    monkeypatch.setattr(replay, "ThreadPoolExecutor", recorded)
    together = threading.Barrier(3, timeout=10)  # the three replays run at once, or this breaks
    real = replay.replay

    def meeting(config, sequence, slot=0):
        together.wait()
        return real(config, sequence, slot)
    monkeypatch.setattr(replay, "replay", meeting)
    stack.culprits = {EARLIER[1]}
    sequences = [EARLIER[:1], EARLIER[:3], EARLIER[1:3]]
    assert replay.replay_all(config(), sequences, 3) == [False, True, True]
    assert sorted(w.slot for w in stack.workers) == [0, 1, 2]
    assert all(w.thread.startswith("flagos-replay") for w in stack.workers)
    monkeypatch.setattr(replay, "replay", real)
    assert replay.replay_all(config(), sequences, 2) == [False, True, True]  # two at once
    assert replay.replay_all(config(), sequences[:2], 8) == [False, True]  # no more than there are
    assert pools == [3, 2, 2]


def test_the_first_round_replays_every_earlier_case_and_ends_the_trace_when_the_error_does_not_come_back(stack):
    log: list = []
    counts = {"replays": 0, "rounds": 0}
    assert replay.bisect_side_by_side(config(), EARLIER, TARGET, 3, log, counts) == (False, None)
    assert log == [{"cases": 7, "came_back": False}] and counts == {"replays": 3, "rounds": 1}
    # all the earlier cases, and (width - 1) replays the bisection would ask for next
    assert sorted(stack.runs()) == sorted([EARLIER + [TARGET], EARLIER[3:] + [TARGET], EARLIER[4:] + [TARGET]])
    stack.workers.clear()
    counts = {"replays": 0, "rounds": 0}
    assert replay.bisect_side_by_side(config(), EARLIER, TARGET, 1, [], counts) == (False, None)
    assert counts == {"replays": 2, "rounds": 1}  # at least one replay ahead, even one at a time
    assert stack.runs() == [EARLIER + [TARGET], EARLIER[3:] + [TARGET]]
    # one earlier case: its replay is the whole bisection, and it is run
    stack.workers.clear()
    log.clear()
    counts = {"replays": 0, "rounds": 0}
    assert replay.bisect_side_by_side(config(), EARLIER[:1], TARGET, 2, log, counts) == (False, None)
    assert stack.runs() == [[EARLIER[0], TARGET]] and counts == {"replays": 1, "rounds": 1}
    stack.culprits = {EARLIER[0]}
    assert replay.bisect_side_by_side(config(), EARLIER[:1], TARGET, 2, log, counts) == (True, EARLIER[0])
    assert log == [{"cases": 2, "came_back": False}, {"cases": 2, "came_back": True}]


def test_the_replays_side_by_side_name_the_culprit_and_log_the_path_the_serial_bisection_takes(stack):
    for width in (1, 2, 4):
        for culprit in [None, *range(len(EARLIER))]:
            stack.culprits = {EARLIER[culprit]} if culprit is not None else set()
            stack.together = [] if culprit is not None else [{EARLIER[0], EARLIER[5]}]
            serial: list = []
            expected = replay.narrow(config(), EARLIER, TARGET, serial)
            stack.workers.clear()
            log: list = []
            counts = {"replays": 0, "rounds": 0}
            came_back, found = replay.bisect_side_by_side(config(), EARLIER, TARGET, width, log, counts)
            assert (came_back, found) == (True, expected), (width, culprit)
            assert log == [{"cases": 7, "came_back": True}] + serial, (width, culprit)
            assert counts["replays"] == len(stack.workers), (width, culprit)
            stack.workers.clear()


def test_each_round_runs_as_many_replays_as_run_at_once_and_the_rounds_are_counted(stack):
    stack.culprits = {EARLIER[1]}
    log: list = []
    counts = {"replays": 0, "rounds": 0}
    assert replay.bisect_side_by_side(config(), EARLIER, TARGET, 2, log, counts) == (True, EARLIER[1])
    # round 1: all (back), 3..5 (not back); round 2: 1..2 (back) and 2 (not back), the two
    # next steps a "came back" would ask for; round 3: 1 alone, the one step left
    assert counts == {"replays": 5, "rounds": 3}
    runs = stack.runs()  # (each up to the case that reported the error; a round's in any order)
    assert sorted(runs[:2]) == sorted([EARLIER[:3], EARLIER[3:] + [TARGET]])
    assert sorted(runs[2:4]) == sorted([EARLIER[1:3], [EARLIER[2], TARGET]]) and runs[4] == [EARLIER[1], TARGET]
    assert log == [{"cases": 7, "came_back": True}, {"cases": 4, "came_back": False},
                   {"cases": 3, "came_back": True}, {"cases": 2, "came_back": False},
                   {"cases": 2, "came_back": True}]


# -- trace ------------------------------------------------------------------------------------

def test_a_traced_suspect_takes_what_its_fresh_runs_said_and_names_its_culprit_which_carries_the_failure(stack, opened):
    stack.culprits = {EARLIER[4]}
    record = opened(survey())
    notes, remembered = [], []
    figures = replay.trace(config(), record, notes.append, remember=remembered.append)
    suspect, culprit = suspect_of(record), one_case(record, "sin")
    assert suspect["status"] == PASS and suspect["detail"] == ""
    assert suspect["first_run"] == {"status": ERROR, "detail": POISON}
    assert suspect["poisoned_by"] == {"overload": "sin", "profile": "1d"}
    assert suspect["replay"] == {"runs": 5, "cases": 6, "came_back": True}
    assert culprit["status"] == ERROR and culprit["first_run"] == {"status": PASS, "detail": ""}
    assert culprit["detail"] == (f"leaves the device context poisoned: tan [2d], run after it in the same worker, "
                                 f"failed with {POISON!r} (replayed)")
    assert culprit["poisoned"] == [["tan", "2d"]]
    assert all("poisoned" not in one_case(record, name) for name, _ in EARLIER if name != "sin")
    assert figures == {"suspects": 1, "traced": 1, "untraced": 0, "not_reproduced": 0, "runs": 5,
                       "replays": 5, "rounds": 4, "known": 0}
    assert remembered == [EARLIER[4]]
    assert notes == [f"replaying the 6 case(s) run before tan [2d] in its worker (it failed with {POISON!r} there "
                     "and passed in fresh workers)"]
    record.save()  # what the trace recorded is a valid results document
    with open(record.output, encoding="utf-8") as handle:
        saved = json.load(handle)["overloads"]
    assert saved["tan"]["cases"][0]["poisoned_by"] == {"overload": "sin", "profile": "1d"}


def test_a_suspects_status_is_the_settled_status_of_its_repeats_with_that_repeats_detail(stack, opened):
    stack.culprits = {EARLIER[5]}
    record = opened(survey(repeats=[ERROR, WRONG, PASS, WRONG],
                           details=[{"detail": "mismatch 1"}, {"detail": ""}, {"detail": "mismatch 3"}]))
    replay.trace(config(), record)
    assert suspect_of(record)["status"] == FLAKY and suspect_of(record)["detail"] == ""
    record = opened(survey(repeats=[ERROR, WRONG, WRONG], details=[{"detail": "mismatch 1"}, {"detail": "mismatch 2"}]))
    replay.trace(config(), record)
    assert suspect_of(record)["status"] == WRONG and suspect_of(record)["detail"] == "mismatch 1"
    record = opened(survey(repeats=[ERROR, WRONG, WRONG], details=[{"detail": "mismatch 2"}]))  # details missing
    replay.trace(config(), record)
    assert suspect_of(record)["status"] == WRONG and suspect_of(record)["detail"] == ""
    record = opened(survey(repeats=None))  # no repeats recorded: PASS
    replay.trace(config(), record)
    assert suspect_of(record)["status"] == PASS and suspect_of(record)["first_run"] == {"status": FLAKY, "detail": POISON}


def test_a_culprit_already_failing_keeps_its_own_failure_and_only_names_the_case_it_poisoned(stack, opened):
    stack.culprits = {EARLIER[5]}
    overloads = survey()
    overloads["cos"] = [case("2d", PASS, worker="w2", worker_order=1),  # another case of the culprit's overload
                        case("1d", WRONG, "off by one", worker="w1", worker_order=6)]
    record = opened(overloads)
    replay.trace(config(), record)
    other, wrong = record.finished["cos"]
    assert wrong["status"] == WRONG and wrong["detail"] == "off by one" and "first_run" not in wrong
    assert wrong["poisoned"] == [["tan", "2d"]]
    assert other == case("2d", PASS, worker="w2", worker_order=1)
    overloads = survey()
    overloads["cos"][0]["status"] = FLAKY  # a FLAKY culprit carries the failure, as a PASS does
    record = opened(overloads)
    replay.trace(config(), record)
    assert one_case(record, "cos")["status"] == ERROR
    overloads = survey()
    overloads["cos"][0]["status"] = CRASH
    record = opened(overloads)
    replay.trace(config(), record)
    assert one_case(record, "cos")["status"] == CRASH and one_case(record, "cos")["poisoned"] == [["tan", "2d"]]


def test_a_suspect_brought_back_only_by_several_earlier_cases_together_names_how_many(stack, opened):
    stack.together = [{EARLIER[0], EARLIER[5]}]
    record = opened(survey())
    remembered = []
    figures = replay.trace(config(), record, remember=remembered.append)
    suspect = suspect_of(record)
    assert suspect["poisoned_by"] == {"overload": None, "profile": None, "cases": 6}
    assert suspect["status"] == PASS and suspect["replay"]["came_back"] is True
    assert figures["untraced"] == 1 and figures["traced"] == 0 and remembered == []
    assert all("poisoned" not in one_case(record, name) and one_case(record, name)["status"] == PASS
               for name, _ in EARLIER)


def test_a_suspect_the_replay_does_not_bring_back_stays_flaky_with_the_evidence(stack, opened):
    record = opened(survey())
    remembered = []
    figures = replay.trace(config(), record, remember=remembered.append, width=3)
    suspect = suspect_of(record)
    assert suspect["status"] == FLAKY and suspect["detail"] == POISON
    assert "first_run" not in suspect and "poisoned_by" not in suspect
    assert suspect["replay"] == {"runs": 1, "cases": 6, "came_back": False}
    assert figures == {"suspects": 1, "traced": 0, "untraced": 0, "not_reproduced": 1, "runs": 1,
                       "replays": 3, "rounds": 1, "known": 0}
    assert remembered == []


def test_a_suspect_its_worker_ran_first_is_not_replayed(stack, opened):
    record = opened(survey(earlier=[]))
    figures = replay.trace(config(), record, known=[EARLIER[0]])
    assert stack.workers == []
    assert suspect_of(record)["replay"] == {"runs": 0, "cases": 0, "came_back": False}
    assert figures["not_reproduced"] == 1 and figures["replays"] == 0


def test_a_suspect_traced_by_an_earlier_run_is_left_alone_and_every_other_is_traced(stack, opened):
    stack.culprits = {EARLIER[5]}
    overloads = survey()
    overloads["sqrt"] = [case("1d", FLAKY, POISON, worker="w1", worker_order=9, poison=POISON,
                              replay={"runs": 1, "cases": 8, "came_back": False})]
    overloads["erf"] = [case("1d", FLAKY, POISON, worker="w2", worker_order=1, poison=POISON)]
    record = opened(overloads)
    figures = replay.trace(config(), record)
    assert one_case(record, "sqrt")["replay"] == {"runs": 1, "cases": 8, "came_back": False}
    assert one_case(record, "sqrt")["status"] == FLAKY
    assert one_case(record, "erf")["replay"] == {"runs": 0, "cases": 0, "came_back": False}
    assert figures["suspects"] == 2 and figures["traced"] == 1 and figures["not_reproduced"] == 1


def test_a_known_culprit_is_tried_first_alone_before_the_suspect_and_no_bisection_runs(stack, opened):
    stack.culprits = {EARLIER[2]}
    record = opened(survey())
    remembered = []
    figures = replay.trace(config(), record, known=[list(EARLIER[2]), ["erf", "1d"]], remember=remembered.append, width=4)
    assert stack.runs() == [[EARLIER[2], TARGET]]
    assert stack.workers[0].config.purpose == "replay"
    suspect = suspect_of(record)
    assert suspect["replay"] == {"runs": 1, "cases": 6, "came_back": True, "known": True}
    assert suspect["poisoned_by"] == {"overload": "exp", "profile": "1d"}
    assert one_case(record, "exp")["status"] == ERROR
    assert figures == {"suspects": 1, "traced": 1, "untraced": 0, "not_reproduced": 0, "runs": 1,
                       "replays": 1, "rounds": 1, "known": 1}
    assert remembered == [EARLIER[2]]


def test_a_known_culprit_that_does_not_bring_the_error_back_costs_one_replay_then_the_bisection_runs(stack, opened):
    stack.culprits = {EARLIER[4]}
    record = opened(survey())
    figures = replay.trace(config(), record, known=[EARLIER[2]], width=1)
    assert stack.runs()[0] == [EARLIER[2], TARGET]
    suspect = suspect_of(record)
    assert suspect["replay"] == {"runs": 5, "cases": 6, "came_back": True}
    assert suspect["poisoned_by"] == {"overload": "sin", "profile": "1d"}
    assert figures["known"] == 0 and figures["replays"] == len(stack.workers) and figures["rounds"] >= 2


def test_the_known_culprit_tried_is_the_latest_of_the_suspects_earlier_cases_that_is_known():
    known = [["exp", "1d"], ("sin", "1d"), ("tan", "9d")]
    assert replay.known_before(EARLIER, known) == ("sin", "1d")
    assert replay.known_before(EARLIER[:4], known) == ("exp", "1d")
    assert replay.known_before(EARLIER[:2], known) is None
    assert replay.known_before(EARLIER, []) is None


# -- Ahead --------------------------------------------------------------------------------------

def before_repeats(**more) -> dict:
    """The survey before its confirmation: the suspect failed once, with a sticky error."""
    return survey(repeats=None, suspect_status=ERROR, **more)


def test_the_cases_that_may_become_suspects_are_failures_with_a_sticky_error_in_a_known_worker_not_traced(stack):
    finished = before_repeats()
    finished["erf"] = [case("1d", WRONG, worker="w1", worker_order=9, poison=POISON),
                       case("2d", FLAKY, worker="w1", worker_order=10, poison=POISON),
                       case("3d", ERROR, worker="w1", worker_order=11, poison=POISON, replay={"runs": 1}),
                       case("4d", ERROR, poison=POISON),
                       case("5d", ERROR, worker="w1", worker_order=12)]
    ahead = replay.Ahead(config(), finished, 2)
    assert ahead.candidates == {TARGET: EARLIER, ("erf", "1d"): EARLIER + [TARGET]}


def test_a_suspects_replays_start_when_a_repeat_of_it_passes_once_and_trace_takes_their_answer(stack, opened):
    stack.culprits = {EARLIER[4]}
    finished = before_repeats()
    ahead = replay.Ahead(config(), finished, 4)
    ahead.passed(EARLIER[0])  # not a candidate: nothing starts
    assert ahead._threads == {} and stack.workers == []
    ahead.passed(TARGET)
    ahead.passed(TARGET)  # once
    assert list(ahead._threads) == [TARGET]
    ahead.close()
    ran_ahead = len(stack.workers)
    assert ran_ahead > 0 and len(ahead.spans) == 1 and ahead.spans[0][0] <= ahead.spans[0][1]
    assert ahead.figures == {"replays": ran_ahead, "rounds": 2, "known": 0}
    finished[TARGET[0]][-1].update(status=FLAKY, repeats=[ERROR, PASS, PASS], repeat_details=[{}, {}])
    record = opened(finished)
    figures = replay.trace(config(), record, width=4, ahead=ahead)
    assert len(stack.workers) == ran_ahead  # trace ran no replay of its own
    assert suspect_of(record)["poisoned_by"] == {"overload": "sin", "profile": "1d"}
    assert suspect_of(record)["replay"] == {"runs": 5, "cases": 6, "came_back": True}
    assert figures["replays"] == ran_ahead and figures["rounds"] == 2 and figures["traced"] == 1


def test_trace_replays_itself_a_suspect_whose_replays_did_not_run_ahead_or_ran_other_cases(stack, opened):
    stack.culprits = {EARLIER[5]}
    finished = before_repeats()
    ahead = replay.Ahead(config(), finished, 1)
    assert ahead.outcome(TARGET, EARLIER) is None  # never started
    ahead.passed(TARGET)
    ahead.close()
    assert ahead.outcome(TARGET, EARLIER[1:]) is None  # other earlier cases than it has now
    assert ahead.outcome(TARGET, EARLIER) == (True, EARLIER[5], [{"cases": 7, "came_back": True},
                                                                  {"cases": 4, "came_back": True},
                                                                  {"cases": 3, "came_back": True},
                                                                  {"cases": 2, "came_back": True}], False)
    finished[TARGET[0]][-1].update(status=FLAKY, repeats=[ERROR, PASS], repeat_details=[{}])
    finished["neg"][0]["worker"] = "w9"  # the suspect's earlier cases are now five
    ran_ahead = len(stack.workers)
    record = opened(finished)
    figures = replay.trace(config(), record, ahead=ahead)
    assert len(stack.workers) > ran_ahead and suspect_of(record)["replay"]["cases"] == 5
    assert figures["replays"] == len(stack.workers)  # its own and those run ahead


def test_replays_ahead_that_fail_are_left_to_trace(stack, opened, monkeypatch):
    raised = []
    monkeypatch.setattr(threading, "excepthook", raised.append)
    stack.culprits = {EARLIER[5]}
    stack.start = RuntimeError("no worker")
    finished = before_repeats()
    ahead = replay.Ahead(config(), finished, 2)
    ahead.passed(TARGET)
    ahead.close()
    assert ahead.outcome(TARGET, EARLIER) is None and len(ahead.spans) == 1 and raised == []
    stack.start = None
    finished[TARGET[0]][-1].update(status=FLAKY, repeats=[ERROR, PASS], repeat_details=[{}])
    record = opened(finished)
    replay.trace(config(), record, ahead=ahead)
    assert suspect_of(record)["poisoned_by"] == {"overload": "cos", "profile": "1d"}


def test_replays_ahead_try_a_known_culprit_first(stack):
    stack.culprits = {EARLIER[3]}
    ahead = replay.Ahead(config(), before_repeats(), 4, known=[EARLIER[3]])
    ahead.passed(TARGET)
    ahead.close()
    assert stack.runs() == [[EARLIER[3], TARGET]]
    assert ahead.outcome(TARGET, EARLIER) == (True, EARLIER[3], [{"cases": 2, "came_back": True}], True)
    assert ahead.figures == {"replays": 1, "rounds": 1, "known": 1}


# -- PairsAhead ------------------------------------------------------------------------------

def main_phase(pairs: replay.PairsAhead, cases: list, worker: str = "w1", poisoned=(), first: int = 1) -> None:
    """The main phase records ``cases`` of ``worker`` in order (those in ``poisoned`` met a sticky error)."""
    for order, (name, profile) in enumerate(cases, start=first):
        more = {"poison": POISON} if (name, profile) in poisoned else {}
        pairs.seen(name, case(profile, ERROR if more else PASS, worker=worker, worker_order=order, **more))


def test_a_pair_starts_when_a_case_meets_a_sticky_error_after_a_known_culprit_in_its_worker(stack):
    stack.culprits = {EARLIER[1]}
    pairs = replay.PairsAhead(config(baseline=True), [list(EARLIER[1])])
    main_phase(pairs, EARLIER[:3])
    assert pairs.figures() == {"ahead": 0, "unused": 0}  # no sticky error yet
    main_phase(pairs, [TARGET], poisoned={TARGET}, first=4)
    pairs.close()
    assert stack.runs() == [[EARLIER[1], TARGET]]
    (worker,) = stack.workers
    assert worker.config.purpose == "replay, ahead of its repeats" and worker.config.baseline is False
    assert worker.slot == 0
    assert pairs.figures() == {"ahead": 1, "unused": 1}
    assert pairs.answer(list(EARLIER[1]), list(TARGET)) is True
    assert pairs.figures() == {"ahead": 1, "unused": 0}
    main_phase(pairs, [TARGET], poisoned={TARGET}, first=4)  # seen again: not run again
    pairs.close()
    assert len(stack.workers) == 1


def test_a_pair_tries_the_latest_known_culprit_among_the_earlier_cases_of_that_worker_only(stack):
    pairs = replay.PairsAhead(config(), [EARLIER[0], EARLIER[2], EARLIER[4]])
    main_phase(pairs, EARLIER[:4])
    main_phase(pairs, [EARLIER[4]], worker="w2", first=1)  # another worker's
    main_phase(pairs, [EARLIER[4]], first=9)  # recorded before, run after
    main_phase(pairs, [TARGET], poisoned={TARGET}, first=5)
    pairs.close()
    assert stack.runs() == [[EARLIER[2], TARGET]]
    assert pairs.answer(EARLIER[2], TARGET) is False and pairs.answer(EARLIER[0], TARGET) is None


def test_a_pair_needs_a_known_culprit_a_worker_and_an_order(stack):
    main_phase(replay.PairsAhead(config(), []), [EARLIER[0], TARGET], poisoned={TARGET})
    pairs = replay.PairsAhead(config(), [EARLIER[0]])
    pairs.seen(EARLIER[0][0], case(EARLIER[0][1], PASS, worker="w1"))  # no order: not recorded
    pairs.seen(EARLIER[0][0], case(EARLIER[0][1], PASS, worker_order=1))  # no worker
    main_phase(pairs, [TARGET], poisoned={TARGET}, first=2)
    pairs.seen(TARGET[0], case(TARGET[1], ERROR, poison=POISON))
    pairs.seen(TARGET[0], case(TARGET[1], ERROR, worker_order=2, poison=POISON))  # after the culprit, no worker
    pairs.close()
    assert stack.workers == [] and pairs.figures() == {"ahead": 0, "unused": 0}


def test_a_pair_looks_back_as_far_as_a_replay_does(stack):
    filler = [("add", f"p{index}") for index in range(replay.MAX_REPLAY_CASES)]
    pairs = replay.PairsAhead(config(), [EARLIER[0]])
    main_phase(pairs, [EARLIER[0], *filler[1:], TARGET], poisoned={TARGET})  # the culprit, 400 cases back
    main_phase(pairs, [EARLIER[0], *filler, TARGET], worker="w2", poisoned={TARGET})  # 401 back
    pairs.close()
    assert pairs.figures() == {"ahead": 1, "unused": 1}


def test_a_known_culprits_replay_takes_the_pairs_answer_when_it_ran_ahead(stack, opened):
    stack.culprits = {EARLIER[2]}
    pairs = replay.PairsAhead(config(), [EARLIER[2]])
    main_phase(pairs, EARLIER + [TARGET], poisoned={TARGET})
    pairs.close()
    assert len(stack.workers) == 1
    record = opened(survey())
    figures = replay.trace(config(), record, known=[EARLIER[2]], pairs=pairs)
    assert len(stack.workers) == 1  # no replay of its own
    assert suspect_of(record)["replay"]["known"] is True and figures["known"] == 1 and figures["replays"] == 1
    # a pair not run ahead: the replay runs then
    record = opened(survey())
    figures = replay.trace(config(), record, known=[EARLIER[2]], pairs=replay.PairsAhead(config(), [EARLIER[2]]))
    assert stack.runs()[1:] == [[EARLIER[2], TARGET]] and figures["known"] == 1


def test_the_answers_of_replays_run_ahead_are_waited_for(stack):
    stack.culprits = {EARLIER[5]}
    stack.gate.clear()  # the replays run ahead wait until the answer is asked for
    ahead = replay.Ahead(config(), before_repeats(), 1)
    ahead.passed(TARGET)
    ahead._lock = Opening(ahead._lock, stack, threading.current_thread())
    assert ahead.outcome(TARGET, EARLIER)[:2] == (True, EARLIER[5])
    stack.gate.clear()
    pairs = replay.PairsAhead(config(), [EARLIER[5]])
    main_phase(pairs, EARLIER + [TARGET], poisoned={TARGET})
    pairs._lock = Opening(pairs._lock, stack, threading.current_thread())
    assert pairs.answer(EARLIER[5], TARGET) is True
    ahead.close()
    pairs.close()


LEFT_RUNNING = """
import sys, threading
from flagos_doctor.results import model
from flagos_doctor.survey import replay
from flagos_doctor.survey.pool import WorkerConfig

never = threading.Event()
replay.trace_one = lambda *args, **kwargs: never.wait()       # a suspect's replays that never end
replay.in_fresh_worker = lambda *args, **kwargs: never.wait()  # and a pair's
config = WorkerConfig(python=sys.executable, stack="demo", device=None, spec=None, conf=None,
                      backend="flagos_python", timeout=5)
earlier = {"profile": "1d", "status": model.PASS, "worker": "w1", "worker_order": 1}
suspect = {"profile": "2d", "status": model.ERROR, "poison": "sticky", "worker": "w1", "worker_order": 2}
ahead = replay.Ahead(config, {"abs": [earlier], "tan": [suspect]}, 4)
ahead.passed(("tan", "2d"))
pairs = replay.PairsAhead(config, [("abs", "1d")])
pairs.seen("abs", earlier)
pairs.seen("tan", suspect)
print(sorted(t.name for t in threading.enumerate() if t is not threading.main_thread()))
"""


def test_replays_run_ahead_never_hold_the_surveys_exit(tmp_path):
    """The threads of :class:`Ahead` and :class:`PairsAhead` are daemons: a survey that stops
    with replays still running ahead (an error, Ctrl-C) exits without waiting for them."""
    env = {**os.environ, "PYTHONPATH": REPO_ROOT}
    done = subprocess.run([sys.executable, "-c", LEFT_RUNNING], env=env, cwd=tmp_path, capture_output=True,
                          text=True, timeout=120)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "['flagos-replay-ahead', 'flagos-replay-pair']\n"
