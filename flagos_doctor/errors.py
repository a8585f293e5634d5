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
