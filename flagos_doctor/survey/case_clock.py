"""The deadline of the case in flight: ``--timeout`` counts running, not compiling.

Parent side, standard library only. A worker announces when a case starts waiting on
Triton compiling or autotuning and when the wait ends (``{"record": "wait"}``,
:mod:`flagos_doctor.survey.child.compile_wait`). While it waits the case's ``--timeout``
clock stands still and the compile cap's clock runs instead; otherwise the other way round.
So a kernel that compiles for three minutes among fifteen other workers compiling theirs,
then runs in milliseconds, is not a TIMEOUT; a kernel that hangs still is, after
``--timeout`` seconds of running.

The cap (:func:`compile_cap`): the compiling and autotuning a case may wait on in all,
``max(COMPILE_CAP_FACTOR * timeout, COMPILE_CAP_MIN)`` seconds (30 minutes with the default
120 s limit), so a compiler that never finishes ends its case (TIMEOUT, "stopped while
compiling") instead of the survey. When a case times out its record says where its time
went: ``spent`` {compile, autotune, run} seconds, and ``stopped_in`` (compile, autotune or
run).
"""

from __future__ import annotations

import time

#: The compile cap is this many times ``--timeout`` ...
COMPILE_CAP_FACTOR = 15
#: ... and never less than this many seconds.
COMPILE_CAP_MIN = 1800.0
WAITS = ("compile", "autotune")


def compile_cap(timeout: float) -> float:
    """Seconds of compiling and autotuning one case may wait on before it is stopped."""
    return max(COMPILE_CAP_FACTOR * timeout, COMPILE_CAP_MIN)


class CaseClock:
    """One case's clocks: running (limited by ``timeout``) and waiting (limited by ``cap``)."""

    def __init__(self, timeout: float, cap: float):
        self.timeout = timeout
        self.cap = cap
        self.started = time.monotonic()
        self.waited = dict.fromkeys(WAITS, 0.0)
        self.waiting: str | None = None  # what the case waits on now
        self._since = 0.0

    def wait(self, what: str, begin: bool) -> None:
        """A ``wait`` record arrived: the case started or stopped waiting on ``what``."""
        now = time.monotonic()
        if self.waiting is not None:
            self.waited[self.waiting] += now - self._since
            self.waiting = None
        if begin:
            self.waiting = what if what in WAITS else "compile"
            self._since = now

    def _waited(self, now: float) -> dict:
        waited = dict(self.waited)
        if self.waiting is not None:
            waited[self.waiting] += now - self._since
        return waited

    def remaining(self) -> float:
        """Seconds until this case is over its limit, as things stand (never below 0)."""
        now = time.monotonic()
        waited = sum(self._waited(now).values())
        if self.waiting is not None:
            return max(0.0, self.cap - waited)
        ran = now - self.started - waited
        return max(0.0, self.timeout - ran)

    def spent(self) -> dict:
        """Where the case's time went so far: {compile, autotune, run} seconds, and
        ``stopped_in``, what it was doing now."""
        now = time.monotonic()
        waited = self._waited(now)
        run = max(0.0, now - self.started - sum(waited.values()))
        return {**{what: round(waited[what], 3) for what in WAITS}, "run": round(run, 3),
                "stopped_in": self.waiting or "run"}

    def timeout_detail(self) -> str:
        """The detail of a TIMEOUT record: which limit it passed. The seconds of each part go
        in ``spent`` (:meth:`spent`), not here: a detail is compared across runs."""
        stopped_in = self.spent()["stopped_in"]
        if stopped_in != "run":
            return (f"still {'compiling' if stopped_in == 'compile' else 'autotuning'} after {self.cap:g}s of "
                    "compiling and autotuning (the compile cap); worker killed (where its time went: spent)")
        return f"no result within {self.timeout:g}s of running; worker killed (where its time went: spent)"
