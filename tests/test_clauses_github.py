"""Each promise of flagos_doctor/compare/github.py's docstrings (``survey --compare`` on
GitHub Actions: the step summary, the annotations, the PR comment), one test each, on
comparisons made here by the real comparer from two committed H200 surveys and on a conf
in a real git checkout. In-process and fast: scripts/mutation runs these first. The command
end to end is tests/test_compare_github.py; hostile names and boxes tests/test_ci_harden.py."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import h6_surveys
from flagos_doctor.compare import github
from flagos_doctor.compare.diff import compare
from flagos_doctor.errors import BadInput


@pytest.fixture(scope="module")
def made():
    a, b = h6_surveys()
    return {"regressed": compare(b, a, label_a="ceb4821", label_b="5c9d6f4"),  # 4 regressed, 1 changed
            "fixed": compare(a, b, label_a="5c9d6f4", label_b="ceb4821"),  # 4 fixed, 1 regressed
            "same": compare(a, a, label_a="5c9d6f4", label_b="5c9d6f4"),
            "moved": compare(a, {**a, "census_sha256": "0" * 64}, label_a="x", label_b="y")}


def fresh(comparison: dict) -> dict:
    return json.loads(json.dumps(comparison))


def refused(comparison: dict) -> dict:
    return {"schema": comparison["schema"], "comparable": False, "arms": comparison["arms"], "refused": True,
            "differences": [{"field": "torch", "a": "2.11.0", "b": "2.13.0"}, {"field": "flag_gems", "a": "5.0.2", "b": "4.2.0"}],
            "census_sha256": comparison["census_sha256"]}


# -- GitHub mode ---------------------------------------------------------------------------------
@pytest.mark.parametrize("flag, env, on", [
    (None, "true", True), (None, "false", False), (None, None, False), (None, "TRUE", False), (None, "1", False),
    (True, None, True), (True, "false", True), (False, "true", False)])
def test_github_mode_is_the_flag_else_github_actions_true(monkeypatch, flag, env, on):
    if env is None:
        monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    else:
        monkeypatch.setenv("GITHUB_ACTIONS", env)
    assert github.active(flag) is on


def test_a_comment_file_outside_github_mode_is_refused_before_any_work(monkeypatch, tmp_path):
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    with pytest.raises(BadInput) as caught:
        github.check_options(None, str(tmp_path / "c.md"))
    assert "--comment-file needs GitHub mode" in caught.value.message
    github.check_options(True, str(tmp_path / "c.md"))  # in GitHub mode: fine
    github.check_options(None, None)  # no comment file: nothing to check
    (tmp_path / "a-folder").mkdir()
    with pytest.raises(BadInput):  # in GitHub mode, still a file it can write
        github.check_options(True, str(tmp_path / "a-folder"))
    assert not (tmp_path / "c.md").exists()


# -- where each overload is routed -------------------------------------------------------------------
@pytest.fixture
def checkout(tmp_path):
    """A git checkout whose conf routes two of the changed overloads, one of them twice (the
    later line wins) and one through an include."""
    top = tmp_path / "repo"
    (top / "conf").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(top)], check=True)
    (top / "conf" / "vendor.conf").write_text("# the vendor's own\nsum.out = flagos_python\nsum.IntList_out = cuda\n")
    (top / "conf" / "backends.conf").write_text(
        "# routes\nmm.out = cuda\n\ninclude vendor.conf\nmm.out = flagos_python\nabs = cuda\n")
    return top


def test_each_changed_overload_gets_the_conf_line_that_routes_it_includes_followed_later_lines_winning(
        checkout, made, monkeypatch):
    monkeypatch.chdir(checkout.parent)
    comparison = fresh(made["regressed"])
    github.attach_routes(comparison, str(checkout / "conf" / "backends.conf"))
    assert comparison["routed_by"] == "conf/backends.conf"  # as GitHub names files: from the checkout's top
    assert comparison["routed_at"] == {"mm.out": {"file": "conf/backends.conf", "line": 5},
                                       "sum.out": {"file": "conf/vendor.conf", "line": 2},
                                       "sum.IntList_out": {"file": "conf/vendor.conf", "line": 3}}
    # only overloads the comparison names: abs is routed but unchanged. Named by a verdict
    # transition alone (no case listed) or by changed cases alone (sum.IntList_out), each counts:
    transitions_only = {**fresh(made["regressed"]), "cases_changed": []}
    github.attach_routes(transitions_only, str(checkout / "conf" / "backends.conf"))
    assert sorted(transitions_only["routed_at"]) == ["mm.out", "sum.out"]


def test_the_conf_is_the_b_arms_when_none_is_given(checkout, made, monkeypatch):
    monkeypatch.chdir(checkout)
    comparison = fresh(made["regressed"])
    comparison["arms"]["b"]["context"]["conf"] = str(checkout / "conf" / "backends.conf")
    github.attach_routes(comparison, None)
    assert comparison["routed_at"]["mm.out"] == {"file": "conf/backends.conf", "line": 5}


@pytest.mark.parametrize("where", [None, "missing", "folder"])
def test_without_a_conf_that_can_be_read_nothing_is_added(tmp_path, made, where):
    comparison = fresh(made["regressed"])
    comparison["arms"]["b"]["context"]["conf"] = None
    path = {None: None, "missing": str(tmp_path / "gone.conf"), "folder": str(tmp_path)}[where]
    github.attach_routes(comparison, path)
    assert "routed_at" not in comparison and "routed_by" not in comparison


def test_a_conf_outside_any_checkout_is_named_from_the_current_folder(tmp_path, made, monkeypatch):
    (tmp_path / "loose").mkdir()
    conf_path = tmp_path / "loose" / "b.conf"
    conf_path.write_text("mm.out = flagos_python\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no checkout above tmp_path counts
    comparison = fresh(made["regressed"])
    github.attach_routes(comparison, str(conf_path))
    assert comparison["routed_at"] == {"mm.out": {"file": os.path.join("loose", "b.conf"), "line": 1}}


# -- the annotations -----------------------------------------------------------------------------
def test_one_annotation_per_overload_error_for_a_regression_warning_for_a_change_notice_for_a_fix(made):
    comparison = fresh(made["fixed"])
    comparison["routed_at"] = {"sum.IntList_out": {"file": "conf/backends.conf", "line": 9}}
    lines = github.render_annotations(comparison).splitlines()
    levels = [line.split(" ", 1)[0] for line in lines]
    assert levels == ["::error"] + ["::notice"] * 4
    assert lines[0] == ("::error file=conf/backends.conf,line=9,title=flagos-doctor%3A sum.IntList_out regressed::"
                        "sum.IntList_out: 7 cases ERROR -> WRONG: now returns wrong values")
    assert lines[1].startswith("::notice title=flagos-doctor%3A ") and " fixed::" in lines[1]  # routed nowhere known
    changed = github.render_annotations(fresh(made["regressed"])).splitlines()
    assert [line.split(" ", 1)[0] for line in changed] == ["::error"] * 4 + ["::warning"]
    assert changed[-1].startswith("::warning title=flagos-doctor%3A sum.IntList_out changed::")
    assert github.render_annotations(fresh(made["same"])) == ""


def test_annotations_stop_at_50_of_a_kind_then_say_how_many_more(made):
    comparison = fresh(made["regressed"])
    names = [f"op{index:03d}" for index in range(53)]
    comparison["regressed_overloads"] = names
    lines = github.render_annotations(comparison).splitlines()
    errors = [line for line in lines if line.startswith("::error")]
    assert github.ANNOTATIONS_MAX == 50 and len(errors) == 51
    assert errors[-1] == "::error::3 more regressed overloads (the step summary lists them)"
    comparison["regressed_overloads"] = names[:50]
    assert not any("more regressed" in line for line in github.render_annotations(comparison).splitlines())


def test_what_an_annotation_carries_is_escaped_as_github_reads_workflow_commands(made):
    comparison = fresh(made["regressed"])
    name = "evil%0A::warning::x,y:z\r\n::error::forged"
    comparison["regressed_overloads"] = [name]
    comparison["routed_at"] = {name: {"file": "a,b:c%.conf", "line": 3}}
    (line,) = [line for line in github.render_annotations(comparison).splitlines() if line.startswith("::error")]
    # in a property %, CR, LF, ':' and ',' are escaped; in the message %, CR and LF: one line, one command
    assert line == ("::error file=a%2Cb%3Ac%25.conf,line=3,title=flagos-doctor%3A evil%250A%3A%3Awarning%3A%3Ax%2Cy%3Az"
                    "%0D%0A%3A%3Aerror%3A%3Aforged regressed::evil%250A::warning::x,y:z%0D%0A::error::forged: ")


# -- the verdict line and the comment -------------------------------------------------------------------
def test_the_verdict_line_says_regressed_naming_three_then_the_counts(made):
    assert github.verdict_line(made["regressed"]) == (
        "❌ **Not safe to merge** (flagos-doctor): 4 regressed (`cumsum.out`: STRICT -> FAILED, newly failing; "
        "`mm.out`: STRICT -> FAILED, newly failing; `softshrink.out`: STRICT -> FAILED, newly failing, 1 more); "
        "0 fixed, 1 other changes, 386 overloads unchanged.")


def test_the_verdict_line_says_safe_when_nothing_regressed(made):
    assert github.verdict_line(made["same"]) == (
        "✅ **Safe to merge** (flagos-doctor): nothing regressed; 0 fixed, 0 other changes, 391 overloads unchanged.")


def test_fail_on_any_calls_runs_that_differ_at_all_not_safe(made):
    moved = made["moved"]
    assert moved["regressions"] == 0 and not moved["census_identical"]
    assert github.verdict_line(moved).startswith("✅ **Safe to merge**")
    assert github.verdict_line(moved, "any") == (
        "❌ **Not safe to merge** (flagos-doctor, `--fail-on any`): the runs differ; "
        "0 fixed, 0 other changes, 391 overloads unchanged.")
    assert github.verdict_line(made["same"], "any").startswith("✅ **Safe to merge**")
    assert github.verdict_line(made["regressed"], "never").startswith("❌ **Not safe to merge** (flagos-doctor): 4 regressed")


def test_runs_that_are_not_comparable_say_which_fields_differ(made):
    assert github.verdict_line(refused(made["same"])) == (
        "⚠️ **flagos-doctor could not compare the PR**: the runs are not comparable (torch, flag_gems differ).")


def test_the_comment_is_the_verdict_line_the_comparisons_markdown_and_the_marker(made):
    text = github.render_comment(made["regressed"])
    assert text.splitlines()[0] == github.verdict_line(made["regressed"])
    assert text.endswith("\n" + github.COMMENT_MARKER + "\n") and github.COMMENT_MARKER == "<!-- flagos-doctor-pr-check -->"
    assert "\n### Survey comparison: " in text and "cumsum.out" in text.split("\n", 1)[1]  # under it, headed at level 3
    assert github.render_comment(made["moved"], fail_on="any").startswith("❌ **Not safe to merge** (flagos-doctor, `--fail-on any`)")
    refusal = github.render_comment(refused(made["same"]))
    assert refusal == github.verdict_line(refused(made["same"])) + "\n" + github.COMMENT_MARKER + "\n"  # no comparison


def test_the_comment_stays_under_githubs_limit_and_says_where_the_rest_is(made):
    comparison = fresh(made["fixed"])
    big = [{**comparison["cases_changed"][0], "profile": f"p{index}", "overload": f"{'y' * 400}{index}"}
           for index in range(400)]
    comparison["cases_changed"] = comparison["cases_changed"] + big
    text = github.render_comment(comparison, full_record="the artifact `comparison.json`")
    assert github.COMMENT_MAX_CHARS == 65_536 - 1_536
    assert len(text) <= github.COMMENT_MAX_CHARS + len(github.COMMENT_MARKER) + 1 < 65_536
    assert text.startswith("❌ **Not safe to merge**") and "the artifact `comparison.json`" in text


# -- the mode's outputs ---------------------------------------------------------------------------------
def test_github_mode_appends_the_summary_prints_the_annotations_and_writes_the_comment(made, tmp_path, monkeypatch, capfd):
    summary = tmp_path / "summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    github.publish(fresh(made["regressed"]), "regression", str(tmp_path / "c.md"), 60_000, None)
    out = capfd.readouterr().out
    assert [line.split(" ", 1)[0] for line in out.splitlines()] == ["::error"] * 4 + ["::warning"]
    written = summary.read_text()
    assert written.startswith("earlier step\n") and len(written) > 200 and "cumsum.out" in written  # appended
    assert (tmp_path / "c.md").read_text() == github.render_comment(made["regressed"])


def test_a_refused_comparison_prints_no_annotation(made, tmp_path, monkeypatch, capfd):
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)  # no summary asked: none written
    github.publish(refused(made["same"]), "regression", str(tmp_path / "c.md"), 60_000, None)
    assert capfd.readouterr().out == ""
    assert (tmp_path / "c.md").read_text().startswith("⚠️ **flagos-doctor could not compare the PR**")


def test_a_summary_that_cannot_be_written_costs_neither_the_annotations_nor_the_comment(made, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "no" / "such" / "summary.md"))
    with pytest.raises(BadInput) as caught:
        github.publish(fresh(made["regressed"]), "regression", str(tmp_path / "c.md"), 60_000, None)
    assert "GITHUB_STEP_SUMMARY" in str(caught.value.where) + caught.value.message
    assert capfd.readouterr().out.count("::error") == 4
    assert (tmp_path / "c.md").read_text().startswith("❌ **Not safe to merge**")


def test_a_bad_fail_on_is_refused_before_anything_is_written(made, tmp_path, monkeypatch, capfd):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "s.md"))
    with pytest.raises(BadInput):
        github.publish(fresh(made["regressed"]), "sometimes", str(tmp_path / "c.md"), 60_000, None)
    assert not (tmp_path / "s.md").exists() and not (tmp_path / "c.md").exists() and capfd.readouterr().out == ""
