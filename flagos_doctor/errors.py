"""Errors the user can cause, turned into one readable line and exit code 2 at the edge."""

from __future__ import annotations

import contextlib

#: Exit codes shared by every command.
EXIT_OK = 0
EXIT_FINDING = 1  # a regression, an error-level finding, a crash or a timeout
EXIT_BAD_INPUT = 2  # bad usage or bad input
EXIT_INTERNAL = 3  # a bug in flagos-doctor itself
#: ``explain``'s default status when a failure of the program has a cause: out of the range
#: programs say their own with (Python's 1, pytest's 0-5, a shell's 126-127, 128+N for signal N).
EXIT_CAUSE = 10


class BadInput(Exception):
    """Input the user gave us is unusable.

    ``where`` names the file (and line, or field) at fault, so the message reads
    ``conf/backends.conf:12: expected 'op = backend'``.
    """

    def __init__(self, message: str, where: str | None = None):
        super().__init__(message)
        self.message = message
        self.where = where

    def __str__(self) -> str:
        return f"{self.where}: {self.message}" if self.where else self.message


#: The longest error line: a message quoting a user's file (a YAML alias expanded to
#: hundreds of MB) is cut here, whatever the quoting code did.
MAX_ERROR_CHARS = 1000


def one_line(text: str) -> str:
    """``text`` on one line, at most :data:`MAX_ERROR_CHARS` long, its control characters
    escaped (:mod:`flagos_doctor.controls`): a file name or a message may hold any."""
    from flagos_doctor.controls import inert

    line = inert(" ".join(text[: MAX_ERROR_CHARS * 4].split()))
    return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."


@contextlib.contextmanager
def one_line_errors():
    """Around a command's import and run: a user error leaves as one line and exit 2, a bug
    of ours as one line (the traceback in a file) and exit 3, Ctrl-C as exit 130."""
    import typer  # here: the child sides import this module and never need typer

    try:
        yield
    except BadInput as exc:
        typer.echo(f"flagos-doctor: error: {one_line(str(exc))}", err=True)
        raise typer.Exit(EXIT_BAD_INPUT)
    except KeyboardInterrupt:
        typer.echo("flagos-doctor: interrupted", err=True)
        raise typer.Exit(130)
    except (typer.Exit, SystemExit):
        raise
    except Exception as exc:  # a bug of ours: one line, the traceback in a file
        from flagos_doctor import crashlog, redact

        log, why = crashlog.save_traceback()
        where = f"traceback in {log}" if log else f"the traceback could not be saved: {why}"
        message = one_line(redact.scrub_environ(f"{type(exc).__name__}: {exc}".splitlines()[0][:500]))
        typer.echo(f"flagos-doctor: internal error: {message} ({where})", err=True)
        raise typer.Exit(EXIT_INTERNAL)


def excerpt(value, limit: int = 80) -> str:
    """A short ``repr`` of ``value`` from a user's file, for an error line.

    Bounded whatever ``value`` is: a YAML alias repeated in a list expands to a structure
    whose full repr runs to hundreds of MB (one "one-line" error was 351 MB)."""
    import reprlib

    shorter = reprlib.Repr()
    shorter.maxstring = shorter.maxother = limit
    shorter.maxlevel = 2
    shorter.maxlist = shorter.maxtuple = shorter.maxdict = shorter.maxset = 4
    text = shorter.repr(value)
    return text if len(text) <= limit + 20 else text[:limit] + "..."


def check_keys(mapping: dict, where: str) -> dict:
    """``mapping`` when every key is a string; BadInput naming ``where`` otherwise (a YAML
    ``1: x`` beside ``name: y`` made sorting the keys a TypeError)."""
    for key in mapping:
        if not isinstance(key, str):
            raise BadInput(f"key {excerpt(key)} is a {type(key).__name__}: expected a field name", where)
    return mapping
