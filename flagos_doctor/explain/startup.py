"""Child side of ``explain``: the probe's watch, installed in the user's own program.

A ``sitecustomize.py`` that the parent writes in a folder of its own (second on
``PYTHONPATH``, after the folder linking to flagos_doctor: :func:`flagos_doctor.childproc.child_env`)
calls :func:`main` while the interpreter starts, before the program's first line. With
:data:`~flagos_doctor.explain.CONFIG_VAR` set, it installs the probe's tracer for the whole
run, records to a side-channel file of this process's own in the folder named there (never
the program's stdout or stderr), wraps ``sys.excepthook`` to keep an uncaught exception's
traceback, and at exit sends each probe's final state. Then it imports the ``sitecustomize``
it shadows, if there is one, as ``site`` would have done. Without the variable it only chains.
Nothing here may change what the program sees: every failure of ours is swallowed.

The program's Python subprocesses inherit the variable and are watched the same way, each
in its own file (``<pid>.jsonl``): a ``subprocess`` running Python, pytest-xdist's workers,
``multiprocessing``'s spawned children; a fork (``multiprocessing``'s default on Linux)
opens a file of its own in the child, and a ``multiprocessing.Process`` whose target raised
sends that failure (``multiprocessing`` catches it before ``sys.excepthook`` could).

Events are capped (:data:`MAX_EVENTS` per process and kind), the rest counted: a program
with 20,000 read sites made a 30 MB document. A write the file refuses (a full temp
folder) stops the records of this process, counted as ``lost``.

Records (one JSON line each, :class:`flagos_doctor.channel.ChildChannel`): those of the
probe's tracer (``event``, ``saved``, ``phase``, ``notice``, ``driver``), and:

* ``hello``: interpreter, platform, ``pid``, ``ppid``, ``argv`` (``sys.orig_argv``),
  ``forked`` (this process is a fork of a watched one);
* ``dropped``: ``events`` (kind -> count past the cap); ``lost``: ``error``, ``records``;
* ``failure``: ``kind`` (``exception`` | ``test``), ``error``, ``type``, ``traceback``
  (frames, innermost last: ``file``, ``path``, ``line``, ``function``), ``causes`` (the
  exception's cause chain), and for a test ``test`` (its node id) and ``when``;
* ``test``: a test's outcome (``nodeid``, ``when``, ``outcome``);
* ``final``: as the probe's (:func:`flagos_doctor.probe.child.final_state`); ``done``.
"""

from __future__ import annotations

import os
import sys

#: The watch of this process, once installed (the pytest plugin finds it here).
WATCH: "Watch | None" = None
#: Frames kept of a traceback: the innermost ones, where a cause is read.
MAX_FRAMES = 120
#: Events kept per process and kind (read, write, delete); the rest are counted.
MAX_EVENTS = 5000


class Watch:
    """The tracer and its channel in the user's program."""

    def __init__(self, config: dict):
        import json  # noqa: F401  (the channel encodes with it)
        import platform

        from flagos_doctor.probe import tracer as tracing
        from flagos_doctor.probe import watch

        from flagos_doctor import redact

        self.config = config
        # A secret given on the command line (--api-key VALUE) is scrubbed like the environment's.
        self.argv_secrets = redact.secret_arguments(list(getattr(sys, "orig_argv", sys.argv)))
        self.channel = self.open_channel()
        self.kept: dict[str, int] = {}
        self.dropped: dict[str, int] = {}
        self.lost: dict | None = None
        probes = list(dict.fromkeys(watch.DEFAULT_PROBES + config.get("probes", [])))
        env = list(dict.fromkeys(watch.DEFAULT_ENV + config.get("env", [])))
        self.tracer = tracing.Tracer(self.emit, probes, env)
        # sys.path[0] (the script's folder, or the working folder for -m and -c) is put
        # there after sitecustomize runs; files under it are named relative to it.
        first = program_folder()
        if first not in self.tracer.sys_paths:
            self.tracer.sys_paths = sorted([*self.tracer.sys_paths, first], key=len, reverse=True)
        self.tracer.install()
        self.platform = platform.platform()
        self.hello(forked=False)
        self.dirs = stack_dirs(config.get("stack"))
        self.tracer.begin_step("program", self.dirs)
        if "--multiprocessing-fork" in getattr(sys, "orig_argv", []):  # a spawned child: its target's failure
            import multiprocessing.process  # noqa: F401  (spawn_main imports it next anyway)
            watch_multiprocessing()
        os.register_at_fork(after_in_child=self.after_fork)

    def open_channel(self):
        """This process's own side-channel file (``<pid>.jsonl``, another name if a pid came back).

        A file, not a pipe: left behind by a SIGKILL, so it never holds a raw secret (records
        are scrubbed here; the values are not announced: the parent knows its own)."""
        from flagos_doctor.channel import ChildChannel

        for attempt in range(100):
            name = f"{os.getpid()}{f'-{attempt}' if attempt else ''}.jsonl"
            try:
                fd = os.open(os.path.join(self.config["channel"], name),
                             os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o600)
            except FileExistsError:
                continue
            return ChildChannel(None, fd, announce_secrets=False)
        raise OSError("no free side-channel file name")

    def hello(self, forked: bool) -> None:
        # (--api-key VALUE in the argv: scrubbed by emit, as every record is)
        argv = list(getattr(sys, "orig_argv", sys.argv))
        self.tracer.emit({
            "record": "hello", "python": sys.version.split()[0], "executable": sys.executable,
            "platform": self.platform, "pid": os.getpid(), "ppid": os.getppid(),
            "argv": argv, "forked": forked,
            "dict_watchers": self.tracer.dict_watch is not None,
        })

    def emit(self, record: dict) -> None:
        """Send ``record``, unless its kind of event is past :data:`MAX_EVENTS` (counted) or
        the file refused a write before (the records from then on are counted as lost)."""
        from flagos_doctor import redact

        if record.get("record") == "event":
            kind = str(record.get("kind"))
            if self.kept.get(kind, 0) >= self.config.get("max_events", MAX_EVENTS):
                self.dropped[kind] = self.dropped.get(kind, 0) + 1
                return
            self.kept[kind] = self.kept.get(kind, 0) + 1
        if self.lost is not None:
            self.lost["records"] += 1
            return
        try:
            self.channel.emit(redact.scrub(record, self.argv_secrets) if self.argv_secrets else record)
        except OSError as exc:
            self.lost = {"record": "lost", "error": exc.strerror or str(exc), "records": 1}

    def after_fork(self) -> None:
        """In a fork's child: a file of its own, a ``hello`` saying it is a fork, its own counts."""
        try:
            old = self.channel
            self.channel = self.open_channel()
            os.close(old._write_fd)
            self.kept, self.dropped, self.lost = {}, {}, None
            self.tracer._pid = os.getpid()
            self.hello(forked=True)
            watch_multiprocessing()
        except Exception:
            pass

    def failure(self, kind: str, exc: BaseException | None, tb, error: str | None = None, **more) -> None:
        """Send one failure with its traceback (frames of the probe's own code left out); one
        that raised nothing (a strict xfail's pass) is ``error``'s words, without type or frames."""
        from flagos_doctor.probe.child import cause_chain, error_text

        if exc is None:
            self.tracer.emit({"record": "failure", "kind": kind, "error": error, "type": None, "traceback": [],
                              **more})
            return
        tracer = self.tracer
        busy, tracer.busy = tracer.busy, True  # our own looks are not the program's reads
        try:
            record = {"record": "failure", "kind": kind, "error": error_text(exc),
                      "type": f"{type(exc).__module__}.{type(exc).__qualname__}",
                      "traceback": frames(tracer, tb), **more}
            causes = cause_chain(tracer, exc)
            if causes:
                record["causes"] = causes
        finally:
            tracer.busy = busy
        tracer.emit(record)

    def at_exit(self) -> None:
        """Each probe's final state, then ``done``; runs after the program's own exit hooks."""
        from flagos_doctor.probe.child import final_state

        self.tracer.emit(final_state(self.tracer))
        if self.dropped:
            self.tracer.emit({"record": "dropped", "events": self.dropped})
        if self.lost is not None:
            lost, self.lost = self.lost, None
            self.emit(lost)  # (where the write succeeds now: space freed since)
            self.lost = self.lost or lost
        self.tracer.emit({"record": "done"})


def watch_multiprocessing() -> None:
    """Record the failure of a ``multiprocessing.Process`` target (its ``_bootstrap`` catches
    it and prints it; ``sys.excepthook`` never sees it), when ``multiprocessing`` is loaded."""
    process = sys.modules.get("multiprocessing.process")
    if process is None or getattr(process.BaseProcess._bootstrap, "_flagos_doctor", False):
        return
    original = process.BaseProcess._bootstrap

    def _bootstrap(self, *args, **kwargs):
        run = self.run

        def run_watched():
            try:
                return run()
            except BaseException as exc:
                if not isinstance(exc, SystemExit) and WATCH is not None:
                    try:
                        WATCH.failure("exception", exc, exc.__traceback__, process_name=self.name)
                    except Exception:
                        pass
                raise

        self.run = run_watched
        return original(self, *args, **kwargs)

    _bootstrap._flagos_doctor = True
    process.BaseProcess._bootstrap = _bootstrap


def frames(tracer, tb) -> list[dict]:
    """A traceback's frames, innermost last, without importlib's and flagos_doctor's own."""
    import traceback

    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    out = []
    for frame in traceback.extract_tb(tb):
        path = frame.filename
        if path.startswith("<frozen") or os.path.abspath(path).startswith(own):
            continue
        # ``code``: the line's text, where a cause chain finds what the failing line used.
        out.append({"file": tracer.short(path), "path": path, "line": frame.lineno, "function": frame.name,
                    "code": (frame.line or "")[:200]})
    if len(out) > MAX_FRAMES:
        out = out[:10] + out[-(MAX_FRAMES - 10):]
    return out


def without_own_frames(exc: BaseException, tb):
    """``tb`` (and the tracebacks of ``exc``'s chain) without the probe's hook frames, so the
    traceback the program prints is the one it prints unwatched."""
    own = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep

    def strip(tb):
        head = None
        last = None
        while tb is not None:
            nxt = tb.tb_next
            if not os.path.abspath(tb.tb_frame.f_code.co_filename).startswith(own):
                if last is None:
                    head = tb
                else:
                    last.tb_next = tb
                last = tb
            tb = nxt
        if last is not None:
            last.tb_next = None
        return head

    seen = set()
    chained = exc
    while chained is not None and id(chained) not in seen:
        seen.add(id(chained))
        if chained is not exc:
            chained.__traceback__ = strip(chained.__traceback__)
        chained = chained.__cause__ or chained.__context__
    tb = strip(tb)
    exc.__traceback__ = tb
    return tb


def program_folder() -> str:
    """What Python will put first on ``sys.path``: the script's folder, or the working folder."""
    argv = getattr(sys, "argv", None) or [""]
    if argv[0] and argv[0] not in ("-c", "-m") and os.path.exists(argv[0]):
        return os.path.dirname(os.path.realpath(argv[0]))
    return os.getcwd()


def stack_dirs(stack: str | None) -> list[str]:
    """Where the stack's code lives (``--stack``, else the default-stack rule), found without
    importing it: the phases of its writes are named after its functions."""
    from flagos_doctor import stacks
    from flagos_doctor.probe.child import package_dirs

    try:
        modules = stacks.get(stack).probe_imports if stack else stacks.get(stacks.detect()).probe_imports
    except Exception:
        return []
    dirs: list[str] = []
    for module in modules:
        if "." in module:
            continue  # find_spec of a submodule would import its package now
        dirs += [d for d in package_dirs(module) if d not in dirs]
    return dirs


def _install(config_text: str) -> None:
    global WATCH
    import atexit
    import json

    watch = Watch(json.loads(config_text))
    WATCH = watch
    previous = sys.excepthook

    def excepthook(type_, value, tb):
        try:
            watch.failure("exception", value, tb)
            tb = without_own_frames(value, tb)
        except Exception:
            pass
        previous(type_, value, tb)

    sys.excepthook = excepthook

    def at_exit():
        try:
            watch.at_exit()
        except BaseException:
            pass

    atexit.register(at_exit)  # registered first, so it runs last


def _chain(hook_folder: str) -> None:
    """Import the ``sitecustomize`` ours shadows, as ``site`` would (its errors printed, not raised)."""
    import importlib.machinery
    import importlib.util

    ours = sys.modules.get("sitecustomize")
    path = [p for p in sys.path if os.path.abspath(p or ".") != os.path.abspath(hook_folder)]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None:  # (a folder is a namespace package: no loader yet, module_from_spec gives it one)
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        sys.modules["sitecustomize"] = ours
        if sys.flags.verbose:
            sys.excepthook(*sys.exc_info())
        else:
            print(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n{type(exc).__name__}: {exc}",
                  file=sys.stderr)


def main(hook_folder: str) -> None:
    """Called by our ``sitecustomize.py``: install the watch (once per run), then chain."""
    from flagos_doctor.explain import CONFIG_VAR

    # Left in the environment: the program's Python subprocesses are watched too.
    config_text = os.environ.get(CONFIG_VAR)
    if config_text and WATCH is None:
        try:
            _install(config_text)
        except Exception as exc:  # the watch is ours to lose, never the program's run
            try:
                print(f"flagos-doctor explain: the watch could not be installed: {type(exc).__name__}: {exc}",
                      file=sys.stderr)
            except Exception:
                pass
    _chain(hook_folder)
