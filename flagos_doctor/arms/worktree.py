"""Temporary git worktrees of the user's repository, the way asv's ``continuous`` builds commits.

Used for the arms of ``survey --compare --repo`` and ``suite --compare --repo``: a commit is
checked out with ``git worktree add --detach`` in a temporary folder, built and run there,
and the worktree is removed afterwards whatever happened. The user's checkout (files,
index, HEAD) is never touched; only git's own list of worktrees changes, for the duration
of the run. Every command run for an arm writes to one log, which outlives the worktree.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile

from flagos_doctor import git
from flagos_doctor.errors import BadInput


def resolve_commit(repo: str, ref: str) -> str | None:
    """The full hash ``ref`` names in ``repo`` (a prefix, a branch, a tag), or None when it
    names no commit there. BadInput when ``repo`` is not a directory."""
    if not os.path.isdir(repo):
        raise BadInput("no such directory (--repo)", repo)
    done = git.checked(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return done.stdout.strip() if done.returncode == 0 and done.stdout.strip() else None


@contextlib.contextmanager
def temporary_worktree(repo: str, commit: str, prefix: str):
    """Yield ``(scratch, tree)``: a detached worktree of ``commit`` at ``tree``, inside a
    scratch folder for outputs. Both are gone afterwards."""
    scratch = tempfile.mkdtemp(prefix=f"{prefix}{commit[:10]}-")
    tree = os.path.join(scratch, "tree")
    try:
        git.checked(repo, "worktree", "add", "--detach", "--quiet", tree, commit)
        yield scratch, tree
    finally:
        if git.checked(repo, "worktree", "remove", "--force", tree, check=False).returncode != 0:
            shutil.rmtree(tree, ignore_errors=True)
        git.checked(repo, "worktree", "prune", check=False)
        shutil.rmtree(scratch, ignore_errors=True)


def env_with_import_path(first: list[str]) -> dict:
    """This process's environment with ``first`` ahead of everything on ``PYTHONPATH``: the
    worktree's own code must win over any copy installed from the user's checkout."""
    env = dict(os.environ)
    rest = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join([*first, *rest])
    return env


class Log:
    """The one log of an arm's commands (build, then survey or tests), each headed ``$ command``."""

    def __init__(self, path: str):
        self.path = path
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w", encoding="utf-8"):
            pass

    def run(self, command, cwd: str, env: dict) -> tuple[int, str]:
        """Run ``command`` (a shell line, or an argv list) into the log; return its exit
        status and what it printed."""
        shown = command if isinstance(command, str) else " ".join(command)
        with open(self.path, "ab") as log:
            log.write(f"$ {shown}\n".encode())
            log.flush()
            start = log.tell()
            done = subprocess.run(command, shell=isinstance(command, str), cwd=cwd, env=env, stdout=log,
                                  stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        with open(self.path, "rb") as log:
            log.seek(start)
            return done.returncode, log.read().decode("utf-8", "replace")

    def failure(self, what: str, code: int, output: str, commit: str, ref: str, why: str = "") -> BadInput:
        """The one-line error for a command of the arm ``ref`` (``commit``) that failed: its
        last line, and the log."""
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        last = lines[-1][:200] if lines else "(no output)"
        return BadInput(f"{what} exited with status {code} at {commit[:12]}{why}: {last} (log: {self.path})", ref)
