"""A survey's scratch folder, and cleaning up after a survey that was killed.

Each pool of workers keeps its capture files (unlinked at once: what the stack prints may
hold raw secrets, so none has a name) in a fresh ``$TMPDIR/flagos-survey-*`` folder, whose
``owner`` file names the survey process (pid and start time, so a reused pid is not
mistaken for it). Every worker, and everything a worker starts, carries the folder
in ``FLAGOS_DOCTOR_SCRATCH``. A survey killed with SIGKILL cannot remove its folder, and a
kernel may have started a detached process (its own session, out of reach of the group
kill) that outlives it. The next survey's :func:`clean_leftovers` removes the folders of
owners that are gone and kills the processes still marked with them: only this user's
folders and processes, and only on the evidence of the mark.
"""

from __future__ import annotations

import os
import shutil
import signal
import tempfile

PREFIX = "flagos-survey-"
MARK_VAR = "FLAGOS_DOCTOR_SCRATCH"
OWNER_FILE = "owner"


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (``/proc/PID/stat`` field 22)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] != "Z" else None


def create() -> str:
    """A new scratch folder owned by this process."""
    folder = tempfile.mkdtemp(prefix=PREFIX)
    with open(os.path.join(folder, OWNER_FILE), "w", encoding="utf-8") as handle:
        handle.write(f"{os.getpid()} {_start_time(os.getpid())}\n")
    return folder


def _owner_gone(folder: str) -> bool:
    try:
        with open(os.path.join(folder, OWNER_FILE), encoding="utf-8") as handle:
            pid, started = handle.read().split()
    except (OSError, ValueError):
        return False  # being created right now, or not ours to judge
    return _start_time(int(pid)) != started


def _marked_processes(folder: str) -> list[int]:
    mark = f"{MARK_VAR}={folder}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == os.getpid():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as handle:
                if mark in handle.read().split(b"\0"):
                    found.append(int(entry))
        except OSError:  # gone, or another user's
            continue
    return found


def clean_leftovers() -> dict:
    """Remove the scratch folders of surveys that are gone, and kill the processes that
    still carry their mark. Returns what was cleaned: {"folders": n, "processes": n}."""
    cleaned = {"folders": 0, "processes": 0}
    root = tempfile.gettempdir()
    try:
        names = [name for name in os.listdir(root) if name.startswith(PREFIX)]
    except OSError:
        return cleaned
    for name in names:
        folder = os.path.join(root, name)
        try:
            info = os.lstat(folder)
        except OSError:
            continue
        if not os.path.isdir(folder) or os.path.islink(folder) or info.st_uid != os.getuid() or not _owner_gone(folder):
            continue
        if os.path.isdir("/proc"):
            for pid in _marked_processes(folder):
                try:
                    os.kill(pid, signal.SIGKILL)
                    cleaned["processes"] += 1
                except OSError:
                    pass
        shutil.rmtree(folder, ignore_errors=True)
        cleaned["folders"] += 1
    return cleaned
