"""The comparison document as Markdown for a pull request or an issue.

Renders from the JSON document alone. Lists longer than :data:`INLINE_MAX` go in
``<details>`` blocks so the page stays readable.
"""

from __future__ import annotations

from flagos_doctor.compare.diff import case_text
from flagos_doctor.markdown import cell, details

INLINE_MAX = 10


def _cell(value) -> str:
    return cell(value, none="—")


def _case(view) -> str:
    return case_text(view)


def _details(summary: str, lines: list[str]) -> list[str]:
    if len(lines) <= INLINE_MAX + 2:  # the table head is 2 lines
        return lines + [""]
    return details(summary, lines)


def render(comparison: dict, heading_level: int = 2) -> str:
    """Markdown text of ``comparison`` (schema ``flagos-doctor/compare/1``)."""
    h = "#" * heading_level
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
        f"- regressions: **{comparison.get('regressions', 0)}**, fixes: {comparison.get('fixes', 0)}, "
        f"other changes: {comparison.get('changes', 0)}, unchanged overloads: {comparison.get('unchanged', 0)}",
        f"- census byte-identical: **{verdict}** (A `{digests.get('a')}`, B `{digests.get('b')}`)",
    ]
    if comparison.get("flaky_only"):
        out.append(f"- the runs differ only in cases either side marks FLAKY ({len(comparison['cases_changed'])})")
    out += [
        "",
    ]
    context = [(k, arms.get("a", {}).get(k), arms.get("b", {}).get(k)) for k in ("source", "commit", "path")]
    context += [
        (name, arms.get("a", {}).get("context", {}).get(name), arms.get("b", {}).get("context", {}).get(name))
        for name in arms.get("a", {}).get("context", {})
    ]
    rows = ["| | A | B | Δ |", "|---|---:|---:|---:|"]
    for row in comparison.get("summary", {}).get("rows", []):
        delta = row.get("delta")
        delta_text = "" if not delta else f"{delta:+d}"
        rows.append(f"| {row['name']} | {_cell(row['a'])} | {_cell(row['b'])} | {delta_text} |")
    out += _details("Summary, side by side", rows)
    ctx_rows = ["| | A | B |", "|---|---|---|"] + [
        f"| {name} | {_cell(va)} | {_cell(vb)} |" for name, va, vb in context if va is not None or vb is not None
    ]
    if len(ctx_rows) > 2:
        out += details("Runs", ctx_rows)
    transitions = comparison.get("transitions") or []
    out += [f"{h}# Verdict transitions ({len(transitions)})", ""]
    if transitions:
        lines = ["| overload | A | B | kind |", "|---|---|---|---|"]
        for t in transitions:
            lines.append(f"| `{t['overload']}` | {_cell(t['from'])} | {_cell(t['to'])} | {t['kind']}: {t['mark']} |")
        out += _details(f"{len(transitions)} verdict transitions", lines)
    else:
        out += ["None.", ""]
    cases = comparison.get("cases_changed") or []
    out += [f"{h}# Cases changed ({len(cases)})", ""]
    if cases:
        lines = ["| overload | profile | A | B | |", "|---|---|---|---|---|"]
        for c in cases:
            mark = "regression" if c.get("regression") else ""
            lines.append(f"| `{c['overload']}` | {_cell(c['profile'])} | {_case(c['from'])} | {_case(c['to'])} | {mark} |")
        out += _details(f"{len(cases)} cases changed", lines)
    else:
        out += ["None.", ""]
    return "\n".join(out).rstrip() + "\n"
