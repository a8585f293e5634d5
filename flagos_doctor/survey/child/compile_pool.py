"""An autotuner's configurations compiled side by side before it times them.

Child side (the survey worker). A Triton autotuner times its configurations one after
another (``Autotuner._bench`` for each), and each compiles on its first launch there: on a
cold H200 ``mm [1d-f32]`` spent 137 s compiling 22 configurations in a row on one core
while most of the 16 sat idle. Triton's compiler leaves the GIL in its long stages
(the MLIR and LLVM passes, ``ptxas``), so threads compile side by side.

At the first ``_bench`` of an autotuning, the wrapper compiles the configurations that
autotuning is about to time in a pool of threads (``JITFunction.run(..., warmup=True)``:
compile and keep in the kernel's own cache, launch nothing), then lets ``_bench`` time each
as before, which finds its kernel compiled. Which configurations: those ``prune_configs``
gave the autotuning (wrapped to remember them), less, for FlagGems' ``LibTuner``, those
whose timing its database already holds (it never times nor compiles them). So the same
configurations are compiled, once each, and timed in the same order by the same code:
which one wins does not change. A configuration whose compilation fails in the pool is
left to ``_bench``, which compiles it again and fails as before (a failed compilation is
not kept). Each thread works on the device the worker's thread had (a new thread starts
on device 0). Every compilation still goes through ``triton.compile`` and so through the
survey's compile lock (:mod:`.compile_lock`: a flock per compilation works between
threads as between processes) and its compile listener.

``FLAGOS_DOCTOR_COMPILE_THREADS`` sets the pool's size (default: the cores this process
may use; ``1`` turns this off). :data:`EVENTS` counts what it did.
"""

from __future__ import annotations

import os
import sys
import threading
from concurrent.futures import ThreadPoolExecutor

THREADS_VAR = "FLAGOS_DOCTOR_COMPILE_THREADS"
#: What the pool did in this process: autotunings compiled ahead, configurations compiled
#: ahead, and those whose compilation failed there (left to ``_bench``).
EVENTS = {"autotunings": 0, "configurations": 0, "failed": 0}
_lock = threading.Lock()


def threads() -> int:
    """The pool's size: ``FLAGOS_DOCTOR_COMPILE_THREADS``, else the cores this process may use."""
    value = os.environ.get(THREADS_VAR, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def install() -> dict:
    """Wrap the Triton the stack imported; what to put in provenance."""
    count = threads()
    module = sys.modules.get("triton.runtime.autotuner")
    tuner_class = getattr(module, "Autotuner", None)
    bench = getattr(tuner_class, "_bench", None)
    prune = getattr(tuner_class, "prune_configs", None)
    if count <= 1:
        return {"threads": 1}
    if not callable(bench) or not callable(prune):
        return {"threads": 1, "why": "this Triton has no Autotuner._bench or prune_configs"}
    if not getattr(prune, "_flagos_pool", False):
        tuner_class.prune_configs = _remembering(prune)
    if not getattr(bench, "_flagos_pool", False):
        tuner_class._bench = _compiling_first(bench, count)
    return {"threads": count}


def _remembering(prune):
    """``prune_configs`` that keeps what it gave on the tuner (for the first ``_bench``)."""

    def prune_configs(tuner, kwargs, *rest, **more):
        pruned = prune(tuner, kwargs, *rest, **more)
        tuner._flagos_pruned = list(pruned)
        return pruned

    prune_configs._flagos_pool = True
    prune_configs.__wrapped__ = prune
    return prune_configs


def _compiling_first(bench, count: int):
    """``_bench`` that compiles the autotuning's configurations in a pool at its first call."""

    def _bench(tuner, *args, config, **meta):
        pending = getattr(tuner, "_flagos_pruned", None)
        if pending:
            tuner._flagos_pruned = None  # once an autotuning: the next prune_configs sets it again
            configs = [c for c in pending if _will_time(tuner, c, meta)]
            if len(configs) > 1:
                compile_ahead(tuner, args, meta, configs, count)
        return bench(tuner, *args, config=config, **meta)

    _bench._flagos_pool = True
    _bench.__wrapped__ = bench
    return _bench


def compile_ahead(tuner, args: tuple, meta: dict, configs: list, count: int) -> None:
    """Compile ``configs`` of ``tuner`` for ``args`` in up to ``count`` threads (launch nothing)."""
    from triton.runtime import driver

    try:
        device = driver.active.get_current_device()
    except Exception:
        return  # no device to compile for: _bench compiles as before
    setter = getattr(driver.active, "set_current_device", None)
    jit_function = tuner.fn
    while not hasattr(jit_function, "device_caches") and hasattr(jit_function, "fn"):
        jit_function = jit_function.fn  # through Heuristics and the like
    caches = getattr(jit_function, "device_caches", None)
    if caches is not None:
        caches[device]  # made here, once: threads making it at once would each keep their own

    def one(config) -> None:
        try:
            if callable(setter):
                setter(device)
            current = dict(meta, **config.all_kwargs())
            current["warmup"] = True
            tuner.fn.run(*args, **current)
            with _lock:
                EVENTS["configurations"] += 1
        except Exception:  # _bench compiles it again and reports it as before
            with _lock:
                EVENTS["failed"] += 1

    with _lock:
        EVENTS["autotunings"] += 1
    with ThreadPoolExecutor(max_workers=min(count, len(configs)), thread_name_prefix="flagos-compile") as pool:
        list(pool.map(one, configs))


def _will_time(tuner, config, meta: dict) -> bool:
    """Whether the autotuning times ``config``: always, but for a FlagGems ``LibTuner`` whose
    database holds its timing already (its ``run`` skips those)."""
    table = getattr(tuner, "benchmark_table_name", None)
    get_key = getattr(tuner, "get_key", None)
    if table is None or not callable(get_key):
        return True
    try:
        cache = next(module.libcache for module in (sys.modules.get(k.__module__) for k in type(tuner).__mro__)
                     if hasattr(module, "libcache"))
        nargs = tuner.nargs or {}
        named = {k: v for k, v in {**nargs, **meta}.items() if k in tuner.arg_names}
        return cache[table, get_key(named)].get(config) is None
    except Exception:
        return True
