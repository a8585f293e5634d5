"""Standard output and error on a GitHub Actions runner: no workflow command but the doctor's own.

The runner reads every line a step prints, on stdout and stderr, as a possible workflow
command: one that starts with ``::`` (after spaces: ``::warning::``, ``::add-mask::``,
``::stop-commands::``), or one holding ``##[`` anywhere (the older form). Lines break at
``\\n``, ``\\r\\n`` and a lone ``\\r``. What the doctor prints holds text any pull request can
set: overload names, a kernel's error message, results files' and box folders' names,
paths. So while GitHub mode may be on (``GITHUB_ACTIONS=true``, or ``--github``) the CLI's
streams are :class:`CommandGuard`: every line is made inert on its way out (a ``·`` before a
leading ``::`` and inside ``##[``), whichever view, error or progress note wrote it, and only
:meth:`CommandGuard.write_commands` (the annotations' view, through
:func:`flagos_doctor.files.write_stdout`) writes commands as they are.
"""

from __future__ import annotations

import re

#: What makes a would-be command inert: shown in the log, read by no runner.
MARK = "\u00b7"
#: Where the runner breaks lines.
_LINE_END = re.compile(r"\r\n|\r|\n")
#: Trimmed before a line's ``::`` by the runner: every character Python calls a space (more
#: than .NET's ``TrimStart`` does), and a few invisible ones some runtimes count as such.
_LEADING = ("\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200c)))
            + "\u2028\u2029\u202f\u205f\u2060\u3000\u180e\ufeff")


def inert(piece: str, at_line_start: bool = True) -> str:
    """``piece`` (part of one line, no line break in it) as no runner reads a command in it;
    ``at_line_start``: it begins its line."""
    if at_line_start:
        body = piece.lstrip(_LEADING)
        if body.startswith("::"):
            piece = piece[: len(piece) - len(body)] + MARK + body
    return piece.replace("##[", "##" + MARK + "[")


def on_runner(argv: list[str], environ) -> bool:
    """Whether GitHub mode may be on for this command line: on a runner, or ``--github``."""
    return environ.get("GITHUB_ACTIONS") == "true" or "--github" in argv


def guarded(stream) -> "CommandGuard":
    """``stream`` behind a :class:`CommandGuard`, whose unfinished line is written at exit."""
    import atexit

    guard = CommandGuard(stream)
    atexit.register(guard.finish)
    return guard


class CommandGuard:
    """A text stream (``sys.stdout``, ``sys.stderr``) whose lines carry no workflow command
    (:func:`inert`), but those written with :meth:`write_commands`.

    A line is written when it ends; :meth:`flush` writes what it can of an unfinished one,
    holding back only what a later write could turn into a command (the spaces or ``:`` a
    line starts with, a trailing ``#``)."""

    def __init__(self, stream):
        self._stream = stream
        self._pending = ""  # the unfinished line, not written yet
        self._started = False  # part of the unfinished line was written already

    def write(self, text):
        if not isinstance(text, str):
            return self._stream.write(text)
        pieces = _LINE_END.split(self._pending + text)
        ends = _LINE_END.findall(self._pending + text)
        for piece, end in zip(pieces, ends):
            self._stream.write(inert(piece, not self._started) + end)
            self._started = False
        self._pending = pieces[-1]
        return len(text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def _write_pending(self, everything: bool) -> None:
        held = ""
        if not everything:
            undecided = not self._started and self._pending.lstrip(_LEADING) in ("", ":")
            held = self._pending if undecided else self._pending[len(self._pending.rstrip("#")):][-2:]
        ready = self._pending[: len(self._pending) - len(held)]
        if ready:
            self._stream.write(inert(ready, not self._started))
            self._started = True
        self._pending = held

    def flush(self):
        self._write_pending(everything=False)
        return self._stream.flush()

    def finish(self) -> None:
        """Write the unfinished line whole (at exit: nothing can follow it)."""
        try:
            self._write_pending(everything=True)
            self._stream.flush()
        except (OSError, ValueError):  # a closed or broken stream at exit: nothing more to say
            pass

    def write_commands(self, text: str) -> None:
        """``text``: whole lines, each a workflow command the doctor means (``::error ...``),
        written after whatever was pending, as they are but for a ``##[`` in their text (which
        the older form would read); a line that is no command is made inert."""
        if self._pending:
            self._write_pending(everything=True)
            self._stream.write("\n")
            self._started = False
        for line in _LINE_END.split(text.rstrip("\r\n")):
            self._stream.write(inert(line, at_line_start=not line.startswith("::")) + "\n")  # "##[" even there

    def __getattr__(self, name):
        return getattr(self._stream, name)
