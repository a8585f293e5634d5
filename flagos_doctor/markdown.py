"""The pieces every Markdown view shares (probe, survey compare, suite compare, report).

GitHub renders them: a table cell must not hold a ``|`` or a line break, and a long part
goes in a ``<details>`` block, with blank lines around its body so Markdown inside renders;
its ``<summary>`` is plain text (no heading marks, no HTML of a user's names).
"""

from __future__ import annotations

import html


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


def summary_text(text: str) -> str:
    """``text`` as a ``<summary>``'s: one line of plain text. A title written as a heading
    (``### Failures``) loses its marks, which GitHub would show as they are; ``<`` ``>`` ``&``
    of a name (an overload, a box's folder) are escaped, so none closes the block."""
    return html.escape(" ".join(str(text).split()).lstrip("#").strip(), quote=False)


def details(summary: str, lines: list[str], blank_after: bool = True) -> list[str]:
    """``lines`` folded under ``summary`` (:func:`summary_text`), as lines of Markdown."""
    return (["<details>", f"<summary>{summary_text(summary)}</summary>", "", *lines, "", "</details>"]
            + ([""] if blank_after else []))


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


#: The shortest a line is cut to when the parts always kept would not fit (a 100 KB
#: overload name, a 100 KB command line): long enough to tell the line apart.
MIN_LINE_CHARS = 300
#: The longest ``full_record`` shown (the closing line names it).
_RECORD_CHARS = 300


def _size(lines: list[str]) -> int:
    return sum(len(line) + 1 for line in lines)


def cut_line(line: str, limit: int) -> str:
    """``line`` when at most ``limit`` characters, else its start and how long it was."""
    if len(line) <= limit:
        return line
    note = f" … ({len(line):,} characters, cut)"
    return line[: max(limit - len(note), 0)] + note


def _capped(lines: list[str], room: int) -> list[str]:
    """``lines`` with the longest cut to the one length (no less than :data:`MIN_LINE_CHARS`)
    at which they fit ``room``, when some length does; else all cut to that least length."""
    if _size(lines) <= room:
        return lines
    low, high = MIN_LINE_CHARS, max(len(line) for line in lines)
    while low < high:  # the largest length that fits
        middle = (low + high + 1) // 2
        if _size([cut_line(line, middle) for line in lines]) <= room:
            low = middle
        else:
            high = middle - 1
    return [cut_line(line, low) for line in lines]


def _head_of(lines: list[str], room: int) -> list[str]:
    """The leading ``lines`` that fit ``room``, any ``<details>`` left open closed, and a
    line counting the rest."""
    kept, used = [], 0
    for line in lines:
        if used + len(line) + 1 > room - 200:  # 200: the closers and the count
            break
        kept.append(line)
        used += len(line) + 1
    still_open = sum(line.startswith("<details") for line in kept) - sum(line == "</details>" for line in kept)
    return kept + ["", "</details>"] * max(still_open, 0) + ["", f"… {len(lines) - len(kept):,} more lines", ""]


class Page:
    """A Markdown page that stays under ``max_chars`` whatever its parts hold.

    Parts are added in the order they appear on the page, each with a priority: 0 is always
    kept (the summary, what changed); higher numbers are kept, lowest first and in page
    order within a priority, while they fit. A table added with :meth:`add_table` keeps as
    many of its rows as fit. Whatever is left out is named in one closing line, which also
    says where the full record is (``full_record``: a file, or how to get one). Parts always
    kept that would not fit (a name of 100 KB) are cut here, for every page: their longest
    lines first, then their last lines.
    """

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS, full_record: str = "the JSON document (`--json PATH`)"):
        self.max_chars = max_chars
        self.full_record = cut_line(full_record, _RECORD_CHARS)
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

    def _kept_lines(self, room: int) -> dict[int, list[str]]:
        """The parts always kept, their long lines cut so that together they fit ``room``
        when they can (else each fitted in turn: :func:`_head_of`)."""
        kept = {i: part["lines"] for i, part in enumerate(self._parts) if "lines" in part and part["priority"] == 0}
        every = [line for lines in kept.values() for line in lines]
        if every and _size(every) > room:
            capped = iter(_capped(every, room))
            kept = {i: [next(capped) for _ in lines] for i, lines in kept.items()}
        return kept

    def _fit_table(self, part: dict, room: int) -> tuple[list[str], str | None]:
        """A table's lines within ``room``: whole, else its leading rows, else none; and
        what the closing line says was left out of it."""
        rows = part["table"][2]
        full = self._table_lines(part["table"], len(rows))
        if _size(full) <= room:
            return full, None
        fixed = _size(self._table_lines(part["table"], 0)) + 40  # 40: "(the first k of n)"
        count, used = 0, fixed
        while count < len(rows) and used + len(rows[count]) + 1 <= room:
            used += len(rows[count]) + 1
            count += 1
        if not count:
            return [], f"{part['what']} ({len(rows)} rows)"
        return self._table_lines(part["table"], count), f"{part['what']}: {len(rows) - count} of {len(rows)} rows"

    def text(self) -> str:
        """The page: the parts that fit, in page order, and the closing line; never more
        than ``max_chars`` characters."""
        room = self.max_chars - _CLOSING_ROOM - len(self.full_record)
        kept = self._kept_lines(room)
        chosen: dict[int, list[str]] = {}
        left_out: list[tuple[int, str]] = []
        for index in sorted(range(len(self._parts)), key=lambda i: (self._parts[i]["priority"], i)):
            part = self._parts[index]
            if "table" in part:
                lines, missing = self._fit_table(part, room)
            elif index in kept:
                lines = kept[index]
                if _size(lines) > room:
                    lines = _head_of(lines, room) if room >= 400 else []
                    missing = f"{part['what'] or 'the summary'}, cut to fit"
                else:
                    missing = None
            else:
                fits = _size(part["lines"]) <= room
                lines, missing = (part["lines"], None) if fits else ([], part["what"] or "a part")
            if lines:
                chosen[index] = lines
                room -= _size(lines)
            if missing:
                left_out.append((index, missing))
        text = "\n".join(line for index in sorted(chosen) for line in chosen[index]).rstrip() + "\n"
        return text + self._closing([what for _, what in sorted(left_out)])

    def _closing(self, names: list[str]) -> str:
        """The closing line naming what was left out, at most :data:`_CLOSING_ROOM` long
        beyond :attr:`full_record`."""
        if not names:
            return ""
        listed = "; ".join(names)
        if len(listed) > _CLOSING_ROOM - 250:
            listed = listed[: _CLOSING_ROOM - 260].rsplit(";", 1)[0] + f"; and {len(names)} parts in all"
        return (f"\n<sub>Left out to stay under {self.max_chars:,} characters: {listed}. "
                f"The full record: {self.full_record}.</sub>\n")


def full_record(json_path: str | None, how: str) -> str:
    """Where a page's full record is, for its closing line: the ``--json`` file when one was
    written, else ``how`` (the command line that writes one)."""
    if json_path and json_path != "-":
        return f"`{json_path}`"
    if json_path == "-":
        return "the JSON written to standard output"
    return how
