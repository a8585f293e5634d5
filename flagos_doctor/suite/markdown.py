"""The comparison document as Markdown, for a PR body or an issue comment.

Renders from the JSON document only, onto a :class:`~flagos_doctor.markdown.Page` under a
character budget: verdict, collected sets and totals always; the transitions next; the
lists of tests in one arm only, renamed and flaky while they fit. Lists longer than
:data:`OPEN_ROWS` go in a ``<details>`` block so the comment stays short.
"""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, code, details
from flagos_doctor.suite.compare import SCHEMA
from flagos_doctor.suite.model import TOTAL_KEYS

OPEN_ROWS = 10


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def _fold(summary: str, lines: list[str]) -> list[str]:
    return details(summary, lines, blank_after=False)


def _add_list(page: Page, summary: str, head: list[str], rows: list[str], priority: int, what: str) -> None:
    """``rows`` under ``head``, in a ``<details>`` block when longer than :data:`OPEN_ROWS`,
    followed by a blank line."""
    page.add_table(summary, head, rows, priority, what, folded=len(rows) > OPEN_ROWS,
                   fold=lambda title, body: _fold(title, body) + [""])


def _totals_brief(totals: dict) -> str:
    return ", ".join(f"{totals[k]} {k}" for k in TOTAL_KEYS[1:] if totals[k]) or "none"


@output.register(SCHEMA, "markdown")
def render(document: dict, max_chars: int = DEFAULT_MAX_CHARS,
           full_record: str = "the comparison's JSON (`suite --compare A B --json PATH`)") -> str:
    page = Page(max_chars, full_record)
    arms = document["arms"]
    a, b = arms["a"]["label"], arms["b"]["label"]
    coll = document["collection"]
    out = [f"### Unit suite: {code(a)} → {code(b)}", "", f"**Verdict:** {document['verdict']}", ""]

    out += ["#### Collected sets", ""]
    if coll["same"]:
        line = f"Both arms collected the same {arms['a']['totals']['collected']} tests."
        out += [line, ""]
    else:
        out += [f"**The arms did not collect the same tests**: {coll['only_a']['count']} only in A, "
                f"{coll['only_b']['count']} only in B, {coll['common']} in both. "
                "The totals below count them; the transitions cover only the tests both ran.", ""]
        rows, listing = [], []
        for side, arm in (("only_a", "A"), ("only_b", "B")):
            for group in coll[side]["files"]:
                rows.append([f"only in {arm}", code(group["file"]), str(len(group["tests"])),
                             _totals_brief(group["totals"]), group["note"]])
                listing += [f"- {code(t)} (only in {arm})" for t in group["tests"]]
        out += _table(["", "file", "tests", "outcomes", "note"], rows) + [""]
        page.add(out)
        out = []
        _add_list(page, f"{len(listing)} tests in one arm only", [], listing, 2, "the tests in one arm only")
    if coll["renamed"]:
        lines = [f"- {code(r['a'])} → {code(r['b'])} ({r['rule']})" for r in coll["renamed"]]
        page.add(out + [f"Renamed (matched, same outcome in both arms): {len(lines)}", ""])
        out = []
        _add_list(page, f"{len(lines)} renamed tests", [], lines, 2, "the renamed tests")

    out += ["#### Totals", ""]
    rows = [[f"A {code(a)}", *(str(arms["a"]["totals"][k]) for k in TOTAL_KEYS)],
            [f"B {code(b)}", *(str(arms["b"]["totals"][k]) for k in TOTAL_KEYS)]]
    if not coll["same"]:
        common = document["common_totals"]
        rows += [["A, tests both ran", *(str(common["a"][k]) for k in TOTAL_KEYS)],
                 ["B, tests both ran", *(str(common["b"][k]) for k in TOTAL_KEYS)]]
    out += _table(["", *TOTAL_KEYS], rows) + [""]

    out += ["#### Transitions (regressions first)", ""]
    page.add(out)
    _transitions(page, document["transitions"], "transitions", 1)
    flaky = document["flaky"]
    if flaky["list"]:
        page.add(["#### Flaky tests (reported apart, never regressions)", ""])
        _transitions(page, flaky["transitions"], "flaky transitions", 2)
        if flaky["unmatched"]:
            page.add(["Entries of the flaky list that match no test: "
                      + ", ".join(code(e) for e in flaky["unmatched"]), ""])
    counts = document["counts"]
    page.add([f"{counts['unchanged']} tests unchanged.", ""])
    return page.text()


def _transitions(page: Page, transitions: list[dict], what: str, priority: int) -> None:
    if not transitions:
        page.add(["None.", ""])
        return
    rows = []
    for t in transitions:
        test = code(t["test"]) + (f" (was {code(t['was'])})" if t.get("was") else "")
        rows.append([t["kind"], test, t["from"], t["to"], t["message"]])
    lines = _table(["kind", "test", "A", "B", "message"], rows)
    _add_list(page, f"{len(rows)} {what}", lines[:2], lines[2:], priority, what)
