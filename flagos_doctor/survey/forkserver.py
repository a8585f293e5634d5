"""Survey workers forked from a process that already imported torch (parent side; the child
is :mod:`flagos_doctor.survey.child.forkserver`).

Where a stack allows it (:attr:`flagos_doctor.stacks.base.Stack.fork_after`: the modules its
workers may import before its ``setup()``), a survey's workers are not started with
``python -m`` each but forked from one server that imported those modules once. A forked
worker then does only what differs between workers: the stack's setup and its device.

Only a worker whose environment equals the server's, but for the variables nothing reads
before a device is touched (:data:`LAZY_VARS` and the stack's visible-devices variable), is
forked; any other (the native path's, another interpreter's) is started as before, and so is
every worker when the server cannot start or fork (no ``pidfd_open``, no ``SOCK_SEQPACKET``,
a server that died): :class:`Unavailable`, and :class:`flagos_doctor.childproc.Child` spawns.
``FLAGOS_DOCTOR_FORK`` (:func:`preload`): ``0`` spawns every worker; a list of modules
(``torch,triton``) is what a stack that says nothing of its imports (a module stack of your
own) may be forked after, where otherwise its workers are spawned. A built-in stack keeps
its own choice (torch_fl: never). The run record says how its workers were born
(``worker_births``).

A forked worker's exit status is its server's to read (it is the server's child); the
parent learns that it ended from a pidfd, as for a spawned one, and then asks the server.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import threading

from flagos_doctor import channel, childproc
from flagos_doctor.survey import scratch

SERVER_MODULE = "flagos_doctor.survey.child.forkserver"
FORK_VAR = "FLAGOS_DOCTOR_FORK"  # 0: spawn every worker; a list: a module stack's preload
#: Read by a worker only after its imports (its niceness), set per child (its channel), or
#: differing by pool but read by nobody (a pool's scratch mark: the survey's leftovers are
#: found by any of its pools' marks, and a forked worker's exec'd children carry its own).
LAZY_VARS = frozenset({"FLAGOS_DOCTOR_NICE", channel.ENV_VAR, scratch.MARK_VAR})
#: The longest reply the server sends (a pid, a status, an error's line).
MAX_REPLY = 1 << 16
#: How long the server may take to preload (as a worker's ``--start-timeout``), and to answer
#: a request after that; past either, the survey spawns its workers instead.
START_SECONDS = 600.0
REPLY_SECONDS = 120.0


class Unavailable(Exception):
    """No worker can be forked here (the reason in words): start it with ``python -m``."""


def preload(stack_choice: tuple[str, ...] | None) -> tuple[str, ...]:
    """The modules a survey's fork server imports (empty: spawn every worker): none under
    ``FLAGOS_DOCTOR_FORK=0`` (off, false, no); else the stack's own
    :attr:`~flagos_doctor.stacks.base.Stack.fork_after`, or where it says nothing (None),
    ``FLAGOS_DOCTOR_FORK``'s list."""
    given = os.environ.get(FORK_VAR, "").strip()
    if given.lower() in ("0", "off", "false", "no"):
        return ()
    if stack_choice is not None:
        return tuple(stack_choice)
    return tuple(name.strip() for name in given.split(",") if name.strip())


class ForkedProcess:
    """A forked worker, as much of ``subprocess.Popen`` as :class:`~flagos_doctor.childproc.Child` uses."""

    def __init__(self, pid: int, server: "ForkServer"):
        self.pid = pid
        self.returncode: int | None = None
        self._server = server
        self._pidfd = os.pidfd_open(pid)
        self._lock = threading.Lock()

    def _ended(self, timeout: float | None) -> bool:
        import select

        ready, _, _ = select.select([self._pidfd], [], [], timeout)
        return bool(ready)

    def poll(self) -> int | None:
        if self.returncode is None and self._ended(0):
            self._reap()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not self._ended(timeout):
                raise subprocess.TimeoutExpired(f"forked worker {self.pid}", timeout)
            self._reap()
        return self.returncode

    def _reap(self) -> None:
        with self._lock:
            if self.returncode is not None:
                return
            code = self._server.status(self.pid)
            # A server gone meanwhile reaped nothing: the worker ended, how is unknown.
            self.returncode = code if code is not None else -9
            try:
                os.close(self._pidfd)
            except OSError:
                pass


class ForkServer:
    """One server process: the environment it was started in, and the modules it preloaded."""

    def __init__(self, python: str, env: dict[str, str], preload: tuple[str, ...], lazy: frozenset[str]):
        self.python = python
        self.preload = preload
        self.lazy = lazy
        self.env = env
        self.preloaded: list[str] = []
        self.forked = 0
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._sock: socket.socket | None = None
        self._stderr = tempfile.TemporaryFile()
        self.failed: str | None = None

    def matches(self, python: str, env: dict[str, str]) -> bool:
        if python != self.python:
            return False
        keys = (set(env) | set(self.env)) - self.lazy
        return all(env.get(key) == self.env.get(key) for key in keys)

    def _start(self) -> None:
        if not hasattr(os, "pidfd_open") or not hasattr(socket, "send_fds"):
            raise Unavailable("no pidfd_open or send_fds on this Python")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        env = {**self.env, "FLAGOS_DOCTOR_FORKSERVER_FD": str(theirs.fileno()),
               "FLAGOS_DOCTOR_FORKSERVER_PRELOAD": ",".join(self.preload)}
        try:
            self._proc = subprocess.Popen([self.python, "-m", SERVER_MODULE], stdin=subprocess.DEVNULL,
                                          stdout=self._stderr, stderr=self._stderr, env=env,
                                          pass_fds=(theirs.fileno(),), start_new_session=True)
        finally:
            theirs.close()
        self._sock = ours
        ours.settimeout(START_SECONDS)  # a preload that hangs: socket.timeout, an OSError
        ready = self._receive()
        if not ready.get("ready"):
            raise Unavailable(f"the fork server did not start: {ready}")
        ours.settimeout(REPLY_SECONDS)
        self.preloaded = list(ready.get("preloaded") or [])

    def _receive(self) -> dict:
        data = self._sock.recv(MAX_REPLY)
        if not data:
            self._stderr.seek(0)
            tail = childproc.tail_text(self._stderr.read(), 5)
            raise Unavailable(f"the fork server ended{': ' + tail if tail else ''}")
        return json.loads(data)

    def fork(self, env: dict[str, str], fds: dict[int, int], module: str) -> ForkedProcess:
        """A worker running ``module``, with ``env`` and each descriptor of ``fds`` (its number
        in the worker -> ours); :class:`Unavailable` when it cannot be forked."""
        with self._lock:
            if self.failed:
                raise Unavailable(self.failed)
            try:
                if self._sock is None:
                    self._start()
                targets = list(fds)
                socket.send_fds(self._sock, [json.dumps({"op": "fork", "env": env, "targets": targets,
                                                         "module": module}).encode()], [fds[t] for t in targets])
                reply = self._receive()
            except (OSError, ValueError, Unavailable) as exc:
                self.failed = str(exc) if isinstance(exc, Unavailable) else f"{type(exc).__name__}: {exc}"
                self._close()
                raise Unavailable(self.failed) from None
            if "pid" not in reply:
                raise Unavailable(str(reply.get("error")))
            self.forked += 1
            return ForkedProcess(int(reply["pid"]), self)

    def status(self, pid: int) -> int | None:
        """How forked worker ``pid`` ended (Popen's returncode); None when the server is gone."""
        with self._lock:
            if self._sock is None:
                return None
            try:
                self._sock.send(json.dumps({"op": "status", "pid": pid}).encode())
                return self._receive().get("returncode")
            except (OSError, ValueError, Unavailable):
                return None

    def _close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
            self._proc = None

    def close(self) -> None:
        with self._lock:
            self._close()
        self._stderr.close()


class ForkServers:
    """A survey's fork servers, one per environment its workers start in (the main workers',
    the native path's...), each started when the first worker of that environment is."""

    def __init__(self, stack_choice: tuple[str, ...] | None, lazy: frozenset[str] = LAZY_VARS):
        self.preload = preload(stack_choice)
        self.lazy = lazy
        self._lock = threading.Lock()
        self._servers: list[ForkServer] = []
        self.spawned = 0

    @classmethod
    def for_stack(cls, stack) -> "ForkServers":
        """The fork servers of a survey of ``stack`` (resolved: :attr:`.pool.WorkerConfig.resolved`):
        its visible-devices variable, set per worker, is lazy too (module doc)."""
        return cls(stack.fork_after, LAZY_VARS | {stack.visible_devices_var})

    def launch(self, python: str, module: str, env: dict[str, str], fds: dict[int, int]) -> ForkedProcess | None:
        """``module`` forked with ``env`` and ``fds`` (its number -> ours); None: the caller
        spawns it (another environment, forking off or unavailable), counted as spawned."""
        server = self.server(python, env)
        if server is not None:
            try:
                return server.fork(env, fds, module)
            except Unavailable:
                pass
        with self._lock:
            self.spawned += 1
        return None

    def server(self, python: str, env: dict[str, str]) -> ForkServer | None:
        """The server a worker of ``env`` is forked from (started on first use); None: spawn it."""
        if not self.preload:
            return None
        with self._lock:
            for server in self._servers:
                if server.matches(python, env):
                    return None if server.failed else server
            server = ForkServer(python, dict(env), self.preload, self.lazy)
            self._servers.append(server)
            return server

    def figures(self) -> dict:
        """How the survey's workers were born: forked (from which preload) or spawned."""
        with self._lock:
            forked = sum(server.forked for server in self._servers)
            failed = [server.failed for server in self._servers if server.failed]
            servers = len(self._servers)
        out = {"forked": forked, "spawned": self.spawned, "preloaded": list(self.preload), "servers": servers}
        if failed:
            out["fork_failed"] = failed[0][:300]
        return out

    def close(self) -> None:
        with self._lock:
            servers, self._servers = self._servers, []
        for server in servers:
            server.close()
