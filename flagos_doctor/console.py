"""The rich console every terminal view prints to.

On a terminal rich fits lines to its width. Outside one (a pipe, a file, a CI log) rich
would wrap at 80 columns and cut paths and digests in two; there lines keep their full
length instead, so they stay whole for grep and for pasting.
"""

from __future__ import annotations

from rich.console import Console

#: The width outside a terminal: no line of ours is longer, so nothing wraps.
UNWRAPPED_WIDTH = 100_000


def output_console(stderr: bool = False, **options) -> Console:
    """A console on stdout (or stderr) that wraps only on a terminal."""
    console = Console(stderr=stderr, **options)
    if console.is_terminal or "file" in options:
        return console
    return Console(stderr=stderr, width=UNWRAPPED_WIDTH, **options)
