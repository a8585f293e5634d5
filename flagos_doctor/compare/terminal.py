"""The comparison document as a rich terminal view. Renders from the JSON document alone."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flagos_doctor.compare.diff import case_text

_KIND_STYLE = {"regression": "bold red", "fix": "green", "change": "yellow"}


def _plain(value) -> str:
    return "-" if value is None else str(value)


def _short(value) -> str:
    """Long hex digests cut to 16 characters: the Markdown and JSON keep them whole."""
    text = _plain(value)
    if len(text) == 64 and all(c in "0123456789abcdef" for c in text):
        return text[:16] + "…"
    return text


def _case(view) -> str:
    return case_text(view)


def render(comparison: dict, console: Console) -> None:
    arms = comparison.get("arms", {})
    label_a = arms.get("a", {}).get("label", "A")
    label_b = arms.get("b", {}).get("label", "B")
    console.print(Text(f"Survey comparison: A = {label_a}   B = {label_b}", style="bold"))
    diffs = comparison.get("differences") or []
    if diffs:
        state = "compared anyway (--force)" if comparison.get("forced") else "refused"
        table = Table(title=f"Not comparable: {state}", title_style="bold red", show_edge=False)
        for col in ("field", "A", "B"):
            table.add_column(col, overflow="fold")
        for d in diffs:
            table.add_row(d["field"], _plain(d["a"]), _plain(d["b"]))
        console.print(table)

    summary = Table(title="Summary", show_edge=False)
    summary.add_column("")
    summary.add_column("A", justify="right")
    summary.add_column("B", justify="right")
    summary.add_column("Δ", justify="right")
    for row in comparison.get("summary", {}).get("rows", []):
        delta = row.get("delta")
        style = "" if not delta else ("cyan")
        summary.add_row(row["name"], _plain(row["a"]), _plain(row["b"]), Text("" if not delta else f"{delta:+d}", style=style))
    console.print(summary)

    context_a = arms.get("a", {}).get("context", {})
    context_b = arms.get("b", {}).get("context", {})
    shown = [(k, arms.get("a", {}).get(k), arms.get("b", {}).get(k)) for k in ("source", "commit", "path")]
    shown += [(k, context_a.get(k), context_b.get(k)) for k in context_a]
    shown = [(k, va, vb) for k, va, vb in shown if va is not None or vb is not None]
    if shown:
        runs = Table(title="Runs", show_edge=False)
        runs.add_column("")
        runs.add_column("A", overflow="fold")
        runs.add_column("B", overflow="fold")
        for name, va, vb in shown:
            runs.add_row(name, _short(va), _short(vb))
        console.print(runs)

    transitions = comparison.get("transitions") or []
    if transitions:
        table = Table(title=f"Verdict transitions ({len(transitions)})", show_edge=False)
        for col in ("overload", "A", "B", "kind"):
            table.add_column(col)
        for t in transitions:
            style = _KIND_STYLE.get(t["kind"], "")
            table.add_row(t["overload"], _plain(t["from"]), _plain(t["to"]), Text(f"{t['kind']}: {t['mark']}", style=style))
        console.print(table)
    cases = comparison.get("cases_changed") or []
    if cases:
        table = Table(title=f"Cases changed ({len(cases)})", show_edge=False)
        for col in ("overload", "profile", "A", "B", ""):
            table.add_column(col)
        for c in cases:
            mark = Text("regression", style="bold red") if c.get("regression") else Text("")
            table.add_row(c["overload"], _plain(c["profile"]), _case(c["from"]), _case(c["to"]), mark)
        console.print(table)

    digests = comparison.get("census_sha256") or {}
    identical = comparison.get("census_identical")
    console.print(
        Text.assemble(
            "census byte-identical: ",
            Text("yes" if identical else "no", style="bold green" if identical else "bold yellow"),
            f"  (A {digests.get('a')}, B {digests.get('b')})",
        )
    )
    if comparison.get("flaky_only"):
        console.print(f"the runs differ only in cases either side marks FLAKY ({len(comparison['cases_changed'])})")
    regressions = comparison.get("regressions", 0)
    console.print(
        Text.assemble(
            Text(f"{regressions} regressed", style="bold red" if regressions else "green"),
            f", {comparison.get('fixes', 0)} fixed, {comparison.get('changes', 0)} other changes, "
            f"{comparison.get('unchanged', 0)} overloads unchanged",
        )
    )
