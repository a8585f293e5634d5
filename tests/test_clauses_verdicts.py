"""Each promise of flagos_doctor/results/verdicts.py's docstrings (verdict, summarize, settle),
one test each, on case records written out here. scripts/mutation runs these against mutants
of verdicts.py."""

from __future__ import annotations

import pytest

from flagos_doctor.results import verdicts


def case(status, profile="p", route="kernel", **more):
    return {"profile": profile, "status": status, "route": route, **more}


@pytest.mark.parametrize("statuses, expected", [
    (["PASS", "PASS"], "STRICT"),
    (["PASS", "WRONG"], "BASIC_ONLY"),
    (["WRONG", "ERROR"], "FAILED"),
    (["INVALID_CASE", "UNVERIFIABLE"], "UNTESTED"),  # neither counts
    (["PASS", "INVALID_CASE"], "STRICT"),
    (["PASS", "UNVERIFIABLE", "WRONG"], "BASIC_ONLY"),
    (["FLAKY", "PASS"], "STRICT"),                     # FLAKY does not count
    (["FLAKY"], "UNTESTED"),
    (["FLAKY", "WRONG"], "FAILED"),
    (["PASS", "NO_SCHEMA"], "NO_SCHEMA"),              # the installed torch lacks it
    ([], "UNTESTED"),
])
def test_the_verdict_rules(statuses, expected):
    assert verdicts.verdict([case(s, f"p{i}") for i, s in enumerate(statuses)]) == expected


def test_an_overload_not_run_is_pending():
    assert verdicts.verdict(None) == "PENDING"


@pytest.mark.parametrize("failure", ["WRONG", "ERROR", "CRASH", "TIMEOUT"])
def test_a_failure_the_baseline_shares_does_not_count(failure):
    shared = case(failure, "a", baseline={"status": failure})
    assert verdicts.verdict([case("PASS", "b"), shared]) == "STRICT"
    assert verdicts.verdict([shared]) == "UNTESTED"
    # the baseline failing another way, or passing, is no excuse
    assert verdicts.verdict([case("PASS", "b"), case(failure, "a", baseline={"status": "PASS"})]) == "BASIC_ONLY"
    other = "ERROR" if failure != "ERROR" else "WRONG"
    assert verdicts.verdict([case(failure, "a", baseline={"status": other})]) == "FAILED"


def test_a_pass_whose_baseline_passed_counts():
    assert verdicts.verdict([case("PASS", baseline={"status": "PASS"})]) == "STRICT"


def test_the_summary_counts():
    overloads = {
        "strict.op": {"cases": [case("PASS", "a"), case("PASS", "b", route="cpu_fallback")]},
        "basic.op": {"cases": [case("PASS", "a"), case("WRONG", "b")]},
        "failed.op": {"cases": [case("ERROR", "a", detail="AttributeError: module 'flag_gems.ops' has no attribute 'x'"),
                                case("MISSING_FUNCTION", "b", route="-",
                                     detail="AttributeError: module 'flag_gems.ops' has no attribute 'frob'")]},
        "untested.op": {"cases": [case("INVALID_CASE", "a", route="-")]},
        "native.op": {"cases": [case("WRONG", "a", baseline={"status": "WRONG"}), case("CRASH", "b")]},
        "noschema.op": {"cases": [case("NO_SCHEMA", "-", route="-"), case("PASS", "c")]},
        "nomark.op": {"cases": [case("PASS", "a", route=None)]},
    }
    del overloads["nomark.op"]["cases"][0]["route"]
    route_set = [*overloads, "pending.op"]
    summary = verdicts.summarize(route_set, overloads)
    assert summary["registered"] == 8
    # tested: a counted case; basic: a counted pass; strict: STRICT; NO_SCHEMA is none of them
    assert (summary["tested"], summary["basic"], summary["strict"]) == (5, 3, 2)
    assert summary["verdicts"] == {"STRICT": 2, "BASIC_ONLY": 1, "FAILED": 2, "UNTESTED": 1, "NO_SCHEMA": 1, "PENDING": 1}
    assert list(summary["verdicts"]) == ["STRICT", "BASIC_ONLY", "FAILED", "UNTESTED", "NO_SCHEMA", "PENDING"]
    assert summary["statuses"] == {"PASS": 5, "WRONG": 2, "ERROR": 1, "MISSING_FUNCTION": 1, "INVALID_CASE": 1,
                                   "CRASH": 1, "NO_SCHEMA": 1}
    assert summary["routes"] == {"-": 3, "cpu_fallback": 1, "kernel": 7, "unknown": 1}
    assert (summary["fallback_passes"], summary["fallback_overloads"]) == (1, ["strict.op"])
    assert summary["missing_functions"] == {"failed.op": "flag_gems.ops.frob"}  # from the MISSING_FUNCTION case only
    assert (summary["native_also"], summary["native_also_overloads"]) == (1, ["native.op"])


def test_a_missing_function_the_detail_does_not_name_is_a_question_mark():
    summary = verdicts.summarize(["m.op"], {"m.op": {"cases": [case("MISSING_FUNCTION", detail="gone")]}})
    assert summary["missing_functions"] == {"m.op": "?"}


def test_a_fallback_pass_is_a_pass_through_the_cpu_fallback():
    assert verdicts.is_fallback_pass(case("PASS", route="cpu_fallback"))
    assert not verdicts.is_fallback_pass(case("WRONG", route="cpu_fallback"))
    assert not verdicts.is_fallback_pass(case("PASS", route="kernel"))


@pytest.mark.parametrize("runs, excused, expected", [
    (["PASS"], [], "PASS"),
    (["WRONG", "WRONG"], [], "WRONG"),
    (["PASS", "WRONG"], [], "FLAKY"),
    (["WRONG", "PASS", "PASS"], [], "FLAKY"),
    (["PASS", "INVALID_CASE"], [], "FLAKY"),            # not every run failed
    (["WRONG", "ERROR", "ERROR"], [], "ERROR"),         # failed in every run: the commonest way
    (["ERROR", "WRONG", "WRONG"], [], "WRONG"),
    (["ERROR", "WRONG"], [], "WRONG"),                  # a tie: the order of model.FAILURES
    (["TIMEOUT", "CRASH"], [], "CRASH"),
    (["CRASH", "ERROR", "TIMEOUT", "WRONG"], [], "WRONG"),
    (["TIMEOUT", "PASS"], [0], "PASS"),                 # a timeout spent compiling says nothing
    (["TIMEOUT", "WRONG", "PASS"], [0], "FLAKY"),
    (["TIMEOUT"], [0], "TIMEOUT"),                      # left out only while another run remains
    (["TIMEOUT", "TIMEOUT"], [0, 1], "TIMEOUT"),
    (["PASS", "TIMEOUT"], [1], "PASS"),
])
def test_settle(runs, excused, expected):
    assert verdicts.settle(runs, excused) == expected


def test_basic_counts_overloads_with_a_counted_pass():
    # two passing: basic; one failing: not basic (a failing counted case is no pass)
    summary = verdicts.summarize(["ok.op", "ok2.op", "bad.op"], {
        "ok.op": {"cases": [case("PASS")]}, "ok2.op": {"cases": [case("PASS")]}, "bad.op": {"cases": [case("WRONG")]}})
    assert (summary["tested"], summary["basic"], summary["strict"]) == (3, 2, 2)
