"""The comparison document as Markdown for a pull request or an issue.

Renders from the JSON document alone, onto a :class:`~flagos_doctor.markdown.Page` that
stays under a character budget: the verdict line and what changed, grouped by cause,
first; then the failures of both runs by cause, largest first; then the side-by-side
summary, the runs, the verdict transitions and the changed cases in ``<details>`` blocks
while they fit. Lists of :data:`INLINE_MAX` rows or fewer stay open.
"""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.compare.diff import COMPARE_SCHEMA, case_text, named, regression_text, sticky_text
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, code
from flagos_doctor.results import groups
from flagos_doctor.results.groups import overloads_named

INLINE_MAX = 10
#: Overloads named beside a group (the JSON lists every member).
GROUP_NAMES = 3
#: Failure groups named in the opening lines.
HEADLINES = 3


def _cell(value) -> str:
    return cell(value, none="—")


def _case(view) -> str:
    return case_text(view)


def _names(members: list) -> str:
    return overloads_named(members, GROUP_NAMES, quote=lambda name: f"`{_cell(name)}`")


def _named(comparison: dict, key: str) -> str:
    return _cell(named(comparison, key, quote=lambda name: f"`{name}`"))


def _side(text: str) -> str:
    return "absent" if text == "absent" else code(_cell(text))


def headline(group: dict) -> str:
    """One compared failure group in words: ``525 ERROR cases: ..., in 246 overloads, only in A``."""
    a, b = group["a"], group["b"]
    if group["presence"] == "in both":
        counts = f"A {a['cases']} cases in {a['overloads']} overloads, B {b['cases']} in {b['overloads']}"
        return f"{group['status']}: {group['signature']} ({counts})"
    side = a if group["presence"] == "only in A" else b
    return (f"{side['cases']} {group['status']} cases: {group['signature']}, "
            f"in {side['overloads']} overloads, {group['presence']}")


def _opening(comparison: dict, h: str) -> list[str]:
    """The heading, the refusal, the counts and the largest causes: the part always kept."""
    arms = comparison.get("arms", {})
    label_a = arms.get("a", {}).get("label", "A")
    label_b = arms.get("b", {}).get("label", "B")
    out = [f"{h} Survey comparison: `{label_a}` → `{label_b}`", ""]
    diffs = comparison.get("differences") or []
    if diffs:
        state = "compared anyway (--force)" if comparison.get("forced") else "refused"
        out += [f"**Not comparable** ({state}); these fields differ:", ""]
        out += ["| field | A | B |", "|---|---|---|"]
        out += [f"| {d['field']} | {_cell(d['a'])} | {_cell(d['b'])} |" for d in diffs]
        out.append("")
    verdict = "yes" if comparison.get("census_identical") else "no"
    digests = comparison.get("census_sha256") or {}
    out += [
        f"- regressions: **{comparison.get('regressions', 0)}**{_named(comparison, 'regressed_overloads')}, "
        f"fixes: {comparison.get('fixes', 0)}, other changes: {comparison.get('changes', 0)}"
        f"{_named(comparison, 'changed_overloads')}, unchanged overloads: {comparison.get('unchanged', 0)}"
        + (f", not surveyed in either run: {comparison['unsurveyed']}" if comparison.get("unsurveyed") else ""),
        f"- cases changed: {len(comparison.get('cases_changed') or [])}, "
        f"in {len(comparison.get('change_groups') or [])} groups by cause",
        f"- census byte-identical: **{verdict}** (A `{digests.get('a')}`, B `{digests.get('b')}`)",
    ]
    if comparison.get("flaky_only"):
        out.append(f"- the runs differ only in cases either side marks FLAKY ({len(comparison['cases_changed'])})")
    traced = comparison.get("sticky_traced") or []
    if traced:
        out.append(f"- sticky device errors traced to another case, not the stack's ({len(traced)}):")
        out += [f"  - {_cell(sticky_text(entry))}" for entry in traced[:HEADLINES]]
    failures = comparison.get("failure_groups") or []
    counted = groups.counted(failures)  # as the survey's summary: not INVALID_CASE, UNVERIFIABLE, FLAKY
    if counted:
        out.append("- largest causes of failure:")
        out += [f"  - {_cell(headline(g))}" for g in counted[:HEADLINES]]
    return out + [""]


def _groups(page: Page, comparison: dict, h: str, p: int) -> None:
    """What changed and the failures of both runs, by cause."""
    failures = comparison.get("failure_groups") or []

    changes = comparison.get("change_groups") or []
    if changes:
        rows = [
            f"| {g['cases']} | {g['overloads']} | {_side(g['from'])} | {_side(g['to'])} | "
            f"{'**regression**' if g.get('regression') else ''} | {_names(g['members'])} |"
            for g in changes
        ]
        page.add_table(f"{h}# What changed, by cause ({len(changes)} groups)",
                       ["| cases | overloads | A | B | | e.g. |", "|---:|---:|---|---|---|---|"],
                       rows, p + 1, "groups of changed cases", folded=False)
    if failures:
        rows = [
            f"| {g['a']['cases']} | {g['b']['cases']} | {g['presence']} | {_cell(g['status'])} | "
            f"{code(_cell(g['signature']))} | {_names(g['members']['a'] or g['members']['b'])} |"
            for g in failures
        ]
        page.add_table(f"{h}# Failures by cause, both runs ({len(failures)} groups)",
                       ["| A cases | B cases | | status | cause | e.g. |", "|---:|---:|---|---|---|---|"],
                       rows, p + 1, "failure groups", folded=len(rows) > INLINE_MAX)


def _side_by_side(page: Page, comparison: dict, p: int) -> None:
    """The summary and the runs' provenance, side by side."""
    arms = comparison.get("arms", {})
    summary = ["| | A | B | Δ |", "|---|---:|---:|---:|"]
    for row in comparison.get("summary", {}).get("rows", []):
        delta = row.get("delta")
        summary.append(f"| {row['name']} | {_cell(row['a'])} | {_cell(row['b'])} | {'' if not delta else f'{delta:+d}'} |")
    page.add_table("Summary, side by side", summary[:2], summary[2:], p + 2, "the side-by-side summary")
    context = [(k, arms.get("a", {}).get(k), arms.get("b", {}).get(k)) for k in ("source", "commit", "path")]
    context += [
        (name, arms.get("a", {}).get("context", {}).get(name), arms.get("b", {}).get("context", {}).get(name))
        for name in arms.get("a", {}).get("context", {})
    ]
    ctx_rows = [f"| {name} | {_cell(va)} | {_cell(vb)} |" for name, va, vb in context if va is not None or vb is not None]
    if ctx_rows:
        page.add_table("Runs", ["| | A | B |", "|---|---|---|"], ctx_rows, p + 2, "the runs' provenance")


def _lists(page: Page, comparison: dict, h: str, p: int) -> None:
    """The verdict transitions and the changed cases."""
    transitions = comparison.get("transitions") or []
    page.add([f"{h}# Verdict transitions ({len(transitions)})", ""] + ([] if transitions else ["None.", ""]), p)
    if transitions:
        rows = [f"| `{t['overload']}` | {_cell(t['from'])} | {_cell(t['to'])} | {t['kind']}: {t['mark']} |"
                for t in transitions]
        page.add_table(f"{len(transitions)} verdict transitions", ["| overload | A | B | kind |", "|---|---|---|---|"],
                       rows, p + 3, "verdict transitions", folded=len(rows) > INLINE_MAX)
    cases = comparison.get("cases_changed") or []
    page.add([f"{h}# Cases changed ({len(cases)})", ""] + ([] if cases else ["None.", ""]), p)
    if cases:
        rows = [
            f"| `{c['overload']}` | {_cell(c['profile'])} | {_case(c['from'])} | {_case(c['to'])} | "
            f"{regression_text(c)} |"
            for c in cases
        ]
        page.add_table(f"{len(cases)} cases changed", ["| overload | profile | A | B | |", "|---|---|---|---|---|"],
                       rows, p + 4, "changed cases", folded=len(rows) > INLINE_MAX)


def render_into(page: Page, comparison: dict, heading_level: int = 2, base_priority: int = 0) -> None:
    """Add ``comparison`` (schema ``flagos-doctor/compare/1``) to ``page``."""
    h = "#" * heading_level
    page.add(_opening(comparison, h), base_priority)
    _groups(page, comparison, h, base_priority)
    _side_by_side(page, comparison, base_priority)
    _lists(page, comparison, h, base_priority)


@output.register(COMPARE_SCHEMA, "markdown")
def render(comparison: dict, heading_level: int = 2, max_chars: int = DEFAULT_MAX_CHARS,
           full_record: str | None = None) -> str:
    """Markdown text of ``comparison``, under ``max_chars`` characters."""
    page = Page(max_chars, full_record or "the comparison's JSON (`survey --compare A B --json PATH`)")
    render_into(page, comparison, heading_level)
    return page.text()
