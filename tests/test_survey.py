"""The survey end to end on CPU: the demo stack, the fault stack, kill -9 and resume, refusals.

Everything runs the real CLI in subprocesses with real workers: real segfaults, aborts and
hangs (tests/fixtures/faultstack.py), a real SIGKILL of the parent.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import FAULT_ENV, FAULT_ENV_WITHOUT_GEMS, FIXTURES, REPO_ROOT, run_cli
from flagos_doctor.results import census, comparable, model, verdicts

FAULT_CONF = os.path.join(FIXTURES, "fault.conf")


def survey(tmp, *args, env=None, timeout=300):
    return run_cli("survey", *args, env=env, cwd=str(tmp), timeout=timeout)


def load(path):
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def outcomes(doc):
    """The overloads of a results document without the times (they differ run to run): each
    case's, and when each verdict was measured."""
    timing = ("seconds", "device_seconds", "worker", "worker_order", "spent")  # which worker, and where a timeout's time went
    return {name: {**{k: v for k, v in entry.items() if k != "measured"},
                   "cases": [{k: v for k, v in c.items() if k not in timing} for c in entry["cases"]]}
            for name, entry in doc["overloads"].items()}


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory):
    """One uninterrupted survey of the demo stack: (folder, results, census text, process)."""
    tmp = tmp_path_factory.mktemp("demo")
    done = survey(tmp, "--stack", "demo", "--no-store", "-o", "demo.json", "--census", "demo.census")
    assert done.returncode == 0, done.stderr
    with open(tmp / "demo.census", encoding="utf-8") as handle:
        text = handle.read()
    return tmp, load(tmp / "demo.json"), text, done


def test_demo_survey_results_file_contract(demo_run):
    tmp, doc, census_text, done = demo_run
    assert doc["schema"] == model.RESULTS_SCHEMA
    summary = doc["summary"]
    for key in ("registered", "tested", "basic", "strict", "verdicts", "statuses"):
        assert key in summary
    assert summary["registered"] == len(doc["routes"]) == len(doc["overloads"]) == 47
    assert doc["complete"] and model.PENDING not in summary["verdicts"]
    assert sum(summary["verdicts"].values()) == 47
    for name, entry in doc["overloads"].items():
        assert entry["verdict"] == verdicts.verdict(entry["cases"])
        assert [case["profile"] for case in entry["cases"]] == entry["profiles"]
        for case in entry["cases"]:
            assert {"profile", "status", "route", "detail"} <= set(case)
            assert case["seconds"] >= case.get("device_seconds", 0) >= 0
            if case["status"] == model.PASS:
                # It ran on the device, so that call was timed; a fast kernel can round to 0.0
                # at the recorded resolution, so only the presence and the sign are certain.
                assert "device_seconds" in case and case["device_seconds"] >= 0
            assert case["status"] in model.CASE_STATUSES
    prov = doc["provenance"]
    assert prov["runs"][-1]["worker_starts"]["count"] >= 1 and prov["runs"][-1]["worker_starts"]["max_s"] > 0
    assert "this run: " in done.stdout and "worker start(s)" in done.stdout
    for key in ("stack", "torch", "triton", "flag_gems", "python", "device", "routes", "harness_version", "spec", "started", "ended"):
        assert key in prov, key
    assert prov["stack"] == "demo" and prov["device"]["type"] == "flagos" and prov["device"]["count"] == 1
    assert prov["routes"]["route_set_sha256"] == doc["comparable"]["route_set_sha256"]
    assert prov["routes"]["conf_sha256"] and prov["routes"]["conf"].endswith("backends_demo.conf")
    assert prov["spec"]["profiles"] and prov["spec"]["tolerances"]
    # The census: sorted (overload, profile, status, route) lines and nothing else.
    assert doc["census_sha256"] == hashlib.sha256(census_text.encode()).hexdigest()
    lines = census_text.splitlines()
    assert lines == sorted(lines) and all(len(line.split("\t")) == 4 for line in lines)
    assert len(lines) == sum(len(entry["cases"]) for entry in doc["overloads"].values())
    assert not os.path.exists(tmp / "demo.json.journal")  # a complete run leaves no journal
    assert "STRICT" in done.stdout and "census sha256" in done.stdout


def test_demo_evidence_kernel_and_silent_cpu_fallback(demo_run):
    _, doc, _, done = demo_run
    overloads = doc["overloads"]
    erf = overloads["erf"]["cases"]
    assert erf and all(case["route"] == model.ROUTE_FALLBACK for case in erf if case["status"] == model.PASS)
    for name in ("abs", "abs.out", "mm", "add.Tensor", "sort"):
        ran = [case for case in overloads[name]["cases"] if case["status"] == model.PASS]
        assert ran and all(case["route"] == model.ROUTE_KERNEL for case in ran), name
    for case in overloads["abs"]["cases"]:
        if case["status"] == model.INVALID_CASE:
            assert case["route"] == model.ROUTE_NONE
    summary = doc["summary"]
    assert summary["fallback_overloads"] == ["erf"]
    assert summary["fallback_passes"] == sum(case["status"] == model.PASS for case in erf)
    assert "through the CPU fallback" in done.stdout and "erf" in done.stdout


@pytest.fixture(scope="module")
def fault_run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fault")
    start = time.monotonic()
    done = survey(tmp, "--stack", "faultstack", "--conf", FAULT_CONF, "--timeout", "5", "--no-store",
                  "-o", "fault.json", env=FAULT_ENV)
    assert done.returncode == 1, done.stderr  # trunc and frac crash, sinh times out: exit 1
    return load(tmp / "fault.json"), done, time.monotonic() - start


def _case(doc, name, profile):
    (case,) = [c for c in doc["overloads"][name]["cases"] if c["profile"] == profile]
    return case


def test_fault_stack_every_status_and_verdict(fault_run):
    doc, done, _ = fault_run
    over = doc["overloads"]
    verdict = {name: entry["verdict"] for name, entry in over.items()}
    assert verdict == {
        "abs": model.STRICT, "erf": model.STRICT, "floor": model.FAILED, "ceil": model.FAILED,
        "trunc": model.BASIC_ONLY, "frac": model.BASIC_ONLY, "sinh": model.BASIC_ONLY, "cosh": model.BASIC_ONLY,
        "no_such_op": model.NO_SCHEMA, "is_nonzero": model.UNTESTED, "_efficient_attention_backward": model.UNTESTED,
        "log1p": model.FAILED, "expm1": model.STRICT,
    }
    # Every status a case can get in one run; FLAKY needs a kernel whose outcome changes
    # when run again (tests/test_survey_truth.py), and the fault stack's failures do not.
    assert set(doc["summary"]["statuses"]) == set(model.CASE_STATUSES) - {model.FLAKY}
    for name in ("floor", "ceil", "trunc", "frac", "sinh", "cosh"):  # each failure confirmed twice more
        failed = [c for c in over[name]["cases"] if c["status"] in model.FAILURES]
        assert failed and all(c["repeats"] == [c["status"]] * 3 for c in failed), name
    assert {c["status"] for c in over["floor"]["cases"]} <= {model.ERROR, model.INVALID_CASE}
    assert {c["status"] for c in over["ceil"]["cases"]} <= {model.WRONG, model.INVALID_CASE}
    segv = _case(doc, "trunc", "1d-f32")
    assert segv["status"] == model.CRASH and segv["signal"] == "SIGSEGV" and "stderr_tail" in segv
    assert segv["route"] == model.ROUTE_KERNEL  # its dispatch line was printed before it died
    abort = _case(doc, "frac", "1d-f32")
    assert abort["status"] == model.CRASH and abort["signal"] == "SIGABRT"
    hang = _case(doc, "sinh", "1d-f32")
    assert hang["status"] == model.TIMEOUT and "5s" in hang["detail"]
    poison = _case(doc, "cosh", "1d-f32")
    assert poison["status"] == model.ERROR and poison["poison"] == "illegal memory access"
    # The cases after each fatal one ran in a fresh worker and were recorded once each.
    for name in ("trunc", "frac", "sinh", "cosh"):
        profiles = [c["profile"] for c in over[name]["cases"]]
        assert profiles == over[name]["profiles"] and len(profiles) == 7, name
        after = [c for c in over[name]["cases"] if c["profile"] in ("2d-f16", "2d-f32-strided")]
        assert all(c["status"] == model.PASS for c in after), name
    assert over["no_such_op"]["cases"] == [
        {"profile": "-", "status": model.NO_SCHEMA, "route": model.ROUTE_NONE, "detail": over["no_such_op"]["cases"][0]["detail"]}
    ]
    assert {c["status"] for c in over["_efficient_attention_backward"]["cases"]} == {model.UNVERIFIABLE}
    missing = [c for c in over["log1p"]["cases"] if c["status"] != model.INVALID_CASE]
    assert missing and {c["status"] for c in missing} == {model.MISSING_FUNCTION}
    assert all(c["detail"].startswith("flag_gems 5.0.2 has no flag_gems.ops.log1p (AttributeError: ") for c in missing)
    assert all(c["route"] == model.ROUTE_KERNEL for c in missing)  # torch_fl routed it; the lookup failed
    summary = doc["summary"]
    assert summary["tested"] == 10 and summary["basic"] == 7 and summary["strict"] == 3
    assert summary["verdicts"][model.NO_SCHEMA] == 1
    assert summary["missing_functions"] == {"log1p": "flag_gems.ops.log1p"}
    assert summary["statuses"][model.MISSING_FUNCTION] == len(missing)
    assert "replaced" in done.stderr and "SIGSEGV" in done.stdout
    assert "1 overload calls a function flag_gems 5.0.2 lacks: log1p -> flag_gems.ops.log1p" in " ".join(done.stdout.split())


def test_pending_then_resume_to_complete(tmp_path):
    first = survey(tmp_path, "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,no_such_op",
                   "--no-store", "-q", "-o", "f.json", env=FAULT_ENV_WITHOUT_GEMS)
    assert first.returncode == 0, first.stderr
    doc = load(tmp_path / "f.json")
    assert not doc["complete"]
    assert doc["summary"]["verdicts"][model.PENDING] == 11  # the 13 routes of fault.conf but abs, no_such_op
    assert doc["overloads"]["abs"]["verdict"] == model.STRICT and doc["overloads"]["floor"]["verdict"] == model.PENDING
    second = survey(tmp_path, "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,floor",
                    "--no-store", "-q", "-o", "f.json", env=FAULT_ENV_WITHOUT_GEMS)
    assert second.returncode == 0, second.stderr
    doc2 = load(tmp_path / "f.json")
    assert doc2["overloads"]["abs"] == doc["overloads"]["abs"]  # not run again
    assert doc2["overloads"]["floor"]["verdict"] == model.FAILED
    assert len(doc2["provenance"]["runs"]) == 2


def test_sigkill_mid_run_then_resume_gives_an_identical_census(demo_run, tmp_path):
    _, _, expected, _ = demo_run
    cmd = [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--no-store", "-q",
           "-o", "k.json", "--census", "k.census"]
    proc = subprocess.Popen(cmd, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    journal = tmp_path / "k.json.journal"
    deadline = time.monotonic() + 120
    killed_with = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if journal.exists():
            killed_with = journal.read_text().count('"kind": "case"')
            if killed_with >= 60:
                proc.send_signal(signal.SIGKILL)
                break
        time.sleep(0.005)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the survey ended before it could be killed"
    doc = load(tmp_path / "k.json")
    assert not doc["complete"] and model.PENDING in doc["summary"]["verdicts"]
    assert not (tmp_path / "k.census").exists()
    kept = journal.read_text().count('"kind": "case"')
    assert kept >= killed_with
    done = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "k.census").read_text() == expected
    resumed = load(tmp_path / "k.json")
    assert resumed["complete"] and len(resumed["provenance"]["runs"]) == 2
    assert resumed["provenance"]["runs"][1]["selected"] == 47
    assert not journal.exists()


def test_sigterm_ends_the_survey_like_ctrl_c_and_keeps_what_was_recorded(tmp_path):
    # sinh hangs on its third profile (1d-f32): SIGTERM arrives while that case runs.
    cmd = [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "faultstack", "--conf", FAULT_CONF,
           "--ops", "abs,sinh", "--workers", "1",  # one worker: sinh's cases in order, the third in flight
           "--timeout", "120", "--no-store", "-q", "-o", "t.json"]
    env = dict(os.environ, **FAULT_ENV_WITHOUT_GEMS)
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = tmp_path / "t.json.journal"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None:
        text = journal.read_text() if journal.exists() else ""
        if '"kind": "end", "overload": "abs"' in text and text.count('"overload": "sinh"') >= 3:
            time.sleep(0.5)  # sinh's 1d-f32 case is under way
            proc.send_signal(signal.SIGTERM)
            break
        time.sleep(0.01)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    doc = load(tmp_path / "t.json")
    assert doc["overloads"]["abs"]["verdict"] == model.STRICT
    partial = doc["overloads"]["sinh"]
    assert partial["verdict"] == model.PENDING
    assert [case["profile"] for case in partial["partial_cases"]] == ["2d-f32", "4d-f32"]
    assert journal.exists()  # kept for the resume


def test_pooled_workers_share_one_overloads_cases(tmp_path):
    # sinh hangs on 1d-f32 until the timeout (10 s: the other worker's start and its 13 cases
    # take a second or two, forked, on a busy machine). With one task per case (the default) the other
    # worker runs abs and sinh's other profiles meanwhile: no replacement is ever started.
    # No confirmation: a TIMEOUT's repeats would each wait out the 10 s again, and this is
    # about the main phase's tasks (tests/test_survey_noise.py has the confirmation's).
    quiet = ("--repeats", "0", "--baseline", "none")
    done = survey(tmp_path, "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "sinh,abs", "--workers", "2",
                  "--timeout", "10", "--no-store", "-q", "-o", "s.json", *quiet, env=FAULT_ENV_WITHOUT_GEMS)
    assert done.returncode == 1, done.stderr  # sinh's TIMEOUT
    doc = load(tmp_path / "s.json")
    cases = {case["profile"]: case["status"] for case in doc["overloads"]["sinh"]["cases"]}
    assert cases.pop("1d-f32") == model.TIMEOUT and len(cases) == 6
    assert doc["provenance"]["runs"][0]["worker_starts"]["count"] == 2
    assert doc["provenance"]["runs"][0]["tasks"] == "cases"
    # --tasks overloads: one worker has all of sinh; after the hang a replacement runs the rest.
    done = survey(tmp_path, "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "sinh,abs", "--workers", "2",
                  "--tasks", "overloads", "--timeout", "10", "--no-store", "-q", "-o", "o.json", *quiet,
                  env=FAULT_ENV_WITHOUT_GEMS)
    assert done.returncode == 1, done.stderr
    whole = load(tmp_path / "o.json")
    assert outcomes(whole) == outcomes(doc)
    assert whole["provenance"]["runs"][0]["worker_starts"]["count"] == 3
    assert whole["provenance"]["runs"][0]["tasks"] == "overloads"
    bad = survey(tmp_path, "--stack", "demo", "--tasks", "some", "--no-store", "-o", "b.json")
    assert bad.returncode == 2 and "--tasks must be one of cases, overloads" in bad.stderr


def test_plan_tasks_one_case_or_one_overload_each(tmp_path):
    from flagos_doctor.survey.command import plan_tasks
    from flagos_doctor.results.resultsfile import ResultsFile

    journal = ResultsFile(str(tmp_path / "p.json"), {})
    journal.profiles["b"] = ["x", "y", "z"]
    journal.partial["b"] = [{"profile": "y", "status": "PASS", "route": "kernel", "detail": ""}]
    journal.profiles["c"] = ["x"]
    journal.partial["c"] = [{"profile": "x", "status": "PASS", "route": "kernel", "detail": ""}]
    assert plan_tasks(["a", "b", "c"], journal, ["x", "y", "z"], "cases") == [
        ("a", ["x"]), ("a", ["y"]), ("a", ["z"]), ("b", ["x"]), ("b", ["z"]), ("c", [])]
    assert plan_tasks(["a", "b", "c"], journal, ["x", "y", "z"], "overloads") == [
        ("a", None), ("b", ["x", "z"]), ("c", [])]


def test_cases_slow_last_time_are_handed_out_first(fault_run, tmp_path):
    # The full fault survey, filed in a store: sinh's hang on 1d-f32 took the 5 s timeout.
    doc, _, _ = fault_run
    assert doc["overloads"]["sinh"]["cases"][2]["seconds"] >= 5  # a TIMEOUT is timed too
    filed = tmp_path / "store" / "survey" / "faultstack-x" / (comparable.fingerprint(doc["comparable"]) + ".json")
    filed.parent.mkdir(parents=True)
    filed.write_text(json.dumps(doc))
    # no confirmation: sinh's repeats would wait out the timeout twice more in each survey;
    # neither op is flag_gems-bound, so no worker imports it (the fingerprint leaves it out)
    args = ("--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,sinh", "--timeout", "5", "-q",
            "--repeats", "0", "--baseline", "none")
    done = survey(tmp_path, *args, "--store", str(tmp_path / "store"), "-o", "h.json", env=FAULT_ENV_WITHOUT_GEMS)
    assert done.returncode == 1, done.stderr  # sinh's TIMEOUT
    run = load(tmp_path / "h.json")["provenance"]["runs"][0]
    assert run["slow_first"]["hints"] == [str(filed)]
    assert run["slow_first"]["first"][0] == "sinh/1d-f32"
    # --no-store takes no hints; the outcomes are the same in either order.
    done = survey(tmp_path, *args, "--store", str(tmp_path / "store"), "--no-store", "-o", "n.json",
                  env=FAULT_ENV_WITHOUT_GEMS)
    assert done.returncode == 1, done.stderr
    plain = load(tmp_path / "n.json")
    assert "slow_first" not in plain["provenance"]["runs"][0]
    assert outcomes(plain) == outcomes(load(tmp_path / "h.json"))


def test_slow_first_orders_only_the_slow_tasks():
    from flagos_doctor.survey import history

    hints = {("a", "x"): 0.2, ("b", "x"): 30.0, ("b", "y"): 0.1, ("c", "x"): 2.0, ("c", "y"): 1.5}
    tasks = [("a", ["x"]), ("b", ["x"]), ("b", ["y"]), ("c", ["x"]), ("c", ["y"]), ("d", ["x"])]
    assert history.slow_first(tasks, hints) == ([
        ("b", ["x"]), ("c", ["x"]), ("c", ["y"]), ("a", ["x"]), ("b", ["y"]), ("d", ["x"])], 3)
    whole = [("a", None), ("b", None), ("c", None), ("d", None)]
    assert history.slow_first(whole, hints) == ([("b", None), ("c", None), ("a", None), ("d", None)], 2)
    assert history.slow_first(tasks, {}) == (tasks, 0)
    partial = {"overloads": {"m": {"cases": [], "partial_cases": [{"profile": "x", "seconds": 99.0}]}}}
    assert history.from_document(partial) == {("m", "x"): 99.0}


def test_cases_that_met_or_left_a_sticky_error_last_time_go_first():
    from flagos_doctor.survey import history

    # the H200's torch_fl cold run: three cases met an illegal memory access in their worker,
    # one was found to leave it (native_batch_norm_backward [2d-f32-strided], silent itself)
    document = history.read_document(os.path.join(REPO_ROOT, "surveys", "h200", "torch_fl-1adbc97-cold.results.json"))
    assert history.sticky_cases(document) == {
        ("native_batch_norm_backward", "2d-f16"), ("native_batch_norm_backward", "4d-f32"),
        ("nll_loss_backward", "4d-f32"), ("native_batch_norm_backward", "2d-f32-strided")}
    hints = {("a", "x"): 0.2, ("b", "x"): 30.0, ("c", "x"): 2.0}
    tasks = [("a", ["x"]), ("b", ["x"]), ("c", ["x"]), ("d", ["x"]), ("d", ["y"])]
    # sticky first (their own order), then the slow, slowest first; a sticky slow case once
    assert history.slow_first(tasks, hints, {("d", "y"), ("c", "x")}) == (
        [("c", ["x"]), ("d", ["y"]), ("b", ["x"]), ("a", ["x"]), ("d", ["x"])], 3)
    whole = [("a", None), ("b", None), ("d", None)]
    assert history.slow_first(whole, hints, {("d", "y")}) == ([("d", None), ("b", None), ("a", None)], 2)
    assert history.slow_first(tasks, hints, set()) == history.slow_first(tasks, hints)


def test_results_from_another_setup_are_refused(demo_run, tmp_path):
    src, _, _, _ = demo_run
    shutil.copy(src / "demo.json", tmp_path / "r.json")
    before = (tmp_path / "r.json").read_text()
    other_conf = survey(tmp_path, "--stack", "demo", "--conf", FAULT_CONF, "--no-store", "-o", "r.json")
    assert other_conf.returncode == 2
    assert "route_set_sha256" in other_conf.stderr and "r.json" in other_conf.stderr
    assert len(other_conf.stderr.strip().splitlines()) == 1
    spec = tmp_path / "spec.yaml"
    spec.write_text("name: one\nprofiles:\n  - {name: 2d-f32, shape: [8, 8], dtype: float32}\n"
                    "tolerances:\n  float32: {atol: 1.0e-3, rtol: 1.0e-3}\nrandom_ops: [dropout]\n")
    other_spec = survey(tmp_path, "--stack", "demo", "--spec", str(spec), "--no-store", "-o", "r.json")
    assert other_spec.returncode == 2 and "spec_sha256" in other_spec.stderr
    harness = json.loads(before)
    harness["comparable"]["harness_version"] = "flagos-doctor-survey/0"
    (tmp_path / "h.json").write_text(json.dumps(harness))
    other_harness = survey(tmp_path, "--stack", "demo", "--no-store", "-o", "h.json")
    assert other_harness.returncode == 2 and "harness_version" in other_harness.stderr
    assert (tmp_path / "r.json").read_text() == before  # untouched


def test_rerun_replaces_only_the_selected_ops_and_files_in_the_store(demo_run, tmp_path):
    src, doc, _, _ = demo_run
    shutil.copy(src / "demo.json", tmp_path / "r.json")
    store = tmp_path / "store"
    done = survey(tmp_path, "--stack", "demo", "--rerun", "--ops", "abs,erf", "--store", str(store), "-q", "-o", "r.json")
    assert done.returncode == 0, done.stderr
    after = load(tmp_path / "r.json")
    assert outcomes(after) == outcomes(doc)  # same outcomes (deterministic cases)
    assert after["census_sha256"] == doc["census_sha256"]
    runs = after["provenance"]["runs"]
    assert len(runs) == 2 and runs[1]["rerun"] and runs[1]["selected"] == 2
    filed = list((store / "survey").rglob("*.json"))
    assert len(filed) == 1 and filed[0].parent.name == "demo-0.1.0"
    assert load(filed[0])["census_sha256"] == doc["census_sha256"]


def test_isolation_workers_and_json_stdout_agree_with_the_pooled_run(demo_run, tmp_path):
    _, doc, expected, _ = demo_run
    ops = ["abs", "erf", "sort"]
    isolated = survey(tmp_path, "--stack", "demo", "--ops", ",".join(ops), "--isolation", "per-overload",
                      "--no-store", "-q", "-o", "i.json", "--census", "i.census")
    assert isolated.returncode == 0, isolated.stderr
    wanted = "".join(line + "\n" for line in expected.splitlines() if line.split("\t")[0] in ops)
    assert (tmp_path / "i.census").read_text() == wanted
    # The same ops on two workers, the results on stdout: the pooled run's census of them
    # (a census_sha256 is its census text's: test_demo_survey_results_file_contract).
    pooled = survey(tmp_path, "--stack", "demo", "--ops", ",".join(ops), "--workers", "2", "--no-store", "-o", "w.json",
                    "--json", "-")
    assert pooled.returncode == 0, pooled.stderr
    assert json.loads(pooled.stdout)["census_sha256"] == hashlib.sha256(wanted.encode()).hexdigest()
    assert doc["census_sha256"] == hashlib.sha256(expected.encode()).hexdigest()


def test_routes_listed_by_flag_gems(tmp_path, flag_gems_env):
    # flag_gems 5.0.2 registers 433 overloads (its own list, read in a child); abs runs on the demo.
    done = survey(tmp_path, "--stack", "demo", "--routes", "flag_gems", "--ops", "abs", "--no-store", "-q",
                  "-o", "g.json", env=flag_gems_env)
    assert done.returncode == 0, done.stderr
    doc = load(tmp_path / "g.json")
    assert doc["provenance"]["routes"]["source"] == "flag_gems" and len(doc["routes"]) == 433
    assert doc["overloads"]["abs"]["verdict"] == model.STRICT


def test_routes_listed_by_the_stack_and_bad_input(tmp_path):
    listed = survey(tmp_path, "--stack", "demo", "--routes", "stack", "--ops", "abs", "--no-store", "-q", "-o", "l.json")
    assert listed.returncode == 0, listed.stderr
    doc = load(tmp_path / "l.json")
    assert doc["provenance"]["routes"]["source"] == "stack" and "erf" not in doc["routes"]  # erf has no kernel
    assert len(doc["routes"]) == 46
    missing = survey(tmp_path, "--stack", "no_such_stack_module", "--conf", FAULT_CONF, "--no-store", "-o", "m.json")
    assert missing.returncode == 2 and "no_such_stack_module" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    unknown_op = survey(tmp_path, "--stack", "demo", "--ops", "not_routed", "--no-store", "-o", "u.json")
    assert unknown_op.returncode == 2 and "not_routed" in unknown_op.stderr


def test_verdicts_and_census_are_pure_functions():
    case = lambda p, s, r="kernel": {"profile": p, "status": s, "route": r, "detail": ""}  # noqa: E731
    assert verdicts.verdict(None) == model.PENDING
    assert verdicts.verdict([case("a", "PASS"), case("b", "INVALID_CASE", "-")]) == model.STRICT
    assert verdicts.verdict([case("a", "PASS"), case("b", "CRASH")]) == model.BASIC_ONLY
    assert verdicts.verdict([case("a", "WRONG"), case("b", "UNVERIFIABLE")]) == model.FAILED
    assert verdicts.verdict([case("a", "INVALID_CASE"), case("b", "UNVERIFIABLE")]) == model.UNTESTED
    assert verdicts.verdict([case("-", "NO_SCHEMA", "-")]) == model.NO_SCHEMA
    one = {"x": {"cases": [case("b", "PASS"), case("a", "WRONG")]}, "w": {"cases": [case("a", "PASS", "cpu_fallback")]}}
    two = {"w": {"cases": [dict(case("a", "PASS", "cpu_fallback"), detail="other", seconds=3)]},
           "x": {"cases": [case("a", "WRONG"), case("b", "PASS")]}}
    assert census.census_text(one) == census.census_text(two) == "w\ta\tPASS\tcpu_fallback\nx\ta\tWRONG\tkernel\nx\tb\tPASS\tkernel\n"
    summary = verdicts.summarize(["w", "x", "y"], one)
    assert summary["verdicts"] == {model.STRICT: 1, model.BASIC_ONLY: 1, model.PENDING: 1}
    assert summary["fallback_passes"] == 1 and summary["fallback_overloads"] == ["w"]


def test_the_survey_parent_never_imports_torch():
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", "import flagos_doctor.survey.command"],
                          capture_output=True, text=True, cwd=REPO_ROOT)
    assert done.returncode == 0
    # The imported modules' names, not the text: flagos_doctor.stacks.torch_fl is no torch.
    imported = [line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")]
    assert "flagos_doctor.survey.command" in imported
    assert not [name for name in imported if name == "torch" or name.startswith("torch.")]


SETUP_LOGGING_STACK = '''
import json, os, time
def setup():
    # A stack import takes seconds. Rather than sleep for a guessed time (too short on a busy
    # machine), the first setup waits until a second one has begun, or 90 s: workers started
    # alongside each other end at once; workers started one after another show the wait.
    start = time.time()
    marker = os.environ["SETUP_LOG"] + ".started." + str(os.getpid())
    open(marker, "w").close()
    folder = os.path.dirname(marker) or "."
    while time.time() - start < 90:
        if len([n for n in os.listdir(folder) if ".started." in n]) >= 2:
            break
        time.sleep(0.05)
    with open(os.environ["SETUP_LOG"], "a") as log:
        log.write(json.dumps({"pid": os.getpid(), "start": start, "end": time.time()}) + "\\n")
    return "cpu"
def registered():
    return ["abs", "neg", "exp", "sin"]
'''


def test_the_listing_worker_works_on_and_the_others_start_alongside_it(tmp_path):
    # The stack lists its own routes: that worker must go on to run cases (no extra stack
    # import), and the second worker must start while the first one does, not after it.
    (tmp_path / "setuplog_stack.py").write_text(SETUP_LOGGING_STACK)
    log = tmp_path / "setups.jsonl"
    env = {"PYTHONPATH": str(tmp_path), "SETUP_LOG": str(log)}
    result = survey(tmp_path, "--stack", "setuplog_stack", "--routes", "stack", "--workers", "2",
                    "--no-store", "-q", "-o", "s.json", env=env)
    assert result.returncode == 0, result.stderr
    doc = load(tmp_path / "s.json")
    assert doc["summary"]["verdicts"].get("STRICT") == 4
    setups = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(setups) == 2, setups  # one per worker; the route listing reused the first
    first, second = sorted(setups, key=lambda s: s["start"])
    assert second["start"] < first["end"], "the second worker waited for the first to start"


def test_summary_names_the_slowest_cases_of_the_h200_survey():
    # The committed FlagGems 5.0.2 survey: mm autotunes for about 100 s a new shape.
    import io

    from rich.console import Console

    from flagos_doctor.survey import progress

    doc = load(os.path.join(REPO_ROOT, "surveys", "results", "flag_gems-5.0.2-h200-harness1.json"))
    out = io.StringIO()
    progress.show_summary(doc, Console(file=out, width=200), "r.json")
    text = out.getvalue()
    assert "slowest cases: mm.out [1d-f32] 99.1 s, mm [1d-f32] 98.4 s, mm [2d-f32-strided] 93.2 s" in text
    assert "this run: 100.2 s, 4 worker start(s), median 6.26 s, longest 6.34 s" in text
