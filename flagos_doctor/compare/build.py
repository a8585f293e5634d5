"""Building and surveying a commit that the results store does not have yet.

The way asv's ``continuous`` builds two commits: for each missing arm,

1. ``git worktree add --detach`` of the user's repository at that commit, in a temporary
   folder (the user's checkout, index and HEAD are never touched);
2. the build command (``--build-cmd``) run in that worktree, its output kept in a log;
3. a child ``python -m flagos_doctor survey`` with the worktree first on ``PYTHONPATH`` and
   the survey options the user gave (conf, stack, ops, spec, ...), writing a results file.
   A build command whose last line ends in ``PYTHONPATH=<folder>`` (what
   ``python -m flagos_doctor.torch_fl_build`` prints: it builds outside the worktree, in its
   cache) puts that folder ahead of the worktree;
4. that file filed in the store under the full commit, so the next comparison finds it;
5. the worktree removed (``git worktree remove --force``, then ``git worktree prune``).

Nothing is installed anywhere unless the build command does it: a build command that runs
``pip install`` installs into whatever interpreter it names, so it should name a virtual
environment (and ``--python`` that environment's interpreter), or build in place
(``python setup.py build_ext --inplace``) and rely on ``PYTHONPATH``.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import flagos_doctor
from flagos_doctor import worktree
from flagos_doctor.childproc import tail_text
from flagos_doctor.compare.arms import SURVEY_KIND, Arm, load_results
from flagos_doctor.compare.diff import COMPARABILITY, lookup
from flagos_doctor.errors import BadInput
from flagos_doctor.options import SurveyOptions
from flagos_doctor.store import Store

def resolve_commit(repo: str, ref: str) -> str:
    """The full commit ``ref`` names in ``repo``; BadInput when it names none."""
    if not os.path.isdir(repo):
        raise BadInput("no such directory (--repo)", repo)
    commit = worktree.resolve_commit(repo, ref)
    if commit is None:
        raise BadInput(f"{ref!r} is neither a results file, nor a run in the store, nor a commit of {repo}", ref)
    return commit


def announced_import_path(log_text: str) -> str | None:
    """The folder a build command's last line names as ``PYTHONPATH=<folder>``, or None."""
    lines = [line.strip() for line in log_text.splitlines() if line.strip()]
    match = re.search(r"PYTHONPATH=(\S+)$", lines[-1]) if lines else None
    return match.group(1) if match and os.path.isdir(match.group(1)) else None


def survey_argv(options: SurveyOptions, output: str) -> list[str]:
    """The ``flagos-doctor survey`` arguments for one arm, paths made absolute."""
    argv = ["survey", "--stack", options.stack, "--backend", options.backend, "--python", options.python,
            *(("--workers", str(options.workers)) if options.workers is not None else ()),
            *(() if options.shared_autotune else ("--no-shared-autotune",)),
            "--isolation", options.isolation, "--tasks", options.tasks,
            "--timeout", str(options.timeout),
            "--output", output, "--no-store", "--quiet"]
    if options.conf:
        argv += ["--conf", os.path.abspath(options.conf)]
    if options.spec:
        argv += ["--spec", os.path.abspath(options.spec)]
    if options.routes:
        argv += ["--routes", options.routes]
    if options.ops:
        argv += ["--ops", ",".join(options.ops)]
    if options.device:
        argv += ["--device", options.device]
    if options.devices:
        argv += ["--devices", ",".join(options.devices)]
    if options.keep_env:
        argv.append("--keep-env")
    return argv


def fingerprint(document: dict) -> str:
    """A short digest of what must match for runs to be comparable (the store's file name).

    Uses the survey's own fingerprint when it offers one, so runs it files and runs filed
    here land side by side.
    """
    comparable = document.get("comparable")
    if isinstance(comparable, dict):
        try:
            from flagos_doctor.survey.results import fingerprint as survey_fingerprint

            return survey_fingerprint(comparable)
        except (ImportError, TypeError, ValueError):
            pass
    parts = {name: lookup(document, paths) for name, paths in COMPARABILITY}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()[:12]


class Builder:
    """Builds and surveys missing arms from ``repo``; ``say`` reports progress (one line each)."""

    def __init__(self, repo: str, build_cmd: str | None, survey: SurveyOptions, store: Store, say=None):
        self.repo = os.path.abspath(repo)
        self.build_cmd = build_cmd
        self.survey = survey
        self.store = store
        self.say = say or (lambda line: print(line, file=sys.stderr))

    def arm(self, ref: str) -> Arm:
        """Build, survey and file the commit ``ref`` names; return the arm."""
        commit = resolve_commit(self.repo, ref)
        filed = [e for e in self.store.entries(SURVEY_KIND) if e.key == commit]
        if filed:
            path = max(filed, key=lambda e: os.path.getmtime(e.path)).path
            return Arm(ref=ref, path=path, document=load_results(path), source="store", commit=commit)
        package_root = os.path.dirname(os.path.dirname(os.path.abspath(flagos_doctor.__file__)))
        with worktree.temporary_worktree(self.repo, commit, "flagos-doctor-") as (scratch, tree):
            self.say(f"{ref}: worktree of {self.repo} at {commit[:12]}")
            env = worktree.env_with_import_path([tree, package_root])
            survey_cwd = tree
            log_path = os.path.join(scratch, "build.log")
            if self.build_cmd:
                self.say(f"{ref}: building: {self.build_cmd}")
                with open(log_path, "wb") as log:
                    done = subprocess.run(self.build_cmd, shell=True, cwd=tree, env=env,
                                          stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
                if done.returncode != 0:
                    with open(log_path, "rb") as log:
                        tail = tail_text(log.read(), max_lines=5)
                    raise BadInput(f"build command exited with {done.returncode}; last lines:\n{tail}",
                                   f"{ref} ({commit[:12]})")
                with open(log_path, "rb") as log:
                    built = announced_import_path(log.read().decode(errors="replace"))
                if built:
                    self.say(f"{ref}: importing the build from {built}")
                    env = worktree.env_with_import_path([built, tree, package_root])
                    survey_cwd = scratch  # ``python -m`` puts its folder first: the unbuilt tree must not shadow the build
            results = os.path.join(scratch, "results.json")
            self.say(f"{ref}: surveying ({self.survey.stack})")
            # In the worktree: ``python -m`` puts the working folder first on sys.path, and
            # the user's own checkout (often where they run this) must not shadow it.
            with open(os.path.join(scratch, "survey.log"), "wb") as log:
                done = subprocess.run([sys.executable, "-m", "flagos_doctor", *survey_argv(self.survey, results)],
                                      cwd=survey_cwd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                      stderr=subprocess.STDOUT)
            if not os.path.isfile(results):
                with open(os.path.join(scratch, "survey.log"), "rb") as log:
                    tail = tail_text(log.read(), max_lines=5)
                raise BadInput(f"the survey wrote no results (exit {done.returncode}); last lines:\n{tail}",
                               f"{ref} ({commit[:12]})")
            document = load_results(results)
            path = self.store.file(SURVEY_KIND, commit, fingerprint(document), results)
            self.say(f"{ref}: filed as {path}")
            return Arm(ref=ref, path=path, document=document, source="built", commit=commit)
