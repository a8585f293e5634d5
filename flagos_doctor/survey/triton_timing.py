"""Where a worker's time went inside Triton: kernels compiled and configurations autotuned.

Child side (the survey worker). Triton announces each compilation (``knobs.compilation.
listener``: cache hit or not, and the compiler's own stage times) and each autotuning
(``knobs.autotuning.listener``: the benchmarking time, or a hit in the cache that
TRITON_CACHE_AUTOTUNING shares between workers). The worker takes the difference around
each case, so a case record says how much of its time was compiling and autotuning; the
full-survey benchmark sums them. Listeners already installed (by the stack or the user)
are still called. A Triton without these knobs (older than 3.4) gives no figures.
"""

from __future__ import annotations

import sys
import threading


class TritonTimes:
    """Running totals of Triton's compilations and autotunings in this process."""

    FIELDS = ("compiles", "compile_seconds", "compile_cache_hits", "autotunes", "autotune_seconds",
              "autotune_cache_hits")

    def __init__(self):
        self._lock = threading.Lock()  # Triton may compile from more than one thread
        self.totals = dict.fromkeys(self.FIELDS, 0)

    def install(self) -> bool:
        """Listen to the Triton the stack imported; False when there is none to listen to."""
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
        if autotuning is not None and hasattr(autotuning, "listener"):
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
        return True

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self.totals)

    def since(self, before: dict) -> dict:
        """What happened since ``before`` (a snapshot); empty when nothing did."""
        now = self.snapshot()
        change = {key: now[key] - before.get(key, 0) for key in self.FIELDS}
        if not any(change.values()):
            return {}
        return {key: round(value, 4) if isinstance(value, float) else value for key, value in change.items()}
