"""Parent side of ``explain``: run the user's command under the watch, build the document.

:func:`run_explain` is the one entry point. The command runs in the foreground, its stdin,
stdout and stderr the terminal's (or whatever the user redirected), under the one launch
policy (:func:`flagos_doctor.childproc.child_env`) plus a folder holding only our
``sitecustomize.py``. Its records arrive in a side-channel file, read once it has ended;
a program that crashes or calls ``os._exit`` still leaves every record sent before.
Never imports torch.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

from flagos_doctor import childproc, redact, stacks
from flagos_doctor.errors import BadInput
from flagos_doctor.explain import CONFIG_VAR, SCHEMA, analysis
from flagos_doctor.options import ExplainOptions, ProbeOptions
from flagos_doctor.probe import findings, watch
from flagos_doctor.probe import runner as probe_runner

_PYTHON = re.compile(r"^python(\d+(\.\d+)?)?$")
PLUGIN = "flagos_doctor.explain.pytest_plugin"
#: What our start-up hook holds: the watch's code lives in flagos_doctor, linked first on the path.
SITECUSTOMIZE = (
    '"""flagos-doctor explain: install the watch, then the sitecustomize this one shadows."""\n'
    "from flagos_doctor.explain import startup as _flagos_doctor_startup\n"
    "_flagos_doctor_startup.main(__file__.rpartition('/')[0])\n"
    "del _flagos_doctor_startup\n"
)


def resolve_command(command: list[str], python: str) -> list[str]:
    """The argv to run: ``python`` (any ``pythonX.Y``) is ``--python``; another bare name is a
    console script beside ``--python``, else on ``PATH``; a ``.py`` file runs under ``--python``.
    Raises BadInput naming CMD when there is nothing to run."""
    if not command:
        raise BadInput("give the program to run after --, e.g. explain -- python repro.py", "CMD")
    first, rest = command[0], list(command[1:])
    if os.sep not in first:
        if _PYTHON.match(first):
            return [python, *rest]
        beside = os.path.join(os.path.dirname(python), first)
        found = beside if os.path.isfile(beside) and os.access(beside, os.X_OK) else shutil.which(first)
        if found is None:
            raise BadInput(f"{first!r} is neither beside {python} nor on PATH", "CMD")
        return [found, *rest]
    if not os.path.isfile(first):
        raise BadInput(f"no such file: {first}", "CMD")
    if first.endswith(".py") and not os.access(first, os.X_OK):
        return [python, first, *rest]
    if not os.access(first, os.X_OK):
        raise BadInput(f"{first} is not executable", "CMD")
    return [first, *rest]


def is_pytest(argv: list[str]) -> bool:
    """``python -m pytest``, or pytest's console script."""
    if any(argv[i] == "-m" and argv[i + 1] in ("pytest", "py.test") for i in range(len(argv) - 1)):
        return True
    return os.path.basename(argv[0]) in ("pytest", "py.test")


def child_config(options: ExplainOptions, channel_path: str) -> dict:
    """What :mod:`.startup` needs; BadInput for unusable ``--stack``/``--watch``/``--watch-file``."""
    if options.stack is not None:
        stacks.get(options.stack)
    probes = [watch.check_probe(name, "--watch") for name in options.watch]
    env: list[str] = []
    if options.watch_file:
        more, env = watch.load_watch_file(options.watch_file)
        probes += more
    return {"channel": channel_path, "stack": options.stack, "probes": list(dict.fromkeys(probes)), "env": env}


def program_env(config: dict, hook_folder: str, pytest: bool) -> dict[str, str]:
    env = childproc.child_env(startup=hook_folder)
    env[CONFIG_VAR] = json.dumps(config)
    if pytest:
        plugins = [p for p in env.get("PYTEST_PLUGINS", "").split(",") if p.strip()]
        env["PYTEST_PLUGINS"] = ",".join([*plugins, PLUGIN] if PLUGIN not in plugins else plugins)
    return env


def run_program(argv: list[str], env: dict[str, str]) -> tuple[int, float]:
    """Run ``argv`` in the foreground; return (its return code, seconds).

    Ctrl-C reaches the program (same process group) and is the program's to handle: the
    parent only waits, and then still reports what was recorded."""
    started = time.monotonic()
    try:
        proc = subprocess.Popen(argv, env=env)
    except OSError as exc:
        raise BadInput(f"cannot start {argv[0]}: {exc.strerror or exc}", "CMD")
    previous = signal.signal(signal.SIGINT, lambda *_: None)
    try:
        while True:
            try:
                returncode = proc.wait()
                break
            except InterruptedError:
                continue
    finally:
        signal.signal(signal.SIGINT, previous)
    return returncode, time.monotonic() - started


def read_records(path: str) -> list[dict]:
    """The side channel's records; a line torn by a dying program is skipped."""
    records = []
    with open(path, "rb") as handle:
        for line in handle:
            try:
                records.append(json.loads(line))
            except ValueError:
                continue
    return records


def run_explain(options: ExplainOptions) -> dict:
    """Run the command under the watch; return the document (schema ``flagos-doctor/explain/1``).

    Raises BadInput for unusable options or a command that cannot be started."""
    argv = resolve_command(options.command, options.python)
    pytest = is_pytest(argv)
    with tempfile.TemporaryDirectory(prefix="flagos-doctor-explain-") as scratch:
        hook_folder = os.path.join(scratch, "hook")
        os.mkdir(hook_folder)
        with open(os.path.join(hook_folder, "sitecustomize.py"), "w") as handle:
            handle.write(SITECUSTOMIZE)
        channel_path = os.path.join(scratch, "records.jsonl")
        open(channel_path, "wb").close()
        config = child_config(options, channel_path)
        returncode, seconds = run_program(argv, program_env(config, hook_folder, pytest))
        records = read_records(channel_path)
    document = build_document(records, options, config, argv, pytest, returncode, seconds)
    # Watched variables are recorded with their values: never let a secret through.
    return redact.scrub(document, redact.secret_values(os.environ))


def build_document(records: list[dict], options: ExplainOptions, config: dict, argv: list[str], pytest: bool,
                   returncode: int, seconds: float) -> dict:
    """The document from the records and how the program ended (outcome, failures, causes)."""
    probe_like = probe_runner.build_document(records, {"stack": options.stack, "imports": []},
                                             ProbeOptions(python=options.python))
    hello = next((r for r in records if r.get("record") == "hello"), None)
    end = childproc.ChildEnd(returncode)
    program = {
        "command": list(options.command), "argv": argv, "cwd": os.getcwd(), "pytest": pytest,
        "returncode": returncode, "signal": end.signal, "ended": end.describe(), "seconds": round(seconds, 2),
        "watched": hello is not None, "finished": any(r.get("record") == "done" for r in records),
    }
    notices = list(probe_like["notices"])
    if hello is None:
        notices.append("the watch never started in the program: it is not a Python program of --python, "
                       "or its interpreter ignores PYTHONPATH and sitecustomize (-I, -E, -S)")
    elif not program["finished"]:
        notices.append("the program ended without running its exit hooks (os._exit, or a signal): "
                       "events up to that moment are kept; the probes' final state is unknown")
    document = {
        "schema": SCHEMA,
        "program": program,
        "python": probe_like["python"] if hello else {"version": None, "executable": argv[0], "dict_watchers": None},
        "platform": probe_like["platform"],
        "stack": options.stack,
        "notices": notices,
        "phases": probe_like["phases"],
        "events": probe_like["events"],
        "probes": probe_like["probes"],
        "saved_originals": probe_like["saved_originals"],
        "facts": probe_like["facts"],
        "tests": tests_summary(records) if pytest else None,
        "failures": failures(records, program),
        "causes": [],
        "findings": [],
        "doctor": {"argv_python": sys.executable, "probes": config["probes"], "env": config["env"]},
    }
    # The probe's own findings of the same events (a redirect read stale, a Triton driver
    # chosen wrong), judged as the probe would; the causes below tie them to failures.
    document["findings"] = findings.judge({**probe_like, "outcome": "ok", "outcomes": []})
    document["causes"] = analysis.causes(document)
    causes_by_failure: dict[int, list[int]] = {}
    for cause in document["causes"]:
        causes_by_failure.setdefault(cause["failure"], []).append(cause["id"])
    for failure in document["failures"]:
        failure["causes"] = causes_by_failure.get(failure["id"], [])
    return document


def tests_summary(records: list[dict]) -> dict:
    """Each test's outcome (its worst phase wins): counts and the node ids by outcome."""
    worst: dict[str, str] = {}
    rank = {"passed": 0, "skipped": 1, "failed": 2}
    for record in records:
        if record.get("record") != "test":
            continue
        nodeid, outcome = record["nodeid"], record["outcome"]
        if rank.get(outcome, 2) >= rank.get(worst.get(nodeid, "passed"), 0) or nodeid not in worst:
            worst[nodeid] = outcome
    counts: dict[str, int] = {}
    for outcome in worst.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return {"counts": counts, "outcomes": worst}


def failures(records: list[dict], program: dict) -> list[dict]:
    """Each failure, numbered: an uncaught exception, each failed test, and a non-zero exit
    that neither explains (``sys.exit(3)``, a signal)."""
    out = []
    for record in records:
        if record.get("record") != "failure":
            continue
        failure = {k: v for k, v in record.items() if k not in ("record", "causes")}
        failure["raised_from"] = record.get("causes", [])
        out.append(failure)
    if program["returncode"] != 0 and not out:
        ended = program["ended"].replace("killed by", "was killed by")
        out.append({"kind": "exit", "error": f"the program {ended}", "type": None, "traceback": []})
    for number, failure in enumerate(out, start=1):
        failure["id"] = number
    return [{"id": f["id"], **{k: v for k, v in f.items() if k != "id"}} for f in out]
