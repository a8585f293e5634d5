"""The views of a large comparison: wall time and peak memory of each, side by side.

A tester measured 122 s and 700 MB for the terminal view of the FlagGems 4.2.0 vs 5.0.2
comparison, against 9 s for ``--json``. Each arm here is ``flagos-doctor survey --compare
A B --force`` in a fresh process with one output (``--json``, ``--markdown``, the terminal
view, the terminal view with ``--all``), written to a pipe as a user's redirect would be;
rounds alternate arms, so a busy machine slows all alike. Prints the median seconds and
the largest peak RSS of each arm, and the size of what it wrote.

    python benchmarks/compare_views.py                         # the committed H200 surveys, 3 rounds
    python benchmarks/compare_views.py A.json B.json --rounds 5

Target: no view takes more than 3x the ``--json`` arm.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "surveys", "results")
ARMS = {
    "--json": ["--json", "-", "-q"],
    "--markdown": ["--markdown", "-", "-q"],
    "terminal": [],
    "terminal --all": ["--all"],
}
TARGET = 3.0


def run_arm(a: str, b: str, extra: list[str], store: str) -> tuple[float, int, int]:
    """(seconds, peak RSS in KiB of the child, characters written) of one arm."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "flagos_doctor", "survey", "--compare", a, b, "--force", "--store", store, *extra],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": ROOT},
    )
    seconds = time.perf_counter() - started
    if done.returncode not in (0, 1):
        sys.exit(f"arm {extra} failed ({done.returncode}): {done.stderr.strip()}")
    # ru_maxrss of children is the largest of any child so far; a later, smaller arm reads
    # the earlier figure, so each arm's figure is an upper bound.
    peak = max(before, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    return seconds, peak, len(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("a", nargs="?", default=os.path.join(RESULTS, "flag_gems-4.2.0-h200.json"))
    parser.add_argument("b", nargs="?", default=os.path.join(RESULTS, "flag_gems-5.0.2-h200-harness1.json"))
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: dict = {name: [] for name in ARMS}
    peaks: dict = {name: 0 for name in ARMS}
    sizes: dict = {}
    with tempfile.TemporaryDirectory() as store:
        for _ in range(args.rounds):
            for name, extra in ARMS.items():
                seconds, peak, size = run_arm(args.a, args.b, extra, store)
                times[name].append(seconds)
                peaks[name] = max(peaks[name], peak)
                sizes[name] = size
    base = statistics.median(times["--json"])
    print(f"{'view':<16}{'median s':>10}{'x --json':>10}{'peak MiB':>10}{'chars':>10}")
    worst = 0.0
    for name in ARMS:
        median = statistics.median(times[name])
        worst = max(worst, median / base)
        print(f"{name:<16}{median:>10.2f}{median / base:>10.2f}{peaks[name] / 1024:>10.0f}{sizes[name]:>10}")
    print(f"worst view: {worst:.2f}x the --json arm (target at most {TARGET}x): {'met' if worst <= TARGET else 'NOT met'}")


if __name__ == "__main__":
    main()
