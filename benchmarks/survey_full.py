"""The whole route set, cold then warm, against a per-overload reference on a sample.

Each phase is one run of the real CLI (``flagos-doctor survey``) and may be cut short and
called again: the survey resumes from its journal and the phase's wall time is the sum of
its calls (each call pays its worker starts again; the calls are listed). State lives in
``--state`` (caches, results files, the times so far), so a phase per call of at most
``--deadline`` seconds fits a device lease's limit:

    python benchmarks/survey_full.py cold                 # demo stack, CPU: the script works
    python benchmarks/survey_full.py --stack flag_gems --state /tmp/fd/full cold
    ... warm          # the same route set again, Triton's and FlagGems' caches kept
    ... reference     # one process per overload on --sample overloads, cold caches, Triton's
                      # own autotuning (--full-autotune --no-shared-autotune): upstream's way
    ... reference-warm  # the same, on the caches the warm run used

``cold`` empties the Triton, FlagGems and inductor caches before its first call. After
every call the documents ``survey-full-cold.json`` and ``survey-full-warm.json`` are
written to ``--out`` from what the state holds: top-level ``seconds``, ``overloads``,
``cases``, ``workers``, ``census_sha256``, ``hints`` (where each call's timing hints came
from: ``--hints RESULTS.json``, passed to cold and warm, or the results file resumed), where the time went (worker starts, case and
device seconds, Triton's compile and autotune counts and seconds as the workers' listeners
saw them, kernels compiled and autotuning results added to the cache folder, the slowest
cases),
and the reference: its seconds on the sample, extrapolated to the whole route set (and said
to be), with whether its census equals the full run's on the sample.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)

import survey_speed  # noqa: E402  (route_list, pick: the same sample rule as the speed benchmark)

from flagos_doctor import files  # noqa: E402

SCHEMA = "flagos-doctor/benchmark-survey-full/1"
PHASES = ("cold", "warm", "reference", "reference-warm")


def cache_env(state: str, which: str) -> dict:
    """Triton, FlagGems and inductor caches under ``state``/``which``."""
    root = os.path.join(state, f"cache-{which}")
    return {"TRITON_CACHE_DIR": os.path.join(root, "triton"), "FLAGGEMS_CACHE_DIR": os.path.join(root, "flaggems"),
            "TORCHINDUCTOR_CACHE_DIR": os.path.join(root, "inductor")}


def cache_counts(env: dict) -> dict:
    """What Triton's cache folder holds: compiled kernels (one metadata group each) and
    autotuning results shared between processes (``*.autotune.json``)."""
    kernels = autotunes = 0
    for _, _, names in os.walk(env["TRITON_CACHE_DIR"]):
        kernels += sum(name.startswith("__grp__") for name in names)
        autotunes += sum(name.endswith(".autotune.json") for name in names)
    return {"kernels_compiled": kernels, "autotune_results": autotunes}


def load_state(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except FileNotFoundError:
        return {"phases": {}}


def run_phase(args, phase: str, state: dict, ops: list[str] | None) -> None:
    """One call of ``phase``: run (or resume) its survey for at most ``--deadline`` seconds."""
    record = state["phases"].setdefault(phase, {"calls": [], "complete": False})
    if record["complete"]:
        print(f"{phase}: already complete ({sum(record['calls']):.1f} s in {len(record['calls'])} call(s))")
        return
    which = {"cold": "full", "warm": "full", "reference": "reference", "reference-warm": "full"}[phase]
    env_caches = cache_env(args.state, which)
    if phase in ("cold", "reference") and not record["calls"]:
        shutil.rmtree(os.path.dirname(env_caches["TRITON_CACHE_DIR"]), ignore_errors=True)
        for name in ("results", "census"):
            _remove(os.path.join(args.state, f"{phase}.{name}"))
    if phase in ("warm", "reference-warm") and not state["phases"].get("cold", {}).get("complete"):
        sys.exit(f"{phase}: run cold to the end first (its caches are the warm ones)")
    for folder in env_caches.values():
        os.makedirs(folder, exist_ok=True)
    output = os.path.join(args.state, f"{phase}.results")
    census = os.path.join(args.state, f"{phase}.census")
    cmd = [args.python, "-m", "flagos_doctor", "survey", "--stack", args.stack, "--backend", args.backend,
           "--no-store", "--quiet", "-o", output, "--census", census]
    if args.timeout is not None:  # else the survey's own default, as a new user runs it
        cmd += ["--timeout", str(args.timeout)]
    if phase.startswith("reference"):
        # upstream's harness: a process per overload, Triton's own autotuning (its full
        # timing budget, nothing shared between processes)
        cmd += ["--isolation", "per-overload", "--workers", "1", "--ops", ",".join(ops),
                "--full-autotune", "--no-shared-autotune"]
    else:
        if args.workers:
            cmd += ["--workers", str(args.workers)]
        if args.devices:
            cmd += ["--devices", args.devices]
        if args.no_shared_autotune:
            cmd.append("--no-shared-autotune")
        if args.full_autotune:
            cmd.append("--full-autotune")
    if args.hints and phase in ("cold", "warm"):  # only orders the cases: the census is the same
        cmd += ["--hints", os.path.abspath(args.hints)]
        record["hints_given"] = os.path.abspath(args.hints)  # kept: a later call's report may have none
    for flag, value in (("--conf", args.conf), ("--routes", args.routes), ("--device", args.device), ("--spec", args.spec)):
        if value:
            cmd += [flag, value]
    env = dict(os.environ, **env_caches)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (REPO, env.get("PYTHONPATH")) if p)
    before = cache_counts(env_caches)
    start = time.monotonic()
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = child.communicate(timeout=args.deadline)
    except subprocess.TimeoutExpired:
        child.send_signal(signal.SIGTERM)  # the survey stops as on Ctrl-C and keeps its journal
        out, err = child.communicate()
    seconds = time.monotonic() - start
    after = cache_counts(env_caches)
    record["calls"].append(round(seconds, 2))
    record.setdefault("cache_added", []).append({k: after[k] - before[k] for k in after})
    # exit 0: every selected overload got a verdict (a sample's reference selects --ops)
    record["complete"] = child.returncode == 0 and (phase.startswith("reference") or _complete(output))
    record["last_exit"] = child.returncode
    print(f"{phase}: call {len(record['calls'])} took {seconds:.1f} s, exit {child.returncode}, "
          f"{'complete' if record['complete'] else 'NOT complete: call it again to resume'}")
    if child.returncode not in (0, 130):  # 130: stopped at the deadline, journal kept
        print(err[-3000:], file=sys.stderr)


def _remove(path: str) -> None:
    for each in (path, path + ".journal"):
        try:
            os.unlink(each)
        except FileNotFoundError:
            pass


def _complete(path: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return bool(json.load(handle).get("complete"))
    except (OSError, ValueError):
        return False


def _results(state_dir: str, phase: str) -> tuple[dict | None, str | None]:
    try:
        with open(os.path.join(state_dir, f"{phase}.results"), encoding="utf-8") as handle:
            document = json.load(handle)
        with open(os.path.join(state_dir, f"{phase}.census"), encoding="utf-8") as handle:
            return document, handle.read()
    except (OSError, ValueError):
        return None, None


def where_the_time_went(document: dict, record: dict) -> dict:
    """From a results document: worker starts, case and device seconds, the slowest cases,
    the schedule; from the cache folder: kernels compiled and autotuning results kept."""
    cases = [(case.get("seconds") or 0.0, case.get("device_seconds"), name, case["profile"])
             for name, entry in document["overloads"].items() for case in entry.get("cases") or []]
    runs = document["provenance"].get("runs") or []
    starts = [run.get("worker_starts") or {} for run in runs]
    added = record.get("cache_added") or []
    triton = {}  # the workers' own figures (survey/child/triton_timing.py), summed over cases
    for entry in document["overloads"].values():
        for case in entry.get("cases") or []:
            for key, value in (case.get("triton") or {}).items():
                triton[key] = triton.get(key, 0) + value
    return {
        "worker_starts": {"count": sum(s.get("count", 0) for s in starts),
                          "median_s_per_call": [s.get("median_s") for s in starts],
                          "max_s_per_call": [s.get("max_s") for s in starts]},
        "case_seconds_sum": round(sum(c[0] for c in cases), 2),
        "device_seconds_sum": round(sum(c[1] or 0.0 for c in cases), 2),
        "triton_cache": {k: sum(a.get(k, 0) for a in added) for k in ("kernels_compiled", "autotune_results")},
        "triton_in_cases": {k: round(v, 2) if isinstance(v, float) else v for k, v in sorted(triton.items())},
        "schedule": [run.get("schedule") for run in runs],
        "slowest_cases": [{"overload": n, "profile": p, "seconds": round(s, 2), "device_seconds": d}
                          for s, d, n, p in sorted(cases, key=lambda c: c[0], reverse=True)[:10]],
    }


def reference_figures(state: dict, state_dir: str, phase: str, full_census: str, overloads: int) -> dict | None:
    record = state["phases"].get(phase)
    document, census = _results(state_dir, phase)
    if not record or document is None:
        return None
    sample = state["sample"]
    seconds = sum(record["calls"])
    on_sample = "".join(line + "\n" for line in full_census.splitlines() if line.split("\t")[0] in set(sample))
    per = seconds / max(1, len(sample))
    last = (document["provenance"].get("runs") or [{}])[-1]
    return {
        "isolation": "per-overload", "complete": record["complete"], "sample": sample, "overloads": len(sample),
        "autotune_timing": last.get("autotune_timing"), "shared_autotune": last.get("shared_autotune"),
        "seconds": round(seconds, 2), "calls": record["calls"], "seconds_per_overload": round(per, 2),
        "extrapolated_seconds": round(per * overloads, 1),
        "extrapolated": f"per-overload time of the whole route set EXTRAPOLATED from {len(sample)} sampled "
                        f"overloads x {overloads}; not measured",
        "census_identical_on_sample": census == on_sample,
        "where_the_time_went": where_the_time_went(document, record),
    }


def report(args, state: dict) -> None:
    """Write survey-full-cold.json / -warm.json to --out from what the state holds."""
    _, cold_census = _results(args.state, "cold")
    for phase, reference in (("cold", "reference"), ("warm", "reference-warm")):
        record = state["phases"].get(phase)
        document, census = _results(args.state, phase)
        if not record or document is None:
            continue
        provenance = document["provenance"]
        last = (provenance.get("runs") or [{}])[-1]
        overloads = len(document["overloads"])
        figures = {
            "schema": SCHEMA,
            "caches": phase,
            "complete": record["complete"],
            "seconds": round(sum(record["calls"]), 2),
            "calls": record["calls"],
            "overloads": overloads,
            "cases": sum(len(entry["cases"]) for entry in document["overloads"].values()),
            "workers": last.get("workers"),
            "workers_choice": last.get("workers_choice"),
            "shared_autotune": last.get("shared_autotune"),
            "autotune_timing": last.get("autotune_timing"),
            # where the timing hints came from (--hints, the results file resumed), each call
            "hints": [run.get("hints") for run in provenance.get("runs") or []],
            "hints_given": record.get("hints_given"),
            "census_sha256": document.get("census_sha256"),
            "census_identical_to_cold": (census == cold_census) if phase == "warm" else None,
            "statuses": document["summary"].get("statuses"),
            "where_the_time_went": where_the_time_went(document, record),
            "reference": None,
            "stack": {k: provenance.get(k) for k in ("stack", "torch", "triton", "flag_gems", "python", "device")},
            "harness_version": provenance.get("harness_version"),
            # HEAD of the checkout it ran in; a copied tree (the device tool's) may carry a
            # stale .git, so the digest of the package's own sources says what really ran.
            "flagos_doctor_commit": _commit(),
            "flagos_doctor_sources_sha256": _sources_digest(),
        }
        found = reference_figures(state, args.state, reference, census, overloads)
        if found:
            found["ratio_extrapolated"] = round(found["extrapolated_seconds"] / max(figures["seconds"], 1e-9), 2)
            figures["reference"] = found
        target = os.path.join(args.out, f"survey-full-{phase}.json")
        files.write_json(target, figures)
        ratio = f", reference {found['extrapolated_seconds']} s extrapolated: {found['ratio_extrapolated']}x" if found else ""
        print(f"{target}: {figures['seconds']} s, {overloads} overloads, {figures['cases']} cases, "
              f"{figures['workers']} workers{ratio}")


def _sources_digest() -> str:
    """sha256 over the paths and contents of flagos_doctor/**/*.py, in sorted order."""
    import hashlib

    digest = hashlib.sha256()
    package = os.path.join(REPO, "flagos_doctor")
    for folder, dirs, names in sorted(os.walk(package)):
        dirs.sort()
        for name in sorted(n for n in names if n.endswith(".py")):
            path = os.path.join(folder, name)
            digest.update(os.path.relpath(path, REPO).encode() + b"\0")
            with open(path, "rb") as handle:
                digest.update(handle.read() + b"\0")
    return digest.hexdigest()


def _commit() -> str | None:
    try:
        done = subprocess.run(["git", "-C", REPO, "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10)
        return done.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("phase", choices=PHASES + ("report",))
    parser.add_argument("--stack", default="demo")
    parser.add_argument("--conf")
    parser.add_argument("--routes", help="flag_gems | stack")
    parser.add_argument("--backend", default="flagos_python")
    parser.add_argument("--device")
    parser.add_argument("--spec")
    parser.add_argument("--workers", type=int, help="default: the survey's own pick")
    parser.add_argument("--devices", help="0,1,...")
    parser.add_argument("--no-shared-autotune", action="store_true")
    parser.add_argument("--full-autotune", action="store_true", help="cold and warm: Triton's own autotune timing budget")
    parser.add_argument("--hints", metavar="RESULTS.json",
                        help="cold and warm: a results file whose case seconds order the run (the survey's --hints)")
    parser.add_argument("--sample", type=int, default=26, help="overloads of the per-overload reference")
    parser.add_argument("--timeout", type=float, help="the survey's per-case timeout (default: the survey's own)")
    parser.add_argument("--deadline", type=float, default=520.0, help="seconds a call may run before it stops and keeps its journal")
    parser.add_argument("--python", default=sys.executable)
    parser.add_argument("--state", default=os.path.join(os.environ.get("TMPDIR", "/tmp"), "flagos-survey-full"))
    parser.add_argument("--out", default=".", help="folder for survey-full-cold.json and survey-full-warm.json")
    args = parser.parse_args()

    if args.stack == "flag_gems" and not args.conf and not args.routes:
        args.routes = "flag_gems"
    os.makedirs(args.state, exist_ok=True)
    os.makedirs(args.out, exist_ok=True)
    state_path = os.path.join(args.state, "state.json")
    state = load_state(state_path)
    if args.phase != "report":
        ops = None
        if args.phase.startswith("reference"):
            if "sample" not in state:
                all_ops = survey_speed.route_list(argparse.Namespace(**{**vars(args), "timeout": args.timeout or 120.0}))
                state["sample"] = survey_speed.pick(all_ops, args.sample)
            ops = state["sample"]
        run_phase(args, args.phase, state, ops)
        files.write_json(state_path, state)
    report(args, state)
    return 0 if all(p.get("complete") for p in state["phases"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
