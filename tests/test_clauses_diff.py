"""The compare's classification (flagos_doctor/compare/diff.py, its module docstring's Rules),
each clause on two results files written here and compared by the CLI (``survey --compare``):
worse and newly failing (also from UNTESTED, also an overload new in B) are regressions; a
case from PASS to a failure is one even when the verdict holds, but not to FLAKY nor to a
failure its baseline shares; better and not FAILED is a fix; NO_SCHEMA, PENDING, added and
removed are plain changes; PENDING in both is unsurveyed, not unchanged."""

from __future__ import annotations

import copy
import json
import os

import pytest

from conftest import REPO_ROOT, run_cli
from flagos_doctor.results import groups, verdicts

SAMPLE = os.path.join(REPO_ROOT, "surveys", "results", "torch_fl-ceb4821-sample-flag_gems-5.0.2-h200.json")


def cases(*statuses, baseline=None):
    out = []
    for index, status in enumerate(statuses):
        case = {"profile": f"p{index}", "status": status, "route": "kernel" if status != "INVALID_CASE" else "-",
                "detail": "" if status == "PASS" else f"{status.lower()} detail"}
        if baseline and index in baseline:
            case["baseline"] = {"status": baseline[index], "detail": "native"}
        out.append(case)
    return out


P2 = ("PASS", "PASS")
A = {
    "worse": cases(*P2), "newly_failing": cases("PASS", "WRONG"), "untested_to_failed": cases("INVALID_CASE"),
    "fixed": cases("WRONG", "ERROR"), "to_no_schema": cases("WRONG"), "removed": cases("ERROR"), "lost_pass": cases(*P2),
    "better_lost_pass": cases("PASS", "WRONG"), "other_native": cases(*P2), "pass_with_baseline": cases("WRONG"),
    "case_regressed": cases("PASS", "WRONG", "PASS"), "to_flaky": cases(*P2), "native_also": cases(*P2),
    "same": cases("PASS", "WRONG"), "pending_both": None, "to_pending": cases("INVALID_CASE"),
}
B = {
    "worse": cases("PASS", "WRONG"), "newly_failing": cases("WRONG", "WRONG"), "untested_to_failed": cases("WRONG"),
    "fixed": cases(*P2), "to_no_schema": [{"profile": "-", "status": "NO_SCHEMA", "route": "-", "detail": ""}],
    "added": cases(*P2), "new_failed": cases("ERROR"), "lost_pass": None,
    "better_lost_pass": cases("INVALID_CASE", "PASS"),
    "other_native": cases("PASS", "ERROR", baseline={1: "WRONG"}),
    "pass_with_baseline": cases("PASS", baseline={0: "WRONG"}),  # the baseline ran, the case then passed  # the native path fails otherwise: no excuse
    "case_regressed": cases("WRONG", "WRONG", "PASS"), "to_flaky": cases("PASS", "FLAKY"),
    "native_also": cases("PASS", "WRONG", baseline={1: "WRONG"}),
    "same": cases("PASS", "WRONG"), "pending_both": None, "to_pending": None,
}


# a case whose first run another case's sticky device error poisoned, traced by replay
B["same"][0]["poisoned_by"] = {"overload": "frac", "profile": "1d-f32"}


def results_file(path, base, overloads: dict) -> str:
    """``base`` with these overloads only (None: PENDING), its verdicts and summary worked out
    from the cases by the survey's public rules, as a survey writes them."""
    document = copy.deepcopy(base)
    routes = sorted(overloads)
    document["routes"] = routes
    document["overloads"] = {name: ({"verdict": verdicts.verdict(c), "cases": c} if c is not None
                                    else {"verdict": "PENDING", "cases": []}) for name, c in overloads.items()}
    finished = {name: {"cases": c} for name, c in overloads.items() if c is not None}
    document["summary"] = verdicts.summarize(routes, finished)
    document["complete"] = len(finished) == len(routes)
    document["failure_groups"] = groups.failure_groups(document["overloads"])
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    return str(path)


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("diff")
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    a, b = results_file(tmp / "a.json", base, A), results_file(tmp / "b.json", base, B)
    done = run_cli("survey", "--compare", a, b, "--json", str(tmp / "c.json"), "--no-store", "--all",
                   cwd=str(tmp))
    assert (tmp / "c.json").exists(), done.stderr[-3000:]
    return done, json.loads((tmp / "c.json").read_text())


def transition(document, name):
    found = [t for t in document["transitions"] if t["overload"] == name]
    return (found[0]["kind"], found[0]["mark"]) if found else None


@pytest.mark.parametrize("name, expected", [
    ("worse", ("regression", "worse")),                       # STRICT -> BASIC_ONLY
    ("newly_failing", ("regression", "newly failing")),       # BASIC_ONLY -> FAILED
    ("untested_to_failed", ("regression", "newly failing")),  # up the rank, and still FAILED: no fix
    ("new_failed", ("regression", "newly failing")),          # new in B, FAILED
    ("fixed", ("fix", "better")),                             # FAILED -> STRICT
    ("other_native", ("regression", "worse")),
    ("to_no_schema", ("change", "changed")),                 # FAILED -> NO_SCHEMA
    ("to_pending", ("change", "changed")),                    # UNTESTED -> PENDING
    # a verdict change to PENDING is a plain change, but its PASS cases are gone: the case rule
    ("lost_pass", ("regression", "changed, lost a PASS case")),
    ("better_lost_pass", ("regression", "better, lost a PASS case")),  # BASIC_ONLY -> STRICT, p0 PASS -> INVALID_CASE
    ("added", ("change", "added")),
    ("removed", ("change", "removed")),                       # FAILED, then absent
    ("case_regressed", None), ("to_flaky", None), ("native_also", None), ("same", None), ("pending_both", None),
])
def test_each_verdict_change_is_classified(comparison, name, expected):
    assert transition(comparison[1], name) == expected


def test_a_case_from_pass_to_a_failure_is_a_regression_even_when_the_verdict_holds(comparison):
    document = comparison[1]
    changed = {(c["overload"], c["profile"]): c for c in document["cases_changed"]}
    assert changed[("case_regressed", "p0")]["regression"] is True
    # ... but not to FLAKY, nor to a failure the native path shares
    assert changed[("to_flaky", "p1")]["regression"] is False
    assert changed[("native_also", "p1")]["regression"] is False
    assert changed[("native_also", "p1")]["to"] == {"status": "WRONG", "route": "kernel", "baseline": "WRONG"}
    # beside a PASS the baseline tells only how the survey got there: not shown
    assert changed[("pass_with_baseline", "p0")]["to"] == {"status": "PASS", "route": "kernel"}


def test_the_counts(comparison):
    done, document = comparison
    # worse, newly_failing, untested_to_failed, new_failed, case_regressed, lost_pass, better_lost_pass, other_native
    assert document["regressions"] == 8
    assert document["fixes"] == 2             # fixed, pass_with_baseline; better_lost_pass is a regression
    # to_no_schema, to_pending, added, removed, and the same verdict with changed cases: to_flaky,
    # native_also; lost_pass's change of verdict is a regression (it lost a PASS case), so no change
    assert document["changes"] == 6
    assert document["unchanged"] == 1          # "same" only: to_flaky and native_also changed cases
    assert document["unsurveyed"] == 1         # PENDING in both: neither ran it
    assert done.returncode == 1                # regressions: the compare fails


def test_a_changed_case_in_words(comparison):
    # case_text: the status and route, and what the native path did when it failed too
    lines = {" ".join(line.split()[:2]): " ".join(line.split()[2:]) for line in comparison[0].stdout.splitlines()
             if line.startswith("  ") and " -> " in line}
    assert lines["native_also p1"] == "PASS (kernel) -> WRONG (kernel), and the native path is WRONG too"
    assert lines["other_native p1"] == "PASS (kernel) -> ERROR (kernel); the native path: WRONG regression: lost a PASS case"
    assert lines["new_failed p0"] == "absent -> ERROR (kernel)"
    assert lines["to_pending p0"] == "INVALID_CASE (-) -> absent"


def test_a_traced_sticky_error_is_told_and_changes_nothing(comparison):
    done, document = comparison
    assert document["sticky_traced"] == [{"arm": "b", "overload": "same", "profile": "p0", "status": "PASS",
                                          "poisoned_by": {"overload": "frac", "profile": "1d-f32"}}]
    assert ("B: same [p0] is PASS; its first run's sticky device error was left by frac [1d-f32] (replayed)"
            in " ".join(done.stdout.split()))
    assert transition(document, "same") is None and document["unchanged"] == 1


@pytest.mark.parametrize("older", ["a", "b"])
def test_a_summary_without_the_newer_counts_is_read_from_its_cases(tmp_path, older):
    # an older results file's summary has no statuses, fallback_passes or native_also: the
    # statuses are counted from its cases, the other rows shown while either arm has them
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    overloads = {"x": cases("PASS", "WRONG"), "y": cases("PASS")}
    paths = {arm: results_file(tmp_path / f"{arm}.json", base, overloads) for arm in "ab"}
    with open(paths[older], encoding="utf-8") as handle:
        document = json.load(handle)
    for key in ("statuses", "fallback_passes", "native_also"):
        document["summary"].pop(key)
    with open(paths[older], "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    done = run_cli("survey", "--compare", paths["a"], paths["b"], "--json", str(tmp_path / "c.json"), "--no-store",
                   cwd=str(tmp_path))
    rows = {r["name"]: (r["a"], r["b"]) for r in json.loads((tmp_path / "c.json").read_text())["summary"]["rows"]}
    assert rows["cases PASS"] == (2, 2) and rows["cases WRONG"] == (1, 1), done.stderr[-2000:]
    assert rows["PASS via cpu_fallback"] == (0, 0) and rows["failures the native path shares"] == (0, 0)


def test_a_status_or_route_only_one_arm_has_counts_zero_in_the_other(tmp_path):
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    after = cases("PASS", "ERROR")
    after[1]["route"] = "cpu_fallback"
    a = results_file(tmp_path / "a.json", base, {"x": cases("PASS", "PASS"), "y": cases("INVALID_CASE")})
    b = results_file(tmp_path / "b.json", base, {"x": after, "y": cases("PASS")})
    done = run_cli("survey", "--compare", a, b, "--json", str(tmp_path / "c.json"), "--no-store", cwd=str(tmp_path))
    rows = {r["name"]: (r["a"], r["b"]) for r in json.loads((tmp_path / "c.json").read_text())["summary"]["rows"]}
    assert rows["cases ERROR"] == (0, 1) and rows["cases INVALID_CASE"] == (1, 0), done.stderr[-2000:]
    assert rows["cases PASS"] == (2, 2) and rows["route kernel"] == (2, 2)
    assert rows["route cpu_fallback"] == (0, 1) and rows["route -"] == (1, 0)


def test_only_a_loud_failure_that_becomes_wrong_is_now_wrong():
    # case_regression: ERROR, CRASH, TIMEOUT, MISSING_FUNCTION -> WRONG is a regression; a
    # FLAKY case turned WRONG, or a WRONG case on another route, is a changed case only.
    from flagos_doctor.compare.diff import NOW_WRONG, case_regression
    for loud in ("ERROR", "CRASH", "TIMEOUT", "MISSING_FUNCTION"):
        assert case_regression({"status": loud, "route": "kernel"}, {"status": "WRONG", "route": "kernel"}) == NOW_WRONG
    assert case_regression({"status": "FLAKY", "route": "kernel"}, {"status": "WRONG", "route": "kernel"}) is None
    assert case_regression({"status": "WRONG", "route": "kernel"}, {"status": "WRONG", "route": "cpu_fallback"}) is None


@pytest.mark.parametrize("before, after, flaky_only", [
    (("PASS", "PASS"), ("PASS", "FLAKY"), True),    # the only change: a case turned FLAKY
    (("PASS", "FLAKY"), ("PASS", "PASS"), True),    # ... or stopped being FLAKY
    (("PASS",), ("PASS", "PASS"), False),           # an added case (absent before) is no flake
    (("PASS", "PASS"), ("PASS",), False),           # nor a removed one
    (("PASS", "FLAKY"), ("WRONG", "PASS"), False),  # one change that is not FLAKY is enough
])
def test_flaky_only_says_every_changed_case_is_a_flake(tmp_path, before, after, flaky_only):
    from flagos_doctor.compare.diff import compare
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    documents = []
    for arm, statuses in (("a", before), ("b", after)):
        with open(results_file(tmp_path / f"{arm}.json", base, {"x": cases(*statuses)}), encoding="utf-8") as handle:
            documents.append(json.load(handle))
    result = compare(*documents)
    assert result["cases_changed"] and result["flaky_only"] is flaky_only


@pytest.mark.parametrize("arm", [0, 1])
def test_a_count_one_arm_lacks_has_no_delta(tmp_path, arm):
    # A summary row's delta is b - a only when both arms give a number.
    from flagos_doctor.compare.diff import compare
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    documents = []
    for name in "ab":
        with open(results_file(tmp_path / f"{name}.json", base, {"x": cases("PASS")}), encoding="utf-8") as handle:
            documents.append(json.load(handle))
    documents[arm]["summary"].pop("strict")
    rows = {r["name"]: r for r in compare(*documents)["summary"]["rows"]}
    assert rows["strict"]["delta"] is None and (rows["strict"]["a"] is None) == (arm == 0)
    assert rows["tested"]["delta"] == 0


@pytest.mark.parametrize("force, other_harness, forced", [
    (True, True, True),     # compared although the runs differ: recorded
    (False, True, False),   # the caller refused nothing yet: not forced
    (None, True, False),    # not asked (the default): not forced
    (True, False, False),   # forcing a comparable pair forces nothing
])
def test_forced_records_force_only_where_the_runs_differ(tmp_path, force, other_harness, forced):
    from flagos_doctor.compare.diff import compare
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    documents = []
    for name in "ab":
        with open(results_file(tmp_path / f"{name}.json", base, {"x": cases("PASS")}), encoding="utf-8") as handle:
            documents.append(json.load(handle))
    if other_harness:
        documents[1]["provenance"]["harness_version"] = "flagos-doctor-survey/0"  # a compared field
    result = compare(*documents, **({} if force is None else {"force": force}))
    assert result["comparable"] is not other_harness and result["forced"] is forced


@pytest.mark.parametrize("transitions, cases_changed, census_identical, code", [
    ([{"overload": "x"}], [], True, 1),   # a verdict differs
    ([], [{"overload": "x"}], True, 1),   # a case differs
    ([], [], False, 1),                   # the census differs
    ([], [], True, 0),                    # nothing differs
])
def test_fail_on_any_fails_on_any_verdict_case_or_census_that_differs(transitions, cases_changed,
                                                                       census_identical, code):
    from flagos_doctor.compare.diff import exit_code
    comparison = {"transitions": transitions, "cases_changed": cases_changed, "census_identical": census_identical,
                  "regressions": 0}
    assert exit_code(comparison, "any") == code and exit_code(comparison, "regression") == 0


def checked_pair(tmp_path, before: dict, after: dict) -> list[dict]:
    """Two results files of these overloads, written and read back as the compare reads them."""
    from flagos_doctor.results import document
    with open(SAMPLE, encoding="utf-8") as handle:
        base = json.load(handle)
    return [document.load(results_file(tmp_path / f"{arm}.json", base, overloads))
            for arm, overloads in (("a", before), ("b", after))]


def test_census_identical_needs_both_digests_present_and_equal(tmp_path):
    from flagos_doctor.compare.diff import compare
    a, b = checked_pair(tmp_path, {"x": cases("PASS")}, {"x": cases("PASS")})
    assert compare(a, b)["census_identical"] is True
    for document in (a, b):
        document["census_sha256"] = None  # equal, but there is nothing to compare
    assert compare(a, b)["census_identical"] is False


def test_flaky_only_needs_a_changed_case(tmp_path):
    from flagos_doctor.compare.diff import compare
    result = compare(*checked_pair(tmp_path, {"x": cases("PASS")}, {"x": cases("PASS")}))
    assert result["cases_changed"] == [] and result["flaky_only"] is False


def test_only_a_failure_of_another_cause_is_a_changed_case_at_the_same_status(tmp_path):
    # An ERROR with another message changed (its cause did); a FLAKY or INVALID_CASE case
    # whose detail differs did not: the status is the whole of what those say.
    from flagos_doctor.compare.diff import compare
    before, after = cases("ERROR", "FLAKY", "INVALID_CASE"), cases("ERROR", "FLAKY", "INVALID_CASE")
    for case in after:
        case["detail"] = "another " + case["detail"]
    result = compare(*checked_pair(tmp_path, {"x": before}, {"x": after}))
    assert [(c["profile"], c["from"]["cause"], c["to"]["cause"]) for c in result["cases_changed"]] == [
        ("p0", "error detail", "another error detail")]


def test_a_file_that_leaves_out_an_empty_case_list_compares(tmp_path):
    # "cases" absent reads as no cases: an overload finished with none (UNTESTED) in both
    # arms is unchanged (it was measured), not unsurveyed (that is PENDING in both).
    from flagos_doctor.compare.diff import compare
    a, b = checked_pair(tmp_path, {"x": [], "y": cases("PASS"), "z": None}, {"x": [], "y": cases("PASS"), "z": None})
    for document in (a, b):
        for entry in document["overloads"].values():
            if not entry["cases"]:
                del entry["cases"]
    result = compare(a, b)
    assert (result["unchanged"], result["unsurveyed"], result["cases_changed"]) == (2, 1, [])
    rows = {r["name"]: (r["a"], r["b"]) for r in result["summary"]["rows"]}
    assert rows["cases"] == (1, 1) and rows["verdict UNTESTED"] == (1, 1) and rows["verdict PENDING"] == (1, 1)


def test_why_an_overload_changed_in_words(comparison, tmp_path):
    from flagos_doctor.compare.diff import compare, why_changed
    document = comparison[1]
    # a verdict transition, an arm without the overload called absent
    assert why_changed(document, "removed") == "FAILED -> absent, removed"
    assert why_changed(document, "added") == "absent -> STRICT, added"
    # the same verdict: its changed cases, counted by move, a case one arm lacks called absent
    grown = compare(*checked_pair(tmp_path, {"x": cases("PASS")}, {"x": cases("PASS", "PASS", "PASS")}))
    assert why_changed(grown, "x") == "2 cases absent -> PASS"
    shrunk = compare(*checked_pair(tmp_path, {"x": cases("PASS", "PASS")}, {"x": cases("PASS")}))
    assert why_changed(shrunk, "x") == "1 case PASS -> absent: lost a PASS case"
    # a comparison from a vendor's artifact that carries no lists (an older or cut file): no words, no crash
    assert why_changed({"regressed_overloads": ["x"]}, "x") == ""


def test_a_case_that_only_changed_route_is_a_changed_case(tmp_path):
    # a case's view is its compared fields (results/case.py: status and route); its time,
    # worker or detail are not (a PASS's detail is "" anyway)
    from flagos_doctor.compare.diff import compare
    before, after = cases("PASS", "PASS"), cases("PASS", "PASS")
    after[0]["route"] = "cpu_fallback"
    after[1].update(seconds=9.5, worker="w2")
    result = compare(*checked_pair(tmp_path, {"x": before}, {"x": after}))
    assert [(c["profile"], c["from"], c["to"]) for c in result["cases_changed"]] == [
        ("p0", {"status": "PASS", "route": "kernel"}, {"status": "PASS", "route": "cpu_fallback"})]
