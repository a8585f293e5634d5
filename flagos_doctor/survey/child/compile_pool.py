"""An autotuner's configurations compiled side by side before it times them.

Child side (the survey worker). A Triton autotuner times its configurations one after
another (``Autotuner._bench`` for each), and each compiles on its first launch there: on a
cold H200 ``mm [1d-f32]`` spent 137 s compiling 22 configurations in a row on one core
while most of the 16 sat idle.

At the first ``_bench`` of an autotuning, the wrapper compiles the configurations that
autotuning is about to time in forked children of the worker (``JITFunction.run(...,
warmup=True)``: compile, launch nothing), which fill Triton's cache folder; then
``_bench`` times each as before, and its launch finds the kernel there (a cache hit). Which
configurations: those ``prune_configs`` gave the autotuning (wrapped to remember them),
less, for FlagGems' ``LibTuner``, those whose timing its database already holds (it never
times nor compiles them). So the same configurations are compiled, once each, and timed in
the same order by the same code: which one wins does not change. A configuration whose
compilation fails in a child is left to ``_bench``, which compiles it again and fails as
before. Every compilation still goes through ``triton.compile`` and so through the survey's
compile lock (:mod:`.compile_lock`), so no two workers compile one kernel at once.

A child compiles what ``_bench`` will launch, so it first runs the configuration's
``pre_hook`` on the launch's arguments, as ``_bench`` does: FlagGems 5.0.2's Hopper ``mm``
passes host TMA descriptors made with a dummy block shape that this hook sets, and the
block shape is part of what Triton compiles. Without it every child's compilation of
``mm_kernel_general_host_tma`` failed (a [1, 1] block), and on the H200 the worker compiled
all 162 configurations of ``mm [2d-f32]`` itself; the tests' fixture kernel had no hook.
The tuner's own ``pre_hook`` (``reset_to_zero``, ``restore_value``) changes only tensor
contents, which nothing compiled depends on, and would touch the device: not run.

Processes, not threads: threads of one worker compiled the 22 large ``mm [1d-f32]``
kernels on the H200 (Triton 3.6) 2.3 times faster than one after another, and compiling
holds the GIL for much of its time. A forked child holds the parent's CUDA context but
never touches it (Triton is told the device and stream; nothing launches) and leaves with
``os._exit``.

The compilations a child makes are not seen by the worker's compile listener: a case's
``triton`` figures count them as cache hits (``compile_cache_hits``), and its
``compile_seconds`` leave them out (its ``seconds`` and ``autotune_seconds`` do not). What
each autotuning got is kept in :data:`AUTOTUNINGS` (configurations it was to time,
compiled and failed ahead, timed, and compiled by the worker inside ``_bench`` or found in
the cache there; fewer are timed where another worker's timings reached FlagGems' database
meanwhile: ``LibTuner`` reads them there, as on the H200 ``mm`` and ``mm.out`` did), and a
case's ``compile_ahead`` (:func:`since`) says it for the autotunings of that case, with the
pool off too (``compiled_ahead`` 0): whether the pool engaged is read there, not guessed.

``FLAGOS_DOCTOR_COMPILE_THREADS`` sets how many children an autotuning forks (default:
the cores this process may use; ``1`` turns this off).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import warnings

THREADS_VAR = "FLAGOS_DOCTOR_COMPILE_THREADS"
#: How long the worker waits for its compiling children before it kills them and lets
#: ``_bench`` compile what they had not (a compiler hung in a child delays, never stops).
PATIENCE_SECONDS = 600.0
#: The figures of one autotuning (an entry of :data:`AUTOTUNINGS`), and of a case's.
COUNTS = ("configurations", "compiled_ahead", "failed_ahead", "timed", "worker_compiled", "cache_hits")
#: A case's ``compile_ahead`` lists at most this many autotunings (those of most configurations).
LISTED = 8
#: Every autotuning this process timed, in order: {"kernel", **COUNTS}.
AUTOTUNINGS: list[dict] = []
_lock = threading.Lock()
_timing = threading.local()  # .entry: the AUTOTUNINGS entry whose _bench runs on this thread


def threads() -> int:
    """How many children: ``FLAGOS_DOCTOR_COMPILE_THREADS``, else the cores this process may use."""
    value = os.environ.get(THREADS_VAR, "").strip()
    if value.isdigit() and int(value) > 0:
        return int(value)
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def install() -> dict:
    """Wrap the Triton the stack imported; what to put in provenance. The autotunings are
    counted (:data:`AUTOTUNINGS`) with the pool off too."""
    count = threads()
    module = sys.modules.get("triton.runtime.autotuner")
    tuner_class = getattr(module, "Autotuner", None)
    bench = getattr(tuner_class, "_bench", None)
    prune = getattr(tuner_class, "prune_configs", None)
    if not callable(bench) or not callable(prune):
        return {"threads": 1, "why": "this Triton has no Autotuner._bench or prune_configs"}
    if not getattr(prune, "_flagos_pool", False):
        tuner_class.prune_configs = _remembering(prune)
    if not getattr(bench, "_flagos_pool", False):
        tuner_class._bench = _compiling_first(bench, count)
        _listen()
    return {"threads": count}


def mark() -> int:
    """Where this process's autotunings stand (for :func:`since`)."""
    return len(AUTOTUNINGS)


def since(before: int) -> dict | None:
    """The autotunings since ``before`` (a :func:`mark`): their summed counts and the
    largest :data:`LISTED` of them; None when there were none."""
    with _lock:
        entries = [dict(entry) for entry in AUTOTUNINGS[before:]]
    if not entries:
        return None
    found = {key: sum(entry[key] for entry in entries) for key in COUNTS}
    found["autotunings"] = sorted(entries, key=lambda entry: -entry["configurations"])[:LISTED]
    return found


def _listen() -> None:
    """Count, on Triton's compile listener, the worker's compilations inside ``_bench``."""
    knobs = getattr(sys.modules.get("triton"), "knobs", None)
    compilation = getattr(knobs, "compilation", None)
    if compilation is None or not hasattr(compilation, "listener"):
        return
    previous = compilation.listener

    def on_compile(**kwargs):
        entry = getattr(_timing, "entry", None)
        # only the tuned kernel: do_bench's L2 flush may compile the stack's own fill kernel
        name = (kwargs.get("metadata") or {}).get("name") or getattr(kwargs.get("src"), "name", None)
        if entry is not None and name in (entry["kernel"], None):
            with _lock:
                entry["cache_hits" if kwargs.get("cache_hit") else "worker_compiled"] += 1
        if previous is not None:
            previous(**kwargs)

    compilation.listener = on_compile


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
    """``_bench`` that compiles the autotuning's configurations in a pool at its first call,
    and counts what the worker compiled or found in the cache in each call."""

    def _bench(tuner, *args, config, **meta):
        pending = getattr(tuner, "_flagos_pruned", None)
        if pending:
            tuner._flagos_pruned = None  # once an autotuning: the next prune_configs sets it again
            configs = [c for c in pending if _will_time(tuner, c, meta)]
            name = getattr(getattr(tuner, "base_fn", None), "__name__", None) or type(tuner).__name__
            entry = {"kernel": name, **dict.fromkeys(COUNTS, 0), "configurations": len(configs)}
            with _lock:
                AUTOTUNINGS.append(entry)
            tuner._flagos_entry = entry
            if count > 1 and len(configs) > 1:
                entry["compiled_ahead"] = compile_ahead(tuner, args, meta, configs, count)
                entry["failed_ahead"] = len(configs) - entry["compiled_ahead"]
        outer = getattr(_timing, "entry", None)
        _timing.entry = getattr(tuner, "_flagos_entry", None)
        if _timing.entry is not None:
            _timing.entry["timed"] += 1
        try:
            return bench(tuner, *args, config=config, **meta)
        finally:
            _timing.entry = outer

    _bench._flagos_pool = True
    _bench.__wrapped__ = bench
    return _bench


def compile_ahead(tuner, args: tuple, meta: dict, configs: list, count: int) -> int:
    """Compile ``configs`` of ``tuner`` for ``args`` in up to ``count`` forked children
    (module doc); they fill Triton's cache folder, and the autotuner's own launches then
    find each kernel there. How many they compiled."""
    from triton.runtime import driver

    try:
        device = driver.active.get_current_device()
        stream = driver.active.get_current_stream(device)
    except Exception:
        return 0  # no device to compile for: _bench compiles as before
    jit_function = tuner.fn
    while not hasattr(jit_function, "device_caches") and hasattr(jit_function, "fn"):
        jit_function = jit_function.fn  # through Heuristics and the like
    caches = getattr(jit_function, "device_caches", None)
    if caches is not None:
        caches[device]  # the target and binder, made in the parent (the children never ask the device)
    shares = [configs[index::count] for index in range(min(count, len(configs)))]
    children: dict[int, int] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork of a process with threads: see _in_child
        for share in shares:
            pid = os.fork()
            if pid == 0:
                _in_child(tuner, args, meta, share, device, stream)  # never returns
            children[pid] = len(share)
    return _wait(children)


def _in_child(tuner, args: tuple, meta: dict, share: list, device, stream) -> None:
    """Compile ``share`` in this forked child, then leave at once (``os._exit``: no atexit
    handler, no flush of the parent's buffers). The child never touches the device, whose
    context is the parent's: Triton is told the parent's device and stream instead of
    asking torch, and nothing is launched. It writes nothing where the parent reads (its
    output goes to /dev/null) and dies of a signal as a plain process does. The exit code
    is the number of configurations it compiled."""
    compiled = 0
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        for name in ("SIGTERM", "SIGINT", "SIGALRM"):
            signal.signal(getattr(signal, name), signal.SIG_DFL)
        from triton.runtime import driver

        active = driver.active
        active.get_current_device = lambda: device
        active.get_current_stream = lambda *_: stream
        for config in share:
            try:
                current = dict(meta, **config.all_kwargs())
                if config.pre_hook:  # as _bench does: it may set what is compiled (module doc)
                    config.pre_hook({**(tuner.nargs or {}), **current})
                current["warmup"] = True
                tuner.fn.run(*args, **current)
                compiled += 1
            except Exception:  # left to _bench, which compiles it again and reports it as before
                pass
    finally:
        os._exit(min(compiled, 255))


def _wait(children: dict[int, int]) -> int:
    """Wait for the children (at most :data:`PATIENCE_SECONDS`: one stuck is killed, and
    _bench compiles what it had not); the configurations they compiled."""
    compiled = 0
    deadline = time.monotonic() + PATIENCE_SECONDS
    pause = 0.005
    while children:
        for pid in list(children):
            try:
                done, status = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:
                children.pop(pid)
                continue
            if done:
                children.pop(pid)
                compiled += os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 0
        if children and time.monotonic() > deadline:
            for pid in children:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
            break
        time.sleep(pause)
        pause = min(pause * 2, 0.1)
    return compiled


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
