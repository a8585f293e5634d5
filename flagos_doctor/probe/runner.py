"""Parent side of the probe: start the child, gather its records, build the JSON document.

:func:`run_probe` is the one entry point (the ``report`` command calls it too). It never
imports torch and never raises for anything the child does: a child that segfaults,
aborts, hangs or fails an import still yields a document, with ``outcome`` saying which.
"""

from __future__ import annotations

import json
import os
import platform
import sys
import time

from flagos_doctor import redact, stacks
from flagos_doctor.childproc import Child, ChildTimeout
from flagos_doctor.errors import BadInput
from flagos_doctor.options import ProbeOptions
from flagos_doctor.probe import SCHEMA, findings, watch


def child_config(options: ProbeOptions) -> dict:
    """What the child needs, from the options; raise BadInput for unusable options."""
    if options.stack is not None:
        stacks.get(options.stack)  # a built-in or a module name (imported by the child), else BadInput
    for module in options.imports:
        if not all(part.isidentifier() for part in module.split(".")):
            raise BadInput(f"{module!r} is not a module name", "--import")
    if options.timeout <= 0:
        raise BadInput("must be a positive number of seconds", "--timeout")
    probes = [watch.check_probe(name, "--watch") for name in options.watch]
    env: list[str] = []
    if options.watch_file:
        more, env = watch.load_watch_file(options.watch_file)
        probes += more
    return {
        "stack": options.stack,
        "imports": list(options.imports),
        "probes": list(dict.fromkeys(probes)),
        "env": env,
        "exercise": options.exercise,
        "timeout": options.timeout,
        # Test suites and the overhead benchmark may skip the slow compile step.
        "compile": os.environ.get("FLAGOS_DOCTOR_PROBE_COMPILE", "1") != "0",
    }


def run_probe(options: ProbeOptions) -> dict:
    """Probe the stack in a child process; return the document (schema ``flagos-doctor/probe/1``).

    Raises BadInput for unusable options or an interpreter that cannot be started.
    """
    config = child_config(options)
    started = time.monotonic()
    records: list[dict] = []
    try:
        child = Child(options.python, "flagos_doctor.probe.child", [json.dumps(config)])
    except OSError as exc:
        raise BadInput(f"cannot start {options.python}: {exc.strerror or exc}", "--python")
    with child:
        timed_out = False
        try:
            for record in child.records(timeout=options.timeout):
                records.append(record)
                if record.get("record") == "done":
                    break
        except ChildTimeout:
            timed_out = True
        if timed_out:
            end = child.terminate_after_timeout()
        else:
            end = child.wait(timeout=30)
        stderr_tail = child.stderr_tail()
        stdout_tail = child.stdout_tail()
    document = build_document(records, config, options)
    document["notices"] += missing_notices(document, options)
    document["seconds"] = round(time.monotonic() - started, 2)
    finished = any(r.get("record") == "done" for r in records)
    child_info = {"returncode": end.returncode, "signal": end.signal, "timed_out": end.timed_out,
                  "ended": end.describe(), "stderr_tail": stderr_tail, "stdout_tail": stdout_tail}
    document["child"] = child_info
    if timed_out:
        document["outcome"] = "timeout"
    elif not finished:
        document["outcome"] = "crashed"
    elif any(o["step"].startswith("import ") and not o["ok"] for o in document["outcomes"]):
        document["outcome"] = "import-failed"
    else:
        document["outcome"] = "ok"
    if document["outcome"] in ("timeout", "crashed"):
        document["interrupted"] = {
            "phase": document["phases"][-1] if document["phases"] else None,
            "last_event": document["events"][-1] if document["events"] else None,
            "reason": (f"no answer within {options.timeout:g} s" if timed_out else end.describe()),
        }
    document["findings"] = findings.judge(document)
    # Watched variables are recorded with their values: never let a secret through.
    return redact.scrub(document, redact.secret_values(os.environ))


def missing_notices(document: dict, options: ProbeOptions) -> list[str]:
    """A way forward for each of the stack's modules its import could not find (its
    ``install_hint``: torch_fl's build command)."""
    if not options.stack:
        return []
    hint = stacks.get(options.stack).install_hint
    out = []
    for outcome in document["outcomes"]:
        module = outcome["step"].removeprefix("import ")
        if hint and not outcome.get("ok") and f"No module named '{module}'" in str(outcome.get("error")):
            out.append(f"{module} is not importable by {options.python}: {hint}")
    return out


def build_document(records: list[dict], config: dict, options: ProbeOptions) -> dict:
    """The document from the child's records (before outcome and findings are set)."""
    hello = next((r for r in records if r.get("record") == "hello"), {})
    imports = next((r["modules"] for r in records if r.get("record") == "imports"), config["imports"])
    events = [_event(r) for r in records if r.get("record") == "event"]
    for record in records:
        if record.get("record") == "driver":  # creating Triton's driver raised
            for event in events:
                if event["seq"] == record["seq"]:
                    event["raised"] = record["raised"]
    final = next((r for r in records if r.get("record") == "final"), None)
    probes = _probes(events, final)
    return {
        "schema": SCHEMA,
        "python": {"version": hello.get("python"), "executable": hello.get("executable") or options.python,
                   "dict_watchers": hello.get("dict_watchers")},
        "platform": hello.get("platform") or platform.platform(),
        "stack": config["stack"],
        "imports": imports,
        "notices": [r["text"] for r in records if r.get("record") == "notice"],
        "outcome": None,
        "phases": [r["name"] for r in records if r.get("record") == "phase"],
        "outcomes": [{k: v for k, v in r.items() if k != "record"} for r in records if r.get("record") == "outcome"],
        "events": events,
        "probes": probes,
        "saved_originals": _saved(records, final),
        "facts": (final or {}).get("facts", {}),
        "final_state": final is not None,
        "findings": [],
        "doctor": {"argv_python": sys.executable, "config": config},
    }


def _event(record: dict) -> dict:
    event = {k: v for k, v in record.items() if k != "record"}
    event.setdefault("value", None)
    return event


def _probes(events: list[dict], final: dict | None) -> list[dict]:
    """Per probe: its final state and its chain of writers (from the events, in order)."""
    by_name: dict[str, dict] = {}
    for entry in (final or {}).get("probes", []):
        by_name[entry["name"]] = dict(entry, writers=[], write_events=[], reads=[])
    for event in events:
        entry = by_name.setdefault(event["probe"], {
            "name": event["probe"], "kind": "env" if event["probe"].startswith("$") else "state",
            "resolved": True, "final": None, "original": None, "writers": [], "write_events": [], "reads": [],
        })
        if event["kind"] in ("write", "delete"):
            entry["writers"].append(event["where"])
            entry["write_events"].append(event["seq"])
            if entry["kind"] in ("env", "state"):
                entry["final"] = event.get("value")
        elif event["kind"] == "read":
            entry["reads"].append(event["seq"])
    env = ((final or {}).get("facts") or {}).get("env", {})
    for name, entry in by_name.items():
        if entry["kind"] == "env":
            values = env.get(name[1:])
            if isinstance(values, dict):  # a secret-named variable's facts come scrubbed whole
                entry["original"] = values["final"] == values["original"]
        elif entry["kind"] == "state" and entry["original"] is None:
            entry["original"] = not entry["write_events"]
    return list(by_name.values())


def _saved(records: list[dict], final: dict | None) -> list[dict]:
    """Saved originals, and whether anything read them (from the read events, so a crash keeps it)."""
    read = {r["probe"] for r in records if r.get("record") == "event" and r.get("kind") == "read"}
    return [
        {"probe": r["probe"], "saves": r["saves"], "seq": r["seq"], "read": r["probe"] in read}
        for r in records
        if r.get("record") == "saved"
    ]
