"""The fork server: a child that imports what a survey worker imports first, once, and forks
fresh workers from that state (parent side: :mod:`flagos_doctor.survey.forkserver`).

A survey worker spends most of its start importing; ``import torch`` alone is a third of a
flag_gems worker's start on an H200 (4.5 of 8.8 s with 16 starting at once) and nearly all of
a demo worker's on CPU. The modules it preloads are those the stack says may come before its
``setup()`` (:attr:`flagos_doctor.stacks.base.Stack.fork_after`): never a device runtime's
first touch, so nothing forked carries a CUDA context (which a fork cannot use). A forked
worker is otherwise the worker ``python -m`` would have started: the same interpreter,
environment, descriptor numbers, session of its own and standard streams; it runs the
worker module as ``__main__``.

Over a ``SOCK_SEQPACKET`` socket (one message a request, descriptors beside it)::

    (after the preload)                                        -> {"ready": true, "preloaded": [...]}
    {"op": "fork", "env", "targets": [fd numbers], "module"} + descriptors
                                                               -> {"pid"} | {"error"}
    {"op": "status", "pid"}                                    -> {"returncode"} (it waits)

The forked worker is this server's child: it learns of the server's death
(PR_SET_PDEATHSIG) as a spawned worker learns of its parent's, and the parent asks here how
it ended. The server ends when the parent closes the socket (or dies: the kernel closes it).
"""

from __future__ import annotations

import fcntl
import gc
import importlib
import json
import os
import socket
import sys
import warnings

from flagos_doctor.survey.child.worker import set_parent_death_signal

#: The environment variable naming the socket's descriptor, and the modules to preload.
SOCKET_VAR = "FLAGOS_DOCTOR_FORKSERVER_FD"
PRELOAD_VAR = "FLAGOS_DOCTOR_FORKSERVER_PRELOAD"
MAX_MESSAGE = 1 << 20
MAX_FDS = 16


def _reply(sock: socket.socket, message: dict) -> None:
    sock.send(json.dumps(message).encode())


def _become(sock: socket.socket, request: dict, fds: list[int], server: int) -> None:
    """In the forked child: take the worker's descriptors, environment and session, then run
    its module as ``python -m`` would. Never returns."""
    code = 70
    try:
        sock.close()
        set_parent_death_signal()  # the worker's own, asked before the check below
        if os.getppid() != server:
            return  # the server ended before the signal was asked for: nobody would stop it
        os.setsid()  # its own process group: a kill of the group reaches what it starts
        targets = [int(t) for t in request["targets"]]
        # Out of the way first, so that moving one onto its number never closes another.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD, 1024) for fd in fds]
        for fd in fds:
            os.close(fd)
        for target, fd in zip(targets, high):
            os.dup2(fd, target)  # inheritable, as Popen's pass_fds leaves them
            os.close(fd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        keep = {0, 1, 2, *targets}
        for name in os.listdir("/proc/self/fd"):
            fd = int(name)
            if fd not in keep:
                try:
                    os.close(fd)
                except OSError:
                    pass
        os.environ.clear()
        os.environ.update(request["env"])
        sys.argv = [request["module"]]
        import runpy

        try:
            runpy.run_module(request["module"], run_name="__main__", alter_sys=True)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except BaseException:
            import traceback

            traceback.print_exc()
            code = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


def _fork(sock: socket.socket, request: dict, fds: list[int]) -> dict:
    sys.stdout.flush()
    sys.stderr.flush()
    server = os.getpid()
    pid = os.fork()
    if pid == 0:
        _become(sock, request, fds, server)
    for fd in fds:
        os.close(fd)
    return {"pid": pid}


def _status(pid: int) -> dict:
    try:
        _, status = os.waitpid(pid, 0)
    except ChildProcessError:
        return {"returncode": None}
    return {"returncode": os.waitstatus_to_exitcode(status)}


def serve(sock: socket.socket) -> int:
    while True:
        try:
            data, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, MAX_FDS)
        except OSError:
            return 0
        if not data:
            return 0  # the parent closed the socket (or died)
        try:
            request = json.loads(data)
            if request.get("op") == "fork":
                reply = _fork(sock, request, fds)
            elif request.get("op") == "status":
                reply = _status(int(request["pid"]))
            else:
                reply = {"error": f"unknown request {request.get('op')!r}"}
        except Exception as exc:  # a bad request is answered, never the end of the server
            for fd in fds:
                try:
                    os.close(fd)
                except OSError:
                    pass
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        _reply(sock, reply)


def main() -> int:
    sock = socket.socket(fileno=int(os.environ.pop(SOCKET_VAR)))
    preload = [name for name in os.environ.pop(PRELOAD_VAR, "").split(",") if name]
    # Python 3.12 warns about forking a process with a second thread; torch's import starts a
    # native one that holds no lock the worker needs (its DataLoader forks the same way).
    warnings.filterwarnings("ignore", message=".*fork.*", category=DeprecationWarning)
    loaded = []
    for name in preload:
        try:
            importlib.import_module(name)
            loaded.append(name)
        except ImportError:
            pass  # an optional one (triton on a machine without it): the worker imports what it needs
    # What the preload made is never collected in a worker: a collection there would write to
    # every object of the import (its GC header) and so copy each of their pages (copy-on-write).
    gc.freeze()
    _reply(sock, {"ready": True, "preloaded": loaded})
    return serve(sock)


if __name__ == "__main__":
    sys.exit(main())
