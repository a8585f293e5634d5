"""An autotuner's configurations compile side by side (survey/child/compile_pool.py).

Real Triton compilations for an sm_90 target (no GPU needed to compile) through a real
``Autotuner``: a fixture driver stands in for the device (it names the target and device 0
and has no launcher, so every launch fails after its compilation, as on a machine without
the GPU; asked for the target in a forked child, it fails: the children are told it), and
Triton's stage-inspection hook makes each compilation's TTIR stage sleep and write when it
ran and in which process. The same script runs with the pool and without it
(``FLAGOS_DOCTOR_COMPILE_THREADS=1``): the same configurations compiled once each, timed in
the same order, the same one chosen; with the pool they compile in forked children whose
compilations overlap in time, and the worker loads each from Triton's cache.

That fixture passed while on the H200 the pool did nothing for FlagGems' ``mm [2d-f32]``:
its kernel takes host TMA descriptors whose block shape each configuration's ``pre_hook``
sets, which the children skipped. So the class is tested too, on FlagGems 5.0.2's own
kernels and configurations through its ``LibTuner`` (imported for sm_90 on a machine without
a GPU: ``GEMS_VENDOR=nvidia ARCH=sm_90``): the cache keys the children compiled are the
ones the worker then looks up, each once, with a configuration that fails to compile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT

#: Both scripts' stand-in for the device's part of Triton's driver (which target, which device;
#: no launcher), made the active driver where the script puts it.
FIXTURE_DRIVER = r"""
import os, threading
from triton.backends.compiler import GPUTarget
from triton.runtime import driver

PARENT = os.getpid()
class FixtureDriver:  # the device's part of a driver: which target, which device; no launcher
    def get_current_target(self):  # asked once a kernel, where its binder is made: never in a forked child
        if os.getpid() != PARENT:
            raise RuntimeError("a forked child asked the device for its target")
        return GPUTarget("cuda", 90, 32)
    def get_current_device(self):
        return getattr(self._local, "device", 0)
    def set_current_device(self, device):
        self._local.device = device
    def get_current_stream(self, device=None):
        return 0
    _local = threading.local()

driver.set_active(FixtureDriver())
"""

SCRIPT = r"""
import json, os, sys, time
import triton, triton.language as tl
from triton.runtime.jit import MockTensor
from flagos_doctor.survey.child import compile_pool

folder = sys.argv[1]
""" + FIXTURE_DRIVER + r"""
def slow_stages(*args):  # log (in a file: the compiling processes are forked), sleep, lower as usual
    if not args:
        return "slow", "slow"
    lower = args[1]["ttir"]
    def ttir(src, metadata):
        began = time.time()
        time.sleep(1)
        with open(os.path.join(folder, "lowered.log"), "a") as handle:
            handle.write(json.dumps([os.getpid(), began, time.time()]) + "\n")
        return lower(src, metadata)
    args[1]["ttir"] = ttir
triton.knobs.runtime.add_stages_inspection_hook = slow_stages
compiled, compile_hits = [], [0]
pooled = compile_pool.install()
previous = triton.knobs.compilation.listener  # the pool's own count: kept, as the worker keeps it
def listener(**kw):  # in this process: compilations, and loads from the cache folder
    if kw["cache_hit"]:
        compile_hits[0] += 1
    else:
        compiled.append(1)
    previous(**kw)
triton.knobs.compilation.listener = listener
timed = []
def do_bench(kernel_call, quantiles):
    try:
        kernel_call()  # compiles (when not compiled yet), then the launch fails: no launcher
    except Exception as exc:
        pass
    timed.append(len(timed))
    return [float(10 - len(timed))] * 3  # the last timed wins
configs = [triton.Config({"BLOCK": b}, num_warps=w) for b in (32, 64, 128, 256) for w in (1, 2)]
@triton.autotune(configs=configs, key=["n"], do_bench=do_bench)
@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
try:
    add_one[(1,)](MockTensor(tl.float32), 8)
except Exception as exc:
    pass  # the chosen configuration's launch: no launcher
with open(os.path.join(folder, "lowered.log")) as handle:
    log = [json.loads(line) for line in handle]
print(json.dumps({"pooled": pooled, "autotunings": compile_pool.AUTOTUNINGS, "log": log, "compiles": len(compiled),
                  "pid": os.getpid(), "cache_hits": compile_hits[0],
                  "timed": len(timed), "chosen": {str(k): [c.kwargs, c.num_warps] for k, c in add_one.cache.items()}}))
"""


def run(tmp_path, name, threads):
    folder = tmp_path / name
    folder.mkdir()
    script = tmp_path / "autotuned.py"  # @triton.jit reads its source from a file
    script.write_text(SCRIPT)
    env = dict(os.environ, TRITON_CACHE_DIR=str(folder / "cache"), PYTHONPATH=REPO_ROOT,
               FLAGOS_DOCTOR_COMPILE_THREADS=str(threads), TRITON_CACHE_AUTOTUNING="0")
    done = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True, env=env,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def overlapping(log):
    """Pairs of compilations whose sleeping stages ran at the same time."""
    return sum(1 for i, a in enumerate(log) for b in log[i + 1:] if a[1] < b[2] and b[1] < a[2])


def test_an_autotuners_configurations_compile_side_by_side_once_each_and_the_same_one_wins(tmp_path):
    pooled = run(tmp_path, "pooled", 4)
    serial = run(tmp_path, "serial", 1)
    assert pooled["pooled"] == {"threads": 4} and serial["pooled"] == {"threads": 1}
    # the same 8 configurations compiled, once each (each lowering ran once), and each timed once
    assert len(pooled["log"]) == len(serial["log"]) == 8
    assert pooled["timed"] == serial["timed"] == 8
    assert pooled["chosen"] == serial["chosen"] == {"(8, 'fp32')": [{"BLOCK": 256}, 2]}
    # without the pool: compiled in the worker itself, one after another
    assert serial["compiles"] == 8 and serial["cache_hits"] == 0
    assert {pid for pid, _, _ in serial["log"]} == {serial["pid"]} and overlapping(serial["log"]) == 0
    assert serial["autotunings"] == [{"kernel": "add_one", "configurations": 8, "compiled_ahead": 0,
                                      "failed_ahead": 0, "timed": 8, "worker_compiled": 8, "cache_hits": 0}]
    # with it: in 4 forked children at once; the worker's own launches load them from the cache
    assert pooled["autotunings"] == [{"kernel": "add_one", "configurations": 8, "compiled_ahead": 8,
                                      "failed_ahead": 0, "timed": 8, "worker_compiled": 0, "cache_hits": 8}]
    assert pooled["compiles"] == 0 and pooled["cache_hits"] == 8
    pids = {pid for pid, _, _ in pooled["log"]}
    assert len(pids) == 4 and pooled["pid"] not in pids
    assert overlapping(pooled["log"]) >= 4


FLAG_GEMS_SCRIPT = r"""
import importlib, json, os, sys, time, warnings
warnings.simplefilter("ignore")  # flag_gems on a machine without a GPU warns at import
import torch, triton, triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor
from flagos_doctor.survey.child import compile_pool

folder, count = sys.argv[1], int(sys.argv[2])
pooled = compile_pool.install()  # as the worker does: before the stack's first autotuning
hopper_mm = importlib.import_module("flag_gems.runtime.backend._nvidia.hopper.ops.mm")
bmm = importlib.import_module("flag_gems.ops.bmm")
""" + FIXTURE_DRIVER + r"""
previous = triton.knobs.compilation.listener  # the pool's own count: kept, as the worker keeps it
def listener(**kw):  # every compilation and cache load, in whichever process (forked children too)
    with open(os.path.join(folder, "compilations.log"), "a") as handle:
        handle.write(json.dumps([os.getpid(), kw["metadata"]["name"], kw["metadata"]["hash"], kw["cache_hit"]]) + "\n")
    previous(**kw)
triton.knobs.compilation.listener = listener

def do_bench(kernel_call, quantiles):  # compiles (when not compiled yet), then the launch fails: no launcher
    try:
        kernel_call()
    except Exception:
        pass
    return [1.0] * 3

seconds = {}  # each autotuning's wall (benchmarks/compile_ahead.py)
def tune(kernel, *args, **meta):
    tuner = kernel.fn  # the LibTuner under FlagGems' LibEntry, which hands it these arguments
    configs = tuner.configs
    tuner.configs = configs[:: max(1, len(configs) // count)][:count]  # spread over the real list
    tuner._do_bench = do_bench
    began = time.perf_counter()
    try:
        tuner.run(*args, grid=(1,), warmup=False, **meta)
    except Exception:
        pass  # the chosen configuration's launch: no launcher
    seconds[tuner.base_fn.__name__] = time.perf_counter() - began
    return len(configs)

listed = {}
# mm [2d-f32] on sm_90: host TMA descriptors; FlagGems makes them with a dummy block shape
# that each configuration's pre_hook sets (hopper/ops/mm.py general_mm)
M, N, K = 64, 48, 40
a, b, c = torch.empty(M, K), torch.empty(K, N), torch.empty(M, N)
descriptors = [TensorDescriptor(t, t.shape, t.stride(), [1, 1]) for t in (a, b, c)]
strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
listed["tma"] = tune(hopper_mm.mm_kernel_general_host_tma, *descriptors, M, N, K, *strides,
                     GROUP_M=8, A_ROW_MAJOR=True, B_ROW_MAJOR=True, dtype="float32")
# mm where TMA does not apply (N not a multiple of 4): plain tensors, the 22 tuned configurations
b3, c3 = torch.empty(K, 3), torch.empty(M, 3)
listed["plain"] = tune(hopper_mm.mm_kernel_general, a, b3, c3, M, 3, K, a.stride(0), a.stride(1),
                       b3.stride(0), b3.stride(1), c3.stride(0), c3.stride(1), GROUP_M=8)
# bmm: a LibTuner over @triton.heuristics
A, B, O = torch.empty(2, M, K), torch.empty(2, K, N), torch.empty(2, M, N)
listed["heuristics"] = tune(bmm.bmm_kernel, A, B, O, M, N, K, *A.stride(), *B.stride(), *O.stride())

# a configuration that cannot compile (a static assertion), in a plain triton.autotune
@triton.autotune(configs=[triton.Config({"BLOCK": block}) for block in (32, 64, 128, 256)], key=["n"],
                 do_bench=do_bench)
@triton.jit
def at_most_128(x_ptr, n, BLOCK: tl.constexpr):
    tl.static_assert(BLOCK <= 128)
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
try:
    at_most_128[(1,)](torch.empty(8), 8)
except Exception:
    pass
print(json.dumps({"pooled": pooled, "pid": os.getpid(), "listed": listed, "autotunings": compile_pool.AUTOTUNINGS,
                  "seconds": seconds}))
"""


def run_flag_gems(tmp_path, threads: int, count: int) -> dict:
    """FLAG_GEMS_SCRIPT with the pool of ``threads``, ``count`` configurations a kernel:
    its output and the compilations log, one line a compilation or cache load."""
    folder = tmp_path / f"flag-gems-{threads}"
    folder.mkdir()
    script = tmp_path / "flag_gems_autotuned.py"
    script.write_text(FLAG_GEMS_SCRIPT)
    env = dict(os.environ, TRITON_CACHE_DIR=str(folder / "cache"), PYTHONPATH=REPO_ROOT,
               FLAGOS_DOCTOR_COMPILE_THREADS=str(threads), TRITON_CACHE_AUTOTUNING="0",
               GEMS_VENDOR="nvidia", ARCH="sm_90", FLAGGEMS_DB_URL=f"sqlite:///{folder}/gems.db")
    done = subprocess.run([sys.executable, str(script), str(folder), str(count)], capture_output=True, text=True,
                          env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    with open(folder / "compilations.log") as handle:
        found["log"] = [json.loads(line) for line in handle]
    return found


def compilations(found: dict, kernel: str) -> tuple[list, list]:
    """``kernel``'s cache keys compiled in the forked children, and those the worker looked up
    (with whether each was a cache hit)."""
    children = [key for pid, name, key, hit in found["log"] if name == kernel and pid != found["pid"] and not hit]
    worker = [(key, hit) for pid, name, key, hit in found["log"] if name == kernel and pid == found["pid"]]
    return children, worker


def test_flag_gems_libtuner_kernels_compile_ahead_under_the_keys_the_worker_looks_up(tmp_path):
    """FlagGems 5.0.2's own kernels for sm_90, through its LibTuner, as the H200 worker runs
    them: mm on host TMA descriptors whose block shape each configuration's pre_hook sets
    (the children did not run it: every compilation failed, and the worker compiled all 162
    configurations of mm [2d-f32] itself), mm on plain tensors, bmm under heuristics, and a
    configuration that does not compile."""
    # 2 configurations of each kernel, spread over its list (10 sm_90 compiles with at_most_128's)
    found = run_flag_gems(tmp_path, threads=2, count=2)
    assert found["pooled"] == {"threads": 2}
    assert found["listed"] == {"tma": 216, "plain": 22, "heuristics": 12}  # no GPU: no shared-memory filter
    entries = {entry["kernel"]: entry for entry in found["autotunings"]}
    expected = {"mm_kernel_general_host_tma": 2, "mm_kernel_general": 2, "bmm_kernel": 2}
    for kernel, count in expected.items():
        children, worker = compilations(found, kernel)
        # each configuration compiled once, in a child; the worker found each of those keys in the cache
        assert len(children) == len(set(children)) == count, kernel
        assert sorted(worker) == sorted((key, True) for key in children), kernel
        assert entries[kernel] == {"kernel": kernel, "configurations": count, "compiled_ahead": count,
                                   "failed_ahead": 0, "timed": count, "worker_compiled": 0, "cache_hits": count}
    # the configuration that does not compile fails ahead, and again in the worker (as before)
    children, worker = compilations(found, "at_most_128")
    assert len(set(children)) == 3 and sorted(worker) == sorted((key, True) for key in children)
    assert entries["at_most_128"] == {"kernel": "at_most_128", "configurations": 4, "compiled_ahead": 3,
                                      "failed_ahead": 1, "timed": 4, "worker_compiled": 0, "cache_hits": 3}


def test_without_the_pool_the_worker_compiles_every_configuration_and_says_so(tmp_path):
    found = run_flag_gems(tmp_path, threads=1, count=2)
    assert found["pooled"] == {"threads": 1}
    assert {entry["kernel"]: (entry["compiled_ahead"], entry["worker_compiled"], entry["cache_hits"])
            for entry in found["autotunings"]} == {
        "mm_kernel_general_host_tma": (0, 2, 0), "mm_kernel_general": (0, 2, 0), "bmm_kernel": (0, 2, 0),
        "at_most_128": (0, 3, 0)}
    assert all(pid == found["pid"] for pid, *_ in found["log"])


def test_the_h200_run_compiled_no_configuration_in_a_worker_and_kept_the_census():
    """surveys/h200/compile-ahead-mm-cold.results.json (its README row): the pool on, cold,
    mm / mm.out / addmm / bmm. Its census lines are the full committed survey's for those
    overloads, and no autotuning of 20 or more configurations compiled any in a worker."""
    from flagos_doctor.results import census, document

    def lines(path, names):
        doc = document.load(os.path.join(REPO_ROOT, path))
        return doc, census.census_text({name: doc["overloads"][name] for name in names})

    names = ("mm", "mm.out", "addmm", "bmm")
    run, ours = lines("surveys/h200/compile-ahead-mm-cold.results.json", names)
    _, full = lines("surveys/results/flag_gems-5.0.2-h200-harness6.json", names)
    assert ours == full and len(ours.splitlines()) == 28
    large = [entry for name in names for case in run["overloads"][name]["cases"]
             for entry in (case.get("compile_ahead") or {}).get("autotunings", []) if entry["configurations"] >= 20]
    assert len(large) == 11 and {entry["kernel"] for entry in large} == {"mm_kernel_general_host_tma", "mm_kernel_general"}
    assert all(entry["worker_compiled"] == 0 and entry["compiled_ahead"] + entry["failed_ahead"] == entry["configurations"]
               for entry in large)
