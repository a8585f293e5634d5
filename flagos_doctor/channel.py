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

Only the harness speaks on the channel. The parent's first request, sent before the child
imports anything, is a fresh random ``nonce`` that only this module holds (never in the
environment, which ``/proc/self/environ`` shows), every record carries it, and the parent
keeps only records that do (:class:`flagos_doctor.childproc.Child`). What that protects
against: a process that inherits or finds the record pipe without being the harness (a
subprocess the stack starts, which gets ``FLAGOS_DOCTOR_CHANNEL`` and the descriptors but not
the nonce), and stray bytes written to the descriptor by mistake. What it does not: code
running in the child's own process (the stack itself) can read the nonce from this
module's memory and forge a record; a stack is trusted as far as its own process goes.

Secrets: every record is scrubbed here, with the child's own environment at the time it is
emitted (a stack's ``setup()`` may have set ``MY_API_KEY`` the parent never saw), and
before it, whenever that environment holds new secret values, a ``{"record": "secrets",
"values": [...]}`` tells the parent what to hide in everything else it writes (the child's
stderr tail, a crash log): :func:`flagos_doctor.redact.remember`. That announcement holds
raw values, so it is made only over a pipe (``announce_secrets``): a channel that is a file
(``explain``'s side-channel file, which a SIGKILL leaves behind) never announces, and its
parent scrubs with the values it knows itself.
"""

from __future__ import annotations

import json
import os
import threading

from flagos_doctor import redact

ENV_VAR = "FLAGOS_DOCTOR_CHANNEL"
#: The key of every record's nonce, and the parent's first request (``{"op": "hello", NONCE: ...}``).
NONCE = "channel_nonce"
#: The record that announces the child's secret values (consumed by the parent, never kept).
SECRETS_RECORD = "secrets"


def _jsonable(obj):
    # Records must never fail to encode: a value we cannot encode becomes its repr.
    return repr(obj)


def encode(record: dict) -> bytes:
    """Return ``record`` as one JSON line."""
    return (json.dumps(record, default=_jsonable, separators=(",", ":")) + "\n").encode()


class ChildChannel:
    """The child's end: ``emit`` records to the parent, ``receive`` requests from it."""

    def __init__(self, read_fd: int | None, write_fd: int, nonce: str | None = None,
                 announce_secrets: bool = True):
        self._read_fd = read_fd
        self._announce_secrets = announce_secrets
        self._write_fd = write_fd
        self._pending = b""
        # Records may come from more than one thread (a survey worker announces compile
        # waits from whichever thread compiles): one record's bytes never interleave.
        self._write_lock = threading.Lock()
        self._nonce = nonce
        self._announced: set[str] = set()
        self._environ: dict | None = None
        self._secrets: list[str] = []

    @classmethod
    def from_env(cls) -> "ChildChannel":
        """Open the channel named by ``FLAGOS_DOCTOR_CHANNEL`` and read the parent's nonce
        (its first request); raise KeyError if the variable is absent."""
        read_fd, write_fd = (int(x) for x in os.environ[ENV_VAR].split(","))
        opened = cls(read_fd if read_fd >= 0 else None, write_fd)
        hello = opened.receive()
        if hello is not None and hello.get("op") == "hello":
            opened._nonce = hello.get(NONCE)
        elif hello is not None:  # a parent of another version: no nonce, keep its request
            opened._pending = encode(hello) + opened._pending
        return opened

    def emit(self, record: dict) -> None:
        self._learn_secrets()
        secrets = self._secrets
        new = [value for value in secrets if value not in self._announced] if self._announce_secrets else []
        if new:
            self._announced.update(new)
            self._write({"record": SECRETS_RECORD, "values": new})
        self._write(redact.scrub(record, secrets))

    def _learn_secrets(self) -> None:
        """The environment's secret values, learnt again only from the entries that changed
        (a program that sets 8,000 variables made every record rescan all of them: minutes);
        a value once secret stays hidden."""
        raw = getattr(os.environ, "_data", None)  # the bytes behind os.environ: compared in C
        if raw is None:
            raw = dict(os.environ)
        if raw == self._environ:
            return
        fresh = raw.items() - self._environ.items() if self._environ is not None else raw.items()
        self._environ = dict(raw)
        decoded = {os.fsdecode(k) if isinstance(k, bytes) else k: os.fsdecode(v) if isinstance(v, bytes) else v
                   for k, v in fresh}
        new = redact.secret_values(decoded)
        if new:
            self._secrets = sorted({*self._secrets, *new}, key=len, reverse=True)

    def _write(self, record: dict) -> None:
        if self._nonce is not None:
            record = {**record, NONCE: self._nonce}
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
