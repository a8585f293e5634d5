"""One compilation of each Triton kernel at a time across a survey's workers.

Child side (the survey worker). Triton compiles per process into one cache folder that
all workers share, and checks that folder only when a compilation starts: two workers
that need the same kernel at once both compile it, and the second finds nothing to reuse.
On a cold H200 that was the survey's long pole: cases of ``mm`` for float32 compiled the
same configurations side by side. Holding whole cases apart in the parent cannot say
which cases share kernels: ``mm [4d-f32]`` reused 87 of the 162 kernels ``mm [2d-f32]``
compiled, while ``mm [1d-f32]``, run after both, reused none (a size of 1 is a Triton
specialisation of its own) and took 115 s alone behind them.

So the workers agree on each compilation itself. A compilation is named by what Triton
compiles: the source's hash (the function's code, its signature, constants and argument
specialisations: :meth:`triton.compiler.ASTSource.hash`), the target and the options (the
configuration's warps and stages). Before compiling, a worker takes an exclusive
``flock`` on the file of that name in the survey's scratch folder
(``FLAGOS_DOCTOR_SCRATCH``, :mod:`flagos_doctor.survey.scratch`); a second worker that
needs the same compilation waits for it, then calls Triton, which finds the kernel in
the shared cache. Different compilations never wait for each other, so cases of one
family and different shapes run side by side.

The wrapper calls Triton's ``compile`` with the same arguments and returns what it
returns: what is compiled and computed never changes, only who compiles it first. A
source without a hash (an IR file), a worker outside a survey, or a lock that cannot be
taken compiles as before. The lock is released when the compilation ends or the process
dies (the kernel drops a dead process's ``flock``), and a wait gives up after
:data:`PATIENCE_SECONDS` and compiles anyway, so a compiler hung in another worker
delays a case, never stops it. Nested compilations (none in Triton today) take no second
lock, so no two workers can wait on each other. Each wait is reported to ``on_wait``
(the case's ``compile_lock_waits`` and ``compile_lock_seconds``:
:mod:`.triton_timing`).
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import threading
import time

from flagos_doctor.survey import scratch
from flagos_doctor.survey.child.compile_wait import replace_compile

#: The scratch folder's subfolder of lock files, one per compilation asked for.
FOLDER = "triton-compile-locks"
#: How long a worker waits for another's compilation before compiling it itself.
PATIENCE_SECONDS = 1800.0


def compilation_key(args: tuple, kwargs: dict) -> str | None:
    """A name for what ``triton.compile(src, target, options)`` compiles, the same in every
    worker; None when it has none (the source is not an ``ASTSource``)."""
    src = args[0] if args else kwargs.get("src")
    source_hash = getattr(src, "hash", None)
    if not callable(source_hash):
        return None
    target = args[1] if len(args) > 1 else kwargs.get("target")
    options = args[2] if len(args) > 2 else kwargs.get("options")
    try:
        # sorted by option name (names are unique, so values are never compared)
        text = "|".join((source_hash(), repr(target), repr(sorted(dict(options or {}).items()))))
    except Exception:  # a source Triton itself could not hash: compile unlocked, as before
        return None
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class CompileLock:
    """Wraps Triton's ``compile`` so that a compilation runs in one worker at a time."""

    def __init__(self, folder: str, on_wait=None, patience: float = PATIENCE_SECONDS):
        self.folder = folder
        self._on_wait = on_wait
        self._patience = patience
        self._held = threading.local()  # .active: this thread is compiling (no nested lock)

    @classmethod
    def for_survey(cls, on_wait=None) -> "CompileLock | None":
        """The lock of the survey this worker belongs to; None outside a survey."""
        folder = os.environ.get(scratch.MARK_VAR)
        if not folder or not os.path.isdir(folder):
            return None
        return cls(os.path.join(folder, FOLDER), on_wait)

    def _acquire(self, key: str) -> int | None:
        """A descriptor holding the lock of ``key``; None when it could not be had."""
        try:
            os.makedirs(self.folder, exist_ok=True)
            descriptor = os.open(os.path.join(self.folder, key), os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return None
        start = time.monotonic()
        pause = 0.01
        waited = False
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as exc:
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(descriptor)
                    return None
            waited = True
            if time.monotonic() - start > self._patience:
                os.close(descriptor)
                descriptor = None
                break
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        if waited and self._on_wait is not None:
            self._on_wait(time.monotonic() - start)
        return descriptor

    def wrap(self, compile_function):
        if getattr(compile_function, "_flagos_locked", False):
            return compile_function

        def locked(*args, **kwargs):
            if getattr(self._held, "active", False):  # nested: the outer compilation holds a lock
                return compile_function(*args, **kwargs)
            key = compilation_key(args, kwargs)
            descriptor = self._acquire(key) if key else None
            self._held.active = True
            try:
                return compile_function(*args, **kwargs)
            finally:
                self._held.active = False
                if descriptor is not None:
                    os.close(descriptor)  # releases the flock

        locked._flagos_locked = True
        locked.__wrapped__ = compile_function
        locked.__doc__ = compile_function.__doc__
        return locked

    def install(self) -> bool:
        """Wrap the Triton the stack imported; False when there is none."""
        return replace_compile(self.wrap)
