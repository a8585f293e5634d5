"""Each promise of flagos_doctor/survey/confirm.py's docstrings, one test each: which cases a
confirmation repeats and runs on the native path, the passes it plans, how a repeat's
record settles a case (FLAKY, PASS past the compile cap, the way it failed most), the
baseline, the lanes' worker shares, the order passes are applied and saved in, the notes,
and what :class:`Confirmation` queues in which lane as the survey hands it cases.

Case records are in the shapes a survey writes, recorded through a real
:class:`~flagos_doctor.results.resultsfile.ResultsFile` in tmp_path (its results file read
back from disk where the clause is about saving). No worker process starts: building a
:class:`Confirmation` builds real :class:`~flagos_doctor.survey.pool.Pool` objects (a scratch
folder each, no thread), but ``Pool.add`` (which would start a slot thread and its worker),
``Pool.lend`` and ``Pool.end_input`` are replaced by recorders of what they are called with
(``Pool.drain`` only recorded, then run: with no slot started it returns at once); where
:func:`confirm` is driven, ``Lane.drain`` gives each lane's canned (found, failure), and
``replay.Ahead`` / ``replay.trace`` / ``PairsAhead._run`` (which would run replays in fresh
workers) are recorders too; the pools' cleaning of earlier surveys' scratch folders is left
out. Records come back through the lanes' own event handlers (``Lane._event``,
``AloneAgain._event``) fed :class:`~flagos_doctor.survey.pool.Event` objects shaped as the
pool's. The real lanes and workers are tests/test_survey_noise.py's and
tests/test_survey_speed.py's. scripts/mutation runs these first.
"""

from __future__ import annotations

import json
import sys
import time
from types import SimpleNamespace

import pytest

from flagos_doctor.results import model
from flagos_doctor.results.model import CRASH, ERROR, FAILURES, FLAKY, PASS, TIMEOUT, WRONG
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.survey import confirm, pool as pool_module, replay
from flagos_doctor.survey.confirm import (AloneAgain, Confirmation, Lane, _apply_baseline, _apply_repeat,
                                          _in_order_applier, _pass_announcer, _pass_figures, _plan_repeats,
                                          _shares, _timing_figures, expected_seconds, native_config,
                                          stopped_compiling, times_done, to_baseline, to_repeat)
from flagos_doctor.survey.pool import Event, Pool, WorkerConfig

SETUP = {"harness_version": "flagos-doctor-survey/test", "stack": "demo"}
POISON = "CUDA error: an illegal memory access was encountered"
CONFIRMED = FAILURES + (FLAKY,)
NOT_CONFIRMED = [status for status in model.CASE_STATUSES if status not in CONFIRMED]


def case(profile: str, status: str, detail: str = "", **more) -> dict:
    """A case record as the survey writes it (and as a lane's run of it comes back)."""
    return {"profile": profile, "status": status, "route": "kernel", "detail": detail, "seconds": 1.5, **more}


def found_for(pairs, status: str, detail: str = "") -> dict:
    """A pass's records: every case of ``pairs`` came back ``status``."""
    return {(name, c["profile"]): case(c["profile"], status, detail) for name, c in pairs}


def config(**more) -> WorkerConfig:
    return WorkerConfig(python=sys.executable, stack="demo", device=None, spec=None, conf=None,
                        backend="flagos_python", timeout=5, **more)


def stopped(pool: Pool) -> bool:
    """Whether ``pool`` was stopped (:meth:`Pool.stop`: no task handed out, no fresh worker waited for)."""
    return pool._stop.is_set()


def saved(record: ResultsFile) -> dict:
    """The results file on disk: overload -> its cases."""
    with open(record.output, encoding="utf-8") as handle:
        return {name: entry.get("cases", []) for name, entry in json.load(handle)["overloads"].items()}


@pytest.fixture
def opened(finished_results):
    """``opened({overload: [case, ...]})``: a ResultsFile in tmp_path with those overloads
    finished, checkpointed, as the main phase leaves it for the confirmation (``finished_results`` in conftest.py)."""
    return lambda overloads: finished_results(SETUP, overloads, checkpoint=True)


@pytest.fixture
def added(monkeypatch):
    """Every ``Pool.add`` as (the pool's purpose, tasks, work): no slot thread, no worker."""
    calls: list = []
    monkeypatch.setattr(Pool, "add", lambda self, tasks, work=None: calls.append((self.config.purpose, tasks, work)))
    monkeypatch.setattr(pool_module.scratch, "clean_leftovers", lambda: {"folders": 0, "processes": 0})
    return calls


@pytest.fixture
def confirmation(added):
    """``confirmation(workers, repeats, native=True, known=())``: a Confirmation on the demo
    stack (its native lane's purpose "native"), stopped after the test."""
    made: list = []

    def build(workers: int, repeats: int, native: bool = True, known=()) -> Confirmation:
        base = config()
        made.append(Confirmation(base, workers, repeats, native_config(base, ["abs"], None) if native else None,
                                 known=list(known)))
        return made[-1]

    yield build
    for one in made:
        one.stop()


@pytest.fixture
def drained(monkeypatch):
    """The purpose of every pool drained (``Pool.drain``, then run as it is)."""
    calls: list = []
    drain = Pool.drain

    def recorded(self):
        calls.append(self.config.purpose)
        drain(self)
    monkeypatch.setattr(Pool, "drain", recorded)
    return calls


class Tracer:
    """Stands for :class:`.replay.Ahead` in :func:`confirm` (its ``passed`` would start real
    replays): the keys it was handed, whether it was closed."""

    def __init__(self, config, finished, width, known=(), pairs=None):
        self.keys, self.closed, self.spans = [], False, []

    def passed(self, key):
        self.keys.append(key)

    def close(self):
        self.closed = True


@pytest.fixture
def tracers(monkeypatch):
    """Every Tracer :func:`confirm` made in place of a :class:`.replay.Ahead`."""
    made: list = []
    monkeypatch.setattr(replay, "Ahead", lambda *args, **kwargs: made.append(Tracer(*args, **kwargs)) or made[-1])
    return made


@pytest.fixture
def alone_again(added):
    """``alone_again(first=None)``: an AloneAgain of the "main" purpose, abandoned after the test."""
    made: list = []

    def build(first=None) -> AloneAgain:
        made.append(AloneAgain(config(), 2, first=first))
        return made[-1]

    yield build
    for one in made:
        one.abandon()


# -- to_repeat, to_baseline -------------------------------------------------------------------

def test_to_repeat_takes_the_failures_and_the_flaky_cases_not_the_others_nor_an_overload_level_record():
    finished = {"abs": [case(status.lower(), status) for status in model.CASE_STATUSES] + [case("-", ERROR)]}
    assert to_repeat(finished, 2) == [("abs", c) for c in finished["abs"] if c["status"] in CONFIRMED
                                      and c["profile"] != "-"]
    assert {c["status"] for _, c in to_repeat(finished, 2)} == set(CONFIRMED)


def test_to_repeat_counts_the_runs_a_case_has_in_repeats_the_surveys_own_included():
    finished = {"abs": [case("1d", ERROR, repeats=[ERROR, ERROR]), case("2d", ERROR, repeats=[ERROR, ERROR, ERROR]),
                        case("3d", ERROR, repeats=[]), case("4d", FLAKY, repeats=[ERROR, PASS]), case("5d", WRONG)]}
    assert [c["profile"] for _, c in to_repeat(finished, 2)] == ["1d", "3d", "4d", "5d"]
    assert [c["profile"] for _, c in to_repeat(finished, 1)] == ["3d", "5d"]
    assert to_repeat(finished, 0) == []


def test_to_repeat_and_to_baseline_are_sorted_by_overload_the_cases_in_their_order():
    finished = {"neg": [case("2d", WRONG), case("1d", ERROR)], "abs": [case("3d", CRASH)]}
    expected = [("abs", finished["abs"][0]), ("neg", finished["neg"][0]), ("neg", finished["neg"][1])]
    assert to_repeat(finished, 2) == expected
    assert to_baseline(finished) == expected


def test_to_baseline_takes_the_failing_and_flaky_cases_without_a_baseline_whatever_their_repeats():
    finished = {"abs": [case(status.lower(), status) for status in model.CASE_STATUSES] + [case("-", ERROR)],
                "neg": [case("1d", WRONG, baseline={"status": WRONG, "detail": ""}),
                        case("2d", ERROR, repeats=[ERROR, ERROR, ERROR])]}
    assert to_baseline(finished) == [("abs", c) for c in finished["abs"] if c["status"] in CONFIRMED
                                     and c["profile"] != "-"] + [("neg", finished["neg"][1])]


# -- expected_seconds -------------------------------------------------------------------------

def test_expected_seconds_is_none_when_the_last_run_has_no_number():
    assert expected_seconds({}) is None
    assert expected_seconds({"seconds": None}) is None
    assert expected_seconds({"seconds": "12"}) is None
    assert expected_seconds({"seconds": 12}) == 12 and expected_seconds({"seconds": 2.5}) == 2.5


def test_expected_seconds_leaves_out_compiling_and_autotuning_never_below_zero():
    triton = {"compile_seconds": 3.0, "autotune_seconds": 1.5, "cache_hits": 7, "other_seconds": 2.0}
    assert expected_seconds({"seconds": 10.0, "triton": triton}) == 5.5
    assert expected_seconds({"seconds": 4.0, "triton": triton}) == 0.0
    # a figure Triton did not give counts nothing
    assert expected_seconds({"seconds": 10.0, "triton": {"compile_seconds": 3.0}}) == 7.0
    assert expected_seconds({"seconds": 10.0, "triton": {"autotune_seconds": 2.0, "compile_seconds": None}}) == 8.0
    assert expected_seconds({"seconds": 10.0, "triton": None}) == 10.0


# -- _plan_repeats, times_done ----------------------------------------------------------------

def test_pass_i_holds_the_failures_lacking_more_than_i_repeats_what_to_repeat_gives_before_it(opened):
    record = opened({"abs": [case("1d", ERROR), case("2d", WRONG, repeats=[WRONG, WRONG], repeat_details=[{}])],
                     "neg": [case("1d", FLAKY, repeats=[ERROR, PASS, ERROR], repeat_details=[{}, {}])]})
    a, b = record.finished["abs"]
    passes = _plan_repeats(record.finished, 2)
    assert passes == [[("abs", a), ("abs", b)], [("abs", a)]]
    for pairs in passes:  # each pass coming back whole
        assert to_repeat(record.finished, 2) == pairs
        _apply_repeat(record, pairs, found_for(pairs, ERROR), {"flaky": 0})
    assert to_repeat(record.finished, 2) == []
    assert _plan_repeats(record.finished, 2) == [] and _plan_repeats({}, 2) == []
    assert _plan_repeats({"abs": [case("1d", ERROR)]}, 0) == []


def test_times_done_is_the_runs_of_the_least_run_case_the_surveys_own_included():
    one, two = case("1d", ERROR), case("2d", ERROR, repeats=[ERROR, ERROR])
    three = case("3d", FLAKY, repeats=[ERROR, PASS, ERROR])
    assert times_done([("abs", two), ("abs", one), ("neg", three)], 2) == 1
    assert times_done([("abs", two), ("neg", three)], 2) == 2
    assert times_done([("neg", three)], 2) == 3
    assert times_done([], 4) == 4


# -- stopped_compiling ------------------------------------------------------------------------

def test_stopped_compiling_is_a_timeout_stopped_while_compiling_or_autotuning():
    for where in ("compile", "autotune"):
        assert stopped_compiling(TIMEOUT, {"spent": {"stopped_in": where, "compile": 9.0}})  # a case's record
        assert stopped_compiling(TIMEOUT, {"stopped_in": where})  # a repeat keeps only stopped_in
        for status in (PASS, WRONG, ERROR, CRASH):
            assert not stopped_compiling(status, {"stopped_in": where})
    assert not stopped_compiling(TIMEOUT, {"spent": {"stopped_in": "run"}})
    assert not stopped_compiling(TIMEOUT, {"stopped_in": "run", "spent": {"stopped_in": "compile"}})
    assert not stopped_compiling(TIMEOUT, {})
    assert not stopped_compiling(TIMEOUT, {"spent": None})


# -- _apply_repeat ----------------------------------------------------------------------------

def test_a_case_that_passed_once_and_failed_once_becomes_flaky_counted_once(opened):
    record = opened({"abs": [case("1d", WRONG, "max diff 1")]})
    pairs = to_repeat(record.finished, 3)
    (_, flaky), figures = pairs[0], {"flaky": 0}
    assert _apply_repeat(record, pairs, found_for(pairs, PASS), figures) is True
    assert (flaky["status"], flaky["repeats"], flaky["detail"]) == (FLAKY, [WRONG, PASS], "max diff 1")
    assert figures == {"flaky": 1}
    _apply_repeat(record, pairs, found_for(pairs, WRONG, "max diff 2"), figures)  # FLAKY already
    assert (flaky["status"], flaky["repeats"], figures) == (FLAKY, [WRONG, PASS, WRONG], {"flaky": 1})
    assert "first_run" not in flaky  # FLAKY keeps the first run's status in repeats, its detail on the case


def test_runs_that_agree_leave_the_status_and_repeats_says_how_often_it_was_seen(opened):
    record = opened({"abs": [case("1d", ERROR, "boom")]})
    pairs, figures = to_repeat(record.finished, 2), {"flaky": 0}
    for _ in range(2):
        _apply_repeat(record, pairs, found_for(pairs, ERROR, "boom"), figures)
    (_, same), = pairs
    assert (same["status"], same["detail"], same["repeats"]) == (ERROR, "boom", [ERROR, ERROR, ERROR])
    assert "first_run" not in same and figures == {"flaky": 0}


def test_every_run_passing_but_those_the_compile_cap_stopped_settles_pass(opened):
    capped = {"stopped_in": "compile", "compile": 60.0}
    record = opened({"abs": [case("1d", TIMEOUT, "no result (the compile cap)", spent=capped)]})
    pairs, figures = to_repeat(record.finished, 2), {"flaky": 0}
    (_, settled), = pairs
    _apply_repeat(record, pairs, found_for(pairs, PASS), figures)
    assert (settled["status"], settled["detail"]) == (PASS, "")
    assert settled["first_run"] == {"status": TIMEOUT, "detail": "no result (the compile cap)"}
    # a repeat stopped while autotuning keeps stopped_in, so it is left out too: still PASS
    again = {("abs", "1d"): case("1d", TIMEOUT, "stopped", spent={"stopped_in": "autotune", "autotune": 60.0})}
    _apply_repeat(record, pairs, again, figures)
    assert settled["repeat_details"][-1] == {"detail": "stopped", "stopped_in": "autotune"}
    assert (settled["status"], settled["repeats"], figures) == (PASS, [TIMEOUT, PASS, TIMEOUT], {"flaky": 0})


def test_a_timeout_that_was_not_stopped_by_the_compile_cap_counts_as_a_failure(opened):
    record = opened({"abs": [case("1d", TIMEOUT, "no result", spent={"stopped_in": "run", "run": 5.0})],
                     "neg": [case("1d", ERROR, "boom")]})
    pairs, figures = to_repeat(record.finished, 2), {"flaky": 0}
    found = {("abs", "1d"): case("1d", PASS), ("neg", "1d"): case("1d", TIMEOUT, "no result",
                                                                   spent={"stopped_in": "run"})}
    _apply_repeat(record, pairs, found, figures)
    timed_out, errored = record.finished["abs"][0], record.finished["neg"][0]
    assert timed_out["status"] == FLAKY and figures == {"flaky": 1}
    assert "stopped_in" not in errored["repeat_details"][0]
    _apply_repeat(record, pairs, {("neg", "1d"): case("1d", PASS)}, figures)
    assert errored["status"] == FLAKY and figures == {"flaky": 2}  # the timeout was not left out


def test_failing_every_time_in_more_than_one_way_settles_under_the_way_it_failed_most_counted_once(opened):
    record = opened({"abs": [case("1d", WRONG, "max diff 1")]})
    pairs, figures = to_repeat(record.finished, 4), {"flaky": 0}
    (_, varied), = pairs
    _apply_repeat(record, pairs, found_for(pairs, ERROR, "boom"), figures)
    assert (varied["status"], varied["detail"]) == (WRONG, "max diff 1")  # one each: WRONG comes first
    _apply_repeat(record, pairs, found_for(pairs, ERROR, "boom 2"), figures)
    assert (varied["status"], varied["detail"]) == (ERROR, "boom")  # that way's first run's detail
    assert varied["first_run"] == {"status": WRONG, "detail": "max diff 1"}
    assert figures == {"flaky": 0, "varied": 1}
    for _ in range(2):  # WRONG most now: back to it, with the first run's detail; counted once
        _apply_repeat(record, pairs, found_for(pairs, WRONG, "max diff 3"), figures)
    assert (varied["status"], varied["detail"], varied["repeats"]) == (WRONG, "max diff 1",
                                                                       [WRONG, ERROR, ERROR, WRONG, WRONG])
    assert figures == {"flaky": 0, "varied": 1}


def test_a_repeat_pass_is_false_when_nothing_came_back(opened):
    record = opened({"abs": [case("1d", ERROR), case("2d", WRONG)]})
    pairs = to_repeat(record.finished, 2)
    assert _apply_repeat(record, pairs, {}, {"flaky": 0}) is False
    assert _apply_repeat(record, pairs, {("neg", "1d"): case("1d", PASS)}, {"flaky": 0}) is False
    assert all("repeats" not in c for _, c in pairs)
    assert _apply_repeat(record, pairs, {("abs", "2d"): case("2d", WRONG)}, {"flaky": 0}) is True
    assert "repeats" not in pairs[0][1] and pairs[1][1]["repeats"] == [WRONG, WRONG]


def test_a_repeat_keeps_detail_signal_poison_alone_and_stopped_in_of_its_record_only(opened):
    record = opened({"abs": [case("1d", CRASH, "died"), case("2d", TIMEOUT, "late", spent={"stopped_in": "compile"})]})
    pairs = to_repeat(record.finished, 2)
    alone = {"poison": POISON, "after": 3}
    found = {("abs", "1d"): case("1d", ERROR, "boom", signal="SIGSEGV", poison=POISON, alone=alone, worker="w9",
                                 worker_order=1, triton={"compile_seconds": 1.0}, stderr_tail="..."),
             ("abs", "2d"): case("2d", TIMEOUT, "late again", spent={"stopped_in": "compile", "compile": 60.0},
                                 worker="w9", worker_order=2)}
    _apply_repeat(record, pairs, found, {"flaky": 0})
    first, second = record.finished["abs"]
    assert first["repeat_details"] == [{"detail": "boom", "signal": "SIGSEGV", "poison": POISON, "alone": alone}]
    assert second["repeat_details"] == [{"detail": "late again", "stopped_in": "compile"}]
    assert confirm._KEPT == ("detail", "signal", "poison", "alone")


# -- _apply_baseline --------------------------------------------------------------------------

def test_the_baseline_is_recorded_and_native_also_counted_only_when_the_statuses_match(opened):
    record = opened({"abs": [case("1d", WRONG, "max diff 1"), case("2d", ERROR, "boom"), case("3d", CRASH)]})
    pairs, figures = to_baseline(record.finished), {"native_also": 0}
    found = {("abs", "1d"): case("1d", WRONG, "native too"), ("abs", "2d"): {"profile": "2d", "status": PASS}}
    _apply_baseline(record, pairs, found, figures)
    shared, fixed, none = record.finished["abs"]
    assert shared["baseline"] == {"status": WRONG, "detail": "native too"}
    assert fixed["baseline"] == {"status": PASS, "detail": ""}
    assert "baseline" not in none  # nothing came back for it
    assert figures == {"native_also": 1}
    assert (shared["status"], fixed["status"]) == (WRONG, ERROR)  # the baseline changes no status


# -- _shares ----------------------------------------------------------------------------------

def test_shares_give_each_pass_one_at_least_and_spread_the_rest_from_the_first_on():
    assert _shares(5, [5, 5, 5]) == [2, 2, 1]
    assert _shares(4, [5, 5, 5]) == [2, 1, 1]
    assert _shares(7, [5, 5]) == [4, 3]
    assert _shares(3, [5, 5, 5]) == [1, 1, 1]
    assert _shares(1, [5, 5, 5]) == [1, 1, 1]  # fewer workers than passes: still one each
    assert _shares(4, []) == []


def test_shares_give_no_pass_more_than_its_cases_and_stop_when_none_can_grow():
    assert _shares(10, [1, 2, 5]) == [1, 2, 5]
    assert _shares(6, [1, 4, 4]) == [1, 3, 2]
    assert _shares(50, [2, 1]) == [2, 1]
    assert _shares(3, [0, 2]) == [1, 2]


# -- _in_order_applier ------------------------------------------------------------------------

def applier(record: ResultsFile, times: int = 2):
    """(the callback, its repeat passes, its baseline pairs, the repeats' figures, the baseline's)."""
    passes, base = _plan_repeats(record.finished, times), to_baseline(record.finished)
    rep, basef = {"flaky": 0}, {"native_also": 0}
    return _in_order_applier(record, passes, base, rep, basef), passes, base, rep, basef


def test_outcomes_handed_in_any_order_are_applied_in_pass_order_the_baseline_last(opened):
    record = opened({"abs": [case("1d", WRONG, "max diff 1"), case("2d", ERROR, "boom")]})
    ended, passes, base, rep, basef = applier(record)
    a, b = record.finished["abs"]
    ended(2, ({("abs", "1d"): case("1d", WRONG, "native"), ("abs", "2d"): case("2d", ERROR, "native")}, None))
    ended(1, ({("abs", "1d"): case("1d", WRONG), ("abs", "2d"): case("2d", ERROR)}, None))
    assert "repeats" not in a and "baseline" not in a and saved(record)["abs"][0] == case("1d", WRONG, "max diff 1")
    ended(0, ({("abs", "1d"): case("1d", PASS), ("abs", "2d"): case("2d", ERROR)}, None))
    assert a["repeats"] == [WRONG, PASS, WRONG] and b["repeats"] == [ERROR, ERROR, ERROR]
    # the baseline after the repeats: a is FLAKY by then, so only b is native_also
    assert (a["status"], rep, basef) == (FLAKY, {"flaky": 1}, {"native_also": 1})
    assert saved(record)["abs"] == [a, b]


def test_each_pass_is_applied_and_saved_as_soon_as_every_earlier_one_is(opened):
    record = opened({"abs": [case("1d", ERROR, "boom")]})
    ended, *_ = applier(record)
    (a,) = record.finished["abs"]
    ended(0, ({("abs", "1d"): case("1d", ERROR, "boom")}, None))
    assert saved(record)["abs"][0]["repeats"] == [ERROR, ERROR]
    ended(2, ({("abs", "1d"): case("1d", ERROR, "native")}, None))
    assert "baseline" not in saved(record)["abs"][0]
    ended(1, ({("abs", "1d"): case("1d", PASS)}, None))
    on_disk = saved(record)["abs"][0]
    assert on_disk["repeats"] == [ERROR, ERROR, PASS] and on_disk["status"] == FLAKY
    assert on_disk["baseline"] == {"status": ERROR, "detail": "native"} == a["baseline"]


def test_a_repeat_pass_that_failed_stops_the_repeats_its_records_and_the_later_ones_dropped(opened):
    record = opened({"abs": [case("1d", ERROR, "boom")]})
    ended, passes, base, rep, basef = applier(record, times=3)
    (a,) = record.finished["abs"]
    ended(0, ({("abs", "1d"): case("1d", ERROR)}, None))
    ended(1, ({("abs", "1d"): case("1d", PASS)}, "stack 'demo' did not start"))  # what it ran is dropped too
    ended(2, ({("abs", "1d"): case("1d", PASS)}, None))
    assert a["repeats"] == [ERROR, ERROR] and a["status"] == ERROR
    assert rep == {"flaky": 0, "failure": "stack 'demo' did not start"}
    ended(3, ({("abs", "1d"): case("1d", ERROR, "native")}, "one native worker died"))  # still applied
    assert a["baseline"] == {"status": ERROR, "detail": "native"} == saved(record)["abs"][0]["baseline"]
    assert basef == {"native_also": 1, "failure": "one native worker died"}


def test_a_repeat_pass_that_brought_nothing_back_stops_the_repeats_the_baseline_still_applied(opened):
    record = opened({"abs": [case("1d", ERROR, "boom")]})
    ended, passes, base, rep, basef = applier(record)
    (a,) = record.finished["abs"]
    ended(0, ({}, None))
    ended(1, ({("abs", "1d"): case("1d", PASS)}, None))
    ended(2, ({("abs", "1d"): case("1d", PASS)}, None))
    assert "repeats" not in a and rep == {"flaky": 0}
    assert a["baseline"] == {"status": PASS, "detail": ""} and basef == {"native_also": 0}
    assert saved(record)["abs"][0]["baseline"] == a["baseline"]


# -- _pass_announcer --------------------------------------------------------------------------

def test_the_note_says_what_each_pass_runs_counted_before_any_pass_is_applied(opened):
    record = opened({"abs": [case("1d", ERROR), case("2d", WRONG, repeats=[WRONG, WRONG], repeat_details=[{}])]})
    passes, base = _plan_repeats(record.finished, 2), to_baseline(record.finished)
    notes: list = []
    starting = _pass_announcer(notes.append, passes, base, 2)
    _apply_repeat(record, passes[0], found_for(passes[0], ERROR), {"flaky": 0})  # a's runs change meanwhile
    for index in range(3):
        starting(index)
    assert notes == ["running 2 failing case(s) again (1 of 2), in fresh workers",
                     "running 1 failing case(s) again (2 of 2), in fresh workers",
                     "running 2 failing or flaky case(s) on the native path"]


def test_without_a_note_callback_the_announcer_notes_nothing():
    passes = [[("abs", case("1d", ERROR))]]
    starting = _pass_announcer(None, passes, passes[0], 2)
    assert starting(0) is None and starting(1) is None


# -- native_config ----------------------------------------------------------------------------

def test_native_config_sets_the_baseline_its_overloads_route_and_purpose_and_keeps_the_rest():
    base, overloads = config(), ["abs", "neg"]
    native = native_config(base, overloads, "metax")
    assert (native.baseline, native.baseline_overloads, native.native_route, native.purpose) == (
        True, ["abs", "neg"], "metax", "native")
    assert native.baseline_overloads is not overloads
    assert (native.stack, native.timeout, native.python) == (base.stack, base.timeout, base.python)
    assert (base.baseline, base.baseline_overloads, base.purpose) == (False, [], "main")
    assert native_config(base, [], None).native_route is None


# -- Lane, AloneAgain -------------------------------------------------------------------------

def test_a_lanes_workers_are_niced_fresh_ones_and_its_alone_runs_end_their_worker_after_each_task(confirmation):
    conf = confirmation(workers=5, repeats=2)
    assert [lane.config.purpose for lane in conf.lanes] == ["repeat 1", "repeat 2", "native"]
    assert conf.native is conf.lanes[-1] and conf.native.config.baseline
    assert [lane.pool.workers for lane in conf.lanes] == _shares(5, [5, 5, 5]) == [2, 2, 1]
    for lane in conf.lanes:
        assert lane.pool.config.nice == confirm.NICE > 0 and lane.alone.pool.config.nice == confirm.NICE
        assert lane.alone.pool.per_overload and not lane.pool.per_overload
        assert lane.alone.pool.config.purpose == f"{lane.config.purpose}, alone"
        assert lane.pool.report == lane._event and lane.alone.pool.report == lane.alone._event  # streaming
    assert conf.config.nice == 0 and not conf.chained


def test_stop_stops_every_lanes_pools_and_their_alone_runs(confirmation):
    conf = confirmation(workers=4, repeats=2)
    conf.stop()
    assert all(stopped(lane.pool) and stopped(lane.alone.pool) for lane in conf.lanes)


def test_a_lane_queues_a_case_once_alone_in_a_fresh_worker_or_shared_with_its_seconds(added):
    lane = Lane(config(purpose="repeat 1"), 2, lambda *heard: None)
    try:
        lane.add(("abs", "1d"), work=2.5)
        lane.add(("abs", "2d"), alone=True, work=4.0)
        lane.add(("abs", "1d"), work=2.5)
        lane.add(("abs", "2d"))
        assert added == [("repeat 1", [("abs", ["1d"])], 2.5), ("repeat 1, alone", [("abs", ["2d"])], None)]
        assert lane.queued() == 2
    finally:
        lane.stop()


def test_a_lane_hears_each_record_and_runs_one_poisoned_after_other_cases_alone_again(added, drained):
    heard: list = []
    lane = Lane(config(purpose="repeat 1"), 2, lambda *args: heard.append(args))
    try:
        clean = {"profile": "1d", "status": PASS, "worker_order": 1}
        poisoned = {"profile": "2d", "status": ERROR, "poison": POISON, "worker_order": 3}
        lane._event(Event("case", "abs", clean))
        lane._event(Event("case", "abs", poisoned))
        lane._event(Event("start", "neg", {"profile": "1d"}))
        assert heard == [(lane, ("abs", "1d"), clean, False), (lane, ("abs", "2d"), poisoned, False)]
        assert added == [("repeat 1, alone", [("abs", ["2d"])], None)]
        fresh = {"profile": "2d", "status": PASS, "worker_order": 1}
        lane.alone._event(Event("case", "abs", fresh))
        found, failure = lane.drain()
        assert drained == ["repeat 1", "repeat 1, alone"] and stopped(lane.pool) and stopped(lane.alone.pool)
        assert failure is None and found == {("abs", "1d"): clean, ("abs", "2d"): fresh}
        assert fresh["alone"] == {"poison": POISON, "after": 2}
        assert heard[-1] == (lane, ("abs", "2d"), fresh, True)
    finally:
        lane.stop()


def test_a_lane_whose_workers_could_not_start_says_why_stops_and_replaces_nothing(added):
    lane = Lane(config(purpose="repeat 1"), 2, lambda *args: None)
    try:
        poisoned = {"profile": "2d", "status": ERROR, "poison": POISON, "worker_order": 3}
        lane._event(Event("case", "abs", poisoned))
        lane._event(Event("fatal", None, {"message": "stack 'demo' did not start"}))
        lane._event(Event("fatal", None, {"message": "a later one"}))
        assert lane.failure == "stack 'demo' did not start"
        assert stopped(lane.pool)
        lane.alone._event(Event("case", "abs", {"profile": "2d", "status": PASS, "worker_order": 1}))
        found, failure = lane.drain()
        assert failure == "stack 'demo' did not start" and found == {("abs", "2d"): poisoned}
        assert "alone" not in poisoned
    finally:
        lane.stop()


def test_alone_again_takes_a_case_that_reported_a_sticky_error_after_other_cases_of_its_worker(alone_again, added):
    alone = alone_again()
    late = {"profile": "1d", "status": ERROR, "poison": POISON, "worker_order": 2}
    alone.consider(("abs", "1d"), late)
    alone.consider(("neg", "1d"), {**late, "worker_order": 1})  # its worker's first case
    alone.consider(("ceil", "1d"), {**late, "worker_order": None})  # no order: the first
    alone.consider(("floor", "1d"), {"profile": "1d", "status": ERROR, "worker_order": 5})  # no sticky error
    assert added == [("main, alone", [("abs", ["1d"])], None)]
    assert alone.runs == {("abs", "1d"): late}


def test_alone_again_finish_puts_each_fresh_workers_first_record_in_place_of_the_lanes(alone_again, drained):
    alone = alone_again()
    abs_run = {"profile": "1d", "status": ERROR, "poison": POISON, "worker_order": 4}
    neg_run = {"profile": "1d", "status": ERROR, "poison": POISON, "worker_order": 2}
    alone.consider(("abs", "1d"), abs_run)
    alone.consider(("neg", "1d"), neg_run)
    fresh = {"profile": "1d", "status": PASS, "worker_order": 1}
    alone._event(Event("case", "abs", fresh))
    alone._event(Event("case", "neg", {"profile": "1d", "status": PASS, "worker_order": 2}))  # not its first case
    alone._event(Event("start", "neg", {"profile": "1d"}))
    found = {("abs", "1d"): abs_run, ("neg", "1d"): neg_run}
    notes, seen = [], []
    alone.finish(found, notes.append, lambda key, record: seen.append((key, record)))
    assert found == {("abs", "1d"): fresh, ("neg", "1d"): neg_run}  # neg's worker left none: the lane's stands
    assert fresh["alone"] == {"poison": POISON, "after": 3}
    assert notes == [f"abs [1d]: {POISON} after 3 other case(s) of its worker; alone in a fresh worker: PASS"]
    assert seen == [(("abs", "1d"), fresh)]
    assert drained == ["main, alone"] and stopped(alone.pool)  # it waited for the runs, then closed the pool


def test_alone_again_finish_replaces_nothing_for_a_lane_that_failed(alone_again):
    alone = alone_again()
    alone.consider(("abs", "1d"), {"profile": "1d", "status": ERROR, "poison": POISON, "worker_order": 4})
    alone._event(Event("case", "abs", {"profile": "1d", "status": PASS, "worker_order": 1}))
    notes, seen = [], []
    alone.finish(None, notes.append, lambda key, record: seen.append(key))
    assert notes == [] and seen == []
    alone.finish({}, None, None)  # no note, no listener: nothing called


def test_alone_again_abandoned_stops_its_pool(alone_again):
    alone = alone_again()
    assert not stopped(alone.pool)
    alone.abandon()
    assert stopped(alone.pool)


def test_a_case_queued_alone_from_the_start_is_heard_through_first_as_its_worker_runs_it(alone_again):
    heard: list = []
    alone = alone_again(first=lambda key, record: heard.append((key, record["status"])))
    alone.start(("abs", "1d"))
    alone.consider(("neg", "1d"), {"profile": "1d", "status": ERROR, "poison": POISON, "worker_order": 2})
    alone._event(Event("case", "abs", {"profile": "1d", "status": ERROR, "worker_order": 1}))
    alone._event(Event("case", "neg", {"profile": "1d", "status": PASS, "worker_order": 1}))  # finish's, not first's
    assert heard == [(("abs", "1d"), ERROR)]
    bare = alone_again()  # no first: nothing to tell
    bare.start(("abs", "1d"))
    bare._event(Event("case", "abs", {"profile": "1d", "status": ERROR, "worker_order": 1}))
    assert bare._found == {("abs", "1d"): {"profile": "1d", "status": ERROR, "worker_order": 1}}


# -- Confirmation -----------------------------------------------------------------------------

def test_consider_queues_a_failing_or_flaky_case_in_every_repeat_lane_and_the_native_one(confirmation, added):
    conf = confirmation(workers=4, repeats=2)
    for status in CONFIRMED:
        conf.consider(status.lower(), case("2d", status, seconds=3.0, triton={"compile_seconds": 1.0}))
    for status in NOT_CONFIRMED:
        conf.consider(status.lower(), case("2d", status))
    conf.consider("overload", case("-", ERROR))
    assert conf.queued() == [len(CONFIRMED)] * 3
    assert sorted(added) == sorted((lane, [(status.lower(), ["2d"])], 2.0) for status in CONFIRMED
                                   for lane in ("repeat 1", "repeat 2", "native"))


def test_consider_queues_a_case_already_considered_once(confirmation):
    conf = confirmation(workers=4, repeats=2)
    conf.consider("abs", case("1d", ERROR))
    conf.consider("abs", case("1d", ERROR))
    assert conf.queued() == [1, 1, 1]


def test_a_case_whose_run_was_poisoned_or_a_known_culprit_runs_alone_in_each_repeat_lane(confirmation, added):
    conf = confirmation(workers=4, repeats=2, known=[["neg", "1d"]])
    conf.consider("abs", case("1d", ERROR, poison=POISON, seconds=2.0))
    conf.consider("neg", case("1d", WRONG, seconds=2.0))
    conf.consider("ceil", case("1d", WRONG, seconds=2.0))
    assert sorted(added) == sorted([("repeat 1, alone", [("abs", ["1d"])], None),
                                    ("repeat 2, alone", [("abs", ["1d"])], None), ("native", [("abs", ["1d"])], 2.0),
                                    ("repeat 1, alone", [("neg", ["1d"])], None),
                                    ("repeat 2, alone", [("neg", ["1d"])], None), ("native", [("neg", ["1d"])], 2.0),
                                    ("repeat 1", [("ceil", ["1d"])], 2.0), ("repeat 2", [("ceil", ["1d"])], 2.0),
                                    ("native", [("ceil", ["1d"])], 2.0)])
    assert conf.queued() == [3, 3, 3]


def test_a_case_with_repeats_done_queues_only_the_lanes_it_lacks_and_the_native_one_without_a_baseline(
        confirmation, added):
    conf = confirmation(workers=4, repeats=2)
    conf.consider("a", case("1d", ERROR, repeats=[ERROR, ERROR]))  # lacks one
    conf.consider("b", case("1d", ERROR, repeats=[ERROR, ERROR, ERROR]))  # lacks none
    conf.consider("c", case("1d", FLAKY, repeats=[ERROR, PASS, ERROR], baseline={"status": ERROR, "detail": ""}))
    conf.consider("d", case("1d", WRONG, repeats=[], baseline={"status": PASS, "detail": ""}))  # lacks both
    assert sorted((lane, task[0][0]) for lane, task, _ in added) == [
        ("native", "a"), ("native", "b"), ("repeat 1", "a"), ("repeat 1", "d"), ("repeat 2", "d")]


def test_without_a_native_path_only_the_repeat_lanes_are_queued(confirmation, added):
    conf = confirmation(workers=4, repeats=2, native=False)
    conf.consider("abs", case("1d", ERROR))
    assert conf.native is None and len(conf.lanes) == 2
    assert conf.queued() == [1, 1] and {lane for lane, _, _ in added} == {"repeat 1", "repeat 2"}


def test_chained_repeats_queue_the_first_and_the_next_one_when_its_record_is_heard(confirmation, added):
    conf = confirmation(workers=1, repeats=2)
    assert conf.chained and confirmation(workers=2, repeats=2).chained is False
    conf.consider("abs", case("1d", ERROR))
    conf.consider("neg", case("1d", ERROR, repeats=[ERROR, ERROR]))  # lacks its last only
    assert sorted((lane, task[0][0]) for lane, task, _ in added) == [
        ("native", "abs"), ("native", "neg"), ("repeat 1", "abs"), ("repeat 1", "neg")]
    added.clear()
    first, second, native = conf.lanes
    first._event(Event("case", "abs", {"profile": "1d", "status": ERROR, "worker_order": 1}))
    first._event(Event("case", "neg", {"profile": "1d", "status": ERROR, "worker_order": 2}))
    assert added == [("repeat 2", [("abs", ["1d"])], 1.5)]
    second._event(Event("case", "abs", {"profile": "1d", "status": ERROR, "worker_order": 1}))  # the last repeat
    native._event(Event("case", "neg", {"profile": "1d", "status": ERROR, "worker_order": 1}))
    conf.consider("ceil", case("1d", ERROR))
    added.clear()
    conf._heard(first, ("ceil", "1d"), {"profile": "1d", "status": ERROR}, True)  # an alone rerun's record
    assert added == []
    assert conf.queued() == [3, 1, 3]


def test_repeats_that_pass_are_handed_to_the_tracer_so_far_and_from_then_on(confirmation):
    conf = confirmation(workers=4, repeats=2)
    first, second, native = conf.lanes
    first._event(Event("case", "abs", {"profile": "1d", "status": PASS, "worker_order": 1}))
    first._event(Event("case", "neg", {"profile": "1d", "status": ERROR, "worker_order": 2}))
    native._event(Event("case", "ceil", {"profile": "1d", "status": PASS, "worker_order": 1}))
    tracer = SimpleNamespace(keys=[])
    tracer.passed = tracer.keys.append
    conf.trace_with(tracer)
    assert tracer.keys == [("abs", "1d")]
    second._event(Event("case", "neg", {"profile": "1d", "status": PASS, "worker_order": 1}))
    second._event(Event("case", "abs", {"profile": "1d", "status": WRONG, "worker_order": 2}))
    assert tracer.keys == [("abs", "1d"), ("neg", "1d")]


def test_a_spare_main_worker_is_lent_to_the_repeat_lane_lent_the_fewest_ties_to_the_lowest(confirmation, monkeypatch):
    lent: list = []
    monkeypatch.setattr(Pool, "lend", lambda self, worker, fits: lent.append((worker.id, fits)) or self.config.purpose)
    conf = confirmation(workers=4, repeats=3)
    w1, w2 = SimpleNamespace(id="w1"), SimpleNamespace(id="w2")
    assert [conf.spare(worker) for worker in (w1, w2, w2, w1, w1)] == [
        "repeat 1", "repeat 2", "repeat 3", "repeat 1", "repeat 2"]
    assert len(lent) == 5


def test_a_lent_worker_takes_only_cases_it_did_not_run_itself(confirmation, monkeypatch):
    lent: list = []
    monkeypatch.setattr(Pool, "lend", lambda self, worker, fits: lent.append(fits) or self.config.purpose)
    conf = confirmation(workers=4, repeats=2)
    conf.consider("abs", case("1d", ERROR, worker="w1", worker_order=3))
    conf.consider("neg", case("1d", ERROR, worker="w2", worker_order=1))
    conf.spare(SimpleNamespace(id="w1"))
    (fits,) = lent
    assert not fits(("abs", ["1d"]))
    assert fits(("neg", ["1d"])) and fits(("abs", ["2d"])) and fits(("abs", []))


def test_no_spare_worker_is_taken_without_a_repeat_lane_or_with_repeats_chained(confirmation, monkeypatch):
    monkeypatch.setattr(Pool, "lend", lambda self, worker, fits: pytest.fail("lent"))
    worker = SimpleNamespace(id="w1")
    assert confirmation(workers=4, repeats=0).spare(worker) is None
    assert confirmation(workers=1, repeats=2).spare(worker) is None


def test_end_input_ends_every_lane_but_a_chained_repeats_later_ones(confirmation, monkeypatch):
    ended: list = []
    monkeypatch.setattr(Pool, "end_input", lambda self: ended.append(self.config.purpose))
    confirmation(workers=4, repeats=2).end_input(2)
    assert ended == ["repeat 1", "repeat 2", "native"]
    ended.clear()
    chained = confirmation(workers=2, repeats=3)
    chained.end_input(3)
    assert ended == ["repeat 1", "native"]
    ended.clear()
    chained.end_input(2)  # two passes to run: the third lane has nothing coming
    assert ended == ["repeat 1", "repeat 3", "native"]


def test_a_known_culprits_replay_before_a_case_it_may_have_poisoned_starts_from_the_main_phase_on(
        confirmation, monkeypatch):
    ran: list = []
    monkeypatch.setattr(replay.PairsAhead, "_run",
                        lambda self, culprit, target: time.sleep(0.2) or ran.append((culprit, target)))
    conf = confirmation(workers=4, repeats=2, known=[["neg", "1d"]])
    conf.consider("neg", case("1d", PASS, worker="w1", worker_order=1))
    conf.consider("abs", case("1d", ERROR, poison=POISON, worker="w1", worker_order=2))
    assert conf.close_pairs() == {"ahead": 1, "unused": 1}
    assert ran == [(("neg", "1d"), ("abs", "1d"))]  # close_pairs waited for it
    quiet = confirmation(workers=4, repeats=2, known=[["neg", "1d"]])
    quiet.consider("abs", case("1d", ERROR, worker="w1", worker_order=2))
    assert quiet.close_pairs() is None  # none ran
    assert confirmation(workers=4, repeats=2).pairs is None and confirmation(workers=4, repeats=2).close_pairs() is None
    assert confirmation(workers=4, repeats=0, known=[["neg", "1d"]]).pairs is None


# -- confirm ----------------------------------------------------------------------------------

def drained_as(monkeypatch, outcomes: dict, steps: list) -> None:
    """``Lane.drain`` gives each lane's ``outcomes[purpose]``; ``steps`` hears each drain and end_input."""
    monkeypatch.setattr(Lane, "drain", lambda self, note=None: steps.append(("drain", self.config.purpose))
                        or outcomes[self.config.purpose])
    monkeypatch.setattr(Pool, "end_input", lambda self: steps.append(("end_input", self.config.purpose)))


def test_confirm_applies_the_lanes_in_pass_order_and_counts_native_also_after_the_repeats(
        opened, confirmation, monkeypatch, tracers):
    record = opened({"abs": [case("1d", WRONG, "max diff 1"), case("2d", ERROR, "boom")], "neg": [case("1d", PASS)]})
    conf = confirmation(workers=4, repeats=2)
    for name, cases in record.finished.items():  # as the survey recorded them
        for one in cases:
            conf.consider(name, one)
    a_key, b_key = ("abs", "1d"), ("abs", "2d")
    steps: list = []
    drained_as(monkeypatch, {
        "repeat 1": ({a_key: case("1d", PASS), b_key: case("2d", ERROR, "boom")}, None),
        "repeat 2": ({a_key: case("1d", WRONG), b_key: case("2d", ERROR, "boom")}, None),
        "native": ({a_key: case("1d", WRONG, "native too"), b_key: case("2d", ERROR, "native boom")}, None)}, steps)
    notes: list = []
    done = confirm.confirm(conf, record, baseline_label="stock torch", note=notes.append)
    assert steps == [("end_input", "repeat 1"), ("end_input", "repeat 2"), ("end_input", "native"),
                     ("drain", "repeat 1"), ("drain", "repeat 2"), ("drain", "native")]
    a, b = record.finished["abs"]
    assert (a["status"], a["repeats"], b["status"], b["repeats"]) == (FLAKY, [WRONG, PASS, WRONG], ERROR, [ERROR] * 3)
    assert done["repeats"] == {"repeated": 2, "times": 2, "flaky": 1}
    assert done["baseline"] == {"label": "stock torch", "cases": 2, "native_also": 1}  # b only: a is FLAKY
    passes = done["passes"]
    assert passes["count"] == 3 and passes["queued"] == [2, 2, 2]  # queued once each
    assert len(passes["ended_s"]) == 3 and passes["ended_s"] == sorted(passes["ended_s"])
    assert saved(record)["abs"] == [a, b] and a["baseline"] == {"status": WRONG, "detail": "native too"}
    assert notes == ["running 2 failing case(s) again (1 of 2), in fresh workers",
                     "running 2 failing case(s) again (2 of 2), in fresh workers",
                     "running 2 failing or flaky case(s) on the native path"]
    assert "replay" not in done and all(stopped(lane.pool) and stopped(lane.alone.pool) for lane in conf.lanes)
    (tracer,) = tracers
    assert tracer.closed


def test_confirm_ends_a_chained_repeats_lane_once_the_lane_before_it_is_drained(
        opened, confirmation, monkeypatch, tracers):
    record = opened({"abs": [case("1d", ERROR, "boom")]})
    conf = confirmation(workers=1, repeats=2)
    steps: list = []
    found = {("abs", "1d"): case("1d", ERROR, "boom")}
    drained_as(monkeypatch, {"repeat 1": (found, None), "repeat 2": (found, None), "native": (found, None)}, steps)
    confirm.confirm(conf, record, baseline_label="stock torch")
    assert steps == [("end_input", "repeat 1"), ("end_input", "native"), ("drain", "repeat 1"),
                     ("end_input", "repeat 2"), ("drain", "repeat 2"), ("drain", "native")]


def test_confirm_queues_what_the_results_file_holds_and_drains_only_the_repeat_passes_still_to_run(
        opened, confirmation, monkeypatch, tracers):
    record = opened({"abs": [case("1d", ERROR, "boom", repeats=[ERROR, ERROR], repeat_details=[{}])]})
    conf = confirmation(workers=4, repeats=2)  # the case found finished: never considered by a main phase
    steps: list = []
    drained_as(monkeypatch, {"repeat 1": ({("abs", "1d"): case("1d", PASS)}, None)}, steps)
    done = confirm.confirm(conf, record, baseline_label=None)
    assert [lane for step, lane in steps if step == "drain"] == ["repeat 1"]
    assert done["passes"]["queued"] == [1, 0, 1] and done["passes"]["count"] == 1
    assert "baseline" not in done and "baseline" not in record.finished["abs"][0]
    assert record.finished["abs"][0]["status"] == FLAKY and done["repeats"]["flaky"] == 1


def test_confirm_hands_the_tracer_the_repeats_that_passed_before_the_main_phase_ended(
        opened, confirmation, monkeypatch, tracers):
    record = opened({"abs": [case("1d", ERROR, "boom")]})
    conf = confirmation(workers=4, repeats=2)
    conf.lanes[0]._event(Event("case", "abs", {"profile": "1d", "status": PASS, "worker_order": 1}))
    found = {("abs", "1d"): case("1d", PASS)}
    drained_as(monkeypatch, {"repeat 1": (found, None), "repeat 2": (found, None)}, [])
    confirm.confirm(conf, record, baseline_label=None)
    (tracer,) = tracers
    assert tracer.keys == [("abs", "1d")]


def test_confirm_traces_the_cases_made_flaky_by_a_sticky_error_and_saves_what_the_trace_found(
        opened, confirmation, monkeypatch, tracers):
    monkeypatch.setattr(replay.PairsAhead, "_run", lambda self, culprit, target: None)
    record = opened({"abs": [case("1d", ERROR, "illegal", poison=POISON, worker="w1", worker_order=2)],
                     "neg": [case("1d", PASS, worker="w1", worker_order=1)]})
    conf = confirmation(workers=4, repeats=2, known=[["neg", "1d"]])
    for name, cases in record.finished.items():
        for one in cases:
            conf.consider(name, one)  # the known culprit's pair runs ahead
    traced: list = []

    def trace(config, results, note, **more):
        traced.append(more)
        results.record_replay(results.finished["abs"][0], 2, 1, True)
        return {"suspects": 1}
    monkeypatch.setattr(replay, "trace", trace)
    found = {("abs", "1d"): case("1d", PASS)}
    drained_as(monkeypatch, {"repeat 1": (found, None), "repeat 2": (found, None)}, [])
    done = confirm.confirm(conf, record, baseline_label=None)
    assert record.finished["abs"][0]["status"] == FLAKY
    assert done["replay"] == {"suspects": 1, "pairs": {"ahead": 1, "unused": 1}}
    assert saved(record)["abs"][0]["replay"] == {"runs": 2, "cases": 1, "came_back": True}
    (more,) = traced
    assert more["width"] == 4 and more["ahead"] is tracers[0] and more["pairs"] is conf.pairs


def test_the_pass_figures_say_each_lanes_end_queue_and_workers_started_and_lent():
    lanes = [SimpleNamespace(pool=SimpleNamespace(slots=lambda: 2, lent=lambda: 1)),
             SimpleNamespace(pool=SimpleNamespace(slots=lambda: 1, lent=lambda: 0))]
    assert _pass_figures(lanes, 4, [1.5, 3.0], [5, 5]) == {
        "count": 2, "at_once": 2, "workers": 4, "ended_s": [1.5, 3.0], "queued": [5, 5], "started": [2, 1],
        "lent": [1, 0]}


def test_the_timing_figures_say_when_the_replays_ahead_ran_seconds_into_the_confirmation():
    clock = time.monotonic() - 10
    figures = _timing_figures(clock, SimpleNamespace(spans=[(clock + 1.04, clock + 2.06)]))
    assert figures["replay_ahead_s"] == [[1.0, 2.1]] and 9.9 < figures["seconds"] < 60
    assert list(_timing_figures(clock, SimpleNamespace(spans=[]))) == ["seconds"]
