"""The comparison document as Markdown, for a PR body or an issue comment.

Renders from the JSON document only. Lists longer than :data:`OPEN_ROWS` go in a
``<details>`` block so the comment stays short.
"""

from __future__ import annotations

from flagos_doctor.markdown import cell, details
from flagos_doctor.suite.model import TOTAL_KEYS

OPEN_ROWS = 10


def _code(text: str) -> str:
    return f"`{text}`" if "`" not in text else f"``{text}``"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


def _maybe_folded(summary: str, lines: list[str], rows: int) -> list[str]:
    if rows <= OPEN_ROWS:
        return lines
    return details(summary, lines, blank_after=False)


def _totals_brief(totals: dict) -> str:
    return ", ".join(f"{totals[k]} {k}" for k in TOTAL_KEYS[1:] if totals[k]) or "none"


def format(document: dict) -> str:
    arms = document["arms"]
    a, b = arms["a"]["label"], arms["b"]["label"]
    coll = document["collection"]
    out = [f"### Unit suite: {_code(a)} → {_code(b)}", "", f"**Verdict:** {document['verdict']}", ""]

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
                rows.append([f"only in {arm}", _code(group["file"]), str(len(group["tests"])),
                             _totals_brief(group["totals"]), group["note"]])
                listing += [f"- {_code(t)} (only in {arm})" for t in group["tests"]]
        out += _table(["", "file", "tests", "outcomes", "note"], rows) + [""]
        out += _maybe_folded(f"{len(listing)} tests in one arm only", listing, len(listing)) + [""]
    if coll["renamed"]:
        lines = [f"- {_code(r['a'])} → {_code(r['b'])} ({r['rule']})" for r in coll["renamed"]]
        out += [f"Renamed (matched, same outcome in both arms): {len(lines)}", ""]
        out += _maybe_folded(f"{len(lines)} renamed tests", lines, len(lines)) + [""]

    out += ["#### Totals", ""]
    rows = [[f"A {_code(a)}", *(str(arms["a"]["totals"][k]) for k in TOTAL_KEYS)],
            [f"B {_code(b)}", *(str(arms["b"]["totals"][k]) for k in TOTAL_KEYS)]]
    if not coll["same"]:
        common = document["common_totals"]
        rows += [["A, tests both ran", *(str(common["a"][k]) for k in TOTAL_KEYS)],
                 ["B, tests both ran", *(str(common["b"][k]) for k in TOTAL_KEYS)]]
    out += _table(["", *TOTAL_KEYS], rows) + [""]

    out += ["#### Transitions (regressions first)", ""]
    out += _transitions(document["transitions"], "transitions")
    flaky = document["flaky"]
    if flaky["list"]:
        out += ["#### Flaky tests (reported apart, never regressions)", ""]
        out += _transitions(flaky["transitions"], "flaky transitions")
        if flaky["unmatched"]:
            out += ["Entries of the flaky list that match no test: "
                    + ", ".join(_code(e) for e in flaky["unmatched"]), ""]
    counts = document["counts"]
    out += [f"{counts['unchanged']} tests unchanged.", ""]
    return "\n".join(out)


def _transitions(transitions: list[dict], what: str) -> list[str]:
    if not transitions:
        return ["None.", ""]
    rows = []
    for t in transitions:
        test = _code(t["test"]) + (f" (was {_code(t['was'])})" if t.get("was") else "")
        rows.append([t["kind"], test, t["from"], t["to"], t["message"]])
    lines = _table(["kind", "test", "A", "B", "message"], rows)
    return _maybe_folded(f"{len(rows)} {what}", lines, len(rows)) + [""]
