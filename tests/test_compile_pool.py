"""An autotuner's configurations compile side by side (survey/child/compile_pool.py).

Real Triton compilations for an sm_90 target (no GPU needed to compile) through a real
``Autotuner``: a fixture driver stands in for the device (it names the target and device 0
and has no launcher, so every launch fails after its compilation, as on a machine without
the GPU), and Triton's stage-inspection hook makes each compilation's TTIR stage sleep and
write when it ran and in which process. The same script runs with the pool and without it
(``FLAGOS_DOCTOR_COMPILE_THREADS=1``): the same configurations compiled once each, timed in
the same order, the same one chosen; with the pool they compile in forked children whose
compilations overlap in time, and the worker loads each from Triton's cache.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT

SCRIPT = r"""
import json, os, sys, threading, time
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from triton.runtime import driver
from triton.runtime.jit import MockTensor
from flagos_doctor.survey.child import compile_pool

folder = sys.argv[1]

class FixtureDriver:  # the device's part of a driver: which target, which device; no launcher
    def get_current_target(self):
        return GPUTarget("cuda", 90, 32)
    def get_current_device(self):
        return getattr(self._local, "device", 0)
    def set_current_device(self, device):
        self._local.device = device
    def get_current_stream(self, device=None):
        return 0
    _local = threading.local()

driver.set_active(FixtureDriver())
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
def listener(**kw):  # in this process: compilations, and loads from the cache folder
    if kw["cache_hit"]:
        compile_hits[0] += 1
    else:
        compiled.append(1)
triton.knobs.compilation.listener = listener
pooled = compile_pool.install()
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
print(json.dumps({"pooled": pooled, "events": compile_pool.EVENTS, "log": log, "compiles": len(compiled),
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
    # with it: in 4 forked children at once; the worker's own launches load them from the cache
    assert pooled["events"] == {"autotunings": 1, "configurations": 8, "failed": 0}
    assert pooled["compiles"] == 0 and pooled["cache_hits"] == 8
    pids = {pid for pid, _, _ in pooled["log"]}
    assert len(pids) == 4 and pooled["pid"] not in pids
    assert overlapping(pooled["log"]) >= 4
