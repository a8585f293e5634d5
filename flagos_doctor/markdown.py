"""The pieces every Markdown view shares (probe, survey compare, suite compare, report).

GitHub renders them: a table cell must not hold a ``|`` or a line break, and a long part
goes in a ``<details>`` block, with blank lines around its body so Markdown inside renders.
"""

from __future__ import annotations


def cell(value, none: str | None = None, newline: str = " ") -> str:
    """``value`` as table-cell text: ``|`` escaped, line breaks as ``newline``; None as ``none`` when given."""
    if value is None and none is not None:
        return none
    return str(value).replace("|", "\\|").replace("\n", newline)


def details(summary: str, lines: list[str], blank_after: bool = True) -> list[str]:
    """``lines`` folded under ``summary``, as lines of Markdown."""
    return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>"] + ([""] if blank_after else [])
