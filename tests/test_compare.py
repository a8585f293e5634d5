"""``survey --compare``: the pure diff and the CLI on small real results documents.

The documents are written the way the survey writes them (verdicts and census from the
survey's own pure functions); tests on runs the survey itself made live in
``test_compare_survey.py``.
"""

from __future__ import annotations

import copy
import json
import os
import pytest


from flagos_doctor.compare.diff import classify, compare, exit_code
from flagos_doctor.compare.markdown import render as render_markdown
from flagos_doctor.files import write_json
from flagos_doctor.store import Store
from flagos_doctor.results import census, model, verdicts

PROFILES = ["2d_f32", "1d_f32", "2d_f16"]


def results(cases_by_overload: dict, **provenance) -> dict:
    """A survey results document: ``{overload: [(profile, status, route), ...]}``."""
    overloads = {}
    done = {}
    for name, cases in cases_by_overload.items():
        records = [{"profile": p, "status": s, "route": r, "detail": ""} for p, s, r in cases]
        overloads[name] = {"verdict": verdicts.verdict(records), "cases": records}
        done[name] = {"cases": records}
    prov = {
        "stack": "demo",
        "store_key": "demo-0.1.0",
        "route_set_sha256": "r" * 64,
        "harness_version": model.HARNESS_VERSION,
        "spec": {"profiles": PROFILES, "tolerances": {"float32": {"atol": 1e-5, "rtol": 1.3e-6}}},
        "device": {"type": "flagos", "name": "demo", "count": 1},
        "torch": "2.13.0+cpu",
    }
    prov.update(provenance)
    return {
        "schema": model.RESULTS_SCHEMA,
        "provenance": prov,
        "summary": verdicts.summarize(list(cases_by_overload), done),
        "overloads": overloads,
        "census_sha256": census.census_sha256(census.census_text(done)),
    }


K, F, PASS, WRONG, ERROR, INVALID = "kernel", "cpu_fallback", "PASS", "WRONG", "ERROR", "INVALID_CASE"

BEFORE = {
    "abs": [("2d_f32", PASS, K), ("1d_f32", PASS, K), ("2d_f16", WRONG, K)],  # BASIC_ONLY
    "neg": [("2d_f32", PASS, K), ("1d_f32", PASS, K), ("2d_f16", PASS, K)],  # STRICT
    "exp": [("2d_f32", PASS, K), ("1d_f32", PASS, K), ("2d_f16", PASS, K)],  # STRICT
    "log": [("2d_f32", PASS, K), ("1d_f32", INVALID, "-"), ("2d_f16", PASS, K)],  # STRICT
    "sin": [("2d_f32", PASS, K), ("1d_f32", PASS, K), ("2d_f16", WRONG, K)],  # BASIC_ONLY
    "cos": [("2d_f32", PASS, K)],
}


def after_doc() -> dict:
    after = copy.deepcopy(BEFORE)
    after["abs"][2] = ("2d_f16", PASS, K)  # fixed: BASIC_ONLY -> STRICT
    after["neg"] = [("2d_f32", WRONG, K), ("1d_f32", WRONG, K), ("2d_f16", WRONG, K)]  # STRICT -> FAILED
    after["exp"][1] = ("1d_f32", PASS, F)  # same verdict, the route changed
    after["sin"] = [("2d_f32", PASS, K), ("1d_f32", ERROR, K), ("2d_f16", PASS, K)]  # same verdict, lost a PASS
    return results(after)


def write(tmp_path, name: str, document: dict) -> str:
    path = str(tmp_path / name)
    write_json(path, document)
    return path


# -- the pure function ------------------------------------------------------------------
def test_classify_marks():
    assert classify("STRICT", "BASIC_ONLY") == ("regression", "worse")
    assert classify("STRICT", "FAILED") == ("regression", "newly failing")
    assert classify("UNTESTED", "FAILED") == ("regression", "newly failing")
    assert classify(None, "FAILED") == ("regression", "newly failing")
    assert classify("FAILED", "STRICT") == ("fix", "better")
    assert classify("BASIC_ONLY", "NO_SCHEMA") == ("change", "changed")
    assert classify(None, "STRICT") == ("change", "added")
    assert classify("STRICT", None) == ("change", "removed")


def test_diff_of_identical_runs_is_empty():
    doc = results(BEFORE)
    comparison = compare(doc, copy.deepcopy(doc))
    assert comparison["comparable"] and comparison["differences"] == []
    assert comparison["census_identical"] is True
    assert comparison["census_sha256"]["a"] == comparison["census_sha256"]["b"] == doc["census_sha256"]
    assert comparison["transitions"] == [] and comparison["cases_changed"] == []
    assert comparison["regressions"] == 0 and comparison["unchanged"] == len(BEFORE)
    assert exit_code(comparison, "regression") == 0 and exit_code(comparison, "any") == 0


def test_diff_orders_regressions_first_and_lists_cases():
    comparison = compare(results(BEFORE), after_doc())
    kinds = [(t["overload"], t["from"], t["to"], t["kind"], t["mark"]) for t in comparison["transitions"]]
    assert kinds == [
        ("neg", "STRICT", "FAILED", "regression", "newly failing"),
        ("abs", "BASIC_ONLY", "STRICT", "fix", "better"),
    ]
    assert comparison["regressed_overloads"] == ["neg", "sin"]  # sin lost a PASS case
    assert comparison["regressions"] == 2 and comparison["fixes"] == 1
    changed = {(c["overload"], c["profile"]): (c["from"], c["to"], c["regression"]) for c in comparison["cases_changed"]}
    assert changed[("exp", "1d_f32")] == ({"status": PASS, "route": K}, {"status": PASS, "route": F}, False)
    assert changed[("sin", "1d_f32")] == ({"status": PASS, "route": K}, {"status": ERROR, "route": K}, True)
    assert changed[("neg", "2d_f16")][2] is True
    assert len(changed) == 3 + 1 + 1 + 2  # neg x3, abs, exp, sin x2 (one lost, one gained a PASS)
    # regressions first in the case list too
    assert [c["regression"] for c in comparison["cases_changed"]][:4] == [True] * 4
    assert comparison["unchanged"] == 2  # log, cos
    assert comparison["census_identical"] is False
    assert exit_code(comparison, "regression") == 1 and exit_code(comparison, "never") == 0


def test_overloads_neither_run_surveyed_are_not_counted_unchanged():
    # A survey of a few --ops out of a whole conf leaves the rest PENDING in both arms:
    # nothing was measured there, so they are "not surveyed", never "unchanged".
    doc = results(BEFORE)
    for name in ("mm", "bmm"):
        doc["overloads"][name] = {"verdict": "PENDING", "cases": []}
    comparison = compare(doc, copy.deepcopy(doc))
    assert comparison["unchanged"] == len(BEFORE) and comparison["unsurveyed"] == 2
    text = render_markdown(comparison)
    assert f"unchanged overloads: {len(BEFORE)}, not surveyed in either run: 2" in text


def test_route_only_change_fails_only_with_fail_on_any():
    after = copy.deepcopy(BEFORE)
    after["exp"][1] = ("1d_f32", PASS, F)
    comparison = compare(results(BEFORE), results(after))
    assert comparison["regressions"] == 0 and comparison["transitions"] == []
    assert exit_code(comparison, "regression") == 0 and exit_code(comparison, "any") == 1


# -- the CLI ---------------------------------------------------------------------------
def test_cli_identical_runs_exit_0(tmp_path, cli):
    a = write(tmp_path, "a.json", results(BEFORE))
    b = write(tmp_path, "b.json", results(BEFORE))
    done = cli("survey", "--compare", a, b, "--json", "-", "--store", str(tmp_path / "store"))
    assert done.returncode == 0, done.stderr
    comparison = json.loads(done.stdout)
    assert comparison["schema"] == "flagos-doctor/compare/1"
    assert comparison["census_identical"] is True
    assert comparison["census_sha256"]["a"] == comparison["census_sha256"]["b"]
    assert comparison["unchanged"] == len(BEFORE)
    terminal = cli("survey", "--compare", a, b, "--store", str(tmp_path / "store"))
    assert terminal.returncode == 0
    assert "census byte-identical: yes" in terminal.stdout
    assert f"{len(BEFORE)} overloads unchanged" in terminal.stdout


def test_cli_runs_that_differ_exit_1_with_markdown(tmp_path, cli):
    a = write(tmp_path, "a.json", results(BEFORE))
    b = write(tmp_path, "b.json", after_doc())
    md = tmp_path / "cmp.md"
    out = tmp_path / "cmp.json"
    done = cli("survey", "--compare", a, b, "--json", str(out), "--markdown", str(md))
    assert done.returncode == 1, done.stderr
    text = done.stdout
    assert "neg" in text and "newly failing" in text and "fix: better" in text
    assert text.index("neg") < text.index("abs")  # regressions before fixes
    assert "census byte-identical: no" in text
    comparison = json.loads(out.read_text())
    assert comparison["regressions"] == 2
    markdown = md.read_text()
    assert "| `neg` | STRICT | FAILED | regression: newly failing |" in markdown
    assert "| `sin` | 1d_f32 | PASS (kernel) | ERROR (kernel) | regression: lost a PASS case |" in markdown
    assert "census byte-identical: **no**" in markdown
    assert cli("survey", "--compare", a, b, "--fail-on", "never", "-q").returncode == 0
    bad = cli("survey", "--compare", a, b, "--fail-on", "sometimes")
    assert bad.returncode == 2 and "--fail-on" in bad.stderr


def test_cli_long_lists_go_in_details(tmp_path, cli):
    many_a = {f"op{i:02d}": [("2d_f32", PASS, K)] for i in range(15)}
    many_b = {f"op{i:02d}": [("2d_f32", WRONG, K)] for i in range(15)}
    a = write(tmp_path, "a.json", results(many_a))
    b = write(tmp_path, "b.json", results(many_b))
    done = cli("survey", "--compare", a, b, "--markdown", "-", "-q")
    assert done.returncode == 1
    assert "<details>\n<summary>15 verdict transitions</summary>" in done.stdout
    assert "<summary>15 cases changed</summary>" in done.stdout


def test_cli_incomparable_runs_exit_2_naming_fields(tmp_path, cli):
    a = write(tmp_path, "a.json", results(BEFORE))
    b = write(tmp_path, "b.json", results(
        BEFORE, route_set_sha256="s" * 64, device={"type": "cuda", "name": "H200", "count": 1}, stack="torch_fl"))
    done = cli("survey", "--compare", a, b)
    assert done.returncode == 2
    assert "not comparable" in done.stderr
    for field in ("route_set_sha256", "device_type", "stack"):
        assert field in done.stderr
    assert "harness_version" not in done.stderr and "Traceback" not in done.stderr
    forced = cli("survey", "--compare", a, b, "--force")
    assert forced.returncode == 0, forced.stderr
    assert "comparing anyway (--force)" in forced.stderr
    assert forced.stdout.index("Not comparable") < forced.stdout.index("Summary")
    for field in ("route_set_sha256", "device_type", "stack"):
        assert field in forced.stdout
    listed = cli("survey", "--compare", a, b, "--force", "--json", "-", "-q")
    comparison = json.loads(listed.stdout)
    assert comparison["comparable"] is False and comparison["forced"] is True
    assert [d["field"] for d in comparison["differences"]] == ["route_set_sha256", "device_type", "stack"]


def test_cli_incomparable_spec_fields(tmp_path, cli):
    a = write(tmp_path, "a.json", results(BEFORE))
    spec = {"profiles": PROFILES[:2], "tolerances": {"float32": {"atol": 1e-3, "rtol": 1e-3}}}
    b = write(tmp_path, "b.json", results(BEFORE, harness_version="flagos-doctor-survey/0", spec=spec))
    done = cli("survey", "--compare", a, b, "--json", str(tmp_path / "refused.json"))
    assert done.returncode == 2
    for field in ("harness_version", "profiles", "tolerances"):
        assert field in done.stderr
    refused = json.loads((tmp_path / "refused.json").read_text())
    assert refused["comparable"] is False and refused["refused"] is True


def test_cli_truncated_and_malformed_files_exit_2_naming_them(tmp_path, cli):
    good = write(tmp_path, "good.json", results(BEFORE))
    text = open(good).read()
    truncated = tmp_path / "truncated.json"
    truncated.write_text(text[: len(text) // 2])
    done = cli("survey", "--compare", good, str(truncated))
    assert done.returncode == 2
    assert str(truncated) in done.stderr and "truncated" in done.stderr
    malformed = tmp_path / "malformed.json"
    malformed.write_text('{"schema": "flagos-doctor/survey/1", "overloads": {,}}')
    done = cli("survey", "--compare", str(malformed), good)
    assert done.returncode == 2 and str(malformed) in done.stderr and "malformed" in done.stderr
    foreign = write(tmp_path, "foreign.json", {"schema": "flagos-doctor/probe/1"})
    done = cli("survey", "--compare", good, foreign)
    assert done.returncode == 2 and foreign in done.stderr and "schema" in done.stderr
    hollow = write(tmp_path, "hollow.json", {"schema": "flagos-doctor/survey/1"})
    done = cli("survey", "--compare", good, hollow)
    assert done.returncode == 2 and hollow in done.stderr and "overloads" in done.stderr
    for output in (done.stdout, done.stderr):
        assert "Traceback" not in output


def test_cli_commit_prefixes_in_a_store(tmp_path, cli):
    store = Store(str(tmp_path / "store"))
    commit_a = "1adbc97" + "0" * 33
    commit_b = "5e0f2aa" + "1" * 33
    store.file("survey", commit_a, "fp1", write(tmp_path, "a.json", results(BEFORE)))
    store.file("survey", commit_b, "fp1", write(tmp_path, "b.json", after_doc()))
    done = cli("survey", "--compare", "1adbc", "5e0f2", "--store", store.root, "--json", "-", "-q")
    assert done.returncode == 1, done.stderr
    comparison = json.loads(done.stdout)
    assert comparison["arms"]["a"]["source"] == "store"
    assert comparison["arms"]["a"]["path"].startswith(os.path.join(store.root, "survey", commit_a))
    assert comparison["arms"]["b"]["path"].startswith(os.path.join(store.root, "survey", commit_b))
    # $FLAGOS_DOCTOR_STORE is the default store
    via_env = cli("survey", "--compare", "1adbc97", "5e0f", "-q", env={"FLAGOS_DOCTOR_STORE": store.root})
    assert via_env.returncode == 1, via_env.stderr
    store.file("survey", "5e0f2bb" + "2" * 33, "fp1", write(tmp_path, "c.json", results(BEFORE)))
    ambiguous = cli("survey", "--compare", "1adbc", "5e0f2", "--store", store.root)
    assert ambiguous.returncode == 2 and "ambiguous" in ambiguous.stderr
    missing = cli("survey", "--compare", "1adbc", "deadbee", "--store", store.root)
    assert missing.returncode == 2 and "deadbee" in missing.stderr and store.root in missing.stderr


def test_build_cmd_without_repo_is_refused(tmp_path, cli):
    a = write(tmp_path, "a.json", results(BEFORE))
    done = cli("survey", "--compare", a, a, "--build-cmd", "true")
    assert done.returncode == 2 and "--repo" in done.stderr


def test_largest_causes_of_failure_count_only_what_the_verdicts_count():
    # Issue 23: the committed 4.2.0 -> 5.0.2 compare named an INVALID_CASE group among its
    # largest causes. The survey's summary leaves out what the verdicts do not count; so does this.
    questions = {f"op{i}": [("2d_f32", INVALID, "-"), ("1d_f32", "UNVERIFIABLE", "-"), ("2d_f16", "FLAKY", K)]
                 for i in range(6)}
    a = results({**questions, "abs": [("2d_f32", WRONG, K)]})
    b = results({**questions, "abs": [("2d_f32", ERROR, K)]})
    text = render_markdown(compare(a, b))
    opening = text.split("- largest causes of failure:", 1)[1].split("\n\n", 1)[0]
    assert "WRONG" in opening and "ERROR" in opening
    for status in (INVALID, "UNVERIFIABLE", "FLAKY"):
        assert status not in opening
        assert f"| {status} |" in text  # still in the table of every failure group


# -- a loud failure that turns silent, and failures that change -------------------------
def _detailed(cases_by_overload: dict) -> dict:
    """``results`` with a detail per case: ``{overload: [(profile, status, detail), ...]}``."""
    doc = results({name: [(p, s, K) for p, s, _ in cases] for name, cases in cases_by_overload.items()})
    for name, cases in cases_by_overload.items():
        for record, (_, _, detail) in zip(doc["overloads"][name]["cases"], cases):
            record["detail"] = detail
    return doc


@pytest.mark.parametrize("loud", ["ERROR", "CRASH", "TIMEOUT", "MISSING_FUNCTION"])
def test_a_loud_failure_that_becomes_wrong_is_a_regression(loud):
    before = _detailed({"sum": [("2d_f32", loud, "TypeError: boom")], "abs": [("2d_f32", PASS, "")]})
    after = _detailed({"sum": [("2d_f32", WRONG, "output: 1 of 1 values differ")], "abs": [("2d_f32", PASS, "")]})
    comparison = compare(before, after)
    assert comparison["transitions"] == []  # FAILED in both: no verdict change
    assert comparison["regressed_overloads"] == ["sum"] and comparison["case_regressions"] == 1
    assert comparison["cases_changed"][0]["mark"] == "now returns wrong values"
    assert exit_code(comparison, "regression") == 1 and exit_code(comparison, "never") == 0
    text = render_markdown(comparison)
    assert f"regressions: **1** (`sum`: 1 case {loud} -> WRONG: now returns wrong values)" in text


def test_a_wrong_answer_the_native_path_shares_is_no_regression():
    before = _detailed({"sum": [("2d_f32", ERROR, "TypeError: boom")]})
    after = _detailed({"sum": [("2d_f32", WRONG, "output: values differ")]})
    after["overloads"]["sum"]["cases"][0]["baseline"] = {"status": WRONG}
    comparison = compare(before, after)
    assert comparison["regressions"] == 0 and comparison["changed_overloads"] == ["sum"]


def test_other_changes_of_failing_cases_are_counted_and_named():
    before = _detailed({"a": [("2d_f32", WRONG, "output: values differ")],
                        "b": [("2d_f32", ERROR, "TypeError: f() missing 1 required argument")],
                        "c": [("2d_f32", ERROR, "TypeError: same cause 1")], "d": [("2d_f32", PASS, "")]})
    after = _detailed({"a": [("2d_f32", ERROR, "RuntimeError: now it raises")],
                       "b": [("2d_f32", ERROR, "RuntimeError: backend not registered")],
                       "c": [("2d_f32", ERROR, "TypeError: same cause 2")], "d": [("2d_f32", PASS, "")]})
    comparison = compare(before, after)
    assert comparison["regressions"] == 0 and comparison["fixes"] == 0
    assert comparison["changes"] == 2 and comparison["changed_overloads"] == ["a", "b"]  # c: the same masked cause
    assert comparison["unchanged"] == 2
    cause_change = next(c for c in comparison["cases_changed"] if c["overload"] == "b")
    assert (cause_change["from"]["cause"], cause_change["to"]["cause"]) == (
        "TypeError: f() missing N required argument", "RuntimeError: backend not registered")
    assert "other changes: 2 (`a`: 1 case WRONG -> ERROR; `b`: 1 case ERROR -> ERROR)" in render_markdown(comparison)
    from flagos_doctor import output
    from flagos_doctor.compare import terminal  # noqa: F401  (registers the terminal view)

    assert "0 regressed, 0 fixed, 2 other changes (a: 1 case WRONG -> ERROR; b: 1 case ERROR -> ERROR)" in output.plain(
        comparison, width=300)
    assert exit_code(comparison, "regression") == 0 and exit_code(comparison, "any") == 1
