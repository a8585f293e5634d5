"""Workers never compile the same Triton kernel at once (survey/child/compile_lock.py).

Real processes, real Triton compilations for an sm_90 target (no GPU needed to compile),
each held in a pipeline stage until it sees another process lowering too or waiting on its
lock file (/proc/PID/fd), and logging which: two processes start their compilations
together, with and without the lock, and the log proves overlap and waits by events.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from conftest import REPO_ROOT
from flagos_doctor.survey.child.compile_lock import compilation_key

COMPILER = r"""
import json, os, sys, time
import triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from flagos_doctor.survey.child.compile_lock import FOLDER, CompileLock
from flagos_doctor.survey.child.triton_timing import TritonTimes

folder, block, locked = sys.argv[1], int(sys.argv[2]), sys.argv[3] == "locked"

def open_files(pid):
    found = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            found.add(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except OSError:
            pass
    return found

def met_another():
    # "began": another process is lowering too (the two overlap); "waiting": another holds
    # open the lock file this one compiles under (it waits for this compilation); else None.
    others = [name.split("-", 1)[1] for name in os.listdir(folder)
              if name.startswith("ready-") and name != f"ready-{os.getpid()}"]
    if any(os.path.exists(os.path.join(folder, f"began-{pid}")) for pid in others):
        return "began"
    mine = {path for path in open_files(os.getpid()) if path.startswith(os.path.join(folder, FOLDER) + os.sep)}
    for pid in others:
        try:
            if mine & open_files(pid):
                return "waiting"
        except OSError:
            pass
    return None

def slow_stages(*args):  # Triton's stage inspection hook: log, hold until another process shows, lower as usual
    if not args:
        return "slow", "slow"
    stages = args[1]
    lower = stages["ttir"]
    def ttir(src, metadata):
        open(os.path.join(folder, f"began-{os.getpid()}"), "w").close()
        met = None  # what showed this lowering was not alone: another one under way, or a waiter
        deadline = time.monotonic() + 120  # liveness only: a lowering that met nobody says so
        while met is None and time.monotonic() < deadline:
            met = met_another()
            time.sleep(0.02)
        with open(os.path.join(folder, "lowered.log"), "a") as log:
            log.write(json.dumps({"pid": os.getpid(), "met": met}) + "\n")
        return lower(src, metadata)
    stages["ttir"] = ttir

triton.knobs.runtime.add_stages_inspection_hook = slow_stages
times = TritonTimes()
assert times.install()
if locked:
    lock = CompileLock.for_survey(times.lock_waited)
    assert lock is not None and lock.install()

@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)

open(os.path.join(folder, f"ready-{os.getpid()}"), "w").close()
while not os.path.exists(os.path.join(folder, "go")):
    time.sleep(0.01)
source = triton.compiler.ASTSource(fn=add_one, signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": block})
triton.compile(source, target=GPUTarget("cuda", 90, 32))
print(json.dumps(times.snapshot()))
"""


def compile_together(tmp_path, blocks, locked=True):
    """Start one compiling process per block at the same moment; (figures each, lowerings)."""
    folder = tmp_path / ("locked" if locked else "unlocked")
    folder.mkdir()
    script = tmp_path / "compiler.py"  # @triton.jit reads its source from a file
    script.write_text(COMPILER)
    env = dict(os.environ, TRITON_CACHE_DIR=str(folder / "cache"), PYTHONPATH=REPO_ROOT,
               FLAGOS_DOCTOR_SCRATCH=str(folder))  # as a survey's worker has it
    processes = [subprocess.Popen([sys.executable, str(script), str(folder), str(block),
                                   "locked" if locked else "unlocked"],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                 for block in blocks]
    deadline = time.monotonic() + 120
    while len(list(folder.glob("ready-*"))) < len(blocks):
        assert time.monotonic() < deadline and all(p.poll() is None for p in processes), \
            [p.communicate() for p in processes if p.poll() is not None]
        time.sleep(0.02)
    (folder / "go").touch()
    figures = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err
        figures.append(json.loads(out.strip().splitlines()[-1]))
    lowered = [json.loads(line) for line in (folder / "lowered.log").read_text().splitlines()]
    return figures, lowered


def test_two_workers_needing_one_kernel_at_once_compile_it_once(tmp_path):
    figures, lowered = compile_together(tmp_path, [64, 64])
    assert len(lowered) == 1  # one process ran Triton's pipeline; the other waited for it
    compiled = [f for f in figures if f["compiles"] == 1]
    waited = [f for f in figures if f["compile_lock_waits"] == 1]
    assert len(compiled) == 1 and len(waited) == 1 and compiled != waited
    assert waited[0]["compile_cache_hits"] == 1 and waited[0]["compiles"] == 0  # then found it in the cache
    # The one lowering went on only once the other process held its lock file open, waiting:
    # the wait spanned the compilation (shown by the event, not by a number of seconds).
    assert lowered == [{"pid": lowered[0]["pid"], "met": "waiting"}]
    assert waited[0]["compile_lock_seconds"] > 0
    # Without the lock (as before it) both compile: the test above can tell the two apart.
    figures, lowered = compile_together(tmp_path, [64, 64], locked=False)
    assert len(lowered) == 2 and all(f["compiles"] == 1 for f in figures)
    assert [entry["met"] for entry in lowered] == ["began", "began"]  # and they ran at the same time


def test_different_kernels_compile_side_by_side(tmp_path):
    figures, lowered = compile_together(tmp_path, [64, 128])
    assert len(lowered) == 2 and all(f["compiles"] == 1 and f["compile_lock_waits"] == 0 for f in figures)
    # Each lowering went on only once the other had begun: the two ran at the same time (a
    # lock serialising them would have left each alone, "met": null).
    assert [entry["met"] for entry in lowered] == ["began", "began"]


def test_a_compilation_is_named_by_what_triton_compiles():
    class Source:  # as triton.compiler.ASTSource: hash() covers the code, signature, constants
        def __init__(self, digest):
            self.digest = digest

        def hash(self):
            return self.digest

    key = compilation_key((Source("a"), "sm90", {"num_warps": 4, "num_stages": 3}), {})
    assert key == compilation_key((Source("a"),), {"target": "sm90", "options": {"num_stages": 3, "num_warps": 4}})
    assert key != compilation_key((Source("a"), "sm90", {"num_warps": 8, "num_stages": 3}), {})  # another configuration
    assert key != compilation_key((Source("b"), "sm90", {"num_warps": 4, "num_stages": 3}), {})
    assert compilation_key(("/path/to/kernel.ttir", "sm90", None), {}) is None  # IR text: compiled unlocked
