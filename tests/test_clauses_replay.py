"""Each promise of flagos_doctor/survey/replay.py's docstrings about which cases a trace
replays and in what order, one test each: the suspects, the earlier cases of a suspect's
worker, the bisection (later half first, the last one alone unless proven on the way) and
the replays it runs ahead. In-process, on case records in the shapes a survey writes;
scripts/mutation runs these first. The replays themselves, in real fresh workers of a stack
with a real sticky error, are tests/test_replay_side_by_side.py and tests/test_survey_noise.py."""

from __future__ import annotations

import random

import pytest

from flagos_doctor.results import model
from flagos_doctor.survey import replay
from flagos_doctor.survey.replay import Bisection


def record(profile, status=model.PASS, worker=None, order=None, **more):
    found = {"profile": profile, "status": status, "route": "kernel", "detail": ""}
    if worker is not None:
        found.update(worker=worker, worker_order=order)
    return {**found, **more}


POISON = "CUDA error: an illegal memory access was encountered"


def test_a_suspect_is_flaky_its_first_run_poisoned_in_a_known_worker_and_not_traced_yet():
    finished = {
        "b": [record("1d", model.FLAKY, "w1", 3, poison=POISON),  # the suspect
              record("2d", model.FLAKY, "w1", 4)],  # flaky, but no sticky error
        "a": [record("1d", model.FLAKY, "w2", 1, poison=POISON, replay={"runs": 1}),  # traced already
              record("2d", model.ERROR, "w2", 2, poison=POISON),  # failed every time: not a suspect
              record("3d", model.FLAKY, None, None, poison=POISON),  # no worker to replay
              record("4d", model.FLAKY, "w2", 5, poison=POISON)],
    }
    assert replay.suspects(finished) == [("a", finished["a"][3]), ("b", finished["b"][0])]  # by name


def test_the_earlier_cases_are_those_of_the_suspects_worker_before_it_in_its_order():
    finished = {
        "z": [record("1d", worker="w1", order=2), record("2d", worker="w2", order=1)],
        "a": [record("1d", worker="w1", order=5), record("2d", worker="w1", order=1)],
        "m": [record("-", model.NO_SCHEMA, worker="w1", order=3), record("1d", worker="w1", order=4)],
    }
    suspect = finished["a"][0]
    assert replay.earlier_cases(finished, suspect) == [("a", "2d"), ("z", "1d"), ("m", "1d")]
    assert replay.earlier_cases(finished, finished["a"][1]) == []  # its worker's first case
    # a record without an order is its worker's first
    finished["z"].append(record("3d", worker="w1", order=0))
    assert replay.earlier_cases(finished, {**suspect, "worker_order": None}) == []
    assert replay.earlier_cases(finished, suspect)[0] == ("z", "3d")


def test_a_replay_runs_at_most_the_latest_400_earlier_cases():
    finished = {"op": [record(f"p{order}", worker="w1", order=order) for order in range(1000)]}
    assert replay.MAX_REPLAY_CASES == 400
    assert replay.replayed_before(finished, finished["op"][999]) == [("op", f"p{order}") for order in range(599, 999)]
    assert replay.replayed_before(finished, finished["op"][401]) == [("op", f"p{order}") for order in range(1, 401)]
    assert replay.replayed_before(finished, finished["op"][400]) == [("op", f"p{order}") for order in range(400)]


def walk(candidates, culprit, proven=True):
    """The bisection with a culprit at index ``culprit`` (None: none brings the error back
    alone); (the culprit it names, the replays it asked for)."""
    bisection = Bisection(candidates, proven=proven)
    asked = []
    while not bisection.done:
        sequence = bisection.next_test()
        asked.append(sequence)
        bisection.answer(culprit is not None and candidates[culprit] in sequence)
    return bisection.culprit, asked


def test_the_bisection_tries_the_later_half_first_and_keeps_the_half_that_brings_the_error_back():
    cases = [(f"op{index}", "1d") for index in range(8)]
    found, asked = walk(cases, 6)
    assert found == ("op6", "1d")
    # 4..7 back, 6..7 back, 7 not back: 6 is left unproven, so it is tried alone
    assert asked == [cases[4:], cases[6:], cases[7:], cases[6:7]]
    found, asked = walk(cases, 7)
    assert found == ("op7", "1d") and asked == [cases[4:], cases[6:], cases[7:]]  # proven on the way down
    found, asked = walk(cases, 1)
    assert found == ("op1", "1d") and asked == [cases[4:], cases[2:4], cases[1:2]]  # the earlier halves kept
    found, asked = walk(cases, 0)
    assert found == ("op0", "1d") and asked == [cases[4:], cases[2:4], cases[1:2], cases[0:1]]  # then alone
    for size in range(1, 40):
        for culprit in range(size):
            assert walk([(f"op{i}", "1d") for i in range(size)], culprit)[0] == (f"op{culprit}", "1d")


def test_the_last_candidate_is_tried_alone_unless_proven_and_none_is_named_when_it_does_not_bring_the_error_back():
    cases = [(f"op{index}", "1d") for index in range(5)]
    found, asked = walk(cases, None)  # the error came back only with several together
    assert found is None and asked[-1] == cases[0:1]
    assert walk(cases[:1], 0, proven=True) == (cases[0], [])  # one candidate already proven
    assert walk(cases[:1], 0, proven=False) == (cases[0], [cases[:1]])
    assert walk(cases[:1], None, proven=False) == (None, [cases[:1]])
    assert walk([], None) == (None, [])


def test_a_bisection_copied_answers_on_its_own():
    bisection = Bisection([("a", "1d"), ("b", "1d"), ("c", "1d"), ("d", "1d")], proven=True)
    other = bisection.copy()
    other.answer(False)
    assert bisection.state() == (0, 4, True, False) and other.state() == (0, 2, False, False)


@pytest.mark.parametrize("size", [2, 3, 7, 16, 33])
def test_the_replays_ahead_start_with_the_path_of_came_back_answers_whole(size):
    bisection = Bisection([(f"op{index}", "1d") for index in range(size)], proven=True)
    came_back_path = []
    node = bisection.copy()
    while not node.done:
        came_back_path.append(replay._span(node))
        node.answer(True)
    ahead = replay._tests_ahead(bisection, 64)
    assert ahead[:len(came_back_path)] == came_back_path
    assert len(ahead) == len(set(ahead))  # each replay once


def test_the_replays_ahead_are_at_most_count_and_the_nearest_branches_first():
    bisection = Bisection([(f"op{index}", "1d") for index in range(8)], proven=True)
    assert replay._tests_ahead(bisection, 1) == [(4, 8)]
    assert replay._tests_ahead(bisection, 3) == [(4, 8), (6, 8), (7, 8)]
    # after the "came back" path, the branches one "not back" away, shallowest first
    # (each replay is the later half a node tests: node 4..6 replays 5..6)
    assert replay._tests_ahead(bisection, 7) == [(4, 8), (6, 8), (7, 8), (2, 4), (5, 6), (3, 4), (6, 7)]
    assert replay._tests_ahead(Bisection([], proven=True), 5) == []


def test_the_replays_ahead_change_how_many_rounds_never_the_answer():
    # walking the bisection with the answers of the replays run ahead, as trace does, names
    # the culprit the bisection one replay at a time names, whatever the width
    rng = random.Random(7)
    for _ in range(60):
        size = rng.randint(1, 30)
        cases = [(f"op{index}", "1d") for index in range(size)]
        culprit = rng.choice([None, *range(size)])
        width = rng.randint(1, 8)
        bisection, answers = Bisection(cases, proven=True), {}
        while not bisection.done:
            for start, end in replay._tests_ahead(bisection, width):
                answers[(start, end)] = culprit is not None and start <= culprit < end
            while not bisection.done and replay._span(bisection) in answers:
                bisection.answer(answers[replay._span(bisection)])
        assert bisection.culprit == walk(cases, culprit)[0], (size, culprit, width)
