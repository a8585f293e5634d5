"""Each promise of flagos_doctor/ci/merge.py's docstrings (``ci-merge``: the vendors' boxes
merged into one document and one PR comment), one test each, on comparisons made here by
the real comparer from two committed H200 surveys (one way round it fixes four overloads,
the other way it regresses them). In-process and fast: scripts/mutation runs these first.
The command end to end (exit codes, hostile boxes, a thousand boxes) is tests/test_ci_harden.py
and tests/test_compare_github.py."""

from __future__ import annotations

import json
import os

import pytest
from rich.console import Console

from conftest import h6_surveys
from flagos_doctor.ci import merge
from flagos_doctor.compare.diff import compare
from flagos_doctor.compare.github import COMMENT_MARKER, COMMENT_MAX_CHARS, verdict_line
from flagos_doctor.errors import BadInput


@pytest.fixture(scope="module")
def made():
    a, b = h6_surveys()
    regressed = compare(b, a, label_a="head-b", label_b="head-a")  # 4 regressed, 1 changed
    regressed["arms"]["a"]["commit"], regressed["arms"]["b"]["commit"] = "ceb4821", "5c9d6f4"
    regressed["routed_at"] = {"mm.out": {"file": "conf/backends.conf", "line": 17}}
    fixed = compare(a, b, label_a="5c9d6f4", label_b="ceb4821")  # 4 fixed; sum.IntList_out ERROR -> WRONG regressed
    safe = compare(a, a, label_a="5c9d6f4", label_b="5c9d6f4+")  # nothing changed
    refused = {"schema": regressed["schema"], "comparable": False, "census_sha256": {"a": None, "b": None},
               "differences": [{"field": "torch"}, {"field": "device"}], "arms": fixed["arms"], "refused": True}
    return {"regressed": regressed, "fixed": fixed, "safe": safe, "refused": refused}


def regressing(comparison: dict, names: list[str], changed: list[str] = ()) -> dict:
    """``comparison`` made to regress ``names`` (newly failing) and change ``changed``, its
    counts agreeing, as a comparer would write it."""
    return {**comparison, "regressed_overloads": list(names), "regressions": len(names), "cases_changed": [],
            "transitions": [{"overload": name, "from": "STRICT", "to": "FAILED", "kind": "regression",
                             "mark": "newly failing"} for name in names],
            "fixes": 0, "changed_overloads": list(changed), "changes": len(changed)}


def box(root, folder: str, comparison: dict | str | None) -> str:
    """An artifact folder as actions/download-artifact makes it: ``comparison`` written as
    its comparison.json (a str as it is), none when None."""
    path = os.path.join(str(root), folder)
    os.makedirs(path, exist_ok=True)
    if comparison is not None:
        with open(os.path.join(path, merge.COMPARISON_FILE), "w", encoding="utf-8") as handle:
            handle.write(comparison if isinstance(comparison, str) else json.dumps(comparison))
    return path


# -- the vendor of a box ---------------------------------------------------------------------------
@pytest.mark.parametrize("folder, vendor", [
    ("pr-check-cuda", "cuda"), ("pr-check-metax", "metax"), ("ascend", "ascend"), ("pr-check-", "pr-check-"),
    ("my-pr-check-musa", "my-pr-check-musa"), ("pr-check-pr-check-x", "pr-check-x")])
def test_the_vendor_is_the_folders_name_less_the_workflows_prefix(tmp_path, folder, vendor):
    path = box(tmp_path, folder, None)
    assert merge.vendor_name(path) == vendor
    assert merge.vendor_name(path + os.sep) == vendor  # as a shell completes it
    assert merge.vendor_name(os.path.join(path, merge.COMPARISON_FILE)) == vendor  # a file named instead


# -- a box's row ------------------------------------------------------------------------------------
def test_a_box_without_a_comparison_is_missing_its_job_ended_before_comparing(tmp_path):
    row = merge.vendor(box(tmp_path, "pr-check-musa", None))
    assert row == {"name": "musa", "path": os.path.join(str(tmp_path), "pr-check-musa", "comparison.json"),
                   "state": "missing", "first_line": "no comparison.json: the job ended before comparing"}


@pytest.mark.parametrize("text", ["", "{", "[]", '{"schema": "flagos-doctor/compare/1"}', '{"schema": "x"}'])
def test_a_box_whose_comparison_cannot_be_read_or_trusted_is_unreadable_saying_why_in_one_line(tmp_path, text):
    path = box(tmp_path, "pr-check-cuda", text)
    row = merge.vendor(path)
    assert row["state"] == "unreadable" and row["name"] == "cuda"
    assert row["first_line"].startswith("unreadable: ") and "\n" not in row["first_line"]
    assert set(row) == {"name", "path", "state", "first_line"}  # no counts a reader could take as safe


def test_a_refused_comparison_is_a_refused_row_with_its_labels_and_why(tmp_path, made):
    row = merge.vendor(box(tmp_path, "pr-check-cuda", made["refused"]))
    assert row["state"] == "refused"
    assert row["first_line"] == verdict_line(made["refused"])
    assert "torch, device differ" in row["first_line"]
    assert row["labels"] == {"a": "5c9d6f4", "b": "ceb4821"}
    assert "regressions" not in row


def test_a_compared_row_has_the_counts_and_the_overloads_and_where_each_is_routed(tmp_path, made):
    comparison = made["regressed"]
    row = merge.vendor(box(tmp_path, "pr-check-cuda", comparison))
    assert row["state"] == "compared" and row["first_line"] == verdict_line(comparison)
    assert (row["regressions"], row["fixes"], row["changes"], row["unchanged"]) == (4, 0, 1, 386)
    assert [o["overload"] for o in row["regressed"]] == ["cumsum.out", "mm.out", "softshrink.out", "sum.out"]
    assert [o["overload"] for o in row["changed"]] == ["sum.IntList_out"]
    mm = row["regressed"][1]
    assert mm == {"overload": "mm.out", "why": "STRICT -> FAILED, newly failing", "file": "conf/backends.conf", "line": 17}
    assert "file" not in row["regressed"][0]  # routed nowhere the comparison knows


def test_a_rows_labels_are_the_arms_commits_else_their_labels(tmp_path, made):
    assert merge.vendor(box(tmp_path, "a", made["regressed"]))["labels"] == {"a": "ceb4821", "b": "5c9d6f4"}
    assert merge.vendor(box(tmp_path, "b", made["fixed"]))["labels"] == {"a": "5c9d6f4", "b": "ceb4821"}


def test_a_row_lists_at_most_25_overloads_of_each_kind(tmp_path, made):
    names = [f"op{index:02d}.out" for index in range(30)]
    comparison = regressing(made["regressed"], names, [f"other{index:02d}" for index in range(26)])
    row = merge.vendor(box(tmp_path, "pr-check-cuda", comparison))
    assert [o["overload"] for o in row["regressed"]] == names[:merge.LISTED] and merge.LISTED == 25
    assert len(row["changed"]) == 25 and row["regressions"] == 30


def test_a_file_named_instead_of_a_folder_is_read_as_that_boxs_comparison(tmp_path, made):
    path = os.path.join(box(tmp_path, "pr-check-cuda", made["safe"]), merge.COMPARISON_FILE)
    row = merge.vendor(path)
    assert row["state"] == "compared" and row["path"] == path and row["name"] == "cuda"


# -- the document ---------------------------------------------------------------------------------
def test_the_document_is_safe_only_when_every_box_compared_and_none_regressed(tmp_path, made):
    good = box(tmp_path, "pr-check-metax", made["safe"])
    for other, safe in ((made["safe"], True), (made["regressed"], False), (made["fixed"], False),
                        (made["refused"], False), (None, False), ("not json", False)):
        document = merge.build([good, box(tmp_path / str(len(str(other))), "pr-check-cuda", other)])
        assert document["schema"] == merge.MERGE_SCHEMA == "flagos-doctor/ci-merge/1"
        assert document["safe"] is safe, other
        assert [v["name"] for v in document["vendors"]] == ["metax", "cuda"]  # in the order given
    assert merge.build([good])["safe"] is True


def test_a_path_that_is_no_folder_nor_regular_file_is_refused_never_read(tmp_path, made):
    fifo = str(tmp_path / "pr-check-cuda")
    os.mkfifo(fifo)  # read, it would wait for a writer for ever
    for special in (fifo, os.devnull):
        with pytest.raises(BadInput) as caught:
            merge.build([box(tmp_path, "pr-check-metax", made["safe"]), special])
        assert caught.value.where == special and "not a regular file" in caught.value.message


def test_a_comparison_whose_arms_hold_no_sides_has_no_labels(tmp_path, made):
    comparison = {**made["safe"], "arms": {}}  # arms' sides are optional in a comparison
    row = merge.vendor(box(tmp_path, "pr-check-cuda", comparison))
    assert row["state"] == "compared" and row["labels"] == {"a": None, "b": None}
    only_a = {**made["safe"], "arms": {"a": {"label": "main"}}}
    assert merge.vendor(box(tmp_path, "metax", only_a))["labels"] == {"a": "main", "b": None}


def test_a_path_that_does_not_exist_is_refused_naming_it(tmp_path, made):
    with pytest.raises(BadInput) as caught:
        merge.build([box(tmp_path, "pr-check-metax", made["safe"]), str(tmp_path / "pr-check-nowhere")])
    assert "no such file or folder" in caught.value.message and caught.value.where == str(tmp_path / "pr-check-nowhere")


def test_two_boxes_of_one_vendor_are_refused_naming_the_vendors(tmp_path, made):
    paths = [box(tmp_path / "1", "pr-check-cuda", made["safe"]), box(tmp_path / "2", "cuda", made["safe"]),
             box(tmp_path / "3", "pr-check-ascend", None), box(tmp_path / "4", "ascend", None),
             box(tmp_path / "5", "metax", made["safe"])]
    with pytest.raises(BadInput) as caught:
        merge.build(paths)
    assert "two vendors share a name (ascend, cuda): give each artifact its own folder" in caught.value.message


# -- the first line --------------------------------------------------------------------------------
def test_the_first_line_says_safe_over_every_box(tmp_path, made):
    one = merge.build([box(tmp_path, "pr-check-cuda", made["safe"])])
    assert merge.first_line(one) == "✅ **Safe to merge** (flagos-doctor, 1 vendor box): nothing regressed on any."
    two = merge.build([box(tmp_path, "pr-check-cuda", made["safe"]), box(tmp_path, "metax", made["safe"])])
    assert merge.first_line(two) == "✅ **Safe to merge** (flagos-doctor, 2 vendor boxes): nothing regressed on any."


def test_the_first_line_names_each_box_that_is_not_safe_and_why(tmp_path, made):
    merged = merge.build([box(tmp_path, "pr-check-cuda", made["regressed"]), box(tmp_path, "metax", made["safe"]),
                          box(tmp_path, "musa", None), box(tmp_path, "ascend", made["refused"]),
                          box(tmp_path, "kunlun", "{")])
    assert merge.first_line(merged) == (
        "❌ **Not safe to merge** (flagos-doctor, 5 vendor boxes): cuda (regressed), musa (no comparison), "
        "ascend (not comparable), kunlun (unreadable).")
    assert merge.first_line(merged, name=str.upper).startswith("❌ **Not safe to merge** (flagos-doctor, 5 vendor boxes): CUDA (")


def test_the_first_line_names_ten_boxes_then_how_many_more(tmp_path):
    merged = merge.build([box(tmp_path, f"pr-check-v{index:02d}", None) for index in range(13)])
    line = merge.first_line(merged)
    assert merge.NAMED == 10
    assert "v09 (no comparison), and 3 more." in line and "v10" not in line
    exactly = merge.build([box(tmp_path, f"pr-check-v{index:02d}", None) for index in range(10)])
    assert merge.first_line(exactly).endswith("v09 (no comparison).")


# -- the comment ---------------------------------------------------------------------------------------
def test_the_comment_has_the_verdict_first_a_row_per_vendor_and_the_marker_last(tmp_path, made):
    merged = merge.build([box(tmp_path, "pr-check-cuda", made["regressed"]), box(tmp_path, "metax", made["safe"]),
                          box(tmp_path, "musa", None), box(tmp_path, "ascend", made["refused"])])
    text = merge.render_comment(merged)
    lines = text.splitlines()
    assert lines[0] == merge.first_line(merged) and text.endswith(COMMENT_MARKER + "\n")
    rows = [line for line in lines if line.startswith("| ") and "---" not in line]
    assert text.index("| vendor |") < text.index("<details>")  # the rows are the page, never folded
    assert rows == [
        "| vendor | verdict | regressed | fixed | other changes | unchanged | base → head |",
        "| cuda | ❌ regressed | 4 | 0 | 1 | 386 | ceb4821 → 5c9d6f4 |",
        "| metax | ✅ safe | 0 | 0 | 0 | 391 | 5c9d6f4 → 5c9d6f4+ |",
        "| musa | ⚠️ no comparison | — | — | — | — | — |",
        "| ascend | ⚠️ not comparable | — | — | — | — | 5c9d6f4 → ceb4821 |"]


def test_each_vendor_has_its_details_its_regressions_with_their_conf_line_then_its_changes(tmp_path, made):
    merged = merge.build([box(tmp_path, "pr-check-cuda", made["regressed"]), box(tmp_path, "musa", None)])
    text = merge.render_comment(merged)
    assert "<summary>cuda: ❌ regressed</summary>" in text and "<summary>musa: ⚠️ no comparison</summary>" in text
    cuda = text[text.index("<summary>cuda"):text.index("<summary>musa")]
    listed = [line for line in cuda.splitlines() if line.startswith("- ")]
    assert listed == ["- `cumsum.out`: STRICT -> FAILED, newly failing",
                      "- `mm.out`: STRICT -> FAILED, newly failing (conf/backends.conf:17)",
                      "- `softshrink.out`: STRICT -> FAILED, newly failing",
                      "- `sum.out`: STRICT -> FAILED, newly failing",
                      "- `sum.IntList_out`: 7 cases WRONG -> ERROR"]
    assert verdict_line(made["regressed"]) in cuda
    assert "no comparison.json: the job ended before comparing" in text


def test_an_unreadable_boxs_verdict_cell_says_why(tmp_path):
    merged = merge.build([box(tmp_path, "pr-check-cuda", "{ | broken")])
    (row,) = [line for line in merge.render_comment(merged).splitlines() if line.startswith("| cuda")]
    assert row.startswith("| cuda | ⚠️ unreadable: ") and row.count(" | ") == 6  # its own | escaped


def test_a_boxs_name_is_text_in_the_comment_never_html_nor_a_table_break(tmp_path, made):
    name = "<img src=x onerror=alert(1)>|x"
    merged = merge.build([box(tmp_path, "pr-check-" + name, made["regressed"])])
    text = merge.render_comment(merged)
    assert "<img" not in text and "&lt;img src=x onerror=alert(1)&gt;\\|x" in text
    assert text.splitlines()[0].startswith("❌ **Not safe to merge** (flagos-doctor, 1 vendor box): &lt;img")
    # only what HTML reads as markup is escaped: quotes stay as the folder spells them
    quoted = merge.render_comment(merge.build([box(tmp_path, "pr-check-o'brien \"gpu\"", made["safe"])]))
    assert "| o'brien \"gpu\" | ✅ safe |" in quoted


def test_the_comment_stays_under_githubs_limit_keeping_the_verdict_and_every_row(tmp_path, made):
    comparison = regressing(made["regressed"], [f"{'x' * 3000}{index}.out" for index in range(25)])
    paths = [box(tmp_path, f"pr-check-v{index:02d}", comparison) for index in range(8)]
    text = merge.render_comment(merge.build(paths))
    assert len(text) <= COMMENT_MAX_CHARS + len(COMMENT_MARKER) + 1
    assert text.startswith("❌ **Not safe to merge** (flagos-doctor, 8 vendor boxes)")
    assert all(f"| v{index:02d} | ❌ regressed | 25 |" in text for index in range(8))
    assert "each vendor's artifact (`comparison.json`)" in text  # what was left out, and where it is


def test_the_terminal_shows_the_verdict_then_a_line_per_vendor(tmp_path, made):
    merged = merge.build([box(tmp_path, "pr-check-cuda", made["regressed"]), box(tmp_path, "musa", None)])
    console = Console(record=True, width=400, color_system=None)
    merge.show(merged, console)
    assert console.export_text().splitlines() == [
        merge.first_line(merged), f"  cuda: {verdict_line(made['regressed'])}",
        "  musa: no comparison.json: the job ended before comparing"]
