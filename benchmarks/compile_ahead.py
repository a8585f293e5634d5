"""FlagGems 5.0.2's autotuned kernels compiled for sm_90 with the compile pool and without it.

    python3 benchmarks/compile_ahead.py [--count N] [--threads T]

Runs the script of ``tests/test_compile_pool.py`` (the real LibTuner kernels: mm on host
TMA descriptors, mm on plain tensors, bmm under heuristics, each over N configurations
spread over its real list; a fixture kernel with a configuration that does not compile)
twice on fresh caches: ``FLAGOS_DOCTOR_COMPILE_THREADS=T`` and ``=1``. Prints each arm's
autotuning wall (the three FlagGems kernels), and per kernel its wall and what its
configurations got (compiled ahead, failed ahead, timed, compiled by the worker, cache hits). No GPU needed: Triton compiles for sm_90 without one.
A measurement, not a test: the speed-up depends on the cores free.

Measured at h43a (2026-12-04) on a 2-core machine shared with other jobs (load 6 to 9), so
the pool had no free core to use: ``--count 12``: the three kernels' autotunings 190.1 s
pooled against 400.2 s serial (``mm_kernel_general`` 156.6 / 329.8 s, ``bmm_kernel`` 9.9 /
57.6 s, but ``mm_kernel_general_host_tma`` 23.6 / 12.7 s); ``--count 8``: 366.5 / 365.8 s
(host TMA 20.5 / 11.1 s). Every configuration compiled once, ahead, found in the cache by
the worker, in both runs. On the H200 (16 cores) the same pool took ``mm [2d-f32]`` from
166.6-218.6 s to 58.6 s (surveys/h200/README.md, ``compile-ahead-mm-cold``).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests")
sys.path.insert(0, TESTS)

from test_compile_pool import run_flag_gems  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=16, help="configurations a kernel (default 16)")
    parser.add_argument("--threads", type=int, default=2, help="the pooled arm's children (default 2)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        arms = {threads: run_flag_gems(Path(folder), threads, args.count) for threads in (args.threads, 1)}
    rows = {}
    for threads, found in arms.items():
        for entry in found["autotunings"]:
            row = rows.setdefault(entry["kernel"], {})
            row[f"threads_{threads}"] = {**{k: v for k, v in entry.items() if k != "kernel"},
                                         "seconds": round(found["seconds"].get(entry["kernel"], 0.0), 2)}
    walls = {f"threads_{threads}": round(sum(found["seconds"].values()), 2) for threads, found in arms.items()}
    print(json.dumps({"cpus": os.cpu_count(), "count": args.count, "autotuning_seconds": walls, "kernels": rows},
                     indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
