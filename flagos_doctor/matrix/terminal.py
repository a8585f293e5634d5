"""The matrix document as a terminal view: the runs, the totals, then every overload as
plain aligned lines (no rich table: hundreds of rows print as fast as they are written)."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from flagos_doctor import output
from flagos_doctor.matrix.build import MATRIX_SCHEMA
from flagos_doctor.matrix.markdown import SIGNS


def _text(value: dict | None) -> str:
    if value is None:
        return "-"
    return str(value.get("verdict")) + "".join(SIGNS.get(m, f"[{m}]") for m in value.get("marks") or [])


@output.register(MATRIX_SCHEMA, output.TERMINAL, highlight=False)
def show(matrix: dict, console: Console) -> None:
    columns = matrix.get("columns") or []
    rows = matrix.get("rows") or []
    console.print(Text(f"Operator support: {len(rows)} overloads, {len(columns)} run{'' if len(columns) == 1 else 's'}",
                       style="bold"))
    for index, column in enumerate(columns):
        note = f"  ({column['note']})" if column.get("note") else ""
        console.print(Text(f"  {index + 1}  {column.get('label')}  {column.get('path')}{note}"), highlight=False)
    names = ["overloads", *(matrix.get("verdicts") or []), *(f"{SIGNS.get(m, m)} {m}" for m in matrix.get("marks") or {})]
    width = max(len(n) for n in names)
    totals = matrix.get("totals") or []
    lines = []
    lines.append("".ljust(width) + "".join(f"{i + 1:>12}" for i in range(len(columns))))
    lines.append("overloads".ljust(width) + "".join(f"{t.get('overloads', 0):>12}" for t in totals))
    for verdict in matrix.get("verdicts") or []:
        lines.append(verdict.ljust(width) + "".join(f"{t['verdicts'].get(verdict, 0):>12}" for t in totals))
    for mark in matrix.get("marks") or {}:
        lines.append(f"{SIGNS.get(mark, mark)} {mark}".ljust(width) + "".join(f"{t['marks'].get(mark, 0):>12}" for t in totals))
    console.print(Text("Totals", style="bold"))
    console.print(Text("\n".join("  " + line for line in lines)), highlight=False)
    if rows:
        name_width = max(len(r["overload"]) for r in rows)
        cells = [[_text(c) for c in r["cells"]] for r in rows]
        widths = [max(len(row[i]) for row in cells) for i in range(len(columns))]
        body = ["overload".ljust(name_width) + "  " + "  ".join(str(i + 1).ljust(widths[i]) for i in range(len(columns)))]
        body += [r["overload"].ljust(name_width) + "  " + "  ".join(c.ljust(widths[i]) for i, c in enumerate(row)).rstrip()
                 for r, row in zip(rows, cells)]
        console.print(Text("Overloads", style="bold"))
        console.print(Text("\n".join("  " + line for line in body)), highlight=False)
    for mark, meaning in (matrix.get("marks") or {}).items():
        console.print(Text(f"{SIGNS.get(mark, mark)} {meaning}", style="dim"))
