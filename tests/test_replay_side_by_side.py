"""A suspect's replays run side by side and name the culprit the serial bisection names;
a culprit the store knows is tried first (survey/replay.py, store.Culprits).

Real workers of the noise fixture stack (tests/fixtures/noisestack.py): ``frac [1d-f32]``
leaves its process poisoned, and the next kernel that checks (``floor``, ``ceil``,
``trunc``) raises CUDA's illegal memory access. The suspect, ``trunc [2d-f32]``, ran in one
worker after six cases. The reference is the bisection as it ran before replays ran side
by side (written out below), one replay at a time. Each replay's worker is forked from one
import of torch, as a survey's replays are (conftest: ``FLAGOS_DOCTOR_FORK=torch``; the forked
path's every claim against spawned workers: tests/test_forkserver.py), not spawned: 20 starts.
"""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from conftest import FIXTURES, REPO_ROOT
from flagos_doctor.results import model
from flagos_doctor.store import Culprits, Store
from flagos_doctor.survey import forkserver, replay
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.survey.pool import WorkerConfig

SPEC = os.path.join(FIXTURES, "truth-spec.yaml")
EARLIER = [("ceil", "2d-f32"), ("trunc", "1d-f32"), ("frac", "2d-f32"), ("floor", "2d-f32"), ("frac", "1d-f32"),
           ("floor", "1d-f32")]
TARGET = ("trunc", "2d-f32")


def survey_so_far() -> dict:
    """Case records as a survey left them: one worker ran EARLIER, then the suspect, which
    failed with a sticky error and passed twice in fresh workers (FLAKY)."""
    finished: dict = {}
    for order, (name, profile) in enumerate(EARLIER):
        finished.setdefault(name, []).append({"profile": profile, "status": model.PASS, "detail": "", "route": "kernel",
                                              "worker": "w1", "worker_order": order})
    finished.setdefault("trunc", []).append({
        "profile": "2d-f32", "status": model.FLAKY, "detail": "illegal memory access", "route": "kernel",
        "worker": "w1", "worker_order": len(EARLIER), "poison": "illegal memory access",
        "repeats": [model.ERROR, model.PASS, model.PASS], "repeat_details": [{"detail": ""}, {"detail": ""}]})
    return finished


def serial_reference(config) -> tuple[list, tuple | None]:
    """The bisection one replay at a time, as survey/replay.py ran it before: (log, culprit)."""
    log = []

    def tried(sequence):
        came_back = replay.replay(config, list(sequence) + [TARGET])
        log.append({"cases": len(sequence) + 1, "came_back": came_back})
        return came_back

    assert tried(EARLIER)
    candidates = proven = list(EARLIER)
    while len(candidates) > 1:
        later = candidates[len(candidates) // 2:]
        if tried(later):
            candidates = proven = later
        else:
            candidates = candidates[: len(candidates) // 2]
    culprit = candidates[0] if candidates and (proven == candidates or tried(candidates)) else None
    return log, culprit


def holding(finished: dict) -> ResultsFile:
    """A results file (never written) whose finished overloads are ``finished``."""
    record = ResultsFile(os.devnull, {})
    record.finished = finished
    return record


def recording(monkeypatch):
    """Each replay's (start, end), taken around the real one."""
    spans, real, lock = [], replay.replay, threading.Lock()

    def timed(*args, **kwargs):
        start = time.monotonic()
        try:
            return real(*args, **kwargs)
        finally:
            with lock:
                spans.append((start, time.monotonic()))

    monkeypatch.setattr(replay, "replay", timed)
    return spans


@pytest.fixture(scope="module")
def noise_config(tmp_path_factory):
    """The noise stack's worker configuration, its workers forked from one server the
    module's tests share (one environment, one Triton cache: a server serves only the
    environment it started in), as a survey's config.forks is."""
    tmp = tmp_path_factory.mktemp("replays")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join([FIXTURES, REPO_ROOT]))
        patch.setenv("TRITON_CACHE_DIR", str(tmp / "triton-cache"))
        patch.setenv("NOISESTACK_COMPILE_SLEEP", "0")
        config = WorkerConfig(python=sys.executable, stack="noisestack", device=None, spec=SPEC, conf=None,
                              backend="flagos_python", timeout=60, scratch=str(tmp))
        config.forks = forkserver.ForkServers.for_stack(config.resolved)
        try:
            yield config
        finally:
            config.forks.close()


def test_replays_side_by_side_name_the_serial_bisections_culprit_and_a_known_culprit_goes_first(noise_config, tmp_path,
                                                                                                  monkeypatch):
    config = noise_config
    log, culprit = serial_reference(config)
    assert culprit == ("frac", "1d-f32") and len(log) == 5

    spans = recording(monkeypatch)
    finished = survey_so_far()
    figures = replay.trace(config, holding(finished), width=4)
    (suspect,) = finished["trunc"][1:]
    assert suspect["poisoned_by"] == {"overload": "frac", "profile": "1d-f32"} and suspect["status"] == model.PASS
    assert suspect["replay"] == {"runs": len(log), "cases": len(EARLIER), "came_back": True}
    assert figures["runs"] == len(log) and figures["traced"] == 1
    # side by side: 5 replays in 2 rounds (the serial bisection: 5 in a row), and they overlapped;
    # the first round took the "came back" path down to the last case alone (floor 1d, it
    # did not), so the second round is one replay: frac 1d alone
    assert figures["replays"] == len(spans) == 5 and figures["rounds"] == 2
    assert sum(1 for i, a in enumerate(spans) for b in spans[i + 1:] if a[0] < b[1] and b[0] < a[1]) >= 3

    # The store remembers the culprit; the next trace tries it first, alone: one replay.
    culprits = Culprits(Store(str(tmp_path / "store")), "noisestack")
    assert culprits.known() == []
    culprits.remember(culprit)
    spans.clear()
    again = survey_so_far()
    figures = replay.trace(config, holding(again), width=4, known=culprits.known(), remember=culprits.remember)
    (suspect,) = again["trunc"][1:]
    assert suspect["poisoned_by"] == {"overload": "frac", "profile": "1d-f32"}
    assert suspect["replay"] == {"runs": 1, "cases": len(EARLIER), "came_back": True, "known": True}
    assert figures["known"] == 1 and figures["replays"] == len(spans) == 1
    assert culprits.known() == [("frac", "1d-f32")]
    # A known culprit that does not bring the error back (one replay, then the bisection) is
    # tests/test_clauses_replay_lanes.py's, on stand-in workers: six more real starts here.


def before_repeats() -> dict:
    """The same survey before its confirmation: the suspect failed once, with a sticky error."""
    finished = survey_so_far()
    suspect = finished["trunc"][-1]
    suspect["status"] = model.ERROR
    del suspect["repeats"], suspect["repeat_details"]
    return finished


def repeated(finished: dict) -> dict:
    """What the repeat passes leave: the suspect passed twice in fresh workers (FLAKY)."""
    suspect = finished["trunc"][-1]
    suspect.update(status=model.FLAKY, repeats=[model.ERROR, model.PASS, model.PASS],
                   repeat_details=[{"detail": ""}, {"detail": ""}])
    return finished


def test_a_suspects_replays_start_when_a_repeat_of_it_passes_and_trace_takes_their_answer(noise_config, monkeypatch):
    config = noise_config
    spans = recording(monkeypatch)
    finished = before_repeats()
    ahead = replay.Ahead(config, finished, 4)
    assert list(ahead.candidates) == [TARGET] and ahead.candidates[TARGET] == EARLIER
    ahead.passed(("frac", "1d-f32"))  # not a candidate (it never failed): nothing starts
    ahead.passed(TARGET)  # a repeat of the suspect passed: its replays start now
    ahead.passed(TARGET)  # the second repeat's pass starts nothing more
    ahead._threads[TARGET].join()
    ran_ahead = len(spans)
    assert ran_ahead == 5  # the bisection of the first test, side by side, before any trace
    figures = replay.trace(config, holding(repeated(finished)), width=4, ahead=ahead)
    ahead.close()
    (suspect,) = finished["trunc"][1:]
    assert len(spans) == ran_ahead  # trace ran no replay of its own: it took the answers
    assert suspect["poisoned_by"] == {"overload": "frac", "profile": "1d-f32"} and suspect["status"] == model.PASS
    assert suspect["replay"] == {"runs": 5, "cases": len(EARLIER), "came_back": True}
    assert figures["replays"] == 5 and figures["rounds"] == 2 and figures["traced"] == 1


def test_a_culprit_run_just_before_its_victim_is_found_in_one_round(noise_config):
    # The H200's torch_fl suspect: its culprit was the case its worker ran just before it.
    # The first round's replays follow the "came back" path to the last case alone.
    config = noise_config
    log: list = []  # EARLIER[:5] ends with frac 1d: the suspect's latest earlier case
    counts = {"replays": 0, "rounds": 0}
    came_back, culprit = replay.bisect_side_by_side(config, EARLIER[:5], TARGET, 4, log, counts)
    assert came_back and culprit == ("frac", "1d-f32")
    assert counts == {"replays": 4, "rounds": 1}
    assert log == [{"cases": 6, "came_back": True}, {"cases": 4, "came_back": True},
                   {"cases": 3, "came_back": True}, {"cases": 2, "came_back": True}]


def test_a_failure_whose_repeats_never_pass_is_never_replayed(noise_config, monkeypatch):
    config = noise_config
    spans = recording(monkeypatch)
    finished = before_repeats()
    ahead = replay.Ahead(config, finished, 4)
    finished["trunc"][-1].update(repeats=[model.ERROR, model.ERROR, model.ERROR])  # failed every time
    figures = replay.trace(config, holding(finished), width=4, ahead=ahead)
    ahead.close()
    assert spans == [] and figures["suspects"] == 0 and "replay" not in finished["trunc"][-1]


def test_the_store_keeps_each_culprit_once_the_one_found_last_first_per_stack(tmp_path):
    culprits = Culprits(Store(str(tmp_path / "store")), "noisestack")
    for found in [("frac", "2d-f32"), ("frac", "1d-f32"), ("frac", "2d-f32")]:
        culprits.remember(found)
    assert culprits.known() == [("frac", "2d-f32"), ("frac", "1d-f32")]
    assert Culprits(Store(str(tmp_path / "store")), "demo").known() == []
    for index in range(Culprits.KEEP + 2):
        culprits.remember(("abs", f"{index}d"))
    assert len(culprits.known()) == Culprits.KEEP and culprits.known()[0] == ("abs", f"{Culprits.KEEP + 1}d")
