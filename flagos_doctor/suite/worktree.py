"""Running the build and test commands of one commit in a temporary git worktree.

The worktree itself is :mod:`flagos_doctor.worktree`'s; this module adds the test command
(told where to write its JUnit XML) and the log of both commands, kept outside the worktree.
"""

from __future__ import annotations

import os
import shlex
import subprocess

from flagos_doctor.errors import BadInput
from flagos_doctor.worktree import env_with_import_path, temporary_worktree

#: Where the test command is told to write its JUnit XML: ``{junitxml}`` in the command is
#: replaced by the path; without it, ``--junitxml=PATH`` is appended. Also set in the
#: environment as FLAGOS_DOCTOR_JUNITXML, for a wrapper script.
PLACEHOLDER = "{junitxml}"
ENV_VAR = "FLAGOS_DOCTOR_JUNITXML"


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
    with temporary_worktree(repo, commit, "flagos-doctor-suite-") as (_, tree):
        # The worktree's own code first on the import path, ahead of any copy installed
        # from the user's checkout (an editable install would otherwise win).
        env = env_with_import_path([tree] + ([os.path.join(tree, "src")] if os.path.isdir(os.path.join(tree, "src")) else []))
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


__all__ = ["ENV_VAR", "PLACEHOLDER", "run_in_worktree", "test_command"]
