"""Where a worker's time went inside Triton: kernels compiled and configurations autotuned.

Child side (the survey worker). Triton announces each compilation (``knobs.compilation.
listener``: cache hit or not, and the compiler's own stage times) and each autotuning
(``knobs.autotuning.listener``: the benchmarking time, or a hit in the cache that
TRITON_CACHE_AUTOTUNING shares between workers). The worker takes the difference around
each case, so a case record says how much of its time was compiling and autotuning; the
full-survey benchmark sums them. Listeners already installed (by the stack or the user)
are still called. A Triton without these knobs (older than 3.4) gives no figures.

Triton 3.6 (the H200's) has ``knobs.compilation.listener`` but no ``knobs.autotuning.
listener`` (added after it: ``autotuning_knobs`` there holds only ``cache`` and ``print``),
so its autotunings were never announced and the cases' ``autotunes`` read 0 while 113
results were written to the cache folder. There the figures come from timing around
``triton.runtime.autotuner.Autotuner._bench``, the call that times one configuration on
the device; FlagGems' ``LibTuner`` subclasses ``Autotuner`` and calls the same ``_bench``
for the configurations its database lacks. The wrapper calls the original with the same
arguments and returns what it returns (an exception passes through): what a kernel
computes, which configuration wins and what is cached do not change. An autotuning is
counted at the first ``_bench`` call of a tuner whose ``bench_time`` (set when each of its
autotunings ends) changed since its last one; ``autotune_seconds`` is the time spent in
``_bench``, which includes compiling each configuration on its first launch (also in
``compile_seconds``), as the listener's ``duration`` does. Cache hits are counted from
``Autotuner.check_disk_cache`` (True: the timings came from the shared cache folder).
:attr:`TritonTimes.autotune_source` says which way the figures were taken.
``autotune_short_timed`` counts the configurations timed on the survey's short budget
(:mod:`.autotune_timing`): 0 where an autotuning ran means it did not apply there.
``compile_lock_waits`` and ``compile_lock_seconds`` count the compilations that waited for
another worker compiling the same kernel, and how long (:mod:`.compile_lock`); such a
compilation then reads as a cache hit.
"""

from __future__ import annotations

import sys
import threading
import time

from flagos_doctor.survey.child import autotune_timing


class TritonTimes:
    """Running totals of Triton's compilations and autotunings in this process."""

    FIELDS = ("compiles", "compile_seconds", "compile_cache_hits", "autotunes", "autotune_seconds",
              "autotune_cache_hits", "autotune_short_timed", "compile_lock_waits", "compile_lock_seconds")

    def __init__(self):
        self._lock = threading.Lock()  # Triton may compile from more than one thread
        self.totals = dict.fromkeys(self.FIELDS, 0)
        #: How autotunings are measured: "listener" (knobs.autotuning.listener), "bench"
        #: (timing around Autotuner._bench: Triton 3.6), or None (not measured).
        self.autotune_source: str | None = None

    def install(self, use_listener: bool = True) -> bool:
        """Listen to the Triton the stack imported; False when there is none to listen to.

        ``use_listener`` False takes the autotuning figures around ``Autotuner._bench`` even
        where the listener exists (a test of that path on a Triton that has both).
        """
        triton = sys.modules.get("triton")
        knobs = getattr(triton, "knobs", None)
        compilation = getattr(knobs, "compilation", None)
        autotuning = getattr(knobs, "autotuning", None)
        if compilation is None or not hasattr(compilation, "listener"):
            return False
        previous_compile = compilation.listener

        def on_compile(**kwargs):
            times = kwargs.get("times")
            with self._lock:
                if kwargs.get("cache_hit"):
                    self.totals["compile_cache_hits"] += 1
                else:
                    self.totals["compiles"] += 1
                    self.totals["compile_seconds"] += getattr(times, "total", 0) / 1e6  # microseconds
            if previous_compile is not None:
                previous_compile(**kwargs)

        compilation.listener = on_compile
        if use_listener and autotuning is not None and hasattr(autotuning, "listener"):
            previous_autotune = autotuning.listener

            def on_autotune(**kwargs):
                with self._lock:
                    if kwargs.get("cache_hit"):
                        self.totals["autotune_cache_hits"] += 1
                    else:
                        self.totals["autotunes"] += 1
                        self.totals["autotune_seconds"] += kwargs.get("duration") or 0.0
                if previous_autotune is not None:
                    previous_autotune(**kwargs)

            autotuning.listener = on_autotune
            self.autotune_source = "listener"
        elif self._time_bench():
            self.autotune_source = "bench"
        return True

    def _time_bench(self) -> bool:
        """Time around ``Autotuner._bench`` and count ``check_disk_cache`` hits (module doc)."""
        module = sys.modules.get("triton.runtime.autotuner")
        tuner_class = getattr(module, "Autotuner", None)
        bench = getattr(tuner_class, "_bench", None)
        if not callable(bench) or getattr(bench, "_flagos_timed", False):
            return False
        last_seen: dict[int, object] = {}  # id(tuner) -> its bench_time at its last _bench call
        unset, never = object(), object()

        def _bench(tuner, *args, **kwargs):
            marker = getattr(tuner, "bench_time", unset)
            start = time.perf_counter()
            try:
                return bench(tuner, *args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                with self._lock:
                    previous = last_seen.get(id(tuner), never)
                    if previous is never or previous != marker:
                        self.totals["autotunes"] += 1  # the first configuration of an autotuning
                    last_seen[id(tuner)] = marker
                    self.totals["autotune_seconds"] += elapsed

        _bench._flagos_timed = True
        _bench.__wrapped__ = bench
        tuner_class._bench = _bench
        check = getattr(tuner_class, "check_disk_cache", None)
        if callable(check) and not getattr(check, "_flagos_timed", False):
            def check_disk_cache(tuner, *args, **kwargs):
                hit = check(tuner, *args, **kwargs)
                if hit is True:
                    with self._lock:
                        self.totals["autotune_cache_hits"] += 1
                return hit

            check_disk_cache._flagos_timed = True
            check_disk_cache.__wrapped__ = check
            tuner_class.check_disk_cache = check_disk_cache
        return True

    def lock_waited(self, seconds: float) -> None:
        """A compilation waited ``seconds`` for another worker's (:mod:`.compile_lock`)."""
        with self._lock:
            self.totals["compile_lock_waits"] += 1
            self.totals["compile_lock_seconds"] += seconds

    def snapshot(self) -> dict:
        with self._lock:
            # configurations timed on the short budget (autotune_timing.py): whether it applied
            return dict(self.totals, autotune_short_timed=autotune_timing.SHORTENED["configurations"])

    def since(self, before: dict) -> dict:
        """What happened since ``before`` (a snapshot); empty when nothing did."""
        now = self.snapshot()
        change = {key: now[key] - before.get(key, 0) for key in self.FIELDS}
        if not any(change.values()):
            return {}
        return {key: round(value, 4) if isinstance(value, float) else value for key, value in change.items()}
