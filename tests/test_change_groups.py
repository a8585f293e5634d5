"""A change group says REGRESSION only when every case in it is one (results/groups.py).

The same change (PASS to one ERROR) can be a regression in one case and not in another:
where the stack's native path fails the same way, the case's loss is not the stack's
(compare/diff.py ``case_regression``). Grouped together, the group took its first
member's flag, and the terminal's "What changed, by cause" tagged native-shared cases
REGRESSION while their case lines said otherwise.
"""

from __future__ import annotations

from flagos_doctor.compare.diff import compare
from flagos_doctor.results import model


def _doc(cases: dict) -> dict:
    return {"schema": "flagos-doctor-survey/1", "overloads": {
        name: {"verdict": model.STRICT if all(c["status"] == model.PASS for c in found) else model.FAILED,
               "cases": found} for name, found in cases.items()}}


def _case(profile: str, status: str, baseline: str | None = None) -> dict:
    case = {"profile": profile, "status": status, "route": "kernel",
            "detail": "" if status == model.PASS else "RuntimeError: boom"}
    if baseline:
        case["baseline"] = {"status": baseline, "detail": "RuntimeError: boom"}
    return case


def test_a_change_the_native_path_shares_is_grouped_apart_from_the_same_change_that_regressed():
    before = _doc({"abs": [_case("2d-f32", model.PASS)], "neg": [_case("2d-f32", model.PASS)]})
    after = _doc({"abs": [_case("2d-f32", model.ERROR)],
                  "neg": [_case("2d-f32", model.ERROR, baseline=model.ERROR)]})  # native fails too
    result = compare(before, after)
    marks = {c["overload"]: c["regression"] for c in result["cases_changed"]}
    assert marks == {"abs": True, "neg": False}
    groups = result["change_groups"]
    assert [(g["regression"], g["members"]) for g in groups] == [(True, [["abs", "2d-f32"]]),
                                                                (False, [["neg", "2d-f32"]])]
    assert groups[0]["from"] == groups[1]["from"] and groups[0]["to"] == groups[1]["to"]


def test_a_verdict_change_to_no_schema_or_pending_that_loses_a_pass_case_is_a_regression():
    # compare/diff.py: any other verdict change is a plain change, unless a case of it lost
    # a PASS; an overload gone NO_SCHEMA (or not surveyed) in B lost its PASS cases.
    before = _doc({"abs": [_case("2d-f32", model.PASS)], "neg": [_case("2d-f32", model.ERROR)]})
    for gone in ({"verdict": model.NO_SCHEMA, "cases": [{"profile": "-", "status": model.NO_SCHEMA,
                                                         "route": "none", "detail": "no schema"}]},
                 {"verdict": model.PENDING, "cases": []}):
        after = {"overloads": {"abs": dict(gone), "neg": dict(gone)}}
        result = compare(before, after)
        kinds = {t["overload"]: (t["kind"], t["mark"]) for t in result["transitions"]}
        assert kinds["abs"] == ("regression", "changed, lost a PASS case")
        assert kinds["neg"] == ("change", "changed")  # it had no PASS to lose
        assert result["regressed_overloads"] == ["abs"]
