"""Probe overhead: ``flagos-doctor probe`` vs a bare child importing the same modules.

Both arms run side by side in one run, alternating (so a busy machine slows both alike),
each a fresh child process: the bare arm is ``python -c "import <modules>; os._exit(0)"``
(the probe's child also ends with ``os._exit``, skipping interpreter teardown); the probe arm
is :func:`flagos_doctor.probe.runner.run_probe` with ``--no-exercise`` (the same imports,
under the tracer, plus the final-state record). Prints the medians and their ratio, of the
wall time and of the CPU time (user + system: the child's, plus the parent's own work in the
probe arm), which a shared, busy machine disturbs less than the wall time.

    python benchmarks/probe_overhead.py                     # the demo stack, 5 rounds
    python benchmarks/probe_overhead.py --stack flag_gems   # needs GEMS_VENDOR, FLAGGEMS_DB_URL on CPU
    python benchmarks/probe_overhead.py --import torch --rounds 3
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import time

from flagos_doctor.options import ProbeOptions
from flagos_doctor import stacks
from flagos_doctor.probe.runner import run_probe

TARGET = 1.3


def _cpu(who) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def bare(python: str, modules: list[str]) -> tuple[float, float]:
    cpu = _cpu(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    # os._exit: the probe's child skips interpreter teardown too, so neither arm pays for it.
    code = "import importlib, os\n" + "".join(f"importlib.import_module({m!r})\n" for m in modules) + "os._exit(0)\n"
    subprocess.run([python, "-c", code], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started, _cpu(resource.RUSAGE_CHILDREN) - cpu


def probed(python: str, modules: list[str]) -> tuple[float, float]:
    cpu = _cpu(resource.RUSAGE_CHILDREN) + _cpu(resource.RUSAGE_SELF)
    started = time.perf_counter()
    document = run_probe(ProbeOptions(imports=modules, python=python, exercise=False, timeout=600))
    if document["outcome"] != "ok":
        raise SystemExit(f"probe outcome {document['outcome']}: {document['findings'][:1]}")
    return time.perf_counter() - started, _cpu(resource.RUSAGE_CHILDREN) + _cpu(resource.RUSAGE_SELF) - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="demo", choices=stacks.names())
    parser.add_argument("--import", dest="imports", action="append", default=[], metavar="MOD")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--python", default=sys.executable)
    args = parser.parse_args()
    modules = args.imports or list(stacks.get(args.stack).probe_imports)
    bare(args.python, modules)  # warm the file cache for both arms
    times = {"bare": [], "probe": []}
    for _ in range(args.rounds):
        times["bare"].append(bare(args.python, modules))
        times["probe"].append(probed(args.python, modules))
    print(f"modules: {', '.join(modules)}   rounds: {args.rounds}   python: {args.python}")
    for index, measure in enumerate(("wall", "cpu")):
        medians = {arm: statistics.median(run[index] for run in runs) for arm, runs in times.items()}
        for arm in ("bare", "probe"):
            text = " ".join(f"{run[index]:.2f}" for run in times[arm])
            print(f"  {measure:<4} {arm:<6} median {medians[arm]:6.2f} s   runs: {text}")
        ratio = medians["probe"] / medians["bare"]
        verdict = "within" if ratio <= TARGET else "OVER"
        print(f"  {measure} ratio probe/bare: {ratio:.2f}x ({verdict} the {TARGET}x target)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
