"""How a survey's bookkeeping grows with the size of the route set: linear, not quadratic.

A conf of N routes, all but one naming overloads torch does not have (each is one cheap
NO_SCHEMA round trip to the worker), surveyed with the demo stack through the real CLI;
the script prints the wall time, the time per route and the results-file rewrites
(``compactions``) for each N. The time per route should stay flat as N grows. Before the
journal became the write path, the whole results file was rewritten after every overload.

    python benchmarks/survey_route_scale.py                 # N = 1000, 5000, 20000
    python benchmarks/survey_route_scale.py --counts 50000
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(count: int, folder: str) -> dict:
    conf = os.path.join(folder, f"routes-{count}.conf")
    with open(conf, "w", encoding="utf-8") as handle:
        handle.write("abs = flagos_python\n" + "".join(f"no_such_op_{i} = flagos_python\n" for i in range(count - 1)))
    output = os.path.join(folder, f"routes-{count}.json")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p)}
    clock = time.monotonic()
    subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--conf", conf, "--no-store",
                    "-o", output, "-q"], check=True, env=env)
    seconds = time.monotonic() - clock
    with open(output, encoding="utf-8") as handle:
        run_record = json.load(handle)["provenance"]["runs"][-1]
    return {"routes": count, "seconds": round(seconds, 1), "ms_per_route": round(1000 * seconds / count, 2),
            "compactions": run_record.get("compactions")}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,5000,20000", help="route-set sizes, comma-separated")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="flagos-route-scale-") as folder:
        for count in (int(c) for c in args.counts.split(",")):
            print(json.dumps(run(count, folder)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
