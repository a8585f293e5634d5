"""Time one plain flagos-doctor command on the H200 and say what its results file holds.

    python3 benchmarks/h200/pace.py --name NAME --out FOLDER [--results R.json] [--census C]
        [--commit SHA] -- COMMAND...

Runs COMMAND as given (its environment and folder are the caller's: a fresh HOME makes
the caches and the store fresh), and writes FOLDER/NAME.json (schema
``flagos-doctor/benchmark-pace/1``): the command, its ``seconds`` and ``exit``, and from the
results file (a survey's) its statuses, census digest, confirmation seconds and figures
(repeats, baseline, replay), the slowest cases with their compile seconds, and what the
autotuners' compile pool did; or, for a comparison (``--results`` a comparison's JSON),
its headline counts.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import subprocess
import sys
import time

SCHEMA = "flagos-doctor/benchmark-pace/1"


def survey_figures(doc: dict) -> dict:
    runs = doc["provenance"].get("runs") or [{}]
    cases = [(name, case) for name, overload in doc["overloads"].items() for case in overload.get("cases", [])]
    slowest = sorted(cases, key=lambda pair: -(pair[1].get("seconds") or 0))[:8]
    return {
        "statuses": doc["summary"].get("statuses"),
        "census_sha256": doc.get("census_sha256"),
        "complete": doc.get("complete"),
        "harness_version": doc["comparable"].get("harness_version"),
        "survey_seconds": runs[-1].get("seconds"),
        "workers": runs[-1].get("workers"),
        "worker_starts": runs[-1].get("worker_starts"),
        "confirm": runs[-1].get("confirm"),
        "compile_pool": doc["provenance"].get("compile_pool"),
        "worker_compiled_share": worker_compiled_share(case for _, case in cases),
        "case_seconds_sum": round(sum(case.get("seconds") or 0 for _, case in cases), 2),
        "slowest_cases": [{"overload": name, "profile": case["profile"], "seconds": case.get("seconds"),
                           "compile_seconds": (case.get("triton") or {}).get("compile_seconds"),
                           "compiles": (case.get("triton") or {}).get("compiles"),
                           "compile_ahead": {k: v for k, v in (case.get("compile_ahead") or {}).items() if k != "autotunings"}}
                          for name, case in slowest],
    }


def worker_compiled_share(cases) -> dict:
    """Of the autotunings of 20 or more configurations (each case's ``compile_ahead``), how
    many, and the largest share of its configurations one compiled in the worker itself
    (issue 43: at most 10%)."""
    large = [entry for case in cases for entry in (case.get("compile_ahead") or {}).get("autotunings", [])
             if entry["configurations"] >= 20]
    return {"autotunings": len(large),
            "largest": max((round(e["worker_compiled"] / e["configurations"], 3) for e in large), default=None)}


def device_name() -> str | None:
    try:
        return subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                              capture_output=True, text=True).stdout.strip() or None
    except OSError:
        return None


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--name", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--results")
    parser.add_argument("--census")
    parser.add_argument("--commit", help="the flagos-doctor commit that ran")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    start = time.monotonic()
    code = subprocess.call(command)
    seconds = round(time.monotonic() - start, 2)
    record = {"schema": SCHEMA, "name": args.name, "command": shlex.join(command), "seconds": seconds, "exit": code,
              "flagos_doctor_commit": args.commit, "home": os.environ.get("HOME"),
              "device": device_name()}
    if args.census and os.path.isfile(args.census):
        with open(args.census, "rb") as handle:
            record["census_file_sha256"] = hashlib.sha256(handle.read()).hexdigest()
    if args.results and os.path.isfile(args.results):
        with open(args.results, encoding="utf-8") as handle:
            doc = json.load(handle)
        if "overloads" in doc:
            record.update(survey_figures(doc))
        else:
            record["comparison"] = {k: doc.get(k) for k in ("schema", "headline", "counts", "verdict_changes")
                                    if k in doc}
            record["comparison"]["cases_changed"] = len(doc.get("cases_changed") or [])
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, args.name + ".json"), "w", encoding="utf-8") as handle:
        json.dump(record, handle, indent=1, sort_keys=True)
        handle.write("\n")
    print(f"{args.name}: {seconds} s, exit {code}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
