"""Each promise of flagos_doctor/survey/child/compile_pool.py's docstrings, one test each.

The pool's parts are called directly, on the real Triton of the tests' stack where the clause
is about it (its ``Autotuner`` wrapped and restored, its compile listener, its driver), and
with real forked children where it is about them (their exit codes, one that hangs, one
killed by a signal). A stand-in is used only where the thing itself needs a GPU: the kernel a
child "compiles" records its call instead (the real compilations for sm_90, through a real
autotuner and FlagGems' LibTuner, are tests/test_compile_pool.py); and FlagGems' database
lookup, whose real import needs ``GEMS_VENDOR`` set before it, is shaped as 5.0.2's
(``libcache[table, key].get(config)`` in the tuner class's module). scripts/mutation runs
these first.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import types

import pytest
import triton
import triton.runtime.autotuner as autotuner
from triton.runtime import driver

from conftest import REPO_ROOT
from flagos_doctor.survey.child import compile_pool

VAR = compile_pool.THREADS_VAR


@pytest.fixture
def entries(monkeypatch):
    """A fresh :data:`compile_pool.AUTOTUNINGS` for the test."""
    fresh: list = []
    monkeypatch.setattr(compile_pool, "AUTOTUNINGS", fresh)
    return fresh


@pytest.fixture
def real_triton(monkeypatch, entries):
    """Triton's own Autotuner and compile listener, put back as they were after the test."""
    monkeypatch.setattr(autotuner.Autotuner, "_bench", autotuner.Autotuner._bench)
    monkeypatch.setattr(autotuner.Autotuner, "prune_configs", autotuner.Autotuner.prune_configs)
    monkeypatch.setattr(triton.knobs.compilation, "listener", None)
    return autotuner.Autotuner


# -- threads(): how many children ------------------------------------------------------------

def test_the_variable_sets_how_many_children_and_one_turns_the_pool_off(monkeypatch):
    monkeypatch.setenv(VAR, "3")
    assert compile_pool.threads() == 3
    monkeypatch.setenv(VAR, " 1 ")
    assert compile_pool.threads() == 1


def test_the_cores_are_this_processs_own_not_the_machines():
    one_core = subprocess.run(["taskset", "-c", "0", sys.executable, "-c",
                               "from flagos_doctor.survey.child import compile_pool; print(compile_pool.threads())"],
                              capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=REPO_ROOT), timeout=60)
    assert one_core.stdout.strip() == "1", one_core.stderr


def test_without_a_usable_value_it_is_the_cores_this_process_may_use(monkeypatch):
    cores = len(os.sched_getaffinity(0))
    monkeypatch.delenv(VAR, raising=False)
    assert compile_pool.threads() == cores
    for unusable in ("", "0", "-2", "two", "1.5"):
        monkeypatch.setenv(VAR, unusable)
        assert compile_pool.threads() == cores, unusable


def test_where_the_affinity_cannot_be_read_it_is_the_cpu_count_and_at_least_one(monkeypatch):
    monkeypatch.delenv(VAR, raising=False)
    monkeypatch.delattr(os, "sched_getaffinity")  # not Linux
    monkeypatch.setattr(os, "cpu_count", lambda: 5)
    assert compile_pool.threads() == 5
    monkeypatch.setattr(os, "cpu_count", lambda: None)  # os.cpu_count's "undetermined"
    assert compile_pool.threads() == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: (_ for _ in ()).throw(OSError("no affinity here")),
                        raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 3)
    assert compile_pool.threads() == 3


# -- install() ---------------------------------------------------------------------------------

def test_install_wraps_the_autotuner_once_and_says_how_many_children(real_triton, monkeypatch):
    monkeypatch.setenv(VAR, "3")
    bench, prune = real_triton._bench, real_triton.prune_configs
    assert compile_pool.install() == {"threads": 3}
    wrapped_bench, wrapped_prune = real_triton._bench, real_triton.prune_configs
    assert wrapped_bench.__wrapped__ is bench and wrapped_prune.__wrapped__ is prune
    listener = triton.knobs.compilation.listener
    assert listener is not None  # the worker's compilations inside _bench are counted
    # the stack's import may run it again: nothing is wrapped twice, no second listener
    assert compile_pool.install() == {"threads": 3}
    assert real_triton._bench is wrapped_bench and real_triton.prune_configs is wrapped_prune
    assert triton.knobs.compilation.listener is listener


def test_install_counts_autotunings_with_the_pool_off_too(real_triton, monkeypatch):
    monkeypatch.setenv(VAR, "1")
    assert compile_pool.install() == {"threads": 1}
    assert getattr(real_triton._bench, "_flagos_pool", False) and getattr(real_triton.prune_configs, "_flagos_pool", False)


@pytest.mark.parametrize("has", [(), ("_bench",), ("prune_configs",)])
def test_a_triton_without_bench_or_prune_configs_is_left_alone_and_says_why(monkeypatch, has):
    older = types.ModuleType("triton.runtime.autotuner")
    older.Autotuner = type("Autotuner", (), {name: (lambda self, *a, **k: None) for name in has})
    monkeypatch.setitem(sys.modules, "triton.runtime.autotuner", older)
    before = dict(vars(older.Autotuner))
    assert compile_pool.install() == {"threads": 1, "why": "this Triton has no Autotuner._bench or prune_configs"}
    assert dict(vars(older.Autotuner)) == before


# -- mark() and since() ------------------------------------------------------------------------

def test_since_is_none_when_no_autotuning_ran_since_the_mark(entries):
    assert compile_pool.since(compile_pool.mark()) is None
    entries.append(autotuning("k", configurations=2))
    assert compile_pool.since(compile_pool.mark()) is None


def test_since_sums_the_counts_and_lists_the_largest_autotunings(entries):
    entries.extend(autotuning(f"k{n}", configurations=n, timed=n, compiled_ahead=1, cache_hits=n % 2)
                   for n in (3, 11, 1, 7, 9, 2, 5, 10, 4, 8, 6))
    found = compile_pool.since(2)  # the first two were before the mark
    later = entries[2:]
    assert found["configurations"] == found["timed"] == sum(e["configurations"] for e in later) == 52
    assert found["compiled_ahead"] == 9 and found["cache_hits"] == sum(e["cache_hits"] for e in later)
    assert [e["configurations"] for e in found["autotunings"]] == [10, 9, 8, 7, 6, 5, 4, 2]
    assert len(found["autotunings"]) == compile_pool.LISTED == 8
    assert set(found) == set(compile_pool.COUNTS) | {"autotunings"}


def autotuning(kernel: str, **counts) -> dict:
    return {"kernel": kernel, **dict.fromkeys(compile_pool.COUNTS, 0), **counts}


# -- _remembering and _compiling_first: one entry an autotuning, each _bench counted ----------------

class Tuner:
    """What the wrappers read of an autotuner: its kernel's name and, after prune_configs,
    what it gave (the real one: tests/test_compile_pool.py)."""

    def __init__(self, name: str):
        self.base_fn = types.SimpleNamespace(__name__=name)
        self.nargs = None


def test_prune_configs_keeps_what_it_gave_on_the_tuner():
    given = ["c1", "c2"]
    prune = compile_pool._remembering(lambda tuner, kwargs, *rest: given)
    tuner = Tuner("k")
    assert prune(tuner, {}) == given
    assert tuner._flagos_pruned == given and tuner._flagos_pruned is not given


def test_the_first_bench_of_an_autotuning_opens_its_entry_and_each_bench_is_counted(entries, monkeypatch):
    ahead = spy_on_compile_ahead(monkeypatch, compiled=0)
    bench = compile_pool._compiling_first(lambda tuner, *args, config, **meta: config, 1)
    tuner = Tuner("add_one")
    tuner._flagos_pruned = ["a", "b", "c"]
    assert [bench(tuner, 7, config=c, n=8) for c in ("a", "b", "c")] == ["a", "b", "c"]
    assert entries == [autotuning("add_one", configurations=3, timed=3)]
    assert ahead == []  # one child: no pool
    # the next autotuning of the same tuner (prune_configs again) opens its own entry
    tuner._flagos_pruned = ["a"]
    bench(tuner, 7, config="a", n=16)
    assert entries[1] == autotuning("add_one", configurations=1, timed=1) and entries[0]["timed"] == 3


def test_an_autotuning_without_a_named_kernel_is_named_by_its_tuners_class(entries, monkeypatch):
    spy_on_compile_ahead(monkeypatch, compiled=0)
    tuner = types.SimpleNamespace(_flagos_pruned=["a"], nargs=None)
    compile_pool._compiling_first(lambda tuner, *args, config, **meta: None, 1)(tuner, config="a")
    assert entries[0]["kernel"] == "SimpleNamespace"


@pytest.mark.parametrize("count, configs, pooled", [(2, 3, True), (4, 2, True), (1, 3, False), (4, 1, False)])
def test_the_configurations_compile_ahead_only_with_more_than_one_child_and_configuration(
        entries, monkeypatch, count, configs, pooled):
    ahead = spy_on_compile_ahead(monkeypatch, compiled=1)
    bench = compile_pool._compiling_first(lambda tuner, *args, config, **meta: None, count)
    tuner = Tuner("k")
    pending = [f"c{n}" for n in range(configs)]
    tuner._flagos_pruned = pending
    bench(tuner, "x", config=pending[0], BLOCK=4)
    if pooled:
        assert ahead == [(tuner, ("x",), {"BLOCK": 4}, pending, count)]
        assert (entries[0]["compiled_ahead"], entries[0]["failed_ahead"]) == (1, configs - 1)
    else:
        assert ahead == [] and (entries[0]["compiled_ahead"], entries[0]["failed_ahead"]) == (0, 0)


def test_a_libtuner_configuration_timed_in_its_database_is_neither_compiled_nor_counted(entries, monkeypatch):
    ahead = spy_on_compile_ahead(monkeypatch, compiled=2)
    tuner = LibTunerShape(timed_already={"c1"})
    tuner._flagos_pruned = ["c0", "c1", "c2"]
    compile_pool._compiling_first(lambda tuner, *args, config, **meta: None, 4)(tuner, config="c0", n=8)
    assert ahead[0][3] == ["c0", "c2"] and entries[0]["configurations"] == 2


def spy_on_compile_ahead(monkeypatch, compiled: int) -> list:
    """The calls the wrapper makes to compile_ahead (itself tested on real children below)."""
    calls: list = []

    def compile_ahead(tuner, args, meta, configs, count):
        calls.append((tuner, args, meta, list(configs), count))
        return compiled
    monkeypatch.setattr(compile_pool, "compile_ahead", compile_ahead)
    return calls


def test_the_listener_counts_the_tuned_kernels_compilations_inside_its_bench_each_to_its_own_autotuning(
        real_triton, entries, monkeypatch):
    """Only the tuned kernel (do_bench's L2 flush may compile the stack's fill kernel), or a
    compilation that names none; an autotuning run inside another's _bench counts to its own,
    and the outer one's count resumes after it; the listener before ours still hears all."""
    monkeypatch.setenv(VAR, "1")
    heard = []
    triton.knobs.compilation.listener = lambda **kwargs: heard.append((kwargs["metadata"] or {}).get("name"))
    compile_pool.install()

    def compiled(name, hit=False, src=None):
        triton.knobs.compilation.listener(src=src, metadata={"name": name} if name else {}, cache_hit=hit)

    outer, inner = Tuner("outer_kernel"), Tuner("inner_kernel")

    def bench(tuner, *args, config, **meta):
        if tuner is outer:
            compiled("outer_kernel")
            compiled("fill_kernel")  # not the tuned kernel
            inner._flagos_pruned = ["i"]
            real_triton._bench(inner, config="i")
            compiled("outer_kernel", hit=True)
            compiled(None)
            compiled(None, src=types.SimpleNamespace(name="fill_kernel"))  # named by its source only
            compiled(None, src=types.SimpleNamespace(name="outer_kernel"), hit=True)
            triton.knobs.compilation.listener(src=types.SimpleNamespace(name="outer_kernel"), metadata=None,
                                              cache_hit=True)  # no metadata at all: named by its source
        else:
            compiled("inner_kernel", hit=True)
    monkeypatch.setattr(compile_pool, "_timing", types.SimpleNamespace())
    wrapped = compile_pool._compiling_first(bench, 1)
    monkeypatch.setattr(real_triton, "_bench", wrapped)
    outer._flagos_pruned = ["o"]
    wrapped(outer, config="o")
    by_kernel = {entry["kernel"]: entry for entry in entries}
    assert (by_kernel["outer_kernel"]["worker_compiled"], by_kernel["outer_kernel"]["cache_hits"]) == (2, 3)
    assert (by_kernel["inner_kernel"]["worker_compiled"], by_kernel["inner_kernel"]["cache_hits"]) == (0, 1)
    assert heard == ["outer_kernel", "fill_kernel", "inner_kernel", "outer_kernel", None, None, None, None]
    compiled("outer_kernel")  # outside any _bench: nobody's
    assert by_kernel["outer_kernel"]["worker_compiled"] == 2


def test_a_bench_that_raises_still_ends_its_count(entries, monkeypatch):
    monkeypatch.setattr(compile_pool, "_timing", types.SimpleNamespace())

    def bench(tuner, *args, config, **meta):
        raise RuntimeError("out of resources")
    tuner = Tuner("k")
    tuner._flagos_pruned = ["a"]
    with pytest.raises(RuntimeError):
        compile_pool._compiling_first(bench, 1)(tuner, config="a")
    assert compile_pool._timing.entry is None


def test_a_triton_without_a_compile_listener_is_left_alone(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton", types.ModuleType("triton"))
    compile_pool._listen()  # nothing to wrap; no error
    knobs = types.SimpleNamespace(compilation=types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, "triton", types.SimpleNamespace(knobs=knobs))
    compile_pool._listen()
    assert vars(knobs.compilation) == {}


# -- _will_time: FlagGems' LibTuner skips what its database holds ----------------------------------

class Timings:
    """FlagGems 5.0.2's database as its LibTuner reads it: ``libcache[table, key].get(config)``."""

    def __init__(self, held: dict):
        self.held = held

    def __getitem__(self, table_key):
        table, key = table_key
        return {config: (1.0, 1.0, 1.0) for config in self.held.get((table, key), ())}


libcache = Timings({})  # where _will_time looks: the module of the tuner's class (FlagGems' libentry)


class LibTunerShape:
    benchmark_table_name = "mm_kernel_benchmark"
    arg_names = ["a", "n"]

    def __init__(self, timed_already=(), nargs=None):
        self.nargs = nargs if nargs is not None else {"a": "tensor", "n": 8}
        self.base_fn = types.SimpleNamespace(__name__="mm_kernel")
        libcache.held = {(self.benchmark_table_name, ("key", 8)): set(timed_already)}

    def get_key(self, named):
        assert set(named) <= set(self.arg_names)  # only the kernel's own arguments
        return ("key", named["n"])


def test_a_plain_autotuner_times_every_configuration():
    assert compile_pool._will_time(Tuner("k"), "c0", {}) is True


def test_a_libtuner_skips_a_configuration_whose_timing_its_database_holds():
    tuner = LibTunerShape(timed_already={"c1"})
    assert [compile_pool._will_time(tuner, c, {"n": 8, "BLOCK": 4}) for c in ("c0", "c1")] == [True, False]
    # the key's arguments from the launch's (nargs) when the meta does not hold them
    assert compile_pool._will_time(tuner, "c1", {"BLOCK": 4}) is False
    # under another key (the meta's n wins over the launch's) it holds no timing
    assert compile_pool._will_time(tuner, "c1", {"n": 16}) is True


def test_a_libtuner_not_yet_handed_its_arguments_keys_by_the_meta():
    tuner = LibTunerShape(timed_already={"c1"})
    tuner.nargs = None
    assert compile_pool._will_time(tuner, "c1", {"n": 8}) is False


def test_a_libtuner_whose_database_cannot_be_read_times_as_before():
    tuner = LibTunerShape(timed_already={"c1"})
    tuner.get_key = lambda named: (_ for _ in ()).throw(KeyError("n"))
    assert compile_pool._will_time(tuner, "c1", {}) is True
    tuner = LibTunerShape(timed_already={"c1"})
    tuner.get_key = None  # not callable: not a LibTuner
    assert compile_pool._will_time(tuner, "c1", {}) is True


# -- compile_ahead, _in_child and _wait: real forked children ------------------------------------

def test_without_a_device_to_compile_for_nothing_is_forked(monkeypatch):
    """This machine has no GPU: Triton finds no active driver, and _bench compiles as before."""
    monkeypatch.setattr(driver, "_active", None)
    monkeypatch.setattr(driver, "_default", None)
    with pytest.raises(RuntimeError, match="0 active drivers"):
        driver.active.get_current_device()
    before = os.getpid()
    assert compile_pool.compile_ahead(object(), (), {}, ["c0", "c1"], 2) == 0
    assert os.getpid() == before


class FixtureDriver:
    """The device's part of Triton's driver; asking it anything in a child fails (the children
    must be told the device and stream)."""

    def __init__(self, parent: int):
        self.parent = parent

    def _here(self):
        if os.getpid() != self.parent:
            raise RuntimeError("a child asked the device")

    def get_current_device(self):
        self._here()
        return 3

    def get_current_stream(self, device=None):
        self._here()
        return 77


class RecordingKernel:
    """Stands where the JITFunction is: ``run(..., warmup=True)`` would compile; this writes
    what it was given, in which process, told which device and stream, and fails for BLOCK 64
    (a configuration that does not compile)."""

    def __init__(self, log: str):
        self.log = log

    def run(self, *args, **kwargs):
        os.write(1, b"compiling\n")  # as a compiler's output would: a child's must not reach the parent's
        os.write(2, b"ptxas info\n")
        if kwargs.get("BLOCK") == 64:
            raise RuntimeError("static assertion")
        active = driver.active
        device = active.get_current_device()
        with open(self.log, "a") as handle:
            handle.write(json.dumps({"pid": os.getpid(), "args": list(args), "kwargs": kwargs, "device": device,
                                     "stream": active.get_current_stream(device)}) + "\n")


def test_the_children_compile_each_configuration_once_after_its_pre_hook_and_never_ask_the_device(tmp_path, capfd, monkeypatch):
    log = str(tmp_path / "compiled.log")

    def pre_hook(nargs):  # sets what is compiled, on the launch's own argument (FlagGems' TMA block shape)
        nargs["a"]["block"] = nargs["BLOCK"]
    configs = [triton.Config({"BLOCK": block}, num_warps=2, pre_hook=pre_hook if block == 32 else None)
               for block in (16, 32, 64, 128, 256)]
    descriptor: dict = {}
    tuner = types.SimpleNamespace(fn=RecordingKernel(log), nargs={"a": descriptor, "n": 8})
    monkeypatch.setattr(driver, "_active", FixtureDriver(os.getpid()))
    compiled = compile_pool.compile_ahead(tuner, (descriptor,), {"n": 8}, configs, 2)
    assert compiled == 4  # BLOCK 64 failed ahead: left to _bench
    with open(log) as handle:
        runs = {json.loads(line)["kwargs"]["BLOCK"]: json.loads(line) for line in handle}
    assert sorted(runs) == [16, 32, 128, 256]
    assert all(run["kwargs"]["warmup"] is True and run["kwargs"]["n"] == 8 and run["kwargs"]["num_warps"] == 2
               for run in runs.values())
    assert {(run["device"], run["stream"]) for run in runs.values()} == {(3, 77)}
    # each child has every count-th configuration: [16, 64, 256] and [32, 128]
    assert runs[16]["pid"] == runs[256]["pid"] != runs[32]["pid"] == runs[128]["pid"]
    assert os.getpid() not in {run["pid"] for run in runs.values()}
    # the hook ran before its configuration's compilation, in that child only
    assert runs[32]["args"] == [{"block": 32}] and runs[16]["args"] == runs[256]["args"] == [{}]
    assert descriptor == {}
    printed = capfd.readouterr()
    assert "compiling" not in printed.out and "ptxas" not in printed.err


def test_no_more_children_than_configurations(tmp_path, monkeypatch):
    log = str(tmp_path / "compiled.log")
    tuner = types.SimpleNamespace(fn=RecordingKernel(log), nargs=None)  # a tuner not yet handed its arguments
    monkeypatch.setattr(driver, "_active", FixtureDriver(os.getpid()))
    configs = [triton.Config({"BLOCK": 16}, pre_hook=lambda nargs: None), triton.Config({"BLOCK": 32})]
    compiled = compile_pool.compile_ahead(tuner, (), {}, configs, 8)
    with open(log) as handle:
        assert compiled == 2 and len({json.loads(line)["pid"] for line in handle}) == 2


class TerminatedKernel(RecordingKernel):
    """BLOCK 16's compilation gets SIGTERM (a survey stopping its workers' process group)."""

    def run(self, *args, **kwargs):
        if kwargs.get("BLOCK") == 16:
            os.kill(os.getpid(), signal.SIGTERM)
        super().run(*args, **kwargs)


def test_a_child_dies_of_a_signal_as_a_plain_process_does_not_by_the_workers_handler(tmp_path, monkeypatch):
    log = str(tmp_path / "compiled.log")
    handled = tmp_path / "handled"

    def workers_handler(signum, frame):  # the worker's own (it flushes its records): never in a child
        handled.write_text(str(os.getpid()))
    previous = signal.signal(signal.SIGTERM, workers_handler)
    try:
        monkeypatch.setattr(driver, "_active", FixtureDriver(os.getpid()))
        tuner = types.SimpleNamespace(fn=TerminatedKernel(log), nargs=None)
        compiled = compile_pool.compile_ahead(tuner, (), {}, [triton.Config({"BLOCK": b}) for b in (16, 32)], 2)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert compiled == 1 and not handled.exists()
    with open(log) as handle:
        assert [json.loads(line)["kwargs"]["BLOCK"] for line in handle] == [32]


def test_a_child_says_at_most_255_compiled_an_exit_codes_most(tmp_path, monkeypatch):
    tuner = types.SimpleNamespace(fn=RecordingKernel(str(tmp_path / "compiled.log")), nargs=None)
    monkeypatch.setattr(driver, "_active", FixtureDriver(os.getpid()))
    configs = [triton.Config({"BLOCK": 16, "N": n}) for n in range(300)]
    assert compile_pool.compile_ahead(tuner, (), {}, configs, 1) == 255


FORK_IN_A_THREADED_PROCESS = """
import threading, time, types
threading.Thread(target=time.sleep, args=(30,), daemon=True).start()
from flagos_doctor.survey.child import compile_pool
class Kernel:
    def run(self, *args, **kwargs):
        pass
class Config:
    pre_hook = None
    def all_kwargs(self):
        return {"BLOCK": 16}
print(compile_pool.compile_ahead(types.SimpleNamespace(fn=Kernel(), nargs=None), (), {}, [Config(), Config()], 2))
"""

#: Triton's driver where the survey worker has one, for an interpreter without Triton
TRITON_DRIVER = """
class Active:
    def get_current_device(self):
        return 0
    def get_current_stream(self, device=None):
        return 0
class Driver:
    active = Active()
driver = Driver()
"""


def test_the_forks_beside_the_workers_threads_warn_nothing_under_python_3_12(tmp_path):
    """A survey worker has threads (its channel, its watchdog); from Python 3.12 a fork beside
    them warns (a DeprecationWarning, shown where warnings are on: ``-W``, ``PYTHONWARNINGS``,
    ``-X dev``): the pool's own forks say nothing."""
    from conftest import find_python

    python = find_python("3.12")
    assert python, "no Python 3.12 (scripts/run-tests installs it)"
    runtime = tmp_path / "triton" / "runtime"
    runtime.mkdir(parents=True)
    (tmp_path / "triton" / "__init__.py").write_text("")
    (runtime / "__init__.py").write_text(TRITON_DRIVER)
    done = subprocess.run([python, "-W", "always::DeprecationWarning", "-c", FORK_IN_A_THREADED_PROCESS],
                          capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join([REPO_ROOT, str(tmp_path)])))
    assert done.returncode == 0 and done.stdout.strip() == "2", done.stderr[-2000:]
    assert "DeprecationWarning" not in done.stderr, done.stderr[-2000:]


def fork(then) -> int:
    """A real child of this process that runs ``then()`` and leaves with its return value."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            code = then()
        finally:
            os._exit(code)
    return pid


def test_the_wait_sums_the_exit_codes_and_a_child_killed_by_a_signal_compiled_nothing():
    children = {fork(lambda: 3): 3, fork(lambda: 2): 2, fork(lambda: os.kill(os.getpid(), signal.SIGKILL)): 4}
    assert compile_pool._wait(children) == 5


def test_a_child_stuck_past_the_patience_is_killed_and_what_the_others_compiled_stands(monkeypatch):
    monkeypatch.setattr(compile_pool, "PATIENCE_SECONDS", 1.0)
    stuck = fork(lambda: time.sleep(120) or 0)
    began = time.monotonic()
    assert compile_pool._wait({fork(lambda: 2): 2, stuck: 5}) == 2
    assert time.monotonic() - began < 60
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(stuck, os.WNOHANG)


def test_a_child_reaped_elsewhere_is_no_longer_waited_for():
    gone = fork(lambda: 1)
    os.waitpid(gone, 0)
    assert compile_pool._wait({gone: 1, fork(lambda: 1): 1}) == 1
