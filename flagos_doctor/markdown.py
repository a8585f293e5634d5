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


def code(text: str) -> str:
    """``text`` as inline code that survives backticks inside it (an error message may quote
    an operator in backticks)."""
    text = str(text)
    return f"`{text}`" if "`" not in text else f"`` {text} ``"


def details(summary: str, lines: list[str], blank_after: bool = True) -> list[str]:
    """``lines`` folded under ``summary``, as lines of Markdown."""
    return ["<details>", f"<summary>{summary}</summary>", "", *lines, "", "</details>"] + ([""] if blank_after else [])


#: GitHub refuses an issue body or comment over 65,536 characters; the default leaves room
#: for the words a person adds around a pasted report.
DEFAULT_MAX_CHARS = 60_000
#: Below this a page cannot hold even a summary and its closing line.
MIN_MAX_CHARS = 2_000
#: GitHub refuses an issue or comment body longer than this: the largest budget taken.
GITHUB_MAX_CHARS = 65_536
#: Room kept for the closing line that says what was left out (beyond the words naming
#: where the full record is).
_CLOSING_ROOM = 700


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


class Page:
    """A Markdown page that stays under ``max_chars`` by design, not by cutting.

    Parts are added in the order they appear on the page, each with a priority: 0 is always
    kept (the summary, what changed); higher numbers are kept, lowest first and in page
    order within a priority, while they fit. A table added with :meth:`add_table` keeps as
    many of its rows as fit. Whatever is left out is named in one closing line, which also
    says where the full record is (``full_record``: a file, or how to get one).
    """

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS, full_record: str = "the JSON document (`--json PATH`)"):
        self.max_chars = max_chars
        self.full_record = full_record
        self._parts: list[dict] = []

    def add(self, lines: list[str], priority: int = 0, what: str | None = None) -> None:
        """A part kept whole or left out whole (``what`` names it in the closing line)."""
        self._parts.append({"lines": list(lines), "priority": priority, "what": what})

    def add_table(self, title: str, head: list[str], rows: list[str], priority: int, what: str,
                  folded: bool = True, note: str | None = None, fold=details) -> None:
        """A table (``head``: its two header lines) keeping as many leading ``rows`` as fit;
        folded in a ``<details>`` block titled ``title`` (by ``fold``), else under a
        ``title`` line."""
        folding = fold if folded else None
        self._parts.append({"table": (title, list(head), list(rows), folding, note), "priority": priority, "what": what})

    @staticmethod
    def _table_lines(table, count: int) -> list[str]:
        title, head, rows, fold, note = table
        shown = rows[:count]
        if count < len(rows) and title:
            title = f"{title} (the first {count} of {len(rows)})"
        body = head + shown + (["", note] if note else [])
        if fold is not None:
            return fold(title, body)
        return ([title, ""] if title else []) + body + [""]

    def text(self) -> str:
        """The page: the parts that fit, in page order, and the closing line."""
        room = self.max_chars - _CLOSING_ROOM - len(self.full_record)
        chosen: dict[int, list[str]] = {}
        left_out: list[tuple[int, str]] = []
        order = sorted(range(len(self._parts)), key=lambda i: (self._parts[i]["priority"], i))
        for index in order:
            part = self._parts[index]
            if "lines" in part:
                size = _size(part["lines"])
                if part["priority"] == 0 or size <= room:
                    chosen[index] = part["lines"]
                    room -= size
                else:
                    left_out.append((index, part["what"] or "a part"))
                continue
            rows = part["table"][2]
            full = self._table_lines(part["table"], len(rows))
            if part["priority"] == 0 or _size(full) <= room:
                chosen[index] = full
                room -= _size(full)
                continue
            fixed = _size(self._table_lines(part["table"], 0)) + 40  # 40: "(the first k of n)"
            count, used = 0, fixed
            while count < len(rows) and used + len(rows[count]) + 1 <= room:
                used += len(rows[count]) + 1
                count += 1
            if count:
                lines = self._table_lines(part["table"], count)
                chosen[index] = lines
                room -= _size(lines)
                left_out.append((index, f"{part['what']}: {len(rows) - count} of {len(rows)} rows"))
            else:
                left_out.append((index, f"{part['what']} ({len(rows)} rows)"))
        out: list[str] = []
        for index in sorted(chosen):
            out += chosen[index]
        text = "\n".join(out).rstrip() + "\n"
        if left_out:
            names = [what for _, what in sorted(left_out)]
            listed = "; ".join(names)
            if len(listed) > _CLOSING_ROOM - 250:
                listed = listed[: _CLOSING_ROOM - 260].rsplit(";", 1)[0] + f"; and {len(names)} parts in all"
            text += (f"\n<sub>Left out to stay under {self.max_chars:,} characters: {listed}. "
                     f"The full record: {self.full_record}.</sub>\n")
        return text


def full_record(json_path: str | None, how: str) -> str:
    """Where a page's full record is, for its closing line: the ``--json`` file when one was
    written, else ``how`` (the command line that writes one)."""
    if json_path and json_path != "-":
        return f"`{json_path}`"
    if json_path == "-":
        return "the JSON written to standard output"
    return how
