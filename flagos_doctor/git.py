"""The one way flagos-doctor runs git: ``git -C FOLDER ARGS``, bounded in time, never reading
stdin. Either side (standard library only): a child reads where torch_fl came from with it.

* :func:`output`: what a question to git answers, or None (no git, too slow, not a checkout);
* :func:`checked`: a git command the user's input needs (``--repo``); a failure is a
  :class:`~flagos_doctor.errors.BadInput` naming the repository.
"""

from __future__ import annotations

import subprocess

from flagos_doctor.errors import BadInput

#: Seconds for a question asked while describing a stack: a report or a survey must not
#: hang on a slow filesystem.
QUICK = 10
#: Seconds for a command that does work (``worktree add`` on a large repository).
SLOW = 300


def run(folder: str, *args: str, timeout: float) -> subprocess.CompletedProcess:
    """``git -C folder ARGS``; raises OSError (no git) or subprocess.TimeoutExpired."""
    return subprocess.run(["git", "-C", folder, *args], capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def output(folder: str, *args: str, timeout: float = QUICK) -> str | None:
    """The stripped stdout of ``git -C folder ARGS``; None when git is missing, too slow or fails."""
    try:
        done = run(folder, *args, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def checked(folder: str, *args: str, check: bool = True, timeout: float = SLOW) -> subprocess.CompletedProcess:
    """``git -C folder ARGS``; with ``check``, a failure is a BadInput naming the repository
    (as are a missing git and a command past ``timeout``, with or without ``check``)."""
    try:
        done = run(folder, *args, timeout=timeout)
    except FileNotFoundError:
        raise BadInput("git is not installed", folder)
    except subprocess.TimeoutExpired:
        raise BadInput(f"'git {' '.join(args)}' took more than {timeout:g} s", folder)
    if check and done.returncode != 0:
        lines = [line.strip() for line in (done.stderr + done.stdout).splitlines() if line.strip()]
        raise BadInput(f"'git {' '.join(args)}' failed: {lines[-1][:200] if lines else done.returncode}", folder)
    return done
