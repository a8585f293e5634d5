"""Turning the ``A`` and ``B`` of ``suite --compare A B`` into runs.

Each argument is, in this order:

1. a file: pytest's JUnit XML, or a run filed in the results store (JSON, by content);
2. with ``--repo``: anything git resolves to a commit there (a prefix, a branch, a tag).
   The run filed in the store under that commit and this ``--test-cmd``/``--build-cmd``
   is used; missing, the commit is built and tested in a temporary worktree, and the run
   is filed in the store before the comparison;
3. without ``--repo``: a commit prefix in the results store (kind ``suite``).

Runs are filed as ``<store>/suite/<full commit>/<fingerprint>.json``: the JUnit XML
converted to JSON (schema ``flagos-doctor/suite-run/1``, one entry per test), with the
commands, so a person can open it. The fingerprint is a digest of the test and build
commands: runs of one commit with other commands sit side by side.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import tempfile
from dataclasses import dataclass

from flagos_doctor.errors import BadInput
from flagos_doctor.files import write_json
from flagos_doctor.store import Store
from flagos_doctor.suite import worktree
from flagos_doctor.worktree import resolve_commit
from flagos_doctor.suite.junit import load_run, parse_junit, run_document
from flagos_doctor.suite.model import SuiteRun

KIND = "suite"


@dataclass
class Arm:
    run: SuiteRun
    label: str  # what the views call it: the argument, or the short commit
    origin: str  # file | store | built
    commit: str | None = None

    def describe(self) -> dict:
        return {"label": self.label, "origin": self.origin, "source": self.run.source, "commit": self.commit}


def fingerprint(test_cmd: str | None, build_cmd: str | None) -> str:
    text = f"test-cmd\0{test_cmd or ''}\0build-cmd\0{build_cmd or ''}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def resolve_arm(ref: str, store: Store, repo: str | None = None, test_cmd: str | None = None,
                build_cmd: str | None = None, say=None) -> Arm:
    """Load (or build, test and file) the run ``ref`` names. Raises BadInput."""
    if os.path.isfile(ref):
        run = load_run(ref)
        return Arm(run, ref, "file", run.commit)
    if repo is None:
        try:
            path = store.lookup(KIND, ref)
        except BadInput as exc:
            raise BadInput(f"{exc.message} (or give --repo PATH --test-cmd CMD to run it)", exc.where)
        run = load_run(path)
        return Arm(run, (run.commit or ref)[:10], "store", run.commit)
    commit = resolve_commit(repo, ref)
    if commit is None:
        raise BadInput(f"neither a file nor a commit of {repo}", ref)
    filed = store.path_for(KIND, commit, fingerprint(test_cmd, build_cmd))
    if os.path.isfile(filed):
        if say:
            say(f"{commit[:10]}: filed in the store ({filed})")
        return Arm(load_run(filed), commit[:10], "store", commit)
    run = build_and_test(repo, commit, store, test_cmd, build_cmd, say)
    return Arm(run, commit[:10], "built", commit)


def build_and_test(repo: str, commit: str, store: Store, test_cmd: str, build_cmd: str | None, say=None) -> SuiteRun:
    """Run ``commit``'s tests in a worktree and file the run in the store; return the filed run."""
    with tempfile.TemporaryDirectory(prefix="flagos-doctor-suite-") as scratch:
        junit_path = os.path.join(scratch, "junit.xml")
        log_path = os.path.join(tempfile.gettempdir(), f"flagos-doctor-suite-{commit[:12]}.log")
        worktree.run_in_worktree(repo, commit, build_cmd, test_cmd, junit_path, log_path, say)
        run = parse_junit(junit_path)
        document = run_document(
            run,
            commit=commit,
            repo=os.path.abspath(repo),
            test_cmd=test_cmd,
            build_cmd=build_cmd,
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
        converted = os.path.join(scratch, "run.json")
        write_json(converted, document)
        filed = store.file(KIND, commit, fingerprint(test_cmd, build_cmd), converted)
    if say:
        say(f"{commit[:10]}: {len(run.tests)} tests, filed as {filed}")
    return load_run(filed)
