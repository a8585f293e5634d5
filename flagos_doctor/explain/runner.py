"""Parent side of ``explain``: run the user's command under the watch, build the document.

:func:`run_explain` is the one entry point. The command runs in the foreground, its stdin,
stdout and stderr the terminal's (or whatever the user redirected), under the one launch
policy (:func:`flagos_doctor.childproc.child_env`) plus a folder holding only our
``sitecustomize.py``. Its records arrive in a side-channel file, read once it has ended;
a program that crashes or calls ``os._exit`` still leaves every record sent before.
Never imports torch.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from typing import NamedTuple

from flagos_doctor import childproc, files, redact, stacks
from flagos_doctor.errors import BadInput, excerpt
from flagos_doctor.explain import CONFIG_VAR, SCHEMA, analysis, startup, validate
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


def check_stack(stack: str | None, python: str, argv: list[str]) -> None:
    """Refuse ``--stack`` as probe does (:func:`flagos_doctor.stacks.check`), looking where the
    program will: its script's folder too (``sys.path[0]``: a linked script's real folder)."""
    env = dict(os.environ)
    script = script_of(argv, python)
    if script:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (os.path.dirname(os.path.realpath(script)),
                                                        env.get("PYTHONPATH")) if p)
    stacks.check(stack, python, env)


def script_of(argv: list[str], python: str) -> str | None:
    """The file Python runs as its script, whose folder it puts first on ``sys.path``: the
    first argument of ``--python`` when it is a file (any name: ``python tool``, not only
    ``.py``), or a ``.py`` that runs itself; None for ``-c``, ``-m`` or another program."""
    if argv[0] == python and len(argv) > 1 and os.path.isfile(argv[1]):
        return argv[1]
    if argv[0].endswith(".py") and os.path.isfile(argv[0]):
        return argv[0]
    return None


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
    # The cap on events (startup.MAX_EVENTS; a smaller one where a test asks for it).
    max_events = int(os.environ.get("FLAGOS_DOCTOR_EXPLAIN_MAX_EVENTS") or startup.MAX_EVENTS)
    return {"channel": channel_path, "stack": options.stack, "probes": list(dict.fromkeys(probes)), "env": env,
            "max_events": max_events}


def program_env(config: dict, hook_folder: str, pytest: bool) -> dict[str, str]:
    env = childproc.child_env(startup=hook_folder)
    env[CONFIG_VAR] = json.dumps(config)
    if pytest:
        plugins = [p for p in env.get("PYTEST_PLUGINS", "").split(",") if p.strip()]
        env["PYTEST_PLUGINS"] = ",".join([*plugins, PLUGIN] if PLUGIN not in plugins else plugins)
    return env


#: Signals to explain that are the program's: passed on to it and its subprocesses.
FORWARDED = (signal.SIGINT, signal.SIGTERM)
#: ``si_code`` of a signal the kernel sent (Ctrl-C at the terminal: the program got it too).
SI_KERNEL = 0x80


class Ran(NamedTuple):
    """How the program ran: its return code, seconds, pid, and explain's interruption (or None)."""

    returncode: int
    seconds: float
    pid: int
    interrupted: dict | None


def run_program(argv: list[str], env: dict[str, str]) -> Ran:
    """Run ``argv`` in the foreground; return how it ran (:class:`Ran`).

    SIGINT and SIGTERM sent to explain (``kill``) are passed on to the program and its
    subprocesses, and explain waits for it; Ctrl-C at the terminal already reached the
    program (same process group) and is not sent twice. Either way the interruption is
    returned (``{"signal", "from", "forwarded_to"}``) so the document says so."""
    started = time.monotonic()
    waited = (*FORWARDED, signal.SIGCHLD)
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, waited)
    interrupted = None
    try:
        try:
            proc = subprocess.Popen(argv, env=env, preexec_fn=lambda: signal.pthread_sigmask(signal.SIG_SETMASK, mask))
        except OSError as exc:
            raise BadInput(f"cannot start {argv[0]}: {exc.strerror or exc}", "CMD")
        while (returncode := proc.poll()) is None:
            info = signal.sigtimedwait(waited, 1.0)
            if info is None or info.si_signo == signal.SIGCHLD:
                continue
            from_terminal = info.si_code == SI_KERNEL
            forwarded = 0 if from_terminal else forward(proc.pid, info.si_signo)
            interrupted = interrupted or {"signal": signal.Signals(info.si_signo).name,
                                          "from": "the terminal" if from_terminal else f"pid {info.si_pid}",
                                          "forwarded_to": forwarded}
    finally:
        while signal.sigtimedwait(waited, 0) is not None:
            pass  # what arrived as the program ended was the program's too
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    return Ran(returncode, time.monotonic() - started, proc.pid, interrupted)


def forward(pid: int, signo: int) -> int:
    """Send ``signo`` to ``pid`` and every process under it; return how many got it."""
    sent = 0
    for target in process_tree(pid):
        try:
            os.kill(target, signo)
            sent += 1
        except OSError:
            pass  # it ended meanwhile
    return sent


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (from ``/proc``; where there is none, ``pid`` alone)."""
    parents: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return [pid]
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
        except OSError:
            continue
        ppid = int(stat[stat.rindex(b")") + 2:].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    tree, frontier = [pid], [pid]
    while frontier:
        children = [c for p in frontier for c in parents.get(p, [])]
        tree += children
        frontier = children
    return tree


#: The most of one process's side-channel file read: the watch keeps 5,000 events of each kind
#: (a few MB); a bigger file was written to by something else, and the rest is not read.
MAX_RECORDS_BYTES = 64 << 20
#: The most watched processes' files read (a program that planted more: the rest not read).
MAX_PROCESS_FILES = 2000


def read_records(data: bytes, name: str) -> list[dict]:
    """One side-channel file's records; a line torn by a dying program is skipped; a record
    of another shape is BadInput naming its line (:func:`.validate.record`)."""
    records = []
    name = name if name.isprintable() and len(name) < 100 else excerpt(name)  # a name the program planted
    for number, line in enumerate(data.split(b"\n"), start=1):
        try:
            text = line.decode("utf-8")  # torn inside a character: skipped, as a torn line is
            value = json.loads(text)
        except (ValueError, RecursionError):
            continue
        where = f"explain's side-channel file {name}, line {number}"
        files.refuse_lone_surrogates(value, where, text)  # the text: a line without such an escape is not walked
        records.append(validate.record(value, where))
    return records


def read_processes(folder: str) -> tuple[list[list[dict]], list[str]]:
    """The records of each watched process (one file each, in the order the files sort), and
    a notice for what was not read. The program can find the folder (its path is in the
    environment) and plant entries there: one that is no regular file (a FIFO, a link to
    ``/dev/zero``, a folder) is never read as records, a file is read up to
    :data:`MAX_RECORDS_BYTES`, and the folder itself is not followed if it became a link."""
    try:
        folder_fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as exc:
        return [], [f"explain's side-channel folder could not be read ({exc.strerror or exc}): "
                    "something removed or replaced it, and the watch's records are lost"]
    processes, notices = [], []
    try:
        names = sorted(name for name in os.listdir(folder_fd) if name.endswith(".jsonl"))
        for name in names[:MAX_PROCESS_FILES]:
            data, why = read_record_file(folder_fd, name)
            if why:
                notices.append(f"explain's side-channel folder held {excerpt(name)}, {why}")
            if data is not None:
                processes.append(read_records(data, name))
        if len(names) > MAX_PROCESS_FILES:
            notices.append(f"explain's side-channel folder held {len(names):,} files: the first "
                           f"{MAX_PROCESS_FILES:,} were read")
    finally:
        os.close(folder_fd)
    return processes, notices


def read_record_file(folder_fd: int, name: str) -> tuple[bytes | None, str | None]:
    """The bytes of one entry of the side-channel folder, or why they were not (all) read."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except OSError as exc:
        why = "a symbolic link" if exc.errno == errno.ELOOP else f"unreadable ({exc.strerror or exc})"
        return None, f"{why}: not written by the watch, and not read"
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        return None, f"{files.describe_kind(mode)}: not written by the watch, and not read"
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(MAX_RECORDS_BYTES + 1)
    if len(data) > MAX_RECORDS_BYTES:
        return data[:MAX_RECORDS_BYTES], (f"more than the watch writes ({MAX_RECORDS_BYTES >> 20} MiB): "
                                          "what came after is not read")
    return data, None


def temp_full(folder: str) -> bool:
    """Whether the file system of ``folder`` has no room left for another record."""
    try:
        stat = os.statvfs(folder)
    except OSError:
        return False
    return stat.f_bavail * stat.f_frsize < 64 * 1024


def run_explain(options: ExplainOptions) -> dict:
    """Run the command under the watch; return the document (schema ``flagos-doctor/explain/1``).

    Raises BadInput for unusable options or a command that cannot be started."""
    argv = resolve_command(options.command, options.python)
    pytest = is_pytest(argv)
    check_stack(options.stack, options.python, argv)
    with tempfile.TemporaryDirectory(prefix="flagos-doctor-explain-") as scratch:
        try:
            hook_folder = os.path.join(scratch, "hook")
            os.mkdir(hook_folder)
            with open(os.path.join(hook_folder, "sitecustomize.py"), "w") as handle:
                handle.write(SITECUSTOMIZE)
            channel = os.path.join(scratch, "records")
            os.mkdir(channel, 0o700)
        except OSError as exc:
            raise BadInput(f"cannot write explain's scratch folder: {exc.strerror or exc}", scratch)
        config = child_config(options, channel)
        ran = run_program(argv, program_env(config, hook_folder, pytest))
        processes, unread = read_processes(channel)
        full = temp_full(scratch)
    document = build_document(processes, ran, options, config, argv, pytest, full)
    document["notices"] += unread
    if full:
        document["notices"].insert(0, f"the temp folder {os.path.dirname(scratch)} is full: the watch's records "
                                      "stopped when it filled, and what came after is not in this document")
    if ran.interrupted:
        document["program"]["interrupted"] = ran.interrupted
        document["notices"].insert(0, interrupted_notice(ran.interrupted))
    # Watched variables are recorded with their values, and a command line may hold a
    # secret (--api-key VALUE): never let one through.
    secrets = sorted({*redact.secret_values(os.environ), *redact.secret_arguments(argv)}, key=len, reverse=True)
    return redact.scrub(document, secrets)


def interrupted_notice(interrupted: dict) -> str:
    """``explain was interrupted by SIGTERM (from pid 412): passed on to the program and 2 ...``."""
    if interrupted["from"] == "the terminal":
        passed = "the program got it from the terminal too"
    else:
        others = interrupted["forwarded_to"] - 1
        passed = "passed on to the program" + (f" and {others} of its subprocesses" if others > 0 else "")
    return (f"explain was interrupted by {interrupted['signal']} (from {interrupted['from']}): {passed}; "
            "below is what the program did until it ended")


def hello_of(records: list[dict]) -> dict | None:
    return next((r for r in records if r.get("record") == "hello"), None)


def role(records: list[dict], program_pid: int) -> str:
    """What a watched process was to the program: itself, a pytest-xdist worker, a
    ``multiprocessing`` child, a fork, or a subprocess."""
    hello = hello_of(records) or {}
    if hello.get("pid") == program_pid and not hello.get("forked"):
        return "program"
    worker = next((r["worker"] for r in records if isinstance(r.get("worker"), str)), None)
    if worker:
        return f"pytest-xdist worker {worker}"
    if "--multiprocessing-fork" in (hello.get("argv") or []) or any(r.get("process_name") for r in records):
        return "multiprocessing child"
    return "fork" if hello.get("forked") else "subprocess"


def build_document(processes: list[list[dict]], ran: "Ran", options: ExplainOptions, config: dict,
                   argv: list[str], pytest: bool, full: bool) -> dict:
    """The document from each process's records and how the program ended: the program's
    own events at the top, each other watched process under ``processes``; every failure
    (each naming its process) with its causes, found in its own process's events."""
    main = next((r for r in processes if role(r, ran.pid) == "program"), [])
    probe_like = process_view(main, options)
    program = program_summary(main, ran, options, argv, pytest)
    document = {
        "schema": SCHEMA,
        "program": program,
        "python": probe_like["python"] if program["watched"] else {"version": None, "executable": argv[0],
                                                                    "dict_watchers": None},
        "platform": probe_like["platform"],
        "stack": options.stack or imported_stack([main] + [r for r in processes if r is not main]),
        "notices": program_notices(probe_like, main, program, full),
        "phases": probe_like["phases"],
        "events": probe_like["events"],
        "probes": probe_like["probes"],
        "saved_originals": probe_like["saved_originals"],
        "facts": probe_like["facts"],
        "tests": tests_summary([r for records in processes for r in records]) if pytest else None,
        "processes": [],
        "failures": [],
        "causes": [],
        # The probe's own findings of the same events (a redirect read stale, a Triton driver
        # chosen wrong), judged as the probe would; the causes tie them to failures.
        "findings": findings.judge({**probe_like, "outcome": "ok", "outcomes": []}),
        "doctor": {"argv_python": sys.executable, "probes": config["probes"], "env": config["env"],
                   "max_events": config["max_events"]},
    }
    for records in ([main] if main else []) + [r for r in processes if r is not main]:
        add_process(document, records, ran.pid, options, probe_like if records is main else None)
    if program["returncode"] != 0 and not document["failures"]:
        ended = program["ended"].replace("killed by", "was killed by")
        exit_failure = {"id": 1, "kind": "exit", "error": f"the program {ended}", "type": None, "traceback": [],
                        "raised_from": [], "process": ran.pid, "causes": []}
        document["failures"].append(exit_failure)
    return document


def imported_stack(processes: list[list[dict]]) -> str | None:
    """Without ``--stack``: the built-in stack the program imported, known by its code writing a
    watched probe (the demo and torch_fl register their device at import), the program's own
    process first; None when no stack's code wrote one (``report --explain`` then detects)."""
    for records in processes:
        writers = {(r.get("where") or {}).get("file") or "" for r in records
                   if r.get("record") == "event" and r.get("kind") in ("write", "delete")}
        for name, cls in stacks.BUILT_IN.items():
            for module in cls.probe_imports:
                base = module.replace(".", "/")
                if any(file.startswith(base + "/") or file == base + ".py" for file in writers):
                    return name
    return None


def process_view(records: list[dict], options: ExplainOptions) -> dict:
    """One process's records as the probe's document shapes them (events, probes, facts)."""
    return probe_runner.build_document(records, {"stack": options.stack, "imports": []},
                                       ProbeOptions(python=options.python))


def program_summary(records: list[dict], ran: "Ran", options: ExplainOptions, argv: list[str], pytest: bool) -> dict:
    end = childproc.ChildEnd(ran.returncode)
    return {
        "command": list(options.command), "argv": argv, "cwd": os.getcwd(), "pytest": pytest, "pid": ran.pid,
        "returncode": ran.returncode, "signal": end.signal, "ended": end.describe(), "seconds": round(ran.seconds, 2),
        "watched": hello_of(records) is not None, "finished": any(r.get("record") == "done" for r in records),
    }


def program_notices(probe_like: dict, records: list[dict], program: dict, full: bool) -> list[str]:
    notices = list(probe_like["notices"])
    if not program["watched"]:
        notices.append("the watch never started in the program: it is not a Python program of --python, "
                       "or its interpreter ignores PYTHONPATH and sitecustomize (-I, -E, -S)")
    elif not program["finished"] and not full and not any(r.get("record") == "lost" for r in records):
        notices.append("the program ended without running its exit hooks (os._exit, or a signal): "
                       "events up to that moment are kept; the probes' final state is unknown")
    return notices


def add_process(document: dict, records: list[dict], program_pid: int, options: ExplainOptions,
                view: dict | None) -> None:
    """One watched process into ``document``: its entry (a subprocess's events inside it),
    its failures numbered after those already there, their causes from its own events; its
    dropped and lost records said in a notice."""
    hello = hello_of(records) or {}
    view = view or process_view(records, options)
    entry = {"pid": hello.get("pid"), "ppid": hello.get("ppid"), "role": role(records, program_pid),
             "max_events": document["doctor"]["max_events"],
             "argv": hello.get("argv"), "finished": any(r.get("record") == "done" for r in records),
             "dropped": {}, "lost": None}
    for record in records:
        if record.get("record") == "dropped":  # its events a dict: validate.record
            entry["dropped"] = record["events"]
        elif record.get("record") == "lost":
            entry["lost"] = {"error": record.get("error"), "records": record.get("records")}
    process_findings = document["findings"]
    if entry["role"] != "program":  # its events and findings kept with it (their seq are its own)
        process_findings = findings.judge({**view, "outcome": "ok", "outcomes": []})
        entry["events"], entry["findings"] = view["events"], process_findings
    document["processes"].append(entry)
    say_dropped(document, entry)
    own = failures(records, len(document["failures"]), entry)
    found = analysis.causes({**view, "schema": SCHEMA, "program": document["program"], "failures": own,
                             "findings": process_findings, "stack": options.stack})
    for cause in found:
        cause["id"] += len(document["causes"])
        cause["process"] = entry["pid"]
    for failure in own:
        failure["causes"] = [c["id"] for c in found if c["failure"] == failure["id"]]
    document["failures"] += own
    document["causes"] += found


def say_dropped(document: dict, entry: dict) -> None:
    who = "the program" if entry["role"] == "program" else f"{entry['role']} (pid {entry['pid']})"
    if entry["dropped"]:
        counts = ", ".join(f"{n:,} {kind}s" for kind, n in sorted(entry["dropped"].items()))
        document["notices"].append(f"{who} made more events than the watch keeps ({entry['max_events']:,} of each "
                                   f"kind): {counts} were counted, not recorded; a cause among them is not seen")
    if entry["lost"]:
        document["notices"].append(f"{who}: the watch could not write its records ({entry['lost']['error']}): "
                                   f"{entry['lost']['records']:,} were lost")


def tests_summary(records: list[dict]) -> dict:
    """Each test's outcome (its worst phase wins): counts and the node ids by outcome."""
    worst: dict[str, str] = {}
    rank = {"passed": 0, "xpassed": 0, "skipped": 1, "xfailed": 1, "failed": 2}  # another outcome: as failed
    for record in records:
        if record.get("record") != "test":
            continue
        nodeid, outcome = record["nodeid"], record["outcome"]
        if nodeid not in worst or rank.get(outcome, 2) >= rank.get(worst[nodeid], 2):
            worst[nodeid] = outcome
    counts: dict[str, int] = {}
    for outcome in worst.values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return {"counts": counts, "outcomes": worst}


def failures(records: list[dict], numbered: int, process: dict) -> list[dict]:
    """Each failure one process recorded (an uncaught exception, a failed test), numbered
    after the ``numbered`` already found, each naming its process."""
    out = []
    for record in records:
        if record.get("record") != "failure":
            continue
        failure = {k: v for k, v in record.items() if k not in ("record", "causes")}
        failure["raised_from"] = record.get("causes", [])
        failure["process"] = process["pid"]
        if process["role"] != "program":
            failure["role"] = process["role"]
        out.append({"id": numbered + len(out) + 1, **failure})
    return out
