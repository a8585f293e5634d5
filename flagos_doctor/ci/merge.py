"""The merge document of several vendors' comparisons, and its views.

``flagos-doctor ci-merge DIR...``: each DIR is one vendor box's artifact (the folder
``actions/download-artifact`` makes, named after the artifact) holding its comparison
JSON, ``comparison.json``; a file may be named instead. The vendor is the folder's name
less the workflow's ``pr-check-`` (``pr-check-cuda``: ``cuda``). A DIR without a comparison
is a vendor whose job ended before comparing, one whose comparison cannot be read or does
not hold together (:mod:`flagos_doctor.compare.document`) a box that cannot be trusted:
each is a row that says so, and the PR is not called safe. The document::

    schema    flagos-doctor/ci-merge/1
    safe      bool: every vendor compared and nothing regressed on any
    vendors   [{name, path, state, first_line, regressions, fixes, changes, unchanged,
               regressed: [{overload, why, file, line}], changed: [...], labels: {a, b}}]

state is ``compared``, ``refused`` (the runs were not comparable), ``missing`` or
``unreadable`` (first_line: why).
"""

from __future__ import annotations

import html
import os

from flagos_doctor import files, output
from flagos_doctor.compare import document
from flagos_doctor.compare.diff import why_changed
from flagos_doctor.compare.github import COMMENT_MARKER, COMMENT_MAX_CHARS, verdict_line
from flagos_doctor.errors import BadInput, one_line
from flagos_doctor.markdown import Page, cell, details

MERGE_SCHEMA = "flagos-doctor/ci-merge/1"
COMPARISON_FILE = "comparison.json"
#: How docs/ci's workflows name each box's artifact: ``pr-check-<vendor>``.
ARTIFACT_PREFIX = "pr-check-"
#: Overloads listed per vendor and kind (the vendor's artifact has them all).
LISTED = 25


def _overloads(comparison: dict, key: str) -> list[dict]:
    routed = comparison.get("routed_at") or {}
    return [{"overload": name, "why": why_changed(comparison, name), **routed.get(name, {})}
            for name in (comparison.get(key) or [])[:LISTED]]


def vendor_name(path: str) -> str:
    """The vendor of an artifact folder (or of the folder of a comparison file ``path``)."""
    folder = os.path.basename(os.path.normpath(path if os.path.isdir(path) else os.path.dirname(path) or "."))
    return folder[len(ARTIFACT_PREFIX):] if folder.startswith(ARTIFACT_PREFIX) and folder != ARTIFACT_PREFIX else folder


def vendor(path: str) -> dict:
    """One vendor's row, from its artifact folder (or comparison file) ``path``."""
    found = os.path.join(path, COMPARISON_FILE) if os.path.isdir(path) else path
    row = {"name": vendor_name(path), "path": found}
    if os.path.isdir(path) and not os.path.lexists(found):
        return {**row, "state": "missing", "first_line": f"no {COMPARISON_FILE}: the job ended before comparing"}
    try:
        comparison = document.load(found)
    except BadInput as exc:  # what the box left cannot be trusted: said in its row, the others merged
        return {**row, "state": "unreadable", "first_line": one_line(f"unreadable: {exc.message}")}
    arms = comparison.get("arms") or {}
    row.update(labels={side: (arms.get(side) or {}).get("commit") or (arms.get(side) or {}).get("label")
                       for side in ("a", "b")}, first_line=verdict_line(comparison))
    if comparison.get("refused"):
        return {**row, "state": "refused"}
    return {**row, "state": "compared", "regressions": comparison["regressions"],
            "fixes": comparison["fixes"], "changes": comparison["changes"], "unchanged": comparison["unchanged"],
            "regressed": _overloads(comparison, "regressed_overloads"),
            "changed": _overloads(comparison, "changed_overloads")}


def build(paths: list[str]) -> dict:
    """The merge document of the vendors' artifacts ``paths``; BadInput for a path that
    does not exist or a file that is no comparison."""
    for path in paths:
        if not os.path.isdir(path):
            files.refuse_special(path)  # a FIFO or a device is called what it is, never read
        if not os.path.exists(path):
            raise BadInput("no such file or folder", path)
    vendors = [vendor(path) for path in paths]
    names = [v["name"] for v in vendors]
    if len(set(names)) != len(names):
        raise BadInput(f"two vendors share a name ({', '.join(sorted({n for n in names if names.count(n) > 1}))}): "
                       "give each artifact its own folder")
    safe = all(v["state"] == "compared" and not v["regressions"] for v in vendors)
    return {"schema": MERGE_SCHEMA, "safe": safe, "vendors": vendors}


def _verdict(row: dict) -> str:
    if row["state"] == "missing":
        return "⚠️ no comparison"
    if row["state"] == "refused":
        return "⚠️ not comparable"
    if row["state"] == "unreadable":
        return "⚠️ unreadable"
    return "❌ regressed" if row["regressions"] else "✅ safe"


#: Boxes named on the first line (the table has a row for each).
NAMED = 10


def first_line(merged: dict, name=str) -> str:
    """The verdict over every box, naming the boxes that are not safe (each by ``name``)."""
    vendors = merged["vendors"]
    boxes = f"{len(vendors)} vendor box{'es' if len(vendors) != 1 else ''}"
    if merged["safe"]:
        return f"✅ **Safe to merge** (flagos-doctor, {boxes}): nothing regressed on any."
    bad = [f"{name(v['name'])} ({_verdict(v).split(' ', 1)[1]})" for v in vendors
           if v["state"] != "compared" or v["regressions"]]
    more = f", and {len(bad) - NAMED} more" if len(bad) > NAMED else ""
    return f"❌ **Not safe to merge** (flagos-doctor, {boxes}): {', '.join(bad[:NAMED])}{more}."


def _markdown_name(name: str) -> str:
    """A box's name (a folder's: any character but ``/``) as text in the comment, never HTML."""
    return html.escape(cell(name), quote=False)


def _verdict_cell(row: dict) -> str:
    """The table's verdict: an unreadable box says why."""
    return f"⚠️ {cell(row['first_line'])}" if row["state"] == "unreadable" else _verdict(row)


def _listed(row: dict, key: str) -> list[str]:
    return [f"- `{cell(o['overload'])}`: {cell(o['why'])}" + (f" ({cell(o['file'])}:{o['line']})" if o.get("file") else "")
            for o in row.get(key) or []]


@output.register(MERGE_SCHEMA, "pr-comment")
def render_comment(merged: dict) -> str:
    """The one comment: its verdict on the first line, a row per vendor, then each vendor's
    regressions and other changes, under GitHub's limit."""
    page = Page(COMMENT_MAX_CHARS, "each vendor's artifact (`comparison.json`)")
    page.add([first_line(merged, _markdown_name), ""])
    rows = [f"| {_markdown_name(v['name'])} | {_verdict_cell(v)} | {v.get('regressions', '—')} | {v.get('fixes', '—')} | "
            f"{v.get('changes', '—')} | {v.get('unchanged', '—')} | {cell(' → '.join(str(v.get('labels', {}).get(s)) for s in 'ab')) if v.get('labels') else '—'} |"
            for v in merged["vendors"]]
    page.add_table("", ["| vendor | verdict | regressed | fixed | other changes | unchanged | base → head |",
                        "|---|---|---:|---:|---:|---:|---|"], rows, 0, "the vendors' rows", folded=False)
    for priority, row in enumerate(merged["vendors"], start=1):
        lines = [row["first_line"], ""] + _listed(row, "regressed") + _listed(row, "changed")
        page.add(details(f"{row['name']}: {_verdict(row)}", lines), priority, f"{row['name']}'s details")
    return page.text() + COMMENT_MARKER + "\n"


@output.register(MERGE_SCHEMA, output.TERMINAL)
def show(merged: dict, console) -> None:
    from rich.text import Text

    console.print(Text(first_line(merged)))
    for row in merged["vendors"]:
        console.print(Text(f"  {row['name']}: {row['first_line']}"))
