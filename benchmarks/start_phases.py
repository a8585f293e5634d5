"""Where a survey worker's start goes: each phase of it timed, one worker alone and N at once.

    python3 benchmarks/start_phases.py --stack torch_fl --conf PATH [--at-once 16] [--json OUT]

A worker's start (spawn to ready, ``worker_starts`` in a survey's run record) is mostly the
stack's import. This runs the same steps the worker runs (child/worker.py ``Worker.init``),
in fresh interpreters with the environment a survey gives its workers (``WorkerConfig.env``),
and times each: interpreter, ``import torch``, ``import triton``, the stack's ``setup()``
(its own import), the case engine, the device's first touch (``provenance``), one case.
Printed as a table (median and max over the processes) and written as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

PHASES = ["interpreter", "import torch", "import triton", "stack setup", "case engine", "device (provenance)", "first case"]

CHILD = r"""
import json, os, sys, time
born = float(os.environ.pop("START_PHASES_BORN"))
marks = [("interpreter", time.time() - born)]
clock = time.perf_counter()
def lap(name):
    global clock
    now = time.perf_counter(); marks.append((name, now - clock)); clock = now
import torch; lap("import torch")
try:
    import triton
except ImportError:
    pass
lap("import triton")
from flagos_doctor import stacks
stack = stacks.get(sys.argv[1]); device = stack.setup(); lap("stack setup")
from flagos_doctor.survey.child.engine import CaseRunner
from flagos_doctor.survey.spec import load_spec
runner = CaseRunner(device=device, spec=load_spec(None)); lap("case engine")
from flagos_doctor.survey.child.worker import provenance
provenance(stack, device); lap("device (provenance)")
runner.profiles(sys.argv[2]); runner.run_case(sys.argv[2], sys.argv[3]); lap("first case")
print(json.dumps(dict(marks)))
"""


def run(stack: str, conf: str | None, count: int, overload: str, profile: str) -> list[dict]:
    from flagos_doctor.survey.pool import WorkerConfig

    config = WorkerConfig(python=sys.executable, stack=stack, device=None, spec=None, conf=conf,
                          backend="flagos_python", timeout=300)
    procs = []
    for slot in range(count):
        env = config.env(slot)
        env["START_PHASES_BORN"] = repr(time.time())
        procs.append(subprocess.Popen([sys.executable, "-c", CHILD, stack, overload, profile], env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate()
        lines = [line for line in stdout.splitlines() if line.startswith("{")]
        if proc.returncode or not lines:
            print(f"a worker failed (exit {proc.returncode}): {stderr[-1500:]}", file=sys.stderr)
            continue
        out.append(json.loads(lines[-1]))
    return out


def summary(marks: list[dict]) -> dict:
    return {phase: {"median": round(statistics.median(m[phase] for m in marks), 2),
                    "max": round(max(m[phase] for m in marks), 2)} for phase in PHASES if marks}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="demo")
    parser.add_argument("--conf")
    parser.add_argument("--at-once", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--case", default="abs/2d-f32", help="OVERLOAD/PROFILE run as the first case")
    parser.add_argument("--json")
    args = parser.parse_args()
    overload, profile = args.case.split("/")
    result = {"stack": args.stack, "cores": os.cpu_count()}
    for label, count in (("alone", 1), ("at once", args.at_once)):
        clock = time.time()
        marks = run(args.stack, args.conf, count, overload, profile)
        result[label] = {"processes": count, "ok": len(marks), "wall": round(time.time() - clock, 2), "phases": summary(marks)}
        print(f"{label} ({count} processes, {result[label]['wall']} s):")
        for phase, figures in result[label]["phases"].items():
            print(f"  {phase:22} median {figures['median']:6.2f} s   max {figures['max']:6.2f} s")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(result, handle, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
