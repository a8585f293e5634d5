"""The report's JSON bundle (schema ``flagos-doctor/report/1``): every part, collected.

:func:`collect` gathers the pieces (each one guarded: a piece that fails becomes an
``error`` string in the bundle and a line in ``problems``, never an exception);
:func:`template_fields` is a pure function of the bundle giving the fields of Torch-FL's
bug-report template. The Markdown (:mod:`.markdown`) renders from the bundle alone.

Keys: ``schema``, ``generated``, ``flagos_doctor``, ``stack`` {modules, device_type},
``environment`` {python, packages, torch, stack, errors, child_end, tools, toolkits},
``runtime_config`` [{name, value | redacted}], ``template`` [{field, value}],
``probe`` {outcome, imports, phases, findings, probes, ...} | {error},
optionally ``survey`` (with ``failure_groups``), ``compare`` (only with ``--force`` for
runs that are not comparable) and ``explain`` (an ``explain --json`` document without its
event stream), and ``problems`` [str].
"""

from __future__ import annotations

import datetime
import os

from flagos_doctor import __version__, childproc, stacks
from flagos_doctor.errors import BadInput
from flagos_doctor.options import CompareOptions, ProbeOptions, ReportOptions
from flagos_doctor import redact
from flagos_doctor.report import environment

REPORT_SCHEMA = "flagos-doctor/report/1"


def stack_modules(options: ReportOptions) -> tuple[list[str] | None, str | None]:
    """(modules the env child imports, device type when known here) for ``--import`` or
    ``--stack`` (:mod:`flagos_doctor.stacks`); (None, None): the env child finds the stack
    by the default-stack rule."""
    if options.imports:
        return list(options.imports), None
    if options.stack:
        stack = stacks.get(options.stack)
        return list(stack.probe_imports), stack.device_type
    return None, None


def _probe_summary(document: dict) -> dict:
    """The probe document without its event stream (kept as a count)."""
    summary = {k: v for k, v in document.items() if k != "events"}
    summary["event_count"] = len(document.get("events") or [])
    return summary


def probe_piece(options: ReportOptions) -> dict:
    try:
        from flagos_doctor.probe.runner import run_probe
    except ImportError as exc:
        return {"error": f"the probe is not available in this flagos-doctor: {exc}"}
    probe_options = ProbeOptions(
        imports=list(options.imports), stack=options.stack, python=options.python, timeout=options.timeout,
        quiet=True,
    )
    try:
        return _probe_summary(run_probe(probe_options))
    except BadInput as exc:
        return {"error": str(exc)}
    except Exception as exc:  # a bug in the probe must not cost the user the report
        return {"error": f"the probe failed: {type(exc).__name__}: {exc}"}


def explain_piece_or_raise(path: str) -> dict:
    """An ``explain --json`` document (schema ``flagos-doctor/explain/*``) without its event
    stream (kept as a count); BadInput naming the file when it cannot be read."""
    from flagos_doctor import files
    from flagos_doctor.explain import SCHEMA, validate

    document = validate.document(files.load_json(path, SCHEMA.rsplit("/", 1)[0] + "/"), SCHEMA, path)
    piece = {k: v for k, v in document.items() if k != "events"}
    piece["event_count"] = len(document.get("events") or [])
    # A subprocess's events too are counted, not carried (a pytest-xdist worker's run).
    piece["processes"] = [{k: v for k, v in p.items() if k != "events"} | {"event_count": len(p.get("events") or [])}
                          for p in document.get("processes") or []]
    piece["path"] = path
    return piece


def explain_piece(path: str) -> dict:
    """:func:`explain_piece_or_raise`, or ``{path, error}`` (the file changed since it was checked)."""
    try:
        return explain_piece_or_raise(path)
    except BadInput as exc:
        return {"path": path, "error": str(exc)}


def survey_piece(path: str) -> dict:
    from flagos_doctor.results.document import load as load_results
    from flagos_doctor.results.comparable import CONTEXT, lookup
    from flagos_doctor.results.verdicts import is_native_also
    from flagos_doctor.results.groups import failure_groups

    document = load_results(path)  # BadInput: refused before anything is probed (report.command)
    overloads = document.get("overloads") or {}
    failing = {
        name: entry.get("verdict")
        for name, entry in sorted(overloads.items())
        if entry.get("verdict") in ("FAILED", "BASIC_ONLY")
    }
    provenance = document.get("provenance") or {}
    cases = [(name, case) for name, entry in sorted(overloads.items()) if isinstance(entry, dict)
             for case in (entry.get("cases") or []) if isinstance(case, dict)]
    return {
        "baseline": provenance.get("baseline"),
        "native_also": [{"overload": name, "profile": case.get("profile"), "status": case.get("status")}
                        for name, case in cases
                        if isinstance(case, dict) and "status" in case and is_native_also(case)],
        "flaky": [{"overload": name, "profile": case.get("profile"), "repeats": case.get("repeats")}
                  for name, case in cases if case.get("status") == "FLAKY"],
        "path": os.path.abspath(path),
        "summary": document.get("summary"),
        "census_sha256": document.get("census_sha256"),
        "stack": provenance.get("stack"),
        "harness_version": provenance.get("harness_version"),
        "flag_gems": provenance.get("flag_gems"),
        "context": {name: lookup(document, paths) for name, paths in CONTEXT},
        "not_strict": failing,
        "failure_groups": failure_groups(overloads),
    }


def compare_piece(options: ReportOptions) -> dict:
    """The comparison of ``--compare A B``; runs that are not comparable are attached only
    with ``--force`` (as ``survey --compare``), else an error naming the fields."""
    from flagos_doctor.compare.build import build_comparison, not_comparable_message

    a, b = options.compare
    # An arm that is no survey results file is BadInput, refused before anything is probed.
    comparison = build_comparison(CompareOptions(a=a, b=b, store=options.store, force=options.force))
    if comparison["differences"] and not options.force:
        return {"error": not_comparable_message(comparison), "arms": comparison["arms"],
                "differences": comparison["differences"]}
    return comparison


def _first(*values):
    for value in values:
        if value:
            return value
    return None


def template_fields(bundle: dict) -> list[dict]:
    """The fields of Torch-FL's bug-report template, from the bundle alone (one helper each)."""
    env = bundle.get("environment") or {}
    return [
        {"field": "Platform", "value": _platform_text(env)},
        {"field": "Python Version", "value": _python_text(env)},
        {"field": "PyTorch Version", "value": _pytorch_text(env)},
        {"field": "torch_fl Version/Branch", "value": _torch_fl_text(env)},
        {"field": "CUDA/MACA/CANN/MUSA Version", "value": _runtime_text(env)},
        {"field": "FlagGems Version", "value": _package_text(env, "flag_gems")},
        {"field": "Runtime Configuration", "value": _runtime_config_text(bundle.get("runtime_config") or [])},
    ]


def _package_text(env: dict, name: str) -> str:
    errors = env.get("errors") or {}
    entry = (env.get("packages") or {}).get(name)
    if entry is None:
        return errors.get("packages") or f"not collected: {name}"
    if not entry.get("found"):
        return f"not found: {name}" + (f" ({entry['why']})" if entry.get("why") and "not importable" not in entry["why"] else "")
    return entry.get("version") or f"{name} installed at {entry.get('location')}, version unknown"


def _platform_text(env: dict) -> str:
    errors, py = env.get("errors") or {}, env.get("python") or {}
    stack = env.get("stack") or {}
    accel = stack.get("accelerator") or {}
    platform = py.get("platform") or errors.get("python") or "not collected"
    if py.get("os"):
        platform += f" ({py['os']})"
    if accel.get("count"):
        platform += f"; accelerator: {accel.get('name') or accel.get('type')} x{accel['count']} ({accel.get('type')})"
    elif "stack" in errors:
        platform += f"; accelerator: unknown ({errors['stack']})"
    elif stack:
        platform += f"; accelerator: none found (device type {accel.get('type') or accel.get('privateuse1')})"
    return platform


def _python_text(env: dict) -> str:
    py = env.get("python") or {}
    if py.get("version"):
        return f"{py['version']} ({py.get('executable')})"
    return (env.get("errors") or {}).get("python") or "not collected"


def _pytorch_text(env: dict) -> str:
    errors, torch = env.get("errors") or {}, env.get("torch") or {}
    if torch.get("version"):
        pytorch = f"{torch['version']} ({torch.get('build')} build"
        return pytorch + (f", vendor suffix {torch['vendor_suffix']})" if torch.get("vendor_suffix") else ", no vendor suffix)")
    installed = ((env.get("packages") or {}).get("torch") or {}).get("version")
    if installed:
        return f"{installed} (import failed: {errors.get('torch')})"
    return errors.get("torch") or _package_text(env, "torch")


def _torch_fl_text(env: dict) -> str:
    fl = (env.get("packages") or {}).get("torch_fl") or {}
    if not fl.get("found"):
        return _package_text(env, "torch_fl")
    parts = [fl.get("version") or "version unknown"]
    if fl.get("commit"):
        parts.append(f"commit {fl['commit'][:12]}")
    if fl.get("branch"):
        parts.append(f"branch {fl['branch']}")
    if fl.get("dirty") is not None:
        parts.append("dirty" if fl["dirty"] else "clean")
    if not fl.get("commit"):
        parts.append(f"commit {fl.get('commit_source') or 'unknown'}")
    elif fl.get("commit_source"):
        parts.append(f"commit from {fl['commit_source']}")
    parts.append(f"extension md5 {fl['extension_md5']}" if fl.get("extension_md5") else "no compiled extension found")
    conf = (env.get("stack") or {}).get("backend_config") or {}
    if conf.get("path"):
        gone = "a temporary file, gone after the run; " if conf.get("gone") else ""
        parts.append(f"conf in force {conf['path']} ({gone}chosen by {conf.get('chosen_by')})")
    return ", ".join(parts)


def _runtime_text(env: dict) -> str:
    torch = env.get("torch") or {}
    runtimes = [f"CUDA {torch['cuda']} (torch build)"] if torch.get("cuda") else []
    if torch.get("hip"):
        runtimes.append(f"HIP {torch['hip']} (torch build)")
    for tool in env.get("tools") or []:
        if tool.get("cuda_version") and tool.get("name") == "nvidia-smi (CUDA)":
            runtimes.append(f"CUDA {tool['cuda_version']} (driver {tool.get('driver_version')}, nvidia-smi)")
        if tool.get("cuda_version") and tool.get("name") == "nvcc":
            runtimes.append(f"CUDA {tool['cuda_version']} (nvcc)")
    missing = []
    for kit in env.get("toolkits") or []:
        if kit.get("found"):
            runtimes.append(f"{kit['name']} {kit.get('version')} ({kit.get('path')})")
        else:
            missing.append(kit["name"])
    if not any(r.startswith("CUDA") for r in runtimes):
        missing.insert(0, "CUDA")
    runtime = "; ".join(runtimes) if runtimes else "none"
    return runtime + (f"; not found: {', '.join(missing)}" if missing else "")


def _runtime_config_text(config: list[dict]) -> str:
    return (
        ", ".join(f"{v['name']}=<redacted>" if v.get("redacted") else f"{v['name']}={v['value']}" for v in config)
        or "none of FLAGOS_*, GEMS_*, FLAGGEMS_*, TRITON_*, HF_*, TRANSFORMERS_*, TORCH_DEVICE_BACKEND_AUTOLOAD is set"
    )


def collect(options: ReportOptions, progress=lambda step: None) -> dict:
    """Gather every piece of the report. Files the user named (``--survey``, ``--compare``)
    are read first: one that is no survey results file is BadInput before any probing.
    Otherwise never raises for a missing or broken piece (the bundle's ``problems`` say
    which and why). ``progress(step)`` is told each step as it starts."""
    modules, device_type = stack_modules(options)
    problems = []
    pieces = {}  # read before any progress is said: a bad file stays one line
    if options.survey:
        pieces["survey"] = survey_piece(options.survey)
    if options.compare:
        pieces["compare"] = compare_piece(options)
    progress(f"describing the environment of {options.python}")
    interpreter = environment.collect_interpreter(options.python, options.stack, modules, options.timeout)
    env = dict(interpreter["steps"])
    if options.torch_fl_commit and isinstance(env.get("packages"), dict) and (env["packages"].get("torch_fl") or {}).get("found"):
        from flagos_doctor.torch_fl_source import with_commit
        env["packages"]["torch_fl"] = with_commit(env["packages"]["torch_fl"], options.torch_fl_commit)
    env["errors"] = interpreter["errors"]
    env["child_end"] = interpreter["end"]
    env["tools"] = environment.vendor_tools()
    env["toolkits"] = environment.toolkits()
    problems += [f"environment ({step}): {why}" for step, why in interpreter["errors"].items()]
    bundle = {
        "schema": REPORT_SCHEMA,
        "generated": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "flagos_doctor": __version__,
        "stack": {"requested": options.stack, "imports": list(options.imports), "modules": modules,
                  "device_type": device_type},
        "environment": env,
        "runtime_config": environment.runtime_config(),
    }
    progress("probing the stack")
    bundle["probe"] = probe_piece(options)
    if bundle["probe"].get("error"):
        problems.append(f"probe: {bundle['probe']['error']}")
    if options.survey:
        bundle["survey"] = pieces["survey"]
    if options.compare:
        bundle["compare"] = pieces["compare"]
        if bundle["compare"].get("error"):
            problems.append(f"compare: {bundle['compare']['error']}")
    if options.explain:
        bundle["explain"] = explain_piece(options.explain)
        if bundle["explain"].get("error"):
            problems.append(f"explain: {bundle['explain']['error']}")
    bundle["problems"] = problems
    bundle = redact.scrub(childproc.without_link_folder(bundle), redact.secret_values(os.environ))
    conf = (bundle["environment"].get("stack") or {}).get("backend_config")
    if isinstance(conf, dict) and conf.get("path") and not os.path.exists(conf["path"]):
        conf["gone"] = True  # a temporary file of the stack's run, deleted since
    bundle["template"] = template_fields(bundle)
    return bundle
