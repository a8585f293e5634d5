"""Checks of the user's options that must fail before any work starts.

Each raises :class:`~flagos_doctor.errors.BadInput` naming the option (one line, exit 2),
so a survey that would run for an hour and then fail to write its results, or run with a
timeout that never fires, is refused at once. Standard library only: the parent CLI uses
it, and it never creates or changes anything (a write is tried in a fresh temporary file,
removed at once).
"""

from __future__ import annotations

import math
import os
import re
import shutil
import sys
import tempfile

from flagos_doctor.errors import BadInput
from flagos_doctor.files import replaceable

#: A device as ``CUDA_VISIBLE_DEVICES`` and its kin take one: an index, or a GPU/MIG UUID.
_DEVICE = re.compile(r"^(\d+|(GPU|MIG)-[A-Za-z0-9/-]+)$")


#: The shortest timeout taken: below it a healthy case, or a worker's start, would time
#: out every time (``--timeout 1e-9`` recorded every case as a crash and took minutes).
MIN_SECONDS = 1.0
#: The longest: a week. Beyond it a deadline no longer fits the clocks and selectors that
#: wait for it (``1e308`` overflowed), and no case is meant to run that long.
MAX_SECONDS = 7 * 24 * 3600.0
#: The most extra runs of a failing case (``--repeats``): each is a fresh worker's start.
MAX_REPEATS = 100


def seconds(value: float, option: str = "--timeout") -> float:
    """``value`` when it is a finite number of seconds from :data:`MIN_SECONDS` to
    :data:`MAX_SECONDS` (not ``inf``, not ``nan``, not ``1e-9``)."""
    if not math.isfinite(value) or value <= 0:
        raise BadInput(f"must be a finite positive number of seconds, not {value!r}", option)
    if value < MIN_SECONDS:
        raise BadInput(f"{value:g} s is too short: a worker needs at least {MIN_SECONDS:g} s to answer, "
                       "so every case would time out", option)
    if value > MAX_SECONDS:
        raise BadInput(f"{value:g} s is more than a week ({MAX_SECONDS:g} s), the longest wait taken", option)
    return value


def repeats(value: int, option: str = "--repeats") -> int:
    """``value`` when it is 0 to :data:`MAX_REPEATS` extra runs of each failing case."""
    if value < 0:
        raise BadInput(f"must be 0 or more, not {value}", option)
    if value > MAX_REPEATS:
        raise BadInput(f"{value} is more than {MAX_REPEATS}: each repeat of each failing case starts a fresh worker; "
                       "a few tell a flaky case apart", option)
    return value


def names(text: str | None, option: str) -> list[str]:
    """The comma-separated names of ``text`` (None: the option was not given, []); an
    option given with no name at all (``--ops ''``) is refused rather than read as 'all'."""
    if text is None:
        return []
    found = [part.strip() for part in text.split(",") if part.strip()]
    if not found:
        raise BadInput(f"names nothing ({text!r}); leave it out to take all", option)
    return found


def devices(text: str | None, option: str = "--devices") -> list[str]:
    """Device indices (or GPU/MIG UUIDs) from ``0,1``; refuses empty items and garbage."""
    if text is None:
        return []
    found = [part.strip() for part in text.split(",")]
    bad = [part for part in found if not _DEVICE.match(part)]
    if bad or not found:
        raise BadInput(f"expected device indices such as 0,1 (or GPU-/MIG- UUIDs), not {text!r}", option)
    return found


def interpreter(path: str, option: str = "--python", timeout: float = 60.0) -> str:
    """``path`` when it names an executable file (a bare name is looked up on ``PATH``) that
    answers as a Python within ``timeout`` seconds (survey: its ``--start-timeout``); the
    path this process's Python was started by, the default, is not asked: it is running."""
    found = path if os.sep in path else (shutil.which(path) or path)
    if not os.path.lexists(found):
        raise BadInput(f"no such interpreter: {path}", option)
    if os.path.isdir(found):
        raise BadInput(f"{path} is a directory, not an interpreter", option)
    if not os.access(found, os.X_OK):
        raise BadInput(f"{path} is not executable", option)
    if not _is_this_interpreter(found):  # a `-c` child on every command, for the default
        _answers_as_python(path, option, timeout)
    return path


def _is_this_interpreter(path: str) -> bool:
    """``path`` is the path this process's Python was started by. The same path, not the same
    file: another venv's ``python`` links to the same binary but is another environment."""
    return bool(sys.executable) and os.path.abspath(path) == os.path.abspath(sys.executable)


#: What a Python interpreter prints for :func:`_answers_as_python` (nothing else does).
_PYTHON_ANSWER = "flagos-doctor-python-check"


def _answers_as_python(path: str, option: str, timeout: float = 60.0) -> None:
    """BadInput unless ``path -c ...`` runs as a Python 3.9+ would (``/bin/ls`` or
    ``/bin/false`` as ``--python`` otherwise failed later with a raw or empty reason)."""
    import subprocess

    script = f"import sys; print('{_PYTHON_ANSWER}', *sys.version_info[:2])"
    try:
        done = subprocess.run([path, "-c", script], stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise BadInput(f"{path} is not a Python interpreter: it did not answer `-c` within {timeout:g} s",
                       option) from None
    except OSError as exc:
        raise BadInput(f"{path} cannot be run: {exc.strerror or exc}", option) from None
    words = done.stdout.decode("utf-8", "replace").split()
    if done.returncode != 0 or len(words) != 3 or words[0] != _PYTHON_ANSWER:
        how = f"exited with status {done.returncode}" if done.returncode else "printed something else"
        raise BadInput(f"{path} is not a Python interpreter: asked to run Python code (-c) it {how}", option)
    if (int(words[1]), int(words[2])) < (3, 9):
        raise BadInput(f"{path} is Python {words[1]}.{words[2]}: the stack's Python must be 3.9 or newer", option)


def _nearest_existing(folder: str) -> str:
    while not os.path.lexists(folder):
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    return folder


def _try_create_in(folder: str, path: str, option: str) -> None:
    existing = _nearest_existing(folder)
    if not os.path.isdir(existing):
        raise BadInput(f"cannot write {path}: {existing} is not a folder", option)
    try:
        fd, probe = tempfile.mkstemp(prefix=".flagos-doctor-write-check-", dir=existing)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {existing}: {exc.strerror or exc}", option)
    os.close(fd)
    os.unlink(probe)


def writable_file(path: str | None, option: str) -> None:
    """``path`` can be (re)placed by an atomic write; ``-`` (stdout) and None pass."""
    if path is None or path == "-":
        return
    if not path:
        raise BadInput("is empty: give a file name", option)
    target = replaceable(path, option)  # through any symlink; a device, a FIFO, a directory refused
    _try_create_in(os.path.dirname(target), path, option)


def writable_folder(path: str, option: str) -> None:
    """``path`` is (or can be made) a folder that files can be written in."""
    if not path:
        raise BadInput("is empty: give a folder", option)
    target = os.path.abspath(path)
    if os.path.lexists(target) and not os.path.isdir(target):
        raise BadInput(f"{path} is not a folder", option)
    _try_create_in(target, path, option)
