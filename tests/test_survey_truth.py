"""Survey truth on CPU: failures run again (FLAKY), on the stack's native path (baseline), the
stock-torch stack, and the notice a finished survey gives when run again.

Real CLI runs in subprocesses with real workers; the truth fixture (tests/fixtures/
truthstack.py) has a kernel that is right every other call, one wrong the same way on its
native path, and one wrong on its own.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO_ROOT, run_cli
from flagos_doctor.results import model
from flagos_doctor.survey.pool import WorkerConfig, WorkerProcess

TRUTH_CONF = os.path.join(FIXTURES, "truth.conf")
TRUTH_SPEC = os.path.join(FIXTURES, "truth-spec.yaml")


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def truth_survey(tmp, name, *args, conf=TRUTH_CONF):
    """A survey of the truth stack with its own call counter; (results, census text, process)."""
    env = {"PYTHONPATH": os.pathsep.join([FIXTURES, REPO_ROOT]), "TRUTHSTACK_COUNTER": str(tmp / f"{name}.counter")}
    done = run_cli("survey", "--stack", "truthstack", "--conf", conf, "--spec", TRUTH_SPEC, "--no-store",
                   "-o", f"{name}.json", "--census", f"{name}.census", *args, env=env, cwd=str(tmp))
    assert done.returncode == 0, done.stderr
    with open(tmp / f"{name}.census", encoding="utf-8") as handle:
        return load(tmp / f"{name}.json"), handle.read(), done


def case(doc, name, profile):
    (found,) = [c for c in doc["overloads"][name]["cases"] if c["profile"] == profile]
    return found


@pytest.fixture(scope="module")
def truth_runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("truth")
    # One worker: the confirmation passes run one after another, so the order of neg's
    # calls (its counter) is the order of the passes. With more workers the two repeat
    # passes run at once and which of them gets the wrong call is a race (the census is
    # the same: test_confirmation_passes_at_once_give_the_census_of_passes_in_turn).
    return tmp, truth_survey(tmp, "first", "--workers", "1"), truth_survey(tmp, "second", "--workers", "1")


def test_a_case_right_every_other_call_is_flaky_and_counts_neither_way(truth_runs):
    _, (doc, census, done), _ = truth_runs
    flaky = case(doc, "neg", "2d-f32")
    # Its first call was wrong, the one of the 1d case right; run again: wrong, then right.
    assert flaky["status"] == model.FLAKY and flaky["repeats"] == [model.WRONG, model.WRONG, model.PASS]
    assert case(doc, "neg", "1d-f32")["status"] == model.PASS
    assert doc["overloads"]["neg"]["verdict"] == model.STRICT  # FLAKY is not a failure...
    assert doc["summary"]["statuses"][model.FLAKY] == 1
    assert "neg\t2d-f32\tFLAKY\tkernel\n" in census
    assert "FLAKY neg [2d-f32]: WRONG, WRONG, PASS" in done.stdout
    confirmed = doc["provenance"]["runs"][-1]["confirm"]
    assert confirmed["repeats"] == {"repeated": 9, "times": 2, "flaky": 1, "varied": 1}


def test_a_case_failing_every_run_in_two_ways_is_a_failure_not_flaky(truth_runs):
    # flag_gems 4.2.0's argmax on Triton 3.6 (H200): WRONG, then ERROR twice. Every run
    # failed: counted as FLAKY it would have dropped out of the verdict.
    _, (first, census_a, _), (second, census_b, _) = truth_runs
    for doc in (first, second):
        found = case(doc, "round", "2d-f32")
        assert found["repeats"] == [model.WRONG, model.ERROR, model.ERROR]
        assert found["status"] == model.ERROR and found["detail"] == "TypeError: function takes exactly 18 arguments (17 given)"
        assert found["first_run"] == {"status": model.WRONG, "detail": found["first_run"]["detail"]}
        assert "values differ" in found["first_run"]["detail"]
        assert doc["overloads"]["round"]["verdict"] == model.FAILED
    assert "round\t2d-f32\tERROR\tkernel\n" in census_a and "round\t2d-f32\tERROR\tkernel\n" in census_b


def test_a_kernel_right_on_its_first_call_only_fails_every_run_and_is_never_flaky(truth_runs):
    # flag_gems 4.2.0 on Triton 3.6: a kernel's first launch in a process works, later ones
    # raise. Judged on one call, a case passed or failed by whether its worker had run that
    # kernel before, and the repeats called 110 such cases FLAKY on the H200.
    _, (first, census_a, done), (second, census_b, _) = truth_runs
    for doc in (first, second):
        for profile in ("2d-f32", "1d-f32"):
            found = case(doc, "trunc", profile)
            assert found["status"] == model.ERROR and found["repeats"] == [model.ERROR] * 3, found
            assert "TypeError: function takes exactly 25 arguments (21 given)" in found["detail"]
            assert found["baseline"]["status"] == model.PASS
        assert doc["overloads"]["trunc"]["verdict"] == model.FAILED
    # The case that ran first in its process says it passed once: the second call failed.
    assert any(case(first, "trunc", p)["detail"].startswith("on its second call (the first passed): TypeError")
               for p in ("2d-f32", "1d-f32"))
    assert "trunc\t2d-f32\tERROR\tkernel\n" in census_a and "trunc\t1d-f32\tERROR\tkernel\n" in census_b


def test_a_failure_the_native_path_shares_is_counted_apart(truth_runs):
    _, (doc, census, done), _ = truth_runs
    for profile in ("2d-f32", "1d-f32"):
        shared = case(doc, "ceil", profile)
        assert shared["status"] == model.WRONG and shared["repeats"] == [model.WRONG] * 3
        assert shared["baseline"]["status"] == model.WRONG and "values differ" in shared["baseline"]["detail"]
        own = case(doc, "floor", profile)
        assert own["status"] == model.WRONG and own["baseline"] == {"status": model.PASS, "detail": ""}
        assert f"ceil\t{profile}\tWRONG+native\tkernel\n" in census
        assert f"floor\t{profile}\tWRONG\tkernel\n" in census
    assert doc["overloads"]["ceil"]["verdict"] == model.UNTESTED  # nothing left that tests the stack
    assert doc["overloads"]["floor"]["verdict"] == model.FAILED
    assert case(doc, "neg", "2d-f32")["baseline"]["status"] == model.PASS  # flaky cases get one too
    summary = doc["summary"]
    assert summary["native_also"] == 2 and summary["native_also_overloads"] == ["ceil"]
    assert doc["provenance"]["baseline"] == "truthstack.baseline()"
    assert "ceil [2d-f32]: WRONG, and truthstack.baseline() is WRONG too" in " ".join(done.stdout.split())


def test_two_runs_of_a_stack_with_a_flaky_case_give_the_same_census(truth_runs):
    _, (first, census_a, _), (second, census_b, _) = truth_runs
    assert census_a == census_b and first["census_sha256"] == second["census_sha256"]


def test_without_repeats_or_baseline_the_same_stack_is_blamed(truth_runs):
    tmp = truth_runs[0]
    # One worker, as in truth_runs: with two, an idle worker may take neg's 1d case while its
    # 2d case runs (nothing else left), and which of them gets the wrong call is a race.
    doc, census, _ = truth_survey(tmp, "bare", "--repeats", "0", "--baseline", "none", "--workers", "1")
    assert case(doc, "neg", "2d-f32")["status"] == model.WRONG and "repeats" not in case(doc, "neg", "2d-f32")
    assert doc["overloads"]["neg"]["verdict"] == model.BASIC_ONLY
    assert doc["overloads"]["ceil"]["verdict"] == model.FAILED
    assert "baseline" not in case(doc, "ceil", "2d-f32") and doc["summary"]["native_also"] == 0


def test_compare_says_two_runs_differ_only_in_flaky_cases(truth_runs):
    tmp = truth_runs[0]
    # Without round, whose settled ERROR (run again) differs from its first WRONG (not run
    # again): a difference that is not only FLAKY, as the compare says.
    with open(TRUTH_CONF, encoding="utf-8") as handle:
        routes = [line for line in handle if not line.startswith("round ")]
    conf = tmp / "no-round.conf"
    conf.write_text("".join(routes), encoding="utf-8")
    truth_survey(tmp, "once", "--repeats", "0", "--workers", "1", conf=str(conf))  # neg 2d-f32 stays WRONG
    truth_survey(tmp, "thrice", "--workers", "1", conf=str(conf))  # neg 2d-f32: WRONG, WRONG, PASS: FLAKY
    done = run_cli("survey", "--compare", str(tmp / "once.json"), str(tmp / "thrice.json"), "--json", "-", cwd=str(tmp))
    comparison = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert comparison["flaky_only"] is True
    (changed,) = comparison["cases_changed"]
    assert changed["overload"] == "neg" and changed["to"]["status"] == model.FLAKY
    assert changed["from"] == {"status": model.WRONG, "route": "kernel", "baseline": model.PASS}
    markdown = run_cli("survey", "--compare", str(tmp / "once.json"), str(tmp / "thrice.json"), "--markdown", "-",
                       cwd=str(tmp))
    assert "differ only in cases either side marks FLAKY (1)" in markdown.stdout


def test_a_finished_survey_run_again_says_it_ran_nothing(tmp_path):
    args = ("survey", "--stack", "demo", "--ops", "abs,neg", "--no-store", "-o", "d.json")
    first = run_cli(*args, cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr
    assert "nothing run" not in first.stderr
    doc = load(tmp_path / "d.json")
    started = doc["provenance"]["runs"][0]["started"]
    assert {doc["overloads"][name]["measured"] for name in ("abs", "neg")} == {started}
    again = run_cli(*args, cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert f"complete: 2 overloads from {tmp_path / 'd.json'}, nothing run; --rerun to run them again" in again.stderr
    assert f"verdicts measured by the run started {started}: 2" in again.stdout
    rerun = run_cli(*args, "--rerun", "--ops", "abs", cwd=str(tmp_path))
    assert rerun.returncode == 0 and "nothing run" not in rerun.stderr
    doc = load(tmp_path / "d.json")
    # the run that found everything done started no worker and left no run behind: the rerun is the second
    assert len(doc["provenance"]["runs"]) == 2
    assert doc["overloads"]["abs"]["measured"] == doc["provenance"]["runs"][1]["started"]
    assert doc["overloads"]["neg"]["measured"] == started


def test_stock_torch_stack_runs_torch_own_kernels(tmp_path):
    done = run_cli("survey", "--stack", "torch", "--conf", TRUTH_CONF, "--spec", TRUTH_SPEC, "--no-store",
                   "-o", "t.json", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    doc = load(tmp_path / "t.json")
    assert doc["provenance"]["stack"] == "torch" and doc["provenance"]["device"]["type"] == "cpu"
    assert doc["summary"]["verdicts"] == {model.STRICT: 6}
    assert doc["provenance"]["baseline"] is None  # stock torch is its own native path


def test_flag_gems_baseline_worker_runs_stock_torch_without_flag_gems(tmp_path):
    config = WorkerConfig(python=sys.executable, stack="flag_gems", device=None, spec=TRUTH_SPEC, conf=None,
                          backend="flagos_python", timeout=120, scratch=str(tmp_path), baseline=True)
    worker = WorkerProcess(config, 0)
    try:
        assert worker.ready["baseline"] == "stock torch"
        assert worker.ready["device"] == "cpu"  # torch's default accelerator on this machine
        records = []
        assert worker.attempt("ceil", ["2d-f32"], records.append) == "done"
        (result,) = [event.data for event in records if event.kind == "case"]
        assert result["status"] == model.PASS
    finally:
        worker.close()
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; from flagos_doctor import stacks; "
         "print(stacks.get('flag_gems').setup_baseline(), 'flag_gems' in sys.modules)"],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": REPO_ROOT}, timeout=300)
    assert probe.stdout.split() == ["cpu", "False"], probe.stderr


def test_baseline_environments_route_around_flagos_python():
    overloads = ["add.Tensor", "abs", "mm.out"]
    torch_fl = WorkerConfig(python="python3", stack="torch_fl", device=None, spec=None, conf=TRUTH_CONF,
                            backend="flagos_python", timeout=1, baseline=True, baseline_overloads=overloads)
    env = torch_fl.env(0)
    assert (env["FLAGOS_OP_add__Tensor"], env["FLAGOS_OP_abs"], env["FLAGOS_OP_mm__out"]) == ("cuda",) * 3
    assert "FLAGOS_OP_abs" not in WorkerConfig(**{**torch_fl.__dict__, "baseline": False}).env(0)
    metax = WorkerConfig(**{**torch_fl.__dict__, "native_route": "metax"}).env(0)
    assert metax["FLAGOS_OP_abs"] == "metax"


def test_the_demo_reads_flagos_op_overrides_as_torch_fl_does():
    code = ("import flagos_doctor.demo as demo, torch; x = torch.ones(3).to('flagos'); "
            "print(sorted(set(demo.registered_overloads) & {'abs', 'neg'}))")
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "FLAGOS_OP_abs": "cpu"}
    env.pop("FLAGOS_BACKEND_CONFIG", None)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.stdout.strip() == "['neg']", done.stderr


def test_the_report_names_the_failures_the_native_path_shares(truth_runs):
    from flagos_doctor.report.bundle import survey_piece
    from flagos_doctor.report.markdown import render

    tmp = truth_runs[0]
    text = render({"survey": survey_piece(str(tmp / "first.json"))})
    assert "- failures the native path shares (not counted): 2 in `ceil`" in text
    assert "FLAKY 1" in text  # the statuses line
    assert "- `ceil` [2d-f32]: WRONG, and truthstack.baseline() is WRONG too" in text
    assert "- `neg` [2d-f32]: WRONG, WRONG, PASS" in text


def test_a_survey_killed_while_confirming_carries_on_from_the_last_pass(tmp_path, truth_runs):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([FIXTURES, REPO_ROOT]),
           "TRUTHSTACK_COUNTER": str(tmp_path / "counter")}
    args = [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "truthstack", "--conf", TRUTH_CONF,
            "--spec", TRUTH_SPEC, "--no-store", "-o", "s.json", "--workers", "1"]
    survey = subprocess.Popen(args, cwd=str(tmp_path), env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
    seen = []
    for line in survey.stderr:  # kill it once the first repeats are applied and saved
        seen.append(line)
        if "again (2 of 2)" in line:
            survey.send_signal(signal.SIGKILL)
            break
    survey.stderr.read()
    assert survey.wait(timeout=300) == -signal.SIGKILL, "".join(seen)
    stopped = load(tmp_path / "s.json")
    failing = [c for e in stopped["overloads"].values() for c in e["cases"] if c["status"] != model.PASS]
    # the first repeats are saved; the second ones too when their lane had ended before the
    # kill landed (the lanes stream beside the main phase): either is a checkpoint
    assert failing and len({len(c["repeats"]) for c in failing}) == 1 and len(failing[0]["repeats"]) >= 2
    assert all("baseline" not in c for c in failing) or len(failing[0]["repeats"]) == 3
    done = subprocess.run(args, cwd=str(tmp_path), env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "(1 of 2)" not in done.stderr  # carried on
    final = load(tmp_path / "s.json")
    failing = [c for e in final["overloads"].values() for c in e["cases"] if c["status"] != model.PASS]
    assert failing and all(len(c["repeats"]) == 3 and "baseline" in c for c in failing)
    assert final["summary"]["native_also"] == 2
    _, (uninterrupted, _, _), _ = truth_runs
    assert final["census_sha256"] == uninterrupted["census_sha256"]


def test_confirmation_passes_at_once_give_the_census_of_passes_in_turn(tmp_path):
    # ceil (wrong here and on the native path) and floor (wrong here only), 2 profiles
    # each: 4 failures, each run twice more and once on the native path. One worker runs
    # the three passes one after another; three run them side by side, one worker each.
    def confirmed(name, workers):
        doc, census, done = truth_survey(tmp_path, name, "--ops", "abs,ceil,floor", "--workers", workers)
        cases = {(n, c["profile"]): (c["status"], c.get("repeats"), c.get("baseline"))
                 for n, e in doc["overloads"].items() for c in e["cases"]}
        verdicts = {n: e["verdict"] for n, e in doc["overloads"].items()}
        return census, cases, verdicts, doc["summary"], doc["provenance"]["runs"][-1]["confirm"]

    in_turn = confirmed("turn", "1")
    at_once = confirmed("once", "3")
    assert at_once[:4] == in_turn[:4]
    cases = in_turn[1]
    assert cases[("ceil", "2d-f32")] == (model.WRONG, [model.WRONG] * 3, {"status": model.WRONG, "detail": cases[("ceil", "2d-f32")][2]["detail"]})
    assert cases[("floor", "1d-f32")][1:] == ([model.WRONG] * 3, {"status": model.PASS, "detail": ""})
    assert in_turn[3]["native_also"] == 2

    def passes(figures):  # when each lane ended is timing; how many there were and how, is not
        shape = dict(figures["passes"])
        ended = shape.pop("ended_s")
        # ended_s to 0.1 s, seconds to 0.001 s: 0 for a lane done before the main phase was
        assert len(ended) == 3 and all(0 <= seconds <= figures["seconds"] + 0.05 for seconds in ended)
        # by the main phase's end every failure is queued for its first repeat and the native
        # path; its second repeat is queued when the first ends
        queued = shape.pop("queued")
        assert queued[0] == queued[2] == 4 and queued[1] <= 4
        # main workers with no task left lent to the repeat lanes, one each, none to the
        # native one, none when repeats are chained (one worker)
        lent = shape.pop("lent")
        assert lent[2] == 0 and sum(lent) <= shape["workers"] and (shape["workers"] > 1 or lent == [0, 0, 0])
        return shape
    # the lanes stream side by side, whatever --workers
    # (a worker a lane: four cases of milliseconds never outlast a worker's start)
    assert passes(in_turn[4]) == {"count": 3, "at_once": 3, "workers": 1, "started": [1, 1, 1]}
    assert passes(at_once[4]) == {"count": 3, "at_once": 3, "workers": 3, "started": [1, 1, 1]}
    for figures in (in_turn[4], at_once[4]):
        assert figures["repeats"] == {"repeated": 4, "times": 2, "flaky": 0}
        assert figures["baseline"]["cases"] == 4 and figures["baseline"]["native_also"] == 2


def test_bad_confirmation_options_are_one_line_exit_2(tmp_path):
    for bad in (["--baseline", "stock"], ["--repeats", "-1"]):
        done = run_cli("survey", "--stack", "demo", "--ops", "abs", "--no-store", "-o", "x.json", *bad, cwd=str(tmp_path))
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr


def test_settle_names_flaky_only_a_case_that_passed_once_and_failed_once():
    from flagos_doctor.results.verdicts import settle

    assert settle([model.WRONG, model.WRONG, model.WRONG]) == model.WRONG
    assert settle([model.WRONG, model.PASS, model.WRONG]) == model.FLAKY
    assert settle([model.ERROR, model.INVALID_CASE]) == model.FLAKY  # not a failure every time
    assert settle([model.WRONG, model.ERROR, model.ERROR]) == model.ERROR
    assert settle([model.ERROR, model.WRONG]) == model.WRONG  # a tie: model.FAILURES' order
    assert settle([model.CRASH, model.TIMEOUT, model.CRASH]) == model.CRASH
