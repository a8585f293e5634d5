"""The matrix document as Markdown, under a character budget. Renders from the document alone.

The runs (with their notes) and the per-column totals come first, always. The table of
overloads follows as one table when it fits; otherwise it is split by op family into
``<details>`` blocks, kept while they fit, and the closing line names the families left
out (the JSON and the CSV carry every row).
"""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, details
from flagos_doctor.matrix.build import MATRIX_SCHEMA

#: The Markdown sign of each mark, explained under the totals.
SIGNS = {"native-also": "†", "flaky": "~"}
#: Overloads per block when the table is split by family (families are never cut).
BLOCK_ROWS = 60


def cell_text(value: dict | None) -> str:
    if value is None:
        return "—"
    return cell(value.get("verdict")) + "".join(SIGNS.get(m, f" [{m}]") for m in value.get("marks") or [])


def _head(columns: list[dict]) -> list[str]:
    return ["| overload | " + " | ".join(f"{i + 1}" for i in range(len(columns))) + " |",
            "|---|" + "---|" * len(columns)]


def _rows(rows: list[dict]) -> list[str]:
    return [f"| `{cell(row['overload'])}` | " + " | ".join(cell_text(c) for c in row["cells"]) + " |" for row in rows]


def _blocks(rows: list[dict]) -> list[list[dict]]:
    """``rows`` (sorted by overload) cut into runs of whole families of about BLOCK_ROWS."""
    by_family: dict = {}
    for row in rows:
        by_family.setdefault(row["family"], []).append(row)
    blocks, current = [], []
    for name in sorted(by_family):
        if current and len(current) + len(by_family[name]) > BLOCK_ROWS:
            blocks.append(current)
            current = []
        current += by_family[name]
    if current:
        blocks.append(current)
    return blocks


@output.register(MATRIX_SCHEMA, "markdown")
def render(matrix: dict, max_chars: int = DEFAULT_MAX_CHARS,
           full_record: str = "the matrix JSON or CSV (`matrix ... --json PATH --csv PATH`)") -> str:
    page = Page(max_chars, full_record)
    columns = matrix.get("columns") or []
    rows = matrix.get("rows") or []
    plural = "" if len(columns) == 1 else "s"
    page.add([f"## Operator support: {len(rows)} overloads, {len(columns)} run{plural}", ""])
    # The runs and their totals come first; under a small budget the runs table keeps as
    # many runs as fit (the closing line says how many are left out).
    page.add_table("", ["| # | run | source | note |", "|---|---|---|---|"], [
        f"| {index + 1} | {cell(column.get('label'))} | `{cell(column.get('path'))}` | {cell(column.get('note'), none='')} |"
        for index, column in enumerate(columns)], 1, "the runs table", folded=False)
    out = ["| | " + " | ".join(str(i + 1) for i in range(len(columns))) + " |", "|---|" + "---:|" * len(columns)]
    totals = matrix.get("totals") or []
    out.append("| overloads | " + " | ".join(str(t.get("overloads", 0)) for t in totals) + " |")
    for verdict in matrix.get("verdicts") or []:
        out.append(f"| {cell(verdict)} | " + " | ".join(str(t["verdicts"].get(verdict, 0)) for t in totals) + " |")
    for mark in matrix.get("marks") or {}:
        out.append(f"| {SIGNS.get(mark, mark)} {mark} | " + " | ".join(str(t["marks"].get(mark, 0)) for t in totals) + " |")
    out.append("")
    legend = [f"{SIGNS.get(m, m)} {meaning}" for m, meaning in (matrix.get("marks") or {}).items()]
    if legend:
        out += ["Marks: " + "; ".join(legend) + ".", ""]
    out += ["— : the run has no such overload.", ""]
    page.add(out, 1, "the totals per run")
    whole = _head(columns) + _rows(rows)
    fixed = sum(len(line) + 1 for line in out) + sum(len(c.get("label") or "") + len(c.get("path") or "") + 20
                                                     for c in columns) + 1_000
    if sum(len(line) + 1 for line in whole) + fixed <= max_chars:
        page.add(["### Overloads", ""] + whole + [""])
        return page.text()
    page.add(["### Overloads, by op family", ""])
    for block in _blocks(rows):
        first, last = block[0]["family"], block[-1]["family"]
        span = first if first == last else f"{first} … {last}"
        page.add(details(f"{span} ({len(block)} overloads)", _head(columns) + _rows(block)), 1,
                 f"families {span} ({len(block)} overloads)")
    return page.text()
