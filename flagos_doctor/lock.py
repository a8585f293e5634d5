"""One writer at a time for a file flagos-doctor keeps writing (a survey's results file and
its journal).

:func:`hold` takes an exclusive ``flock`` on ``<path>.lock`` and writes who holds it (pid,
host, start time, command line) into that file; a second writer is refused at once with a
one-line BadInput naming the holder (exit 2), instead of two surveys each rewriting the
results file from their own memory and losing the other's overloads. The kernel drops the
lock when its holder dies, even by SIGKILL, so a lock is never stale; the lock file is
removed on release. The descriptor is not inherited by child processes (Python opens it
close-on-exec), so a worker left behind cannot hold a survey's lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sys
import time

from flagos_doctor import redact
from flagos_doctor.errors import BadInput


def lock_path(path: str) -> str:
    """The lock of the file ``path`` names, whatever names it: a symlink or a second path
    to one results file gives one lock (the lock is the file's, not the name's)."""
    return os.path.realpath(path) + ".lock"


def _holder_text() -> str:
    command = " ".join(os.path.basename(arg) if index == 0 else arg for index, arg in enumerate(sys.argv))
    started = time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime())
    return f"pid {os.getpid()} on {socket.gethostname()} since {started}: {command[:300]}\n"


@contextlib.contextmanager
def hold(path: str, option: str = "--output"):
    """Hold the lock of ``path`` for the ``with`` block; BadInput naming the holder when
    another process holds it."""
    name = lock_path(path)
    while True:
        try:
            os.makedirs(os.path.dirname(name), exist_ok=True)  # -o new/folder/r.json, or a link into one
            fd = os.open(name, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise BadInput(f"cannot lock {path}: {exc.strerror or exc}", option) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = redact.scrub_environ(os.read(fd, 1000).decode("utf-8", "replace").strip()) or "another process"
            os.close(fd)
            raise BadInput(f"{path} is being written by {holder}; wait for it, or choose another {option}", option) from None
        # The holder before us may have removed the file between our open and our lock:
        # then we hold a lock on a file nobody else will open. Start again.
        try:
            same = os.stat(name).st_ino == os.fstat(fd).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.write(fd, _holder_text().encode())
        yield name
    finally:
        try:
            os.unlink(name)
        except OSError:
            pass
        os.close(fd)
