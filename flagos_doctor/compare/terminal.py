"""The comparison document as a terminal view. Renders from the JSON document alone.

A large comparison (FlagGems 4.2.0 against 5.0.2: 1,444 changed cases) shows as its
summary and its largest groups by cause; ``--all`` adds every transition and every
changed case. The long lists are plain aligned lines, not rich tables, so printing them
costs no more than writing them.
"""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flagos_doctor import output
from flagos_doctor.compare.diff import COMPARE_SCHEMA, case_text, named, regression_text, sticky_text
from flagos_doctor.results.groups import overloads_named

_KIND_STYLE = {"regression": "bold red", "fix": "green", "change": "yellow"}
#: Groups, transitions and regressed cases shown without --all.
TOP = 10


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


def _columns(rows: list[tuple]) -> list[str]:
    """``rows`` of strings as left-aligned columns (the last one unpadded)."""
    if not rows:
        return []
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])) + "  " + row[-1] for row in rows]


def _block(console: Console, title: str, lines: list[str], shown: int, hint: str | None) -> None:
    console.print(Text(title, style="bold"))
    console.print(Text("\n".join("  " + line for line in lines[:shown])), highlight=False)
    if len(lines) > shown and hint:
        console.print(Text(f"  … {len(lines) - shown} more ({hint})", style="dim"))


def _refusal(console: Console, comparison: dict) -> None:
    diffs = comparison.get("differences") or []
    if not diffs:
        return
    state = "compared anyway (--force)" if comparison.get("forced") else "refused"
    table = Table(title=f"Not comparable: {state}", title_style="bold red", show_edge=False)
    for col in ("field", "A", "B"):
        table.add_column(col, overflow="fold")
    for d in diffs:
        table.add_row(d["field"], _plain(d["a"]), _plain(d["b"]))
    console.print(table)


def _summary(console: Console, comparison: dict) -> None:
    summary = Table(title="Summary", show_edge=False)
    summary.add_column("")
    for col in ("A", "B", "Δ"):
        summary.add_column(col, justify="right")
    for row in comparison.get("summary", {}).get("rows", []):
        delta = row.get("delta")
        summary.add_row(row["name"], _plain(row["a"]), _plain(row["b"]), Text("" if not delta else f"{delta:+d}", style="cyan"))
    console.print(summary)


def _runs(console: Console, arms: dict) -> None:
    context_a = arms.get("a", {}).get("context", {})
    context_b = arms.get("b", {}).get("context", {})
    shown = [(k, arms.get("a", {}).get(k), arms.get("b", {}).get(k)) for k in ("source", "commit", "path")]
    shown += [(k, context_a.get(k), context_b.get(k)) for k in context_a]
    shown = [(k, va, vb) for k, va, vb in shown if va is not None or vb is not None]
    if not shown:
        return
    runs = Table(title="Runs", show_edge=False)
    runs.add_column("")
    runs.add_column("A", overflow="fold")
    runs.add_column("B", overflow="fold")
    for name, va, vb in shown:
        runs.add_row(name, _short(va), _short(vb))
    console.print(runs)


def _groups(console: Console, comparison: dict, limit: int | None, more: str | None) -> None:
    changes = comparison.get("change_groups") or []
    if changes:
        rows = [(f"{g['cases']} cases", f"{g['overloads']} overloads", "REGRESSION" if g.get("regression") else "",
                 f"{g['from']}  ->  {g['to']}   e.g. {overloads_named(g['members'])}") for g in changes]
        _block(console, f"What changed, by cause ({len(changes)} groups)", _columns(rows), limit or len(rows), more)
    failures = comparison.get("failure_groups") or []
    if failures:
        rows = [(f"A {g['a']['cases']}", f"B {g['b']['cases']}", g["presence"], g["status"], g["signature"])
                for g in failures]
        _block(console, f"Failures by cause ({len(failures)} groups)", _columns(rows), limit or len(rows), more)


def _transitions(console: Console, comparison: dict, show_all: bool, more: str | None) -> None:
    transitions = comparison.get("transitions") or []
    if transitions:
        rows = [(t["overload"], f"{_plain(t['from'])} -> {_plain(t['to'])}", f"{t['kind']}: {t['mark']}") for t in transitions]
        # Regressions sort first: without --all they show, and at least TOP lines.
        regressions = sum(1 for t in transitions if t["kind"] == "regression")
        _block(console, f"Verdict transitions ({len(transitions)})", _columns(rows),
               len(rows) if show_all else max(regressions, TOP), more)


def _cases(console: Console, comparison: dict, show_all: bool) -> None:
    cases = comparison.get("cases_changed") or []
    if not cases:
        return
    picked = cases if show_all else [c for c in cases if c.get("regression")][:TOP]
    rows = [(c["overload"], _plain(c["profile"]), f"{_case(c['from'])} -> {_case(c['to'])}", regression_text(c))
            for c in picked]
    if show_all:
        title = f"Cases changed ({len(cases)})"
    else:  # only the regressions are listed here: say how many there are, none included
        title = f"Cases changed ({len(cases)}), of them regressions ({comparison.get('case_regressions', 0)})"
    console.print(Text(title, style="bold"))
    if rows:
        console.print(Text("\n".join("  " + line for line in _columns(rows))), highlight=False)
    if not show_all and len(cases) > len(picked):
        console.print(Text(f"  … {len(cases) - len(picked)} more (--all shows every line)", style="dim"))


def _closing(console: Console, comparison: dict, show_all: bool, more: str | None) -> None:
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
    traced = comparison.get("sticky_traced") or []
    if traced:
        _block(console, f"Sticky device errors traced to another case, not the stack's ({len(traced)})",
               [sticky_text(entry) for entry in traced], len(traced) if show_all else TOP, more)
    regressions = comparison.get("regressions", 0)
    console.print(
        Text.assemble(
            Text(f"{regressions} regressed{named(comparison, 'regressed_overloads')}",
                 style="bold red" if regressions else "green"),
            f", {comparison.get('fixes', 0)} fixed, {comparison.get('changes', 0)} other changes"
            f"{named(comparison, 'changed_overloads')}, {comparison.get('unchanged', 0)} overloads unchanged",
            f", {comparison['unsurveyed']} not surveyed in either run" if comparison.get("unsurveyed") else "",
        )
    )


@output.register(COMPARE_SCHEMA, output.TERMINAL, markup=False)  # labels, paths, causes: text
def show(comparison: dict, console: Console, show_all: bool = False) -> None:
    arms = comparison.get("arms", {})
    label_a = arms.get("a", {}).get("label", "A")
    label_b = arms.get("b", {}).get("label", "B")
    more = None if show_all else "--all shows every line"
    console.print(Text(f"Survey comparison: A = {label_a}   B = {label_b}", style="bold"))
    _refusal(console, comparison)
    _summary(console, comparison)
    _runs(console, arms)
    _groups(console, comparison, None if show_all else TOP, more)
    _transitions(console, comparison, show_all, more)
    _cases(console, comparison, show_all)
    _closing(console, comparison, show_all, more)
