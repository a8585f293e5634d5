"""Running the test command of one commit in a temporary git worktree.

The way asv's ``continuous`` builds two commits: ``git worktree add --detach`` in a
temporary folder, the build command and then the test command run there, the JUnit XML
written outside the worktree, and the worktree removed afterwards whatever happened. The
user's checkout (its files, index and HEAD) is never touched; only git's own list of
worktrees changes, for the duration of the run.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tempfile

from flagos_doctor.errors import BadInput

#: Where the test command is told to write its JUnit XML: ``{junitxml}`` in the command is
#: replaced by the path; without it, ``--junitxml=PATH`` is appended. Also set in the
#: environment as FLAGOS_DOCTOR_JUNITXML, for a wrapper script.
PLACEHOLDER = "{junitxml}"
ENV_VAR = "FLAGOS_DOCTOR_JUNITXML"


def git(repo: str, *args: str, check: bool = True) -> subprocess.CompletedProcess:
    done = subprocess.run(["git", "-C", repo, *args], capture_output=True, text=True)
    if check and done.returncode != 0:
        raise BadInput(f"git {' '.join(args)} failed: {_last_line(done.stderr + done.stdout)}", repo)
    return done


def resolve_commit(repo: str, ref: str) -> str | None:
    """The full hash ``ref`` names in ``repo`` (a prefix, a branch, a tag), or None."""
    done = git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}", check=False)
    return done.stdout.strip() if done.returncode == 0 else None


def test_command(test_cmd: str, junit_path: str) -> str:
    quoted = shlex.quote(junit_path)
    if PLACEHOLDER in test_cmd:
        return test_cmd.replace(PLACEHOLDER, quoted)
    return f"{test_cmd} --junitxml={quoted}"


def run_in_worktree(repo: str, commit: str, build_cmd: str | None, test_cmd: str, junit_path: str,
                    log_path: str, say=None) -> None:
    """Check ``commit`` out in a temporary worktree of ``repo``, build and test it there.

    The JUnit XML lands at ``junit_path``; both commands' output goes to ``log_path``.
    Raises BadInput when the build fails or the tests leave no JUnit XML.
    """
    short = commit[:10]
    folder = tempfile.mkdtemp(prefix=f"flagos-doctor-suite-{short}-")
    tree = os.path.join(folder, "tree")
    git(repo, "worktree", "add", "--detach", "--quiet", tree, commit)
    try:
        env = dict(os.environ)
        # The worktree's own code first on the import path, ahead of any copy installed
        # from the user's checkout (an editable install would otherwise win).
        paths = [tree] + ([os.path.join(tree, "src")] if os.path.isdir(os.path.join(tree, "src")) else [])
        env["PYTHONPATH"] = os.pathsep.join(paths + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
        env[ENV_VAR] = junit_path
        with open(log_path, "w", encoding="utf-8") as log:
            if build_cmd:
                if say:
                    say(f"{short}: build: {build_cmd}")
                code = _shell(build_cmd, tree, env, log)
                if code != 0:
                    raise BadInput(f"build command exited with status {code} at {short}: "
                                   f"{_last_line(_read(log_path))} (log: {log_path})", build_cmd)
            command = test_command(test_cmd, junit_path)
            if say:
                say(f"{short}: tests: {command}")
            code = _shell(command, tree, env, log)
        if not os.path.isfile(junit_path) or os.path.getsize(junit_path) == 0:
            raise BadInput(f"test command exited with status {code} at {short} and wrote no JUnit XML: "
                           f"{_last_line(_read(log_path))} (log: {log_path})", test_cmd)
    finally:
        if git(repo, "worktree", "remove", "--force", tree, check=False).returncode != 0:
            shutil.rmtree(tree, ignore_errors=True)
            git(repo, "worktree", "prune", check=False)
        shutil.rmtree(folder, ignore_errors=True)


def _shell(command: str, cwd: str, env: dict, log) -> int:
    log.write(f"$ {command}\n")
    log.flush()
    done = subprocess.run(command, shell=True, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                          stdin=subprocess.DEVNULL)
    log.flush()
    return done.returncode


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return ""


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:200] if lines else "(no output)"


__all__ = ["ENV_VAR", "PLACEHOLDER", "resolve_commit", "run_in_worktree", "test_command"]
