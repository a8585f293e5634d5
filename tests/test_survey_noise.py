"""The survey's own noise is never the stack's verdict (issue 23), on CPU.

Real CLI runs in subprocesses with real workers, on the noise fixture
(tests/fixtures/noisestack.py): a kernel whose first call really compiles with Triton for
longer than ``--timeout`` (a pipeline stage that sleeps, seen by Triton's own compile
listener and ``triton.compiler.compile``), one that compiles and then hangs, and one that
leaves its process "poisoned" so that the next kernel raises CUDA's illegal memory access.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import FIXTURES, REPO_ROOT, run_cli, wrapped_python
from flagos_doctor.results import model
from flagos_doctor.results.verdicts import settle
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.store import Culprits, Store
from flagos_doctor.survey.confirm import _apply_repeat
from flagos_doctor.survey.pool import WorkerConfig, WorkerProcess

NOISE_CONF = os.path.join(FIXTURES, "noise.conf")
SPEC = os.path.join(FIXTURES, "truth-spec.yaml")  # two profiles: 2d-f32, then 1d-f32
ENV = {"PYTHONPATH": os.pathsep.join([FIXTURES, REPO_ROOT])}


def noise_survey(tmp, name, *args, sleep="4", exit_code=0, extra_env=None):
    """A survey of the noise stack with a fresh Triton cache; (results document, process).
    ``exit_code``: 1 when a case is to end TIMEOUT (the stack's failure)."""
    env = {**ENV, "TRITON_CACHE_DIR": str(tmp / "triton-cache"), "NOISESTACK_COMPILE_SLEEP": sleep, **(extra_env or {})}
    done = run_cli("survey", "--stack", "noisestack", "--conf", NOISE_CONF, "--spec", SPEC, "--no-store",
                   "-o", f"{name}.json", "--census", f"{name}.census", *args, env=env, cwd=str(tmp))
    assert done.returncode == exit_code, done.stderr
    with open(tmp / f"{name}.json", encoding="utf-8") as handle:
        return json.load(handle), done


def case(doc, name, profile):
    (found,) = [c for c in doc["overloads"][name]["cases"] if c["profile"] == profile]
    return found


def test_a_kernel_compiling_past_the_timeout_then_running_in_ms_passes(tmp_path):
    doc, _ = noise_survey(tmp_path, "slow-compile", "--ops", "floor", "--timeout", "2")
    cases = doc["overloads"]["floor"]["cases"]
    assert [c["status"] for c in cases] == [model.PASS, model.PASS], cases
    assert doc["overloads"]["floor"]["verdict"] == model.STRICT
    # At least one of them compiled for real, for longer than --timeout: Triton's listener says so.
    compiled = [c for c in cases if (c.get("triton") or {}).get("compiles")]
    assert compiled and max(c["triton"]["compile_seconds"] for c in compiled) > 4
    assert max(c["seconds"] for c in compiled) > 2  # the case took longer than the limit
    assert not any(c.get("repeats") for c in cases)  # nothing failed: nothing ran again


def test_two_workers_needing_one_kernel_compile_it_once_and_the_wait_is_off_the_clock(tmp_path):
    # floor compiles the same kernel on both profiles; with two workers and nothing else to
    # do, its second case starts while the first compiles: the compile sleeps 6 s in the
    # pipeline once both workers asked for the kernel (however late one started).
    doc, _ = noise_survey(tmp_path, "one-compile", "--ops", "floor", "--timeout", "2", "--workers", "2",
                          "--repeats", "0", sleep="6",
                          extra_env={"NOISESTACK_COMPILERS_MARK": str(tmp_path / "compilers")})
    cases = doc["overloads"]["floor"]["cases"]
    assert [c["status"] for c in cases] == [model.PASS, model.PASS], cases
    triton = [c.get("triton") or {} for c in cases]
    assert sorted(t.get("compiles", 0) for t in triton) == [0, 1]  # compiled once in all
    (waited,) = [t for t in triton if t.get("compiles", 0) == 0]
    assert waited["compile_lock_waits"] == 1 and waited["compile_cache_hits"] == 1
    assert waited["compile_lock_seconds"] > 2  # longer than --timeout, and still a PASS


def test_a_kernel_that_hangs_after_compiling_is_still_a_timeout_saying_where_its_time_went(tmp_path):
    doc, done = noise_survey(tmp_path, "hang", "--ops", "ceil", "--timeout", "3", "--repeats", "0",
                             "--workers", "1", sleep="2", exit_code=1)
    assert "1 case crashed or timed out (ceil/1d-f32)" in done.stderr
    hang = case(doc, "ceil", "1d-f32")
    assert hang["status"] == model.TIMEOUT
    spent = hang["spent"]
    assert spent["stopped_in"] == "run"
    assert spent["run"] >= 2.8, spent  # --timeout of running: stopped in "run", never before its 3 s ...
    assert hang["seconds"] >= spent["run"] + spent["compile"] - 0.5
    assert hang["detail"] == "no result within 3s of running; worker killed (where its time went: spent)"
    assert spent["compile"] >= 2  # it compiled its own kernel first (2 s asleep in the pipeline)
    assert case(doc, "ceil", "2d-f32")["status"] == model.PASS
    assert case(doc, "ceil", "2d-f32")["triton"]["compile_seconds"] > 2


def test_a_compiler_that_never_finishes_is_stopped_by_the_compile_cap(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton-cache"))
    monkeypatch.setenv("NOISESTACK_COMPILE_SLEEP", "3600")
    config = WorkerConfig(python=sys.executable, stack="noisestack", device=None, spec=SPEC, conf=None,
                          backend="flagos_python", timeout=2, scratch=str(tmp_path), compile_cap=4)
    worker = WorkerProcess(config, 0)
    records = []
    try:
        assert worker.attempt("floor", ["2d-f32"], records.append) == "ended"
    finally:
        worker.close()
    (stopped,) = [event.data for event in records if event.kind == "case"]
    assert stopped["status"] == model.TIMEOUT
    assert stopped["spent"]["stopped_in"] == "compile" and stopped["spent"]["compile"] >= 3.9
    assert "(the compile cap)" in stopped["detail"]


@pytest.fixture(scope="module")
def poison_run(tmp_path_factory):
    """frac and trunc in one worker, in route order (sorted): frac 2d, frac 1d (leaves the
    process poisoned), then trunc 2d raises "illegal memory access" and its worker is
    replaced; trunc 1d passes in the new one. (folder, results document, process): read by
    the poisoned case's test and the sticky cases' hints test, which ran this survey each."""
    tmp = tmp_path_factory.mktemp("poison")
    doc, done = noise_survey(tmp, "poison", "--ops", "frac,trunc", "--workers", "1")
    return tmp, doc, done


def test_a_case_poisoned_by_an_earlier_case_names_it_and_the_culprit_carries_the_failure(poison_run, tmp_path):
    # One worker, in route order (sorted): frac 2d, frac 1d (leaves the process poisoned),
    # then trunc 2d raises "illegal memory access" and its worker is replaced; trunc 1d
    # passes in the new one. Run again in fresh workers trunc 2d passes: without the
    # replay, FLAKY.
    folder, doc, done = poison_run
    victim = case(doc, "trunc", "2d-f32")
    assert victim["first_run"]["status"] == model.ERROR and "illegal memory access" in victim["first_run"]["detail"]
    assert victim["repeats"] == [model.ERROR, model.PASS, model.PASS]
    assert victim["status"] == model.PASS  # not blamed, not FLAKY
    assert victim["poisoned_by"] == {"overload": "frac", "profile": "1d-f32"}
    assert victim["replay"]["came_back"] is True
    culprit = case(doc, "frac", "1d-f32")
    assert culprit["status"] == model.ERROR and culprit["first_run"]["status"] == model.PASS
    assert culprit["poisoned"] == [["trunc", "2d-f32"]]
    assert "trunc [2d-f32]" in culprit["detail"] and "illegal memory access" in culprit["detail"]
    assert case(doc, "frac", "2d-f32")["status"] == model.PASS
    assert doc["overloads"]["trunc"]["verdict"] == model.STRICT
    assert doc["overloads"]["frac"]["verdict"] == model.BASIC_ONLY
    assert model.FLAKY not in doc["summary"]["statuses"]
    assert doc["provenance"]["runs"][-1]["confirm"]["replay"]["traced"] == 1
    # its main run reported the sticky error: each repeat ran alone from the start, never in
    # a lane's shared worker (where it would poison, or be poisoned by, another case)
    assert {w["for"] for w in doc["provenance"]["runs"][-1]["worker_log"]} == {
        "main", "main, replacing a worker lost under a case", "repeat 1, alone", "repeat 2, alone", "native", "replay"}
    assert "alone" not in json.dumps(victim["repeat_details"])
    assert unused_workers(doc) == []
    with open(folder / "poison.census", encoding="utf-8") as handle:
        census = handle.read()
    assert "frac\t1d-f32\tERROR\tkernel\n" in census and "trunc\t2d-f32\tPASS\tkernel\n" in census
    said = " ".join(done.stdout.split())
    assert "trunc [2d-f32]: illegal memory access in its first run, left there by frac [1d-f32] (replayed)" in said
    # Against a run where nothing poisoned trunc, its PASS is no change (its first run made
    # the survey take a baseline, which a PASS does not need), and the comparison says why
    # the two records differ: H200, 5c9d6f4 vs ceb4821, native_dropout "PASS -> PASS".
    noise_survey(tmp_path, "clean", "--ops", "trunc", "--workers", "1")
    compared = run_cli("survey", "--compare", str(folder / "poison.json"), "clean.json", "--fail-on", "never",
                       "--json", "compare.json", "--markdown", "compare.md", env=ENV, cwd=str(tmp_path))
    assert compared.returncode == 0, compared.stderr
    with open(tmp_path / "compare.json", encoding="utf-8") as handle:
        comparison = json.load(handle)
    assert victim["baseline"]["status"] == model.PASS  # its first run failed: the native path ran it
    assert not [c for c in comparison["cases_changed"] if c["overload"] == "trunc"]
    assert comparison["sticky_traced"] == [{"arm": "a", "overload": "trunc", "profile": "2d-f32", "status": model.PASS,
                                            "poisoned_by": {"overload": "frac", "profile": "1d-f32"}}]
    told = ("A: trunc [2d-f32] is PASS; its first run's sticky device error was left by frac [1d-f32] (replayed)")
    assert told in " ".join(compared.stdout.split())
    assert told in (tmp_path / "compare.md").read_text()


def test_a_known_culprits_replay_before_its_victim_starts_from_the_main_phase(tmp_path):
    # The store knows frac [1d-f32] left a sticky error on this stack before. One worker, in
    # route order: frac [1d-f32] poisons, trunc [2d-f32] meets the error. As the main phase
    # records that, the replay of frac [1d-f32] then trunc [2d-f32] starts, before trunc's
    # repeats make it a suspect; the trace takes that replay's answer: one replay in all.
    store = tmp_path / "store"
    Culprits(Store(str(store)), "noisestack").remember(("frac", "1d-f32"))
    env = {**ENV, "TRITON_CACHE_DIR": str(tmp_path / "triton-cache"), "NOISESTACK_COMPILE_SLEEP": "4"}
    done = run_cli("survey", "--stack", "noisestack", "--conf", NOISE_CONF, "--spec", SPEC, "--store", str(store),
                   "-o", "pairs.json", "--ops", "frac,trunc", "--workers", "1", env=env, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "pairs.json").read_text())
    victim = case(doc, "trunc", "2d-f32")
    assert victim["status"] == model.PASS and victim["poisoned_by"] == {"overload": "frac", "profile": "1d-f32"}
    assert victim["replay"]["known"] is True
    assert case(doc, "frac", "1d-f32")["status"] == model.ERROR
    run = doc["provenance"]["runs"][-1]
    figures = run["confirm"]["replay"]
    assert (figures["known"], figures["replays"], figures["pairs"]) == (1, 1, {"ahead": 1, "unused": 0}), figures
    replays = [w for w in run["worker_log"] if w["for"].startswith("replay")]
    assert [w["for"] for w in replays] == ["replay, ahead of its repeats"] and replays[0]["cases"] == 2, replays
    assert unused_workers(doc) == []


def unused_workers(doc) -> list[dict]:
    """The workers of the last run that took no task, but for the listing's."""
    return [w for w in doc["provenance"]["runs"][-1]["worker_log"] if not w["cases"] and w["for"] != "listing"]


def test_a_survey_starts_no_worker_that_takes_no_task(tmp_path):
    # sign [1d-f32] fails with a sticky error and fails again in every fresh worker: it is
    # never a replay suspect, so no replay worker may start (on the H200 flag_gems started
    # 14 ahead and took none). Two main workers: one runs out of tasks while the other runs.
    doc, _ = noise_survey(tmp_path, "unused", "--ops", "sign,neg", "--workers", "2")
    assert case(doc, "sign", "1d-f32")["status"] == model.WRONG
    log = doc["provenance"]["runs"][-1]["worker_log"]
    kinds = {w["for"].split(",")[0] for w in log}  # main workers lent to a lane: "main, then repeat 1"
    assert {"main", "repeat 1", "repeat 2", "native"} <= kinds and "replay" not in kinds, log
    assert unused_workers(doc) == [], log
    for worker in log:  # started, then ready, then ended; its time busy or idle
        assert worker["started_s"] <= worker["ready_s"] <= worker["ended_s"], worker
        assert worker["busy_s"] + worker["idle_s"] <= worker["ended_s"] - worker["ready_s"] + 0.02, worker


def test_a_failures_repeats_start_while_the_main_phase_still_runs(tmp_path):
    # Two main workers: one compiles floor's kernel, a compile that waits until two workers
    # niced for the confirmation have run neg (tests/fixtures/noisestack.py); the other runs
    # neg's cases, WRONG. Confirmed only after the main phase, the repeats could not start
    # before its last case: the compile would wait out its 120 s and this would fail.
    doc, _ = noise_survey(tmp_path, "streamed", "--ops", "neg,floor", "--workers", "2", "--timeout", "300", sleep="0",
                          extra_env={"NOISESTACK_CONFIRM_MARK": str(tmp_path / "confirming"),
                                     "NOISESTACK_MAIN_NICE": str(os.nice(0))})
    run = doc["provenance"]["runs"][-1]
    main_ended = run["main_phase_s"]
    repeats = [w for w in run["worker_log"] if w["for"].startswith("repeat")]
    assert {w["for"] for w in repeats} == {"repeat 1", "repeat 2"}, run["worker_log"]
    assert all(w["first_case_s"] < main_ended for w in repeats), (main_ended, repeats)
    # both neg cases, queued as they failed, each repeat in its lane at once (never chained
    # behind the one before: a worker start and a case per repeat on the critical path)
    assert run["confirm"]["passes"]["queued"][:2] == [2, 2]
    # the same records as repeats run after the main phase: WRONG every time, floor untouched
    for profile in ("2d-f32", "1d-f32"):
        assert case(doc, "neg", profile)["repeats"] == [model.WRONG] * 3
        assert case(doc, "neg", profile)["baseline"]["status"] == model.PASS
        assert case(doc, "floor", profile)["status"] == model.PASS
    assert unused_workers(doc) == []


def test_a_replacement_still_starting_when_every_task_has_ended_is_stopped(tmp_path):
    # Two workers. One takes floor [2d-f32] (its kernel compiles for 20 s); the other runs
    # frac (leaving its process poisoned) and trunc [2d-f32], which meets the sticky error:
    # that worker is lost with tasks still waiting, so a replacement starts before it takes
    # one. The --python given makes every worker after the first two take two minutes to
    # start; meanwhile the first worker takes the rest. Once every task has ended the
    # replacement is stopped, not waited for (on the H200: 15 s of a warm main phase).
    starts = tmp_path / "starts"
    starts.mkdir()
    python = wrapped_python(tmp_path, f"  *child.worker*) mkdir {starts}/1 2>/dev/null || mkdir {starts}/2 2>/dev/null || sleep 120 ;;")
    doc, _ = noise_survey(tmp_path, "replacement", "--ops", "floor,frac,trunc", "--workers", "2", "--repeats", "0",
                          "--baseline", "none", "--python", str(python), sleep="20",
                          extra_env={"FLAGOS_DOCTOR_FORK": "0"})  # the --python sees each worker's start
    assert all(doc["overloads"][name]["verdict"] != model.PENDING for name in ("floor", "frac", "trunc"))
    assert case(doc, "trunc", "2d-f32")["poison"] == "illegal memory access"
    assert case(doc, "trunc", "1d-f32")["status"] == model.PASS
    log = doc["provenance"]["runs"][-1]["worker_log"]
    (stopped,) = [w for w in log if not w["cases"]]
    assert stopped["for"] == ("main, replacing a worker lost under a case, stopped while starting: "
                              "every task had ended") and stopped["ready_s"] is None, log
    assert len(log) == 3, log


def test_a_case_meeting_another_cases_sticky_error_in_a_confirmation_pass_is_judged_alone(tmp_path):
    # sign [1d-f32] is WRONG and leaves its process poisoned; neg is WRONG, or reports the
    # illegal memory access in a poisoned process. Hints put sign [1d-f32] first (one worker):
    # neg [2d-f32] after it reports the sticky error (its worker replaced), neg [1d-f32] is
    # WRONG in the new one. A lane's worker takes its cases in the order they failed: sign
    # [1d-f32], then neg [1d-f32], poisoned there; counted, it would settle ERROR, as
    # pow_.Tensor [2d-i64] did in a cold torch_fl run on the H200. neg [2d-f32], whose own
    # main run met the sticky error, runs alone in each lane from the start.
    hints, _ = noise_survey(tmp_path, "hints", "--ops", "neg,sign", "--repeats", "0", "--baseline", "none")
    case(hints, "sign", "1d-f32")["seconds"] = 5.0
    (tmp_path / "hints.json").write_text(json.dumps(hints))
    doc, done = noise_survey(tmp_path, "pass-poison", "--ops", "neg,sign", "--workers", "1", "--hints", "hints.json")
    victim = case(doc, "neg", "1d-f32")
    assert victim["repeats"] == [model.WRONG] * 3, victim
    assert [d["alone"] for d in victim["repeat_details"]] == [{"poison": "illegal memory access", "after": 1}] * 2
    early = case(doc, "neg", "2d-f32")
    assert early["repeats"] == [model.ERROR, model.WRONG, model.WRONG] and early["status"] == model.WRONG, early
    assert "alone" not in json.dumps(early["repeat_details"])
    assert case(doc, "sign", "1d-f32")["status"] == model.WRONG
    with open(tmp_path / "pass-poison.census", encoding="utf-8") as handle:
        assert handle.read() == ("neg\t1d-f32\tWRONG\tkernel\nneg\t2d-f32\tWRONG\tkernel\n"
                                 "sign\t1d-f32\tWRONG\tkernel\nsign\t2d-f32\tPASS\tkernel\n")
    assert "other case(s) of its worker; alone in a fresh worker: WRONG" in done.stderr
    assert unused_workers(doc) == []


def test_the_alone_run_starts_when_the_pass_reports_the_case_and_only_for_a_case_after_others(tmp_path, monkeypatch):
    from flagos_doctor.survey.confirm import AloneAgain

    monkeypatch.setenv("PYTHONPATH", ENV["PYTHONPATH"])
    config = WorkerConfig(python=sys.executable, stack="noisestack", device=None, spec=SPEC, conf=None,
                          backend="flagos_python", timeout=60, scratch=str(tmp_path))
    alone = AloneAgain(config, 2)
    poisoned = {"profile": "2d-f32", "status": model.ERROR, "poison": "illegal memory access", "worker_order": 3}
    alone.consider(("neg", "2d-f32"), poisoned)
    alone.consider(("trunc", "2d-f32"), {**poisoned, "worker_order": 1})  # first in its worker: its own
    alone.consider(("sign", "2d-f32"), {**poisoned, "poison": None})
    assert list(alone.runs) == [("neg", "2d-f32")]
    assert alone.pool.slots() == 1  # under way before the lane ends: a slot starting its fresh worker
    found = {("neg", "2d-f32"): poisoned}
    alone.finish(found)
    assert found[("neg", "2d-f32")]["status"] == model.WRONG
    assert found[("neg", "2d-f32")]["alone"] == {"poison": "illegal memory access", "after": 2}


def test_a_timeout_spent_compiling_is_never_flaky():
    # A run the compile cap stopped (the compiler's time, not the kernel's answer) is left
    # out of the settling while another run remains; a timeout of running is not.
    case = {"profile": "2d-f32", "status": model.TIMEOUT, "route": "unknown", "detail": "still compiling ...",
            "spent": {"compile": 1800.0, "autotune": 0.0, "run": 0.1, "stopped_in": "compile"}}
    figures = {"flaky": 0}
    for _ in range(2):
        assert _apply_repeat(ResultsFile(os.devnull, {}), [("mm", case)], {("mm", "2d-f32"): {"status": model.PASS, "detail": ""}}, figures)
    assert case["status"] == model.PASS and case["repeats"] == [model.TIMEOUT, model.PASS, model.PASS]
    assert case["first_run"] == {"status": model.TIMEOUT, "detail": "still compiling ..."} and figures["flaky"] == 0
    assert settle([model.TIMEOUT, model.PASS, model.PASS]) == model.FLAKY  # a timeout of running
    assert settle([model.TIMEOUT, model.TIMEOUT], excused=[0]) == model.TIMEOUT


def test_the_cases_that_met_or_left_a_sticky_error_last_time_start_first_and_change_no_record(poison_run, tmp_path):
    # The first run (one worker, route order: poison_run) finds frac [1d-f32] leaving the
    # process poisoned and trunc [2d-f32] meeting it; given as hints (as the store's last run
    # of the same setup is), the second run starts those two first (their repeats, alone in
    # fresh workers, and the replacement of the worker trunc loses then start at once, not at
    # the main phase's end), with the same records.
    def records_of(doc):
        return {(n, c["profile"]): (c["status"], c.get("poisoned"), c.get("poisoned_by"))
                for n, e in doc["overloads"].items() for c in e["cases"]}

    folder, first, _ = poison_run
    records = records_of(first)
    assert first["provenance"]["runs"][-1].get("slow_first", {}).get("first", [])[:2] != ["frac/1d-f32", "trunc/2d-f32"]
    again, _ = noise_survey(tmp_path, "again", "--ops", "frac,trunc", "--workers", "1", "--hints",
                            str(folder / "poison.json"))
    records_again = records_of(again)
    assert again["provenance"]["runs"][-1]["slow_first"]["first"][:2] == ["frac/1d-f32", "trunc/2d-f32"]
    assert records_again == records
