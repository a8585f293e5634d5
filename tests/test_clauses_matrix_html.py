"""Each promise of flagos_doctor/matrix/html.py's docstring, one test each, through its
documented functions (``render``, ``data``, ``rank``, ``ordered``, ``embedded_json``) on
matrix documents written here in the shape ``matrix`` builds. The page of the committed
runs, in a real browser, is tests/test_matrix_page.py; scripts/mutation runs these first."""

from __future__ import annotations

import base64
import hashlib
import json
import re

from flagos_doctor.matrix import html


def cell(verdict, *cases, marks=()):
    return {"verdict": verdict, "marks": list(marks),
            "cases": [{"profile": p, "status": s, "route": r, "cause": c} for p, s, r, c in cases]}


def row(overload, *cells, family=None):
    return {"overload": overload, "family": family or overload.split(".", 1)[0], "cells": list(cells)}


def matrix(rows, columns=None, **rest):
    columns = columns or [{"label": f"run{i}"} for i in range(len(rows[0]["cells"]) if rows else 0)]
    return {"schema": "flagos-doctor/matrix/1", "columns": columns, "rows": rows, **rest}


def embedded(page: str):
    block = re.search(r'<script type="application/json" id="matrix-data">(.*?)</script>', page, re.S).group(1)
    return block, json.loads(block)


def test_rank_differs_across_runs_then_failed_somewhere_then_the_rest_and_pending_is_no_verdict():
    assert html.rank(row("a", cell("STRICT"), cell("FAILED"))) == html.DIFFERS == 0
    assert html.rank(row("a", cell("FAILED"), cell("FAILED"))) == html.FAILS == 1
    assert html.rank(row("a", cell("BASIC_ONLY"), None)) == html.FAILS
    assert html.rank(row("a", cell("STRICT"), cell("PENDING"), None)) == html.OTHER == 2  # nothing to differ from
    assert html.rank(row("a", cell("PENDING"), cell("FAILED"))) == html.FAILS
    assert html.rank(row("a", None, None)) == html.OTHER


def test_the_default_order_puts_families_by_their_most_interesting_row_and_rows_by_rank_then_name():
    rows = [row("zeta", cell("STRICT")), row("add.Tensor", cell("STRICT"), family="add"),
            row("add.out", cell("FAILED"), family="add"), row("abs", cell("STRICT")),
            row("mul.b", cell("STRICT"), family="mul"), row("mul.a", cell("STRICT"), family="mul"),
            row("neg", cell("BASIC_ONLY"))]
    rows = [{**r, "cells": r["cells"] * 2} for r in rows]
    rows.append(row("sub", cell("STRICT"), cell("FAILED")))
    assert [r["overload"] for r in html.ordered(rows)] == [
        "sub",                               # rank 0: its family first
        "add.out", "add.Tensor", "neg",      # families whose best row failed, by family name; rows by rank
        "abs", "mul.a", "mul.b", "zeta"]     # the rest, by family, then by name


def test_the_embedded_rows_are_numbered_cells_in_the_default_order():
    document = matrix([row("abs", cell("STRICT", ("1d", "PASS", "kernel", None)), None),
                       row("sub", cell("FAILED", ("1d", "WRONG", "kernel", 3), ("2d", "PASS", "fallback", None),
                                       marks=["native-also", "flaky"]),
                           cell("STRICT", ("2d", "PASS", "kernel", None), marks=["flaky"]))],
                      verdicts=["PENDING", "STRICT", "FAILED"])
    got = html.data(document)
    assert got["verdicts"] == ["PENDING", "STRICT", "FAILED"]  # the document's order first
    assert got["profiles"] == ["1d", "2d"] and got["statuses"] == ["WRONG", "PASS"]
    assert got["routes"] == ["kernel", "fallback"]
    assert got["rows"] == [
        ["sub", "sub", html.DIFFERS, [[2, 3, 0, 0, 0, 3, 1, 1, 1, None], [1, 2, 1, 1, 0, None]]],
        ["abs", "abs", html.OTHER, [[1, 0, 0, 1, 0, None], None]]]  # null: not routed in that run


def test_a_verdict_met_first_in_a_row_is_numbered_after_the_given_ones():
    got = html.data(matrix([row("abs", cell("UNTESTED"))], verdicts=["STRICT"]))
    assert got["verdicts"] == ["STRICT", "UNTESTED"] and got["rows"][0][3] == [[1, 0]]


def test_causes_are_status_signature_and_their_case_count_and_marks_their_sign_and_meaning():
    got = html.data(matrix([], causes=[{"status": "CRASH", "signature": "SIGSEGV in x", "cases": [3, 0, 4]}],
                           marks={"native-also": "the native kernel fails too", "flaky": "passed on a rerun",
                                  "other": "a mark without a sign"}))
    assert got["causes"] == [["CRASH", "SIGSEGV in x", 7]]
    assert got["marks"] == [["†", "the native kernel fails too"], ["~", "passed on a rerun"],
                            ["other", "a mark without a sign"]]


def test_a_columns_header_lines_are_its_provenance_with_a_dash_for_what_is_unknown():
    full = {"label": "h200", "stack": "torch_fl", "version": "0.3.1", "flag_gems": "5.0.2", "commit": "1adbc97478fb5e0f",
            "device": "NVIDIA H200", "date": "2026-11-30T12:00:00Z", "census_sha256": "abcdef0123456789ff",
            "path": "surveys/h200.json", "note": "a note"}
    (column,) = html.data(matrix([], columns=[full]))["columns"]
    assert column["lines"] == ["0.3.1", "torch_fl 1adbc97478fb", "flag_gems 5.0.2", "NVIDIA H200", "2026-11-30",
                               "census abcdef012345"]
    assert column["title"] == "h200\nsurveys/h200.json\n2026-11-30T12:00:00Z\ncensus sha256 abcdef0123456789ff\na note"
    assert (column["label"], column["stack"]) == ("h200", "torch_fl")
    (bare,) = html.data(matrix([], columns=[{"label": "x", "version": "5.0.2", "flag_gems": "5.0.2"}]))["columns"]
    assert bare["lines"] == ["torch_fl —", "flag_gems 5.0.2", "—", "—", "census —"]  # a version equal to flag_gems': said once
    assert bare["stack"] == "?"
    (unknown,) = html.data(matrix([], columns=[{"label": "y"}]))["columns"]
    assert unknown["lines"][:2] == ["torch_fl —", "flag_gems —"]


def test_the_page_needs_nothing_at_view_time_its_style_and_script_allowed_by_their_sha256():
    page = html.render(matrix([row("abs", cell("STRICT"))]))
    style = re.search(r"<style>(.*?)</style>", page, re.S).group(1)
    script = re.search(r"<script>(.*?)</script>", page, re.S).group(1)
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page).group(1)

    def sha(text):
        return "sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()
    assert policy.startswith("default-src 'none'; ")
    assert f"style-src '{sha(style)}'" in policy and f"script-src '{sha(script)}'" in policy
    assert not re.search(r"<(link|img|iframe)\b|\bsrc=|https?://", page.replace(policy, ""))
    assert "<title>Operator support: 1 overloads, 1 runs</title>" in page


def test_what_the_page_shows_is_never_html_but_escaped_json_it_reads_back():
    hostile = "</script><script>alert(1)</script><!-- & \u2028\u2029"
    document = matrix([row(hostile, cell("FAILED", ("1d", "CRASH", "kernel", 0)), family=hostile)],
                      columns=[{"label": hostile, "note": hostile}],
                      causes=[{"status": "CRASH", "signature": hostile, "cases": [1]}])
    page = html.render(document)
    block, read_back = embedded(page)
    assert not set(block) & {"<", ">", "&", "\u2028", "\u2029"}
    assert read_back == json.loads(json.dumps(html.data(document)))  # the same data, whole
    assert read_back["rows"][0][0] == hostile and read_back["causes"][0][1] == hostile
    assert page.count("</script>") == 2  # the data block's and the script's own; nothing closed early
    assert html.embedded_json({"a": "<&>"}) == '{"a":"\\u003c\\u0026\\u003e"}'


def test_a_secret_in_the_document_is_scrubbed_before_it_is_embedded(monkeypatch):
    monkeypatch.setenv("FLAGOS_TEST_API_KEY", "s3cr3t-v4lue-0123")
    document = matrix([row("abs", cell("FAILED", ("1d", "CRASH", "kernel", 0)))],
                      causes=[{"status": "CRASH", "signature": "auth failed with s3cr3t-v4lue-0123", "cases": [1]}])
    page = html.render(document)
    assert "s3cr3t-v4lue-0123" not in page
    assert "auth failed with " in embedded(page)[1]["causes"][0][1]


def test_names_are_numbered_as_strings_and_a_document_without_rows_is_an_empty_page():
    got = html.data(matrix([row("abs", cell("STRICT", (None, "PASS", None, None)))]))
    assert got["profiles"] == ["None"] and got["routes"] == ["None"]  # a case's missing route said, not null
    bare_cell = html.data(matrix([row("abs", {"verdict": "PENDING"})]))  # no cases, no marks recorded
    assert bare_cell["rows"][0][3] == [[0, 0]]
    unknown_mark = html.data(matrix([row("abs", cell("STRICT", marks=["a-mark-of-another-version", "flaky"]))]))
    assert unknown_mark["rows"][0][3] == [[0, 2]]  # a mark the page has no bit for adds none
    empty = html.data({"schema": "flagos-doctor/matrix/1", "columns": None, "rows": None})
    assert (empty["rows"], empty["columns"], empty["causes"], empty["marks"]) == ([], [], [], [])
    assert "<title>Operator support: 0 overloads, 0 runs</title>" in html.render({"schema": "flagos-doctor/matrix/1"})
