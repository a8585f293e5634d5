"""Pooled workers against one process per overload: the survey's cost model, side by side.

Both arms run the same routes with the same spec through the real CLI
(``flagos-doctor survey``), one after the other in this run; the script prints each arm's
wall time, the time per overload, the ratio, and whether both arms gave the same census.

    python benchmarks/survey_speed.py                                   # demo stack, CPU
    python benchmarks/survey_speed.py --stack flag_gems --count 26 --cache both
    python benchmarks/survey_speed.py --stack torch_fl --conf backends_flaggems.conf --workers 4

Caches (Triton compiles each kernel once per cache folder): ``cold`` points
``TRITON_CACHE_DIR`` (and FlagGems' ``FLAGGEMS_CACHE_DIR``) at a fresh empty folder for each
arm; ``warm`` first runs the pooled arm once untimed into a shared folder, then times both
arms against it; ``both`` does cold then warm.

``--scale-devices 0,1`` measures what more GPUs buy instead: the pooled arm on the first
device with ``--workers`` workers, against the pooled arm on all the listed devices with
``--workers`` workers per device, both with cold caches.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from flagos_doctor import options as opts  # noqa: E402
from flagos_doctor.survey import command, pool  # noqa: E402


def route_list(args) -> list[str]:
    survey_options = opts.SurveyOptions(conf=args.conf, routes=args.routes, stack=args.stack, python=args.python, backend=args.backend)
    config = pool.WorkerConfig(
        python=args.python, stack=args.stack, device=args.device, spec=args.spec, conf=args.conf,
        backend=args.backend, timeout=args.timeout,
    )
    return command._route_set(survey_options, config).overloads


def pick(overloads: list[str], count: int | None) -> list[str]:
    """``count`` overloads spread evenly over the sorted route set (every k-th)."""
    if not count or count >= len(overloads):
        return overloads
    step = len(overloads) / count
    return [overloads[int(i * step)] for i in range(count)]


def run_arm(args, ops: list[str], isolation: str, workdir: str, cache: str, label: str,
            devices: str | None = None, workers: int | None = None) -> dict:
    output = os.path.join(workdir, f"{label}.json")
    census = os.path.join(workdir, f"{label}.census")
    cmd = [
        args.python, "-m", "flagos_doctor", "survey", "--stack", args.stack, "--ops", ",".join(ops),
        "--isolation", isolation,
        "--workers", str((workers or args.workers) if isolation == "pooled" else 1),
        "--timeout", str(args.timeout), "--no-store", "--quiet", "-o", output, "--census", census,
        "--backend", args.backend,
        # The scheduling of the cases is what is measured (upstream's cost model has no
        # confirmation pass); running failures again and on stock torch would be the same
        # extra work in both arms.
        "--repeats", "0", "--baseline", "none",
    ]
    if isolation == "pooled":
        cmd += ["--tasks", args.tasks]
    for flag, value in (("--conf", args.conf), ("--routes", args.routes), ("--device", args.device), ("--spec", args.spec)):
        if value:
            cmd += [flag, value]
    if devices or args.devices:
        cmd += ["--devices", devices or args.devices]
    env = dict(os.environ, TRITON_CACHE_DIR=cache, FLAGGEMS_CACHE_DIR=os.path.join(cache, "flaggems"))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    start = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - start
    if done.returncode != 0:
        sys.exit(f"{label}: survey exited {done.returncode}\n{done.stderr[-3000:]}")
    with open(output, encoding="utf-8") as handle:
        document = json.load(handle)
    with open(census, encoding="utf-8") as handle:
        census_text = handle.read()
    return {"wall": wall, "census": census_text, "statuses": document["summary"]["statuses"],
            "breakdown": breakdown(document)}


def breakdown(document: dict) -> dict:
    """Where an arm's time went, from its results file: worker starts and case times."""
    cases = [(name, case) for name, entry in document["overloads"].items() for case in entry["cases"]]
    timed = [(case.get("seconds") or 0.0, name, case["profile"], case.get("device_seconds")) for name, case in cases]
    runs = document["provenance"].get("runs") or [{}]
    return {
        "worker_starts": runs[-1].get("worker_starts"),
        "cases": len(cases),
        "case_s": round(sum(t[0] for t in timed), 2),
        "device_s": round(sum(t[3] or 0.0 for t in timed), 2),
        "slowest": [{"overload": n, "profile": p, "s": round(t, 2), "device_s": d} for t, n, p, d in sorted(timed, reverse=True)[:5]],
    }


def show_breakdown(label: str, arm: dict) -> None:
    b = arm["breakdown"]
    starts = b.get("worker_starts") or {}
    print(f"  {label}: {starts.get('count', '?')} worker starts (median {starts.get('median_s', '?')} s,"
          f" max {starts.get('max_s', '?')} s); {b['cases']} cases took {b['case_s']} s"
          f" ({b['device_s']} s in the overload on the device)")
    print("    slowest: " + ", ".join(f"{c['overload']}/{c['profile']} {c['s']}s" for c in b["slowest"]))


def compare(args, ops, workdir, caches: str) -> dict:
    arms = {}
    if caches == "warm":
        shared = os.path.join(workdir, "cache-warm")
        run_arm(args, ops, "pooled", workdir, shared, "warmup")
        arm_caches = {"pooled": shared, "per-overload": shared}
    else:
        arm_caches = {name: tempfile.mkdtemp(prefix=f"cache-{name}-", dir=workdir) for name in ("pooled", "per-overload")}
    for isolation in ("pooled", "per-overload"):
        arms[isolation] = run_arm(args, ops, isolation, workdir, arm_caches[isolation], f"{caches}-{isolation}")
    pooled, isolated = arms["pooled"], arms["per-overload"]
    same = pooled["census"] == isolated["census"]
    print(f"\n{caches} caches, {len(ops)} overloads, stack {args.stack}, {args.workers} pooled worker(s), --tasks {args.tasks}")
    print(f"  {'arm':<28}{'wall s':>10}{'s/overload':>12}")
    print(f"  {'pooled':<28}{pooled['wall']:>10.1f}{pooled['wall'] / len(ops):>12.2f}")
    print(f"  {'per-overload (upstream)':<28}{isolated['wall']:>10.1f}{isolated['wall'] / len(ops):>12.2f}")
    print(f"  ratio per-overload / pooled: {isolated['wall'] / pooled['wall']:.1f}x")
    print(f"  census identical: {same}   statuses: {json.dumps(pooled['statuses'], sort_keys=True)}")
    show_breakdown("pooled", pooled)
    show_breakdown("per-overload", isolated)
    return {"caches": caches, "overloads": len(ops), "workers": args.workers, "tasks": args.tasks, "pooled_s": round(pooled["wall"], 2),
            "per_overload_s": round(isolated["wall"], 2), "ratio": round(isolated["wall"] / pooled["wall"], 2),
            "census_identical": same, "statuses": pooled["statuses"],
            "breakdown": {"pooled": pooled["breakdown"], "per_overload": isolated["breakdown"]}}


def scale_devices(args, ops, workdir) -> dict:
    devices = [d for d in args.scale_devices.split(",") if d]
    one = run_arm(args, ops, "pooled", workdir, tempfile.mkdtemp(prefix="cache-one-", dir=workdir), "one-device",
                  devices=devices[0], workers=args.workers)
    many = run_arm(args, ops, "pooled", workdir, tempfile.mkdtemp(prefix="cache-many-", dir=workdir), "all-devices",
                   devices=",".join(devices), workers=args.workers * len(devices))
    same = one["census"] == many["census"]
    print(f"\ncold caches, {len(ops)} overloads, stack {args.stack}, {args.workers} worker(s) per device")
    print(f"  {'arm':<28}{'wall s':>10}{'s/overload':>12}")
    print(f"  {'devices ' + devices[0]:<28}{one['wall']:>10.1f}{one['wall'] / len(ops):>12.2f}")
    print(f"  {'devices ' + ','.join(devices):<28}{many['wall']:>10.1f}{many['wall'] / len(ops):>12.2f}")
    print(f"  speed-up from {len(devices)} devices: {one['wall'] / many['wall']:.2f}x")
    print(f"  census identical: {same}   statuses: {json.dumps(one['statuses'], sort_keys=True)}")
    show_breakdown("one device", one)
    show_breakdown("all devices", many)
    return {"caches": "cold", "overloads": len(ops), "devices": devices, "workers_per_device": args.workers, "tasks": args.tasks,
            "one_device_s": round(one["wall"], 2), "all_devices_s": round(many["wall"], 2),
            "speedup": round(one["wall"] / many["wall"], 2), "census_identical": same, "statuses": one["statuses"],
            "breakdown": {"one_device": one["breakdown"], "all_devices": many["breakdown"]}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stack", default="demo")
    parser.add_argument("--conf")
    parser.add_argument("--routes", help="flag_gems | stack")
    parser.add_argument("--backend", default="flagos_python")
    parser.add_argument("--ops", help="comma-separated overloads (default: the route set, or --count of it)")
    parser.add_argument("--count", type=int, help="this many overloads, spread evenly over the route set")
    parser.add_argument("--workers", type=int, default=1, help="workers of the pooled arm")
    parser.add_argument("--tasks", choices=("cases", "overloads"), default="cases", help="the pooled arm's --tasks")
    parser.add_argument("--devices", help="0,1,...: spread the pooled arm's workers over these")
    parser.add_argument("--device")
    parser.add_argument("--spec")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--cache", choices=("cold", "warm", "both"), default="cold")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--scale-devices", metavar="0,1", help="pooled on the first device vs on all of these")
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args()

    if args.stack == "flag_gems" and not args.conf and not args.routes:
        args.routes = "flag_gems"
    ops = args.ops.split(",") if args.ops else pick(route_list(args), args.count)
    workdir = tempfile.mkdtemp(prefix="survey-speed-")
    try:
        if args.scale_devices:
            figures = [scale_devices(args, ops, workdir)]
        else:
            figures = [compare(args, ops, workdir, c) for c in (("cold", "warm") if args.cache == "both" else (args.cache,))]
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"stack": args.stack, "ops": ops, "figures": figures}, handle, indent=2)
    return 0 if all(f["census_identical"] for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
