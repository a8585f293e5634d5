"""Worker processes of a survey, on the parent side (standard library only, no torch).

Each :class:`WorkerProcess` is a fresh interpreter that imports the stack once and runs many
overloads: spawned, or forked from a server that imported only what the stack allows before
its setup (:mod:`.forkserver`), never from a process with a device runtime. A worker that
dies on a signal, hangs past the per-case timeout or reports a poisoned device context is
replaced; the case in flight is recorded as CRASH, TIMEOUT or ERROR (poison) and the cases
after it run in a fresh worker. A case is recorded only when its worker said it started it.

:class:`Pool` runs slots (``--workers``) in threads, one worker each, pulling tasks (an
overload and some of its profiles) from a :class:`~flagos_doctor.survey.schedule.Schedule` and reporting :class:`Event` objects to the
caller's thread, which alone writes the journal and the terminal.
"""

from __future__ import annotations

import fcntl
import os
import queue
import statistics
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field

from flagos_doctor import redact
from flagos_doctor.childproc import Child, ChildEnded, ChildTimeout, tail_text
from flagos_doctor import stacks
from flagos_doctor.stacks import evidence
from flagos_doctor.results import model
from flagos_doctor.survey import forkserver, scratch
from flagos_doctor.survey.case_clock import CaseClock, compile_cap
from flagos_doctor.survey.schedule import Schedule

WORKER_MODULE = "flagos_doctor.survey.child.worker"
#: A replacement worker that cannot start this many times in a row ends the survey.
MAX_START_FAILURES = 3
#: An overload whose worker dies this many times before any of its cases started gets one
#: overload-level CRASH record instead of another attempt.
MAX_IDLE_DEATHS = 2


class StackFailed(Exception):
    """A worker could not set the stack up (``missing``: the stack module does not exist)."""

    def __init__(self, message: str, missing: bool = False, bad_input: str | None = None, where: str = "--device"):
        super().__init__(message)
        self.missing = missing
        self.where = where
        self.bad_input = bad_input  # the user's option at fault (--device), its message alone


@dataclass
class WorkerConfig:
    python: str
    stack: str
    device: str | None
    spec: str | None
    conf: str | None
    backend: str
    timeout: float
    keep_env: bool = False
    devices: list[str] = field(default_factory=list)
    startup_timeout: float = 600.0
    scratch: str = ""  # folder for the capture files
    baseline: bool = False  # workers set up the stack's native path (survey/confirm.py)
    baseline_overloads: list[str] = field(default_factory=list)
    native_route: str | None = None
    shared_autotune: bool = True
    full_autotune: bool = False  # Triton's own timing budget per configuration (child/autotune_timing.py)
    compile_cap: float | None = None  # seconds of compiling a case may wait on; None: case_clock.compile_cap(timeout)
    nice: int = 0  # the workers' niceness (started while the main phase runs: survey/confirm.py)
    purpose: str = "main"  # what its workers are started for, in the worker log
    log: "WorkerLog | None" = field(default=None, compare=False, repr=False)
    #: the survey's fork servers (survey/forkserver.py), shared by every copy; None: spawn each
    forks: "forkserver.ForkServers | None" = field(default=None, compare=False, repr=False)
    #: the stack itself, resolved from ``stack`` once (a copy for another stack resolves its own)
    resolved: "stacks.Stack | None" = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.resolved is None or self.resolved.name != self.stack:
            self.resolved = stacks.get(self.stack)

    def autotune_timing(self) -> dict:
        """How the workers' autotuners time each configuration, and who chose it."""
        if self.full_autotune:
            return {"mode": "full", "set_by": "--full-autotune"}
        return {"mode": "short", "set_by": "default"}

    def autotune_setting(self) -> tuple[str, str]:
        """The workers' TRITON_CACHE_AUTOTUNING and who chose it (default, option, environment).

        Triton's ``triton.autotune`` keeps its choice in the process: without this each
        worker benchmarks the same configurations again on the device (on an H200, ``addmv``
        spent about 5 s a case on it with warm caches). With it, the first worker's timings
        go into Triton's cache folder and the others read them. What a kernel computes is
        the same; only where its configurations are timed changes. FlagGems' own tuner
        (LibTuner) already keeps its results in a database that all workers share.
        """
        if not self.shared_autotune:
            return "0", "--no-shared-autotune"
        if "TRITON_CACHE_AUTOTUNING" in os.environ:
            return os.environ["TRITON_CACHE_AUTOTUNING"], "environment"
        return "1", "default"

    def env(self, slot: int) -> dict:
        env = dict(os.environ)
        stack = self.resolved
        stack.prepare_env(env, self.conf, self.keep_env)
        if self.baseline:
            stack.prepare_baseline_env(env, self.baseline_overloads, self.native_route)
        if self.devices:
            env[stack.visible_devices_var] = self.devices[slot % len(self.devices)]
        env["TRITON_CACHE_AUTOTUNING"] = self.autotune_setting()[0]
        if self.nice:
            env["FLAGOS_DOCTOR_NICE"] = str(self.nice)  # child/worker.py NICE_VAR
        if self.scratch:
            env[scratch.MARK_VAR] = self.scratch  # inherited by all it starts: found again after a kill -9
        return env


class WorkerLog:
    """Every worker process a survey starts: what for, when, what it ran, how long it sat idle.

    One log a survey, carried by its :class:`WorkerConfig` (and every copy of it), so each
    worker joins it as it starts, whoever starts it. Seconds count from the log's creation
    (the survey command's start)."""

    def __init__(self):
        self.origin = time.monotonic()
        self._lock = threading.Lock()
        self._workers: list[WorkerProcess] = []

    def add(self, worker: "WorkerProcess") -> None:
        with self._lock:
            self._workers.append(worker)

    def seconds(self, when: float | None = None) -> float:
        """``when`` (time.monotonic(); None: now) in seconds since the log's origin."""
        return round((time.monotonic() if when is None else when) - self.origin, 2)

    def start_seconds(self) -> float | None:
        """How long a worker of this survey takes to start (spawn to ready, the median of
        those ready so far); None before one is."""
        with self._lock:
            times = [worker.start_seconds for worker in self._workers if worker.ready_at is not None]
        return statistics.median(times) if times else None

    def records(self) -> list[dict]:
        """One record a worker, in the order they started (the run's ``worker_log``)."""
        with self._lock:
            workers = list(self._workers)
        return [worker.log_record(self) for worker in workers]


@dataclass
class Event:
    kind: str  # ready | profiles | start | case | done | replaced | fatal
    overload: str | None = None
    data: dict = field(default_factory=dict)


class WorkerProcess:
    """One worker process: start it, hand it overloads, learn how it ended."""

    _counter = 0
    _lock = threading.Lock()

    def __init__(self, config: WorkerConfig, slot: int, list_only: bool = False, spawned=None):
        with WorkerProcess._lock:
            WorkerProcess._counter += 1
            number = WorkerProcess._counter
        self.config = config
        self.slot = slot
        # What the stack prints (fds 1 and 2 of the worker), in a file without a name: it may
        # hold raw secrets, and a survey killed with SIGKILL leaves nothing of it behind.
        self.capture = None if list_only else unnamed_capture(config.scratch)
        #: Names this worker in its case records (``worker``, with ``worker_order``, the
        #: case's place among those it started): a sticky device error is traced through
        #: the cases a worker ran before it (:mod:`.replay`).
        self.id = f"{os.getpid():x}-{number}-{int(time.time()) % 100000:05d}"
        self.cases_started = 0
        clock = self.born = time.monotonic()
        self.purpose = config.purpose
        self.ready_at: float | None = None
        self.ended_at: float | None = None
        self.busy = 0.0  # seconds spent on requests (overloads, the listing)
        self.first_case_at: float | None = None
        self.last_case_at: float | None = None
        if config.log is not None:
            config.log.add(self)
        env = config.env(slot)
        # Every text from the stack (exception messages, stderr tails, paths) is scrubbed
        # of the secrets of the environment it ran in, before anything keeps it.
        self._secrets = redact.secret_values(env)
        try:
            self.child = Child(config.python, WORKER_MODULE, env=env, pass_fds=(self.capture,) if self.capture else (),
                               forks=config.forks)
        except BaseException:
            if self.capture is not None:
                os.close(self.capture)
            raise
        if spawned is not None:
            spawned(self)  # ``spawned(worker)``: its process exists, before the stack's import
        self.start_seconds: float | None = None
        self.ready: dict = self._handshake(list_only)
        self.start_seconds = time.monotonic() - clock  # spawn to ready: mostly the stack's import
        self.ready_at = clock + self.start_seconds

    def _handshake(self, list_only: bool) -> dict:
        """Send the worker its setup and wait for its ready record; a worker that does not
        get there is closed and the survey told why (:class:`StackFailed`)."""
        config = self.config
        try:
            self.child.send(
                {
                    "op": "init",
                    "stack": config.stack,
                    "device": config.device,
                    "spec": config.spec,
                    "backend": config.backend,
                    "capture_fd": self.capture,
                    "list_only": list_only,
                    "baseline": config.baseline,
                    "autotune_timing": config.autotune_timing()["mode"],
                }
            )
            record = self.child.recv(config.startup_timeout)
        except ChildTimeout:
            self.child.terminate_after_timeout()
            self.close()
            raise StackFailed(f"stack {config.stack!r} did not start within {config.startup_timeout:.0f}s")
        except ChildEnded as exc:
            tail = self.scrub(self.child.stderr_tail(12))
            self.close()
            raise StackFailed(f"stack {config.stack!r} worker {exc.end.describe()} while starting: {tail[-800:]}")
        record = self.scrub(record)
        if record.get("record") != "ready":
            self.close()
            raise StackFailed(f"stack {config.stack!r} failed to start: {record.get('error')}", bool(record.get("missing")),
                              str(record.get("error", "")).split(": ", 1)[-1] if record.get("bad_input") else None,
                              record.get("where") or "--device")
        return record

    def log_record(self, log: WorkerLog) -> dict:
        """This worker in the survey's worker log (:class:`WorkerLog`): ``idle_s`` is the
        time it was up and held no request."""
        end = self.ended_at if self.ended_at is not None else time.monotonic()
        record = {"id": self.id, "for": self.purpose, "started_s": log.seconds(self.born),
                  "ready_s": None if self.ready_at is None else log.seconds(self.ready_at),
                  "ended_s": log.seconds(end), "cases": self.cases_started, "busy_s": round(self.busy, 2),
                  "idle_s": 0.0 if self.ready_at is None else round(max(0.0, end - self.ready_at - self.busy), 2)}
        if self.first_case_at is not None:
            record.update(first_case_s=log.seconds(self.first_case_at), last_case_s=log.seconds(self.last_case_at))
        return record

    # -- the stack's own list ------------------------------------------------------------
    def registered(self) -> list[str]:
        began = time.monotonic()
        self.child.send({"op": "list"})
        try:
            record = self.scrub(self.child.recv(self.config.startup_timeout))
        finally:
            self.busy += time.monotonic() - began
        if record.get("record") != "registered":
            raise StackFailed(f"stack {self.config.stack!r} cannot list its overloads: {record.get('error')}")
        return record["overloads"]

    # -- one overload --------------------------------------------------------------------
    def attempt(self, name: str, profiles: list[str] | None, report) -> str:
        """Run ``name`` (only ``profiles`` when given); ``report(Event)`` for each record.

        Returns ``"done"``, ``"ended"`` (the worker is gone after a case it started: its
        CRASH / TIMEOUT / poisoned ERROR was reported) or ``"idle"`` (the worker died or hung
        before starting any case of this request: nothing was recorded).
        """
        began = time.monotonic()
        try:
            return self._attempt(name, profiles, self._scrubbing(report))
        finally:  # a worker the request ended was busy until it was gone
            self.busy += (self.ended_at or time.monotonic()) - began

    def _attempt(self, name: str, profiles: list[str] | None, report) -> str:
        in_flight = None
        self._offset = 0
        cap = self.config.compile_cap if self.config.compile_cap is not None else compile_cap(self.config.timeout)
        self._clock = CaseClock(self.config.timeout, cap)
        try:
            self.child.send({"op": "overload", "name": name, "profiles": profiles})
            while True:
                # Between cases the limit is --timeout from the last record; during a case,
                # its clock's (compiling and autotuning not counted: case_clock.py).
                record = self.child.recv(self._clock.remaining() if in_flight is not None else self.config.timeout)
                kind = record.get("record")
                if kind == "start":
                    in_flight = record["profile"]
                    self._offset = int(record.get("offset") or 0)
                    self._clock = CaseClock(self.config.timeout, cap)
                    self.cases_started += 1
                    self.last_case_at = time.monotonic()
                    if self.first_case_at is None:
                        self.first_case_at = self.last_case_at
                    report(Event("start", name, {"profile": in_flight}))
                elif kind == "wait":
                    if in_flight is not None:
                        self._clock.wait(str(record.get("what")), bool(record.get("begin")))
                elif kind == "case":
                    in_flight = None
                    case = {k: v for k, v in record.items() if k not in ("record", "overload")}
                    case.update(self._ran_in())
                    report(Event("case", name, case))
                    if case.get("poison"):
                        self.close()
                        return "ended"
                elif kind == "profiles":
                    report(Event("profiles", name, {"profiles": record["profiles"]}))
                elif kind == "no_schema":
                    report(Event("case", name, {"profile": "-", "status": model.NO_SCHEMA, "route": model.ROUTE_NONE, "detail": record.get("detail", "")}))
                elif kind == "done":
                    return "done"
        except ChildTimeout:
            self.child.terminate_after_timeout()
            if in_flight is None:
                self.close()
                return "idle"
            case = self._ended_case(name, in_flight, model.TIMEOUT, self._clock.timeout_detail())
            case["spent"] = self._clock.spent()
            report(Event("case", name, case))
            self.close()
            return "ended"
        except ChildEnded as exc:
            if in_flight is None:
                self.close()
                return "idle"
            report(Event("case", name, self._ended_case(name, in_flight, model.CRASH, f"worker {exc.end.describe()}", exc.end.signal)))
            self.close()
            return "ended"

    def renice(self, niceness: int) -> None:
        """Give every thread of the worker ``niceness`` (Linux's is a thread's): a worker lent
        to a confirmation lane yields the cores to the main phase's last cases, as the lane's
        own workers do (best effort: a thread may end meanwhile)."""
        pid = self.child.proc.pid if self.child is not None else None
        if pid is None:
            return
        try:
            threads = [int(tid) for tid in os.listdir(f"/proc/{pid}/task")]
        except OSError:
            threads = [pid]
        for tid in threads:
            try:
                os.setpriority(os.PRIO_PROCESS, tid, max(niceness, os.getpriority(os.PRIO_PROCESS, tid)))
            except OSError:
                pass

    def scrub(self, obj):
        """``obj`` without the secrets of the worker's environment, those it started with and
        those its channel announced since (:mod:`flagos_doctor.redact`)."""
        return redact.scrub(obj, sorted({*self._secrets, *redact.secret_values({}, learned=True)}, key=len, reverse=True))

    def _scrubbing(self, report):
        return lambda event: report(Event(event.kind, event.overload, self.scrub(event.data)))

    def _ended_case(self, name: str, profile: str, status: str, detail: str, signal: str | None = None) -> dict:
        """The record of a case its worker did not survive: what it printed since it started
        gives the route (dispatch / fallback lines) and the stderr tail."""
        text = self.captured_since(self._offset)
        route = model.ROUTE_UNKNOWN
        if self.config.resolved.log_evidence:
            route, _ = evidence.route_of(name, *evidence.counts_from_log(text, self.config.backend))
        rest = evidence.strip_evidence(text).strip()
        case = {"profile": profile, "status": status, "route": route, "detail": detail,
                "seconds": round(time.monotonic() - self._clock.started, 4),  # till the crash or the timeout
                **self._ran_in()}
        if signal:
            case["signal"] = signal
        if rest:
            case["stderr_tail"] = tail_text(rest.encode(), 20, 1500)
        return case

    def _ran_in(self) -> dict:
        """Which worker ran the case in flight, and its place among that worker's cases."""
        return {"worker": self.id, "worker_order": self.cases_started}

    def captured_since(self, offset: int) -> str:
        try:
            size = os.fstat(self.capture).st_size
            start = max(offset, size - 1_000_000)
            return os.pread(self.capture, max(size - start, 0), start).decode("utf-8", "replace")
        except (OSError, TypeError):
            return self.child.stderr_tail(20)

    def close(self) -> None:
        if self.child is not None:
            self.child.__exit__(None, None, None)
            self.child = None
            self.ended_at = time.monotonic()
        if self.capture is not None:
            os.close(self.capture)
            self.capture = None


def _task_key(task: tuple) -> tuple:
    name, profiles = task
    return name, None if profiles is None else tuple(profiles)


def worth_a_start(waiting: int, free: int, started: int, work: float | None, start_cost: float | None) -> bool:
    """Whether a streaming pool starts one more worker for its ``waiting`` tasks.

    Never for tasks its ``free`` slots (idle, or their worker still starting) will take.
    Otherwise yes while the expected ``work`` of the waiting tasks (seconds) or a worker's
    start (``start_cost``, seconds) is unknown; when both are known, only if that work,
    shared among the ``started`` slots, would keep each of them busy longer than one more
    worker takes to start: a worker that would be ready after the others had run out of
    tasks costs a stack import of the cores the survey shares and runs nothing. On the H200
    a torch_fl warm run's three confirmation lanes started 16 workers for 393 repeats of
    about 0.05 s each, where one worker ran 127 of them in 4.2 s and eight ran one each,
    while their imports held the cores (ready 12 s after they started, against 7 s).
    """
    if waiting <= free:
        return False
    if started == 0 or work is None or start_cost is None:
        return True
    return work / started > start_cost


def unnamed_capture(folder: str) -> int:
    """A descriptor of an empty file in ``folder`` whose name is already gone, appended to."""
    fd, path = tempfile.mkstemp(prefix="capture-", dir=folder or None)
    os.unlink(path)
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_APPEND)
    return fd


class Pool:
    """Slots (``--workers``) that run tasks in worker processes, one task at a time.

    A task is an overload and the profiles to run (None: all of them). Each task ends with
    Event("end") (also one skipped because its overload already got an overload-level
    record); the caller decides when an overload is finished.
    """

    def __init__(self, config: WorkerConfig, workers: int = 1, per_overload: bool = False):
        self.config = config
        self.workers = max(1, workers)
        self.per_overload = per_overload
        self.events: queue.Queue = queue.Queue()
        self.report = self.events.put  # every event, from the slots' threads (stream: a callback)
        self._slots_started = 0  # stream: slots started so far, and those holding a task
        self._busy = 0
        #: slot threads started and not ended, their worker ready, starting or lost: counted
        #: from the thread's start, so a slot still starting its first worker is one
        self._running = 0
        self._tasks = Schedule()  # an overload's other cases wait for its first, a family's for its sibling (schedule.py)
        self._limit = self.workers  # slots at or above it take no task (lower_limit)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._live: dict[int, WorkerProcess] = {}
        self._live_lock = threading.Lock()
        self._start_seconds: list[float] = []
        self._prestarted: dict[int, threading.Thread] = {}
        self._given_up: set[str] = set()  # overloads with an overload-level record ("-"): skip their other tasks
        self._tasks_ready = threading.Event()
        self._all_done = False  # all_tasks_ended
        self._streamed = False  # stream: tasks come as they are found, each slot started for one
        self._waiting_work: dict[tuple, float | None] = {}  # a task not yet taken -> its expected seconds
        #: ``spare(worker)``: another pool's use for a worker this pool has no task left for
        #: (:meth:`lend`), a callable serving it there, or None (survey/confirm.py)
        self.spare = None
        self._lent_threads: set = set()  # slots whose worker serves another pool: not joined by close
        self._lent_out = 0  # of them, those still serving: the scratch folder stays while any does
        self._closed = False
        self._borrowed = 0  # workers lent to this pool so far (:meth:`lend`)
        self._borrowed_serving = 0  # of them, those still serving (slots of this pool's, for a start's worth)
        self._own_scratch = None
        #: What surveys killed before left behind, cleaned now (:mod:`.scratch`).
        self.leftovers = scratch.clean_leftovers()
        if not config.scratch:
            self._own_scratch = config.scratch = scratch.create()

    def start_worker(self, slot: int, list_only: bool = False, purpose: str | None = None) -> WorkerProcess:
        def spawned(worker: WorkerProcess) -> None:  # live while it starts: stop() reaches it
            worker.purpose = purpose or worker.purpose
            with self._live_lock:
                self._live[slot] = worker
            if self._all_done:
                worker.purpose += ", stopped while starting: every task had ended"
                worker.child.kill()

        worker = WorkerProcess(self.config, slot, list_only=list_only, spawned=spawned)
        with self._live_lock:
            self._start_seconds.append(worker.start_seconds)
        return worker

    def all_tasks_ended(self) -> None:
        """Every task has ended: a worker still starting (a replacement for one lost under a
        case) has nothing left to take, so it is stopped, and none starts after it. On the
        H200 three such starts ended torch_fl's warm main phase 15 s after its last case."""
        self._all_done = True
        with self._live_lock:
            starting = [worker for worker in self._live.values() if worker.ready_at is None]
        for worker in starting:
            worker.purpose += ", stopped while starting: every task had ended"
            if worker.child is not None:
                worker.child.kill()

    def start_figures(self) -> dict:
        """How many workers started and how long each took (seconds: median, max)."""
        with self._live_lock:
            times = list(self._start_seconds)
        if not times:
            return {"count": 0}
        return {"count": len(times), "median_s": round(statistics.median(times), 2), "max_s": round(max(times), 2)}

    def prestart(self, slots: int) -> None:
        """Start slots 1..slots-1 now: each starts its worker, then waits for ``run``.

        A worker spends most of its start importing the stack (seconds to tens of seconds
        with FlagGems on a GPU machine); starting them while slot 0's worker starts and the
        route set and journal are prepared keeps those imports off the critical path. Each
        worker is started by the thread that will use it: a worker asks for a signal when
        the thread that started it ends (PR_SET_PDEATHSIG), so no short-lived helper thread
        may start one.
        """
        for slot in range(1, min(slots, self.workers)):
            if slot in self._prestarted:
                continue
            with self._live_lock:
                thread = self._slot_thread(self._prestarted_slot, slot)
            self._prestarted[slot] = thread
            thread.start()

    def _slot_thread(self, target, *args, name: str | None = None) -> threading.Thread:
        """A slot's thread, not yet started, already counted among the running slots (a slot
        still starting its first worker is one: :meth:`_worth_replacing`); the caller holds
        ``_live_lock``."""
        self._running += 1
        thread = threading.Thread(target=target, args=args, daemon=True, name=name)
        self._threads.append(thread)
        return thread

    def _prestarted_slot(self, slot: int) -> None:
        try:
            worker = self._fresh(slot)
            worker.purpose = "main, started before its tasks were known"  # the log says why it may sit unused
        except StackFailed as exc:
            with self._live_lock:
                self._running -= 1
            self._tasks_ready.wait()
            if not self._stop.is_set() and not self._tasks.empty() and slot < self._limit:
                self.events.put(Event("fatal", None, {"message": str(exc), "missing": exc.missing}))
                self._stop.set()
            self.events.put(Event("slot_end", None, {"slot": slot}))
            return
        self._tasks_ready.wait()
        self._slot(slot, worker)

    def run(self, tasks: list[tuple[str, list[str] | None]], first: WorkerProcess | None = None, unheld: int = 0,
            expected: list[float | None] | None = None) -> int:
        """Start the slots on ``tasks`` ((overload, profiles or None)), in order; events follow on ``events``.

        ``first``, a worker already started (for its provenance), serves slot 0; the first
        ``unheld`` tasks (slow last time) never wait for their overload's first; ``expected``:
        each task's seconds last time (None: not timed), which decide whether a worker lost
        under a case is replaced (:meth:`_worth_replacing`). Returns the number of slots, each
        of which ends with an Event("slot_end").
        """
        with self._live_lock:
            for index, task in enumerate(tasks):
                self._waiting_work[_task_key(task)] = expected[index] if expected is not None else None
        self._tasks.put_all(tasks, unheld)
        count = min(self.workers, max(1, len(tasks)))
        for slot in range(count):
            if slot in self._prestarted:
                continue
            with self._live_lock:
                thread = self._slot_thread(self._slot, slot, first if slot == 0 else None)
            thread.start()
        self._tasks_ready.set()
        return len(set(range(count)) | set(self._prestarted))

    def stream(self, report) -> None:
        """Take tasks as :meth:`add` gives them; ``report(Event)`` hears every event, from
        the slots' threads. A slot (its thread, then its worker) starts only for a task that
        no slot is free to take, so no worker starts that takes no task, and only when the
        work waiting is worth a worker's start (:func:`worth_a_start`)."""
        self.report = report
        self._streamed = True
        self._tasks.hold_followers = self._tasks.hold_family = False  # in the order they come
        self._tasks.stream(True)
        self._tasks_ready.set()

    def add(self, tasks: list[tuple], work: float | None = None) -> None:
        """More tasks for a streaming pool (:meth:`stream`); ``work``: the seconds they are
        expected to take together (None: unknown). Whether a slot starts for them:
        :func:`worth_a_start`, the start measured on the survey's workers so far."""
        self._tasks.put_all(tasks)
        start_cost = self._start_cost()
        with self._live_lock:
            for task in tasks:
                self._waiting_work[_task_key(task)] = None if work is None else work / len(tasks)
            waiting_work = self._waiting_seconds()
            if self._stop.is_set() or self._slots_started >= self.workers:
                return
            # a lent worker counts as a slot, but the pool's first is its own: a task the lent
            # ones may not take (the case they ran before) has a worker
            slots = self._slots_started + self._borrowed_serving
            if self._slots_started and not worth_a_start(self._tasks.count(), slots - self._busy, slots,
                                                         waiting_work, start_cost):
                return
            slot = self._slots_started
            self._slots_started += 1
            thread = self._slot_thread(self._slot, slot, None, name="flagos-stream")
        thread.start()

    def slots(self) -> int:
        """Slots a streaming pool has started so far (each starts its worker for its first task)."""
        with self._live_lock:
            return self._slots_started

    def lent(self) -> int:
        """Workers other pools lent this one (:meth:`lend`)."""
        with self._live_lock:
            return self._borrowed

    def end_input(self) -> None:
        """No task will be added any more: each slot ends (and closes its worker) once out of tasks."""
        self._tasks.stream(False)

    def drain(self) -> None:
        """:meth:`end_input`, then wait until every slot has run out of tasks."""
        self.end_input()
        with self._live_lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join()

    def lower_limit(self, slots: int) -> None:
        """Use only slots 0..slots-1 from now on (the device holds no more workers): the
        others end after their task in hand, or before their first."""
        self._limit = max(1, min(self._limit, slots))

    def schedule_figures(self) -> dict:
        return self._tasks.figures()

    def stop(self) -> None:
        """Stop handing out overloads and kill every live worker."""
        self._stop.set()
        self._tasks.close()  # a slot about to take a task takes none
        self._tasks_ready.set()  # prestarted slots stop waiting
        with self._live_lock:
            live = list(self._live.values())
        for worker in live:
            if worker.child is not None:
                worker.child.kill()

    def close(self) -> None:
        self.stop()
        for thread in self._threads:
            if thread not in self._lent_threads:
                thread.join(timeout=30)
        with self._live_lock:
            for worker in self._live.values():
                worker.close()
            self._closed = True
            last = not self._lent_out
        if last and self._own_scratch is not None:
            shutil.rmtree(self._own_scratch, ignore_errors=True)

    # -- workers lent from one pool to another ---------------------------------------------
    def lend(self, worker: WorkerProcess, fits) -> "callable | None":
        """Take ``worker``, ready and idle, from a pool with no task left for it: a callable
        that runs this pool's tasks ``fits(task)`` allows in it, in the calling thread (whose
        end would signal the worker), until none is left and none will come; it closes the
        worker. None when this pool has stopped."""
        with self._live_lock:
            if self._stop.is_set():
                return None
            slot = 1000 + self._borrowed  # apart from this pool's own slots
            self._borrowed += 1
            self._borrowed_serving += 1
            self._live[slot] = worker
            self._threads.append(threading.current_thread())  # drain waits for it too
        worker.purpose += f", then {self.config.purpose}"
        if self.config.nice:
            worker.renice(self.config.nice)
        return lambda: self._serve(slot, worker, fits)

    def _serve(self, slot: int, worker: WorkerProcess, fits) -> None:
        report = self.report
        try:
            while worker is not None and worker.child is not None and not self._stop.is_set():
                task = self._take(fits)
                if task is None:
                    break
                worker = self._run_task(slot, worker, task, report)
        except StackFailed:
            pass  # a replacement of its own could not start: this pool's own workers take the rest
        except Exception as exc:  # a bug of ours must not hang the caller
            report(Event("fatal", None, {"message": f"internal: {type(exc).__name__}: {exc}", "internal": True}))
            self._stop.set()
        finally:
            if worker is not None:
                worker.close()
            with self._live_lock:
                self._live.pop(slot, None)
                self._borrowed_serving -= 1

    def _lend_out(self, slot: int, worker: WorkerProcess):
        """``worker``'s use elsewhere (:attr:`spare`), once this pool has no task left for it."""
        if self.spare is None or self.per_overload or self._stop.is_set() or worker.child is None:
            return None
        serve = self.spare(worker)
        if serve is None:
            return None
        with self._live_lock:
            self._live.pop(slot, None)
            self._lent_threads.add(threading.current_thread())
            self._lent_out += 1
        return serve

    def _lent_back(self) -> None:
        with self._live_lock:
            self._lent_out -= 1
            last = self._closed and not self._lent_out
        if last and self._own_scratch is not None:
            shutil.rmtree(self._own_scratch, ignore_errors=True)

    # -- one slot (a thread) ---------------------------------------------------------------
    def _slot(self, slot: int, worker: WorkerProcess | None) -> None:
        report = self.report
        lost = False  # this slot's worker ended under a case (a crash, a hang, a sticky error)
        serve = None  # the worker's use in another pool once this one has no task left for it
        running = True  # counted among the running slots (a slot that gives up stops counting at once)
        try:
            while not self._stop.is_set() and slot < self._limit:
                # A replacement starts before it takes a task, so the others may take them all
                # meanwhile (a streaming pool's starts one for a task, as it comes).
                if lost and not self._streamed:
                    if self._tasks.empty():
                        break
                    if not self._worth_replacing(slot):
                        running = False
                        break
                    worker = self._fresh(slot, f"{self.config.purpose}, replacing a worker lost under a case")
                lost = False
                task = self._take()
                if task is None:
                    serve = self._lend_out(slot, worker) if worker is not None else None
                    if serve is not None:
                        worker = None  # it serves there now, and is closed there
                    elif worker is not None and not worker.cases_started:
                        worker.purpose += ", no task left when it was ready"
                    break
                name = task[0]
                if name in self._given_up:  # NO_SCHEMA: its other profiles have nothing to run
                    self._tasks.finished(task)
                    report(Event("end", name, {"slot": slot, "skipped": True}))
                    continue
                worker = self._run_task(slot, worker, task, report)
                lost = worker is None and not self.per_overload
                if self.per_overload and worker is not None:
                    worker.close()
                    worker = None
        except StackFailed as exc:
            if not self._all_done:  # else: a replacement stopped while starting, not needed
                report(Event("fatal", None, {"message": str(exc), "missing": exc.missing}))
                self._stop.set()
        except Exception as exc:  # a bug of ours must not hang the caller
            report(Event("fatal", None, {"message": f"internal: {type(exc).__name__}: {exc}", "internal": True}))
            self._stop.set()
        finally:
            if worker is not None:
                worker.close()
            if running:
                with self._live_lock:
                    self._running -= 1
            report(Event("slot_end", None, {"slot": slot}))
        if serve is not None:
            try:
                serve()
            finally:
                self._lent_back()

    def _worth_replacing(self, slot: int) -> bool:
        """Whether slot ``slot``, its worker lost under a case, starts a replacement: by the
        rule a streaming pool starts a worker by (:func:`worth_a_start`), the tasks waiting
        and their seconds last time against a start measured on this survey's workers, shared
        among the other running slots. The last running slot always does. One that does not
        stops counting at once (a slot lost beside it sees one fewer), and its lost worker's
        log entry says why. On the H200 a warm torch_fl run started three replacements 19 s
        in, each for 14 s of import, and stopped all three unused when the main phase ended."""
        start_cost = self._start_cost()
        with self._live_lock:
            others = self._running - 1
            work = self._waiting_seconds()
            if others < 1 or worth_a_start(self._tasks.count(), others - self._busy, others, work, start_cost):
                return True
            self._running -= 1
            lost = self._live.get(slot)
        if lost is not None:
            lost.purpose += (f", not replaced: {work:.1f} s of cases left for {others} other workers, "
                             f"a start takes {start_cost:.1f} s")
        return False

    def _start_cost(self) -> float | None:
        """A worker's start, measured on this survey's workers so far (None: none ready yet)."""
        return self.config.log.start_seconds() if self.config.log is not None else None

    def _waiting_seconds(self) -> float | None:
        """The expected seconds of the tasks not yet taken (None: one of them is unknown);
        the caller holds ``_live_lock``."""
        known = list(self._waiting_work.values())
        return None if None in known else sum(known)

    def _take(self, fits=None) -> tuple | None:
        """The next task (``fits``: :meth:`.Schedule.take`), no longer counted as waiting work."""
        task = self._tasks.take(fits)
        if task is not None:
            with self._live_lock:
                self._waiting_work.pop(_task_key(task), None)
        return task

    def _run_task(self, slot: int, worker: WorkerProcess | None, task: tuple, report) -> WorkerProcess | None:
        """``task`` run in ``worker``, its slot busy meanwhile; the worker after it (None: lost)."""
        with self._live_lock:
            self._busy += 1
        try:
            return self._run_overload(slot, worker, task[0], task[1], report)
        finally:
            self._tasks.finished(task)
            with self._live_lock:
                self._busy -= 1

    def _fresh(self, slot: int, purpose: str | None = None) -> WorkerProcess:
        failures = 0
        while True:
            try:
                return self.start_worker(slot, purpose=purpose)
            except StackFailed:
                failures += 1
                if failures >= MAX_START_FAILURES or self._stop.is_set() or self._all_done:
                    raise

    def _run_overload(self, slot, worker, name, profiles, report):
        known: list[str] | None = None
        finished: set[str] = set()
        idle_deaths = 0

        last: dict = {}

        def track(event: Event) -> None:
            nonlocal known
            if event.kind == "profiles" and known is None:
                known = event.data["profiles"]
            if event.kind == "case":
                finished.add(event.data["profile"])
                case = event.data
                if case["profile"] == "-":
                    self._given_up.add(name)
                mark = case.get("signal") or (f"poison: {case['poison']}" if case.get("poison") else "")
                last["why"] = f"{case['status']} on {case['profile']}" + (f" ({mark})" if mark else "")
            report(event)

        report(Event("begin", name, {"slot": slot}))
        while not self._stop.is_set():
            if worker is None or worker.child is None:
                worker = self._fresh(slot)
            outcome = worker.attempt(name, profiles, track)
            if outcome == "done":
                break
            worker = None
            if self._stop.is_set():
                return None  # interrupted: the overload stays unfinished
            if outcome == "idle":
                idle_deaths += 1
                if idle_deaths >= MAX_IDLE_DEATHS:
                    detail = f"worker died or hung {idle_deaths} times before a case of this overload started"
                    # A task for some profiles gives each of them the record; a whole overload, one line.
                    unstarted = [p for p in profiles if p not in finished] if profiles is not None else ["-"]
                    for profile in unstarted:
                        track(Event("case", name, {
                            "profile": profile, "status": model.CRASH, "route": model.ROUTE_UNKNOWN, "detail": detail,
                        }))
                    break
                report(Event("replaced", name, {"slot": slot, "why": "died before a case started"}))
                continue
            report(Event("replaced", name, {"slot": slot, "why": last.get("why", "it ended")}))
            base = profiles if profiles is not None else known
            if base is None:
                break
            profiles = [p for p in base if p not in finished]
            if not profiles:
                break
        else:
            return worker
        report(Event("end", name, {"slot": slot}))
        return worker
