"""How long the survey's autotuning times each configuration on the device.

Child side (the survey worker). A Triton autotuner compiles every configuration, runs each
under ``triton.testing.do_bench`` and keeps the fastest. ``do_bench``'s budget is 25 ms of
warm-up and 100 ms of timed runs a configuration, and before each run it clears a 256 MB
buffer to flush the L2 cache: on a small input nearly all of that is the flush, on the GPU.
A survey's workers share the GPU, so those budgets queue up there: on an H200 a cold
survey of FlagGems 5.0.2 spent about a minute a case autotuning ``addmv`` and ``mv`` with
nothing left to compile (``addmv.out`` 1d-f32: 48 cached kernels, 63 s).

``short`` (the default) gives ``do_bench`` a 0 ms warm-up and a 2 ms timing budget while an
autotuner times a configuration, the same function with its own rules otherwise: each
configuration is still compiled and run (at least 8 times), and the fastest still wins. Only
the precision of that timing changes: which configuration wins may differ from a full-budget
run where two configurations are within the timing's noise, as on the survey's small inputs
they mostly are. What each configuration computes does not change. ``full`` leaves Triton's
budget alone (``--full-autotune``; the per-overload reference of the full-survey benchmark
uses it, and its census is compared with the short run's).

Scope: only calls of ``triton.testing.do_bench`` made inside ``Autotuner._bench`` (FlagGems'
``LibTuner`` subclasses ``Autotuner`` and calls the same ``_bench``) are shortened; any other
caller gets Triton's function unchanged. An autotuner given its own ``do_bench`` by its
author, or a Triton whose autotuner does not reach ``triton.testing.do_bench`` at call time,
keeps its budget: :func:`install` says what it could do, and the count of configurations
timed short (:data:`SHORTENED`) shows whether it applied.
"""

from __future__ import annotations

import inspect
import sys
import threading

MODES = ("short", "full")
#: ``do_bench``'s warm-up and timing budgets (ms) for a configuration, in ``short``.
SHORT_BUDGET = {"warmup": 0, "rep": 2}

_state = threading.local()  # depth of Autotuner._bench calls on this thread
SHORTENED = {"configurations": 0}


def install(mode: str) -> dict:
    """Apply ``mode`` to the Triton the stack imported; return what to put in provenance."""
    if mode not in MODES:
        raise ValueError(f"autotune timing must be one of {', '.join(MODES)}, not {mode!r}")
    if mode == "full":
        return {"mode": "full"}
    testing = sys.modules.get("triton.testing")
    if testing is None and "triton" in sys.modules:
        try:  # the stack imported Triton; its autotuner imports triton.testing when it times
            import triton.testing as testing
        except Exception:
            testing = None
    module = sys.modules.get("triton.runtime.autotuner")
    tuner_class = getattr(module, "Autotuner", None)
    bench = getattr(tuner_class, "_bench", None)
    do_bench = getattr(testing, "do_bench", None)
    if not callable(bench) or not callable(do_bench):
        return {"mode": "full", "asked": "short", "why": "this Triton has no Autotuner._bench or triton.testing.do_bench"}
    if not getattr(do_bench, "_flagos_short", False):
        testing.do_bench = _shortened(do_bench)
    if not getattr(bench, "_flagos_short", False):
        tuner_class._bench = _marked(bench)
    return {"mode": "short", "warmup_ms": SHORT_BUDGET["warmup"], "rep_ms": SHORT_BUDGET["rep"]}


def _marked(bench):
    """``Autotuner._bench`` that says, on its thread, that an autotuner is timing."""

    def _bench(tuner, *args, **kwargs):
        _state.depth = getattr(_state, "depth", 0) + 1
        try:
            return bench(tuner, *args, **kwargs)
        finally:
            _state.depth -= 1

    _bench._flagos_short = True
    _bench.__wrapped__ = bench
    return _bench


def _shortened(do_bench):
    """``do_bench`` with the short budget inside ``_bench``; unchanged anywhere else."""
    signature = inspect.signature(do_bench)

    def short_do_bench(*args, **kwargs):
        if getattr(_state, "depth", 0) <= 0:
            return do_bench(*args, **kwargs)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return do_bench(*args, **kwargs)  # a call its own signature refuses: let it say so
        for name, value in SHORT_BUDGET.items():
            if name in signature.parameters:
                bound.arguments[name] = value
        SHORTENED["configurations"] += 1
        return do_bench(*bound.args, **bound.kwargs)

    short_do_bench._flagos_short = True
    short_do_bench.__wrapped__ = do_bench
    short_do_bench.__doc__ = do_bench.__doc__
    return short_do_bench
