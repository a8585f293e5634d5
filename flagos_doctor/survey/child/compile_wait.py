"""Telling the parent, as it happens, when a case waits on Triton compiling or autotuning.

Child side (the survey worker). A case's ``--timeout`` is for running it, not for waiting
on the compiler: on a cold H200 survey ``mm`` cases spent 70 s and more compiling and
autotuning configurations while 15 other workers compiled theirs, and hit the 120 s limit
with no kernel hanging. The parent keeps each case's deadline (:mod:`flagos_doctor.survey.pool`),
so the worker says when a wait begins and ends, and the parent stops the case's clock in
between (under a cap of its own: a compiler that never finishes still ends the case).

Where: every compilation goes through ``triton.compiler.compiler.compile`` (``JITFunction``
imports it from ``triton.compiler`` when it first runs; ``triton.compile`` is the same
function), wrapped here in all three places; every configuration an autotuner times goes
through ``Autotuner._bench`` (FlagGems' ``LibTuner`` calls the same ``_bench``). The
wrappers call the original with the same arguments and return what it returns: what is
compiled, timed and chosen does not change. Only the outermost wait is announced (an
autotuning compiles its configurations: that time is autotuning's), as one record when it
begins (before the compiler runs, so a compiler that holds the GIL for minutes cannot keep
the parent from knowing) and one when it ends::

    {"record": "wait", "what": "compile" | "autotune", "begin": true}
    {"record": "wait", "what": ..., "begin": false, "seconds": s}

Nothing is announced outside a case (:meth:`CompileWait.case`), e.g. while the stack starts.
"""

from __future__ import annotations

import sys
import threading
import time


class CompileWait:
    """Announces the outermost compile / autotune wait of the case in flight on ``emit``."""

    def __init__(self, emit):
        self._emit = emit
        self._lock = threading.Lock()
        self._depth = 0
        self._what = None
        self._since = 0.0
        self._active = False

    def case(self, active: bool) -> None:
        """Announce waits from now (a case started) or no more (it ended)."""
        with self._lock:
            self._active = active

    def _enter(self, what: str) -> None:
        with self._lock:
            self._depth += 1
            if self._depth > 1:
                return
            self._what, self._since = what, time.monotonic()
            if self._active:
                self._emit({"record": "wait", "what": what, "begin": True})

    def _leave(self) -> None:
        with self._lock:
            self._depth -= 1
            if self._depth > 0:
                return
            if self._active:
                self._emit({"record": "wait", "what": self._what, "begin": False,
                            "seconds": round(time.monotonic() - self._since, 4)})

    def _wrap(self, function, what: str):
        if getattr(function, "_flagos_wait", False):
            return function

        def waiting(*args, **kwargs):
            self._enter(what)
            try:
                return function(*args, **kwargs)
            finally:
                self._leave()

        waiting._flagos_wait = True
        waiting.__wrapped__ = function
        waiting.__doc__ = function.__doc__
        return waiting

    def install(self) -> bool:
        """Wrap the Triton the stack imported; False when there is none (nothing to wait on)."""
        if not replace_compile(lambda original: self._wrap(original, "compile")):
            return False
        tuner_class = getattr(sys.modules.get("triton.runtime.autotuner"), "Autotuner", None)
        bench = getattr(tuner_class, "_bench", None)
        if callable(bench):
            tuner_class._bench = self._wrap(bench, "autotune")
        return True


def replace_compile(wrap) -> bool:
    """Put ``wrap(compile)`` in place of Triton's ``compile`` wherever the stack's Triton
    holds it (the three places of the module doc); False when no Triton is imported.
    Also used by :mod:`.compile_lock`, whose wrapper goes in first (innermost)."""
    compiler = sys.modules.get("triton.compiler.compiler")
    if compiler is None or not callable(getattr(compiler, "compile", None)):
        return False
    original = compiler.compile
    wrapped = wrap(original)
    for name in ("triton.compiler.compiler", "triton.compiler", "triton"):
        module = sys.modules.get(name)
        if module is not None and getattr(module, "compile", None) is original:
            module.compile = wrapped
    return True
