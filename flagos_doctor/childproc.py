"""Parent side of a child process that talks over a :mod:`flagos_doctor.channel`.

A :class:`Child` starts ``python -m <module>`` (any interpreter the user chose), or forks it
from a server that already imported what it imports first (a survey's workers:
:mod:`flagos_doctor.survey.forkserver`), in its own process group, hands it a request pipe
and a record pipe, keeps its stderr in a temporary file (so its tail can be reported after a
crash) and reads records with deadlines. Whatever
happens to the child (a signal, a hang, an early exit), the parent keeps every record that
arrived and learns how the child ended.

The child's end is learnt from the process itself (a pidfd, or polling where there is
none), not only from the end of its record pipe: a kernel that forks and then crashes
leaves a grandchild holding the pipe open, and waiting for EOF would turn a crash into a
timeout. When the child has ended, what is left of its process group is killed.

Every child runs one of our modules with an interpreter the user chose, so every child is
launched under one import-path policy (:func:`child_env`): a folder holding only a link to
this flagos_doctor goes first on ``PYTHONPATH``. First, so that the child's half of the
channel is the parent's version; only a link, because our install folder (a
``site-packages``) on the path would lend the chosen interpreter every package installed
beside us (torch, flag_gems, triton), and the child would use and report them as the stack's.
"""

from __future__ import annotations

import atexit
import json
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass

from flagos_doctor import channel, redact

#: Without a pidfd, how often a waiting parent checks whether its child still lives.
POLL_SECONDS = 0.5


class ChildEnded(Exception):
    """The child closed its record pipe: it exited, or died on a signal."""

    def __init__(self, end: "ChildEnd"):
        super().__init__(end.describe())
        self.end = end


class ChildTimeout(Exception):
    """No record arrived before the deadline."""


@dataclass(frozen=True)
class ChildEnd:
    """How a child process ended."""

    returncode: int | None
    timed_out: bool = False

    @property
    def signal(self) -> str | None:
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    def describe(self) -> str:
        if self.timed_out:
            return "timed out"
        if self.signal:
            return f"killed by {self.signal}"
        return f"exited with status {self.returncode}"


_folder_lock = threading.Lock()
_folder: list[str] = []
#: ``<tmp>/flagos-doctor-path-<pid>-<random>``: the pid says whose it is once it is left behind.
FOLDER_PREFIX = "flagos-doctor-path-"


def package_folder() -> str:
    """A folder holding only a link to this flagos_doctor package, made once per process and
    removed when it exits (the children it serves have ended by then)."""
    with _folder_lock:
        if not _folder:
            _remove_left_behind()
            folder = tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-")
            package = os.path.dirname(os.path.realpath(__file__))
            os.symlink(package, os.path.join(folder, "flagos_doctor"))
            atexit.register(shutil.rmtree, folder, True)
            _folder.append(folder)
        return _folder[0]


def without_link_folder(obj):
    """``obj`` (a document) with every path through this process's :func:`package_folder`
    (``/tmp/flagos-doctor-path-<pid>-x/flagos_doctor/...``, which a child such as the demo
    records as its own path) written as the package's real path: the folder is gone once
    this process ends, and a report must not name a file that no longer exists."""
    if not _folder:
        return obj
    link = os.path.join(_folder[0], "flagos_doctor")
    real = os.path.dirname(os.path.realpath(__file__))

    def walk(value):
        if isinstance(value, str):
            return value.replace(link, real) if link in value else value
        if isinstance(value, list):
            return [walk(item) for item in value]
        if isinstance(value, dict):
            return {walk(key): walk(item) for key, item in value.items()}
        return value
    return walk(obj)


def _remove_left_behind() -> None:
    """Remove the folders of this user's earlier processes that ended without running their
    exit hooks (SIGKILL, SIGTERM): those whose pid is gone. A live pid, even one reused by
    another program, keeps its folder; the folder holds a link only, never what it points to."""
    root = tempfile.gettempdir()
    try:
        names = os.listdir(root)
    except OSError:
        return
    for name in names:
        pid = name[len(FOLDER_PREFIX):].split("-", 1)[0] if name.startswith(FOLDER_PREFIX) else ""
        if not pid.isdigit():
            continue
        path = os.path.join(root, name)
        try:
            if os.lstat(path).st_uid != os.getuid():
                continue
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(path, ignore_errors=True)
        except OSError:  # another user's process, or not ours to look at
            continue


def child_env(env: dict[str, str] | None = None, startup: str | None = None) -> dict[str, str]:
    """``env`` (default: this process's environment) with :func:`package_folder` first on
    ``PYTHONPATH``: the environment every child of ours starts in.

    ``startup``, a folder holding only a ``sitecustomize.py``, goes right after it: the
    interpreter's own start-up hook, through which ``explain`` installs its watch in a
    program of the user's (that ``sitecustomize`` chains to the one it shadows)."""
    env = dict(os.environ if env is None else env)
    folder = package_folder()
    ours = [folder] + ([startup] if startup else [])
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p not in ours]
    env["PYTHONPATH"] = os.pathsep.join([*ours, *rest])
    return env


def tail_text(data: bytes, max_lines: int = 30, max_chars: int = 4000) -> str:
    """The last lines of a byte stream, decoded leniently."""
    text = data[-max_chars * 2 :].decode("utf-8", "replace")
    lines = text.splitlines()[-max_lines:]
    return "\n".join(lines)[-max_chars:]


class Child:
    """A child Python process with a request pipe and a record pipe."""

    def __init__(
        self,
        python: str,
        module: str,
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        cwd: str | None = None,
        pass_fds: tuple[int, ...] = (),
        forks=None,
    ):
        req_r, req_w = os.pipe()
        rec_r, rec_w = os.pipe()
        # ``python -m <module>`` is one of ours: always under the one import-path policy.
        environ = child_env(env)
        environ[channel.ENV_VAR] = f"{req_r},{rec_w}"
        environ.setdefault("PYTHONUNBUFFERED", "1")
        # A child that dies on a signal then leaves its Python stack in the stderr tail.
        environ.setdefault("PYTHONFAULTHANDLER", "1")
        self._stderr = tempfile.TemporaryFile()
        self._stdout = tempfile.TemporaryFile()
        try:
            self.proc = self._launch(python, module, args, environ, cwd, (req_r, rec_w, *pass_fds), forks)
        finally:
            os.close(req_r)
            os.close(rec_w)
        self._req_w = req_w
        self._rec_r = rec_r
        # The harness's side of the channel signs its records with this (see channel.py);
        # a line without it was written by the stack, and is dropped.
        self._nonce = secrets.token_hex(16)
        self.forged = 0
        os.write(req_w, channel.encode({"op": "hello", channel.NONCE: self._nonce}))
        os.set_blocking(rec_r, False)
        self._buffer = b""
        self._selector = selectors.DefaultSelector()
        self._selector.register(rec_r, selectors.EVENT_READ)
        self._pidfd = None
        try:
            self._pidfd = os.pidfd_open(self.proc.pid)
            self._selector.register(self._pidfd, selectors.EVENT_READ)
        except (AttributeError, OSError):  # not Linux 5.3+: poll the child instead
            self._pidfd = None
        self._eof = False
        self._closed = False
        self.timed_out = False

    def _launch(self, python, module, args, environ, cwd, pass_fds, forks):
        """The child's process: forked from a server that imported what every such child
        imports first, where the caller has one (``forks``: survey/forkserver.py) and it
        takes this child; else a fresh ``python -m``."""
        if forks is not None and not args and cwd is None:
            fds = {1: self._stdout.fileno(), 2: self._stderr.fileno(), **{fd: fd for fd in pass_fds}}
            forked = forks.launch(python, module, environ, fds)
            if forked is not None:
                return forked
        return subprocess.Popen(
            [python, "-m", module, *(args or [])],
            stdin=subprocess.DEVNULL,
            stdout=self._stdout,
            stderr=self._stderr,
            env=environ,
            cwd=cwd,
            pass_fds=pass_fds,
            start_new_session=True,  # so a kill reaches the whole group
        )

    # -- requests ----------------------------------------------------------------------
    def send(self, request: dict) -> None:
        """Send one request; raise ChildEnded if the child is gone."""
        try:
            os.write(self._req_w, channel.encode(request))
        except (BrokenPipeError, OSError):
            raise ChildEnded(self.wait(timeout=5))

    # -- records -----------------------------------------------------------------------
    def recv(self, timeout: float | None) -> dict:
        """The next record. Raise ChildTimeout after ``timeout`` seconds, ChildEnded at EOF."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if b"\n" in self._buffer:
                line, _, self._buffer = self._buffer.partition(b"\n")
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError):
                    continue  # a torn line from a dying child: skip it
                if not isinstance(record, dict) or record.pop(channel.NONCE, None) != self._nonce:
                    self.forged += 1  # not the harness's: the stack wrote it
                    continue
                if record.get("record") == channel.SECRETS_RECORD:
                    redact.remember(record.get("values") or [])
                    continue
                return record
            if self._eof:
                raise ChildEnded(self.wait(timeout=10))
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise ChildTimeout()
            wait = remaining if self._pidfd is not None else min(POLL_SECONDS, POLL_SECONDS if remaining is None else remaining)
            ready = {key.fd for key, _ in self._selector.select(wait)}
            if self._rec_r in ready:
                try:
                    chunk = os.read(self._rec_r, 1 << 16)
                except BlockingIOError:
                    continue
                if chunk:
                    self._buffer += chunk
                else:
                    self._eof = True
            elif (self._pidfd in ready) if self._pidfd is not None else self.proc.poll() is not None:
                self._child_exited()

    def _child_exited(self) -> None:
        """The child process ended while its record pipe may still be open (held by a
        process it forked): kill what is left of its group, keep what it wrote, end."""
        # Until it is reaped the child is a zombie, so its pid (the group id) is not reused yet.
        self.kill()
        while True:
            try:
                chunk = os.read(self._rec_r, 1 << 16)
            except (BlockingIOError, OSError):
                break
            if not chunk:
                break
            self._buffer += chunk
        self._eof = True

    def records(self, timeout: float | None):
        """Yield records until the child ends; the deadline covers the whole stream.

        Raises ChildTimeout when the deadline passes first; ends (without raising) when
        the child closes its pipe. ``self.end`` then says how it ended.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
            try:
                yield self.recv(remaining)
            except ChildEnded:
                return

    # -- ending ------------------------------------------------------------------------
    def kill(self) -> None:
        """Kill the child's whole process group."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def wait(self, timeout: float | None = None) -> ChildEnd:
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            rc = self.proc.wait()
        return ChildEnd(returncode=rc, timed_out=self.timed_out)

    def terminate_after_timeout(self) -> ChildEnd:
        """Record a timeout, kill the group and reap the child."""
        self.timed_out = True
        self.kill()
        return self.wait()

    def close(self) -> None:
        """Close our pipe ends (a worker reading requests sees EOF and exits)."""
        if self._closed:
            return  # a descriptor number closed twice could be someone else's by then
        self._closed = True
        self._selector.close()
        for fd in (self._req_w, self._rec_r, self._pidfd):
            if fd is None:
                continue
            try:
                os.close(fd)
            except OSError:
                pass

    def stderr_tail(self, max_lines: int = 30) -> str:
        self._stderr.seek(0)
        return redact.scrub_environ(tail_text(self._stderr.read(), max_lines))

    def stdout_tail(self, max_lines: int = 30) -> str:
        self._stdout.seek(0)
        return redact.scrub_environ(tail_text(self._stdout.read(), max_lines))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.kill()
            self.proc.wait()
        self.close()
        self._stderr.close()
        self._stdout.close()
