"""The record channel between the parent CLI and a child process.

Records are JSON objects, one per line, written straight to a pipe file descriptor with
``os.write``: nothing is buffered in the child, so a child that segfaults, aborts or hangs
has already delivered every record it emitted before that moment.

One record shape for every child (probe, survey worker, report's environment child): a
record names what it is under ``"record"`` (``{"record": "case", "overload": ..., ...}``),
its other keys are that record's fields; a request names its operation under ``"op"``
(``{"op": "overload", "name": ...}``). Each child module's docstring lists its records.

The child finds its two descriptors in the environment variable ``FLAGOS_DOCTOR_CHANNEL``
(``"<read_fd>,<write_fd>"``). This module is imported by children before torch, so it uses
the standard library alone.
"""

from __future__ import annotations

import json
import os
import threading

ENV_VAR = "FLAGOS_DOCTOR_CHANNEL"


def _jsonable(obj):
    # Records must never fail to encode: a value we cannot encode becomes its repr.
    return repr(obj)


def encode(record: dict) -> bytes:
    """Return ``record`` as one JSON line."""
    return (json.dumps(record, default=_jsonable, separators=(",", ":")) + "\n").encode()


class ChildChannel:
    """The child's end: ``emit`` records to the parent, ``receive`` requests from it."""

    def __init__(self, read_fd: int | None, write_fd: int):
        self._read_fd = read_fd
        self._write_fd = write_fd
        self._pending = b""
        # Records may come from more than one thread (a survey worker announces compile
        # waits from whichever thread compiles): one record's bytes never interleave.
        self._write_lock = threading.Lock()

    @classmethod
    def from_env(cls) -> "ChildChannel":
        """Open the channel named by ``FLAGOS_DOCTOR_CHANNEL``; raise KeyError if absent."""
        read_fd, write_fd = (int(x) for x in os.environ[ENV_VAR].split(","))
        return cls(read_fd if read_fd >= 0 else None, write_fd)

    def emit(self, record: dict) -> None:
        data = encode(record)
        view = memoryview(data)
        with self._write_lock:
            while view:
                written = os.write(self._write_fd, view)
                view = view[written:]

    def receive(self) -> dict | None:
        """Block for the next request; ``None`` once the parent closed its end."""
        if self._read_fd is None:
            return None
        while b"\n" not in self._pending:
            chunk = os.read(self._read_fd, 65536)
            if not chunk:
                return None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return json.loads(line)
