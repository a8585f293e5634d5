"""Synthesis coverage: how many routed overloads get a case the CPU reference accepts.

Runs the case engine with its device arm on the CPU (the self-check) over the
``flagos_python`` routes of a backends conf on the installed torch, and prints, side by
side with upstream's synthesiser (Torch-FL harness v4, measured on torch 2.13 CPU in
``measurements/upstream-synthesis-backends_flaggems.tsv``):

* overloads with at least one CPU-valid case, and CPU-valid cases in all;
* the overloads with no CPU kernel, and which of them got an independent reference;
* self-check disagreements (a CPU-valid case that does not PASS against itself);
* every overload still without a CPU-valid case, and why.

    python benchmarks/synthesis_coverage.py
    python benchmarks/synthesis_coverage.py --conf ../shared/torch-fl-confs/branch-2.9/backends_flaggems.conf --json out.json

A case is CPU-valid when the CPU reference accepted its inputs (status PASS, WRONG or
ERROR in the self-check; INVALID_CASE and UNVERIFIABLE are not).
"""

from __future__ import annotations

import argparse
import collections
import csv
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SHARED = os.path.join(os.path.dirname(REPO), "shared")
sys.path.insert(0, REPO)

DEFAULT_CONF = os.path.join(SHARED, "torch-fl-confs", "backends_flaggems.conf")
DEFAULT_TSV = os.path.join(SHARED, "measurements", "upstream-synthesis-backends_flaggems.tsv")
#: Stated in measurements/README.md; the TSV's per-overload counts sum to 7 fewer (the 7
#: native_batch_norm cases whose CPU reference crashed count as CRASH, not as CPU-valid).
UPSTREAM_README_CASES = 1824

NO_CPU_KERNEL = "no CPU kernel to run the device arm on"


def measure(conf: str, spec_path: str | None) -> dict:
    from flagos_doctor import conf as confs
    from flagos_doctor.results import model
    from flagos_doctor.survey.child.engine import CaseRunner, NoSchema
    from flagos_doctor.survey.spec import load_spec

    import torch

    routes = confs.select(confs.parse_conf(conf), "flagos_python")
    spec = load_spec(spec_path)
    runner = CaseRunner(device="cpu", spec=spec)
    started = time.perf_counter()
    per_overload = {}
    for overload in routes:
        try:
            profiles = runner.profiles(overload)
        except NoSchema:
            per_overload[overload] = {"no_schema": True, "cases": {}}
            continue
        per_overload[overload] = {"no_schema": False,
                                  "cases": {p: runner.run_case(overload, p) for p in profiles}}
    seconds = time.perf_counter() - started

    valid_statuses = (model.PASS, model.WRONG, model.ERROR)
    summary = collections.Counter()
    missing, disagreements = {}, []
    no_kernel = {}
    for overload, record in per_overload.items():
        cases = record["cases"]
        if record["no_schema"]:
            summary["no_schema"] += 1
            continue
        summary["cases"] += len(cases)
        valid = [p for p, r in cases.items() if r["status"] in valid_statuses]
        independent = [p for p, r in cases.items()
                       if r["status"] == model.UNVERIFIABLE and r["detail"].startswith(NO_CPU_KERNEL)]
        unverifiable = [r["detail"] for r in cases.values() if r["status"] == model.UNVERIFIABLE]
        summary["valid_cases"] += len(valid)
        summary["valid_overloads"] += bool(valid)
        disagreements += [(overload, p, cases[p]) for p in valid if cases[p]["status"] != model.PASS]
        if independent or (unverifiable and not valid):
            no_kernel[overload] = {"reference_cases": len(independent),
                                   "detail": (cases[independent[0]] if independent else
                                              {"detail": unverifiable[0]})["detail"]}
            summary["reference_cases"] += len(independent)
            continue
        if not valid:
            reasons = collections.Counter(r["detail"] for r in cases.values())
            missing[overload] = reasons.most_common(1)[0][0]
    summary["with_cpu_kernel"] = len(routes) - summary["no_schema"] - len(no_kernel)
    summary["valid_with_cpu_kernel"] = summary["valid_overloads"]
    return {
        "conf": os.path.abspath(conf),
        "torch": torch.__version__,
        "spec": spec.to_dict(),
        "routes": len(routes),
        "seconds": round(seconds, 1),
        "summary": dict(summary),
        "no_cpu_kernel": no_kernel,
        "without_valid_case": missing,
        "self_check_disagreements": [{"overload": o, "profile": p, **r} for o, p, r in disagreements],
        "overloads": {o: {p: r["status"] for p, r in rec["cases"].items()} for o, rec in per_overload.items()},
    }


def upstream(tsv: str) -> dict | None:
    if not os.path.isfile(tsv):
        return None
    with open(tsv, newline="") as handle:
        rows = list(csv.DictReader(handle, delimiter="\t"))
    valid = {row["overload"]: int(row["cpu_valid_cases"]) for row in rows}
    verdicts = collections.Counter(row["verdict"] for row in rows)
    return {
        "routes": len(rows),
        "valid_overloads": sum(1 for n in valid.values() if n > 0),
        "valid_cases_tsv": sum(valid.values()),
        "valid_cases_readme": UPSTREAM_README_CASES,
        "self_check_failed_overloads": verdicts.get("FAILED", 0) + verdicts.get("BASIC_ONLY", 0),
        "per_overload": valid,
    }


def render(ours: dict, theirs: dict | None) -> str:
    s = ours["summary"]
    profiles = len(ours["spec"]["profiles"])
    total_cases = ours["routes"] * profiles
    lines = [
        f"Synthesis coverage: {os.path.basename(ours['conf'])}, {ours['routes']} flagos_python routes, "
        f"torch {ours['torch']}, {profiles} profiles ({ours['seconds']} s)",
        "",
        f"{'':44}{'flagos-doctor':>16}{'upstream v4':>16}",
    ]

    def row(label, mine, other):
        lines.append(f"{label:44}{mine:>16}{other:>16}")

    t = theirs or {}
    row("overloads with >= 1 CPU-valid case", f"{s.get('valid_overloads', 0)}/{ours['routes']}",
        f"{t.get('valid_overloads', '-')}/{t.get('routes', '-')}")
    row("  of those with a CPU kernel", f"{s.get('valid_with_cpu_kernel', 0)}/{s.get('with_cpu_kernel', 0)}",
        f"{t['valid_overloads']}/{t['routes'] - len(ours['no_cpu_kernel'])}" if t else "-")
    row("CPU-valid cases", f"{s.get('valid_cases', 0)}/{total_cases}",
        f"{t['valid_cases_tsv']}/{t['routes'] * 7}" if t else "-")
    if t:
        row("  (measurements README's figure)", "", f"{t['valid_cases_readme']}")
    row("no CPU kernel: independent reference", f"{sum(1 for v in ours['no_cpu_kernel'].values() if v['reference_cases'])}"
        f"/{len(ours['no_cpu_kernel'])}", f"0/{len(ours['no_cpu_kernel'])}" if t else "-")
    row("  their reference-valid cases", f"{s.get('reference_cases', 0)}", "0" if t else "-")
    row("self-check: overloads judged against self", f"{len({d['overload'] for d in ours['self_check_disagreements']})}",
        f"{t.get('self_check_failed_overloads', '-')}")
    row("NO_SCHEMA on this torch", f"{s.get('no_schema', 0)}", "-")
    if theirs:
        lost = [o for o, n in theirs["per_overload"].items()
                if n > 0 and not any(st in ("PASS", "WRONG", "ERROR") for st in ours["overloads"].get(o, {}).values())]
        if lost:
            lines += ["", "Covered upstream, not here: " + ", ".join(sorted(lost))]
    lines += ["", "No CPU kernel:"]
    for overload, info in sorted(ours["no_cpu_kernel"].items()):
        how = f"{info['reference_cases']} cases against an independent reference" if info["reference_cases"] else "UNVERIFIABLE"
        lines.append(f"  {overload}: {how}: {info['detail']}")
    lines += ["", f"Still without a CPU-valid case ({len(ours['without_valid_case'])}):"]
    for overload, why in sorted(ours["without_valid_case"].items()):
        lines.append(f"  {overload}: {why}")
    if ours["self_check_disagreements"]:
        lines += ["", "Self-check disagreements (defects of the engine):"]
        for d in ours["self_check_disagreements"]:
            lines.append(f"  {d['overload']} [{d['profile']}] {d['status']}: {d['detail']}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--conf", default=DEFAULT_CONF)
    parser.add_argument("--spec", default=None, help="survey spec (default: surveys/default.yaml)")
    parser.add_argument("--upstream", default=DEFAULT_TSV, help="upstream's per-overload TSV")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    ours = measure(args.conf, args.spec)
    theirs = upstream(args.upstream)
    print(render(ours, theirs))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"schema": "flagos-doctor/synthesis-coverage/1", "ours": ours,
                       "upstream": {k: v for k, v in (theirs or {}).items() if k != "per_overload"}},
                      handle, indent=1, sort_keys=True)
    return 1 if ours["self_check_disagreements"] else 0


if __name__ == "__main__":
    sys.exit(main())
