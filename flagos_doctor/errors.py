"""Errors the user can cause, turned into one readable line and exit code 2 at the edge."""

from __future__ import annotations

#: Exit codes shared by every command.
EXIT_OK = 0
EXIT_FINDING = 1  # a regression, an error-level finding, a crash or a timeout
EXIT_BAD_INPUT = 2  # bad usage or bad input
EXIT_INTERNAL = 3  # a bug in flagos-doctor itself


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
