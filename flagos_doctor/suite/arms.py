"""Suite arms: what ``suite --compare A B`` reads, and how it tests a commit it builds.

The flow (a file, a commit of ``--repo`` built in a temporary worktree, a run in the store)
is :mod:`flagos_doctor.arms`'s; a suite arm adds:

* a file is pytest's JUnit XML, or a run filed in the store (JSON), by content;
* a commit's run in the store is the one filed under it with this ``--test-cmd`` and
  ``--build-cmd`` (:func:`commands_fingerprint`): runs of one commit with other commands
  sit side by side;
* in the built worktree, the test command is told where to write its JUnit XML;
* runs are filed as ``<store>/suite/<full commit>/<fingerprint>.json``: the JUnit XML
  converted to JSON (schema ``flagos-doctor/suite-run/1``, one entry per test), with the
  commands, so a person can open it.
"""

from __future__ import annotations

import datetime
import hashlib
import os
import shlex

from flagos_doctor.arms import Arm, ArmKind
from flagos_doctor.files import write_json
from flagos_doctor.store import SUITE_KIND, Store
from flagos_doctor.suite.junit import load_run, parse_junit, run_document
from flagos_doctor.suite.model import SuiteRun

#: Where the test command is told to write its JUnit XML: ``{junitxml}`` in the command is
#: replaced by the path; without it, ``--junitxml=PATH`` is appended. Also set in the
#: environment as FLAGOS_DOCTOR_JUNITXML, for a wrapper script.
PLACEHOLDER = "{junitxml}"
ENV_VAR = "FLAGOS_DOCTOR_JUNITXML"
JUNIT_NAME = "junit.xml"


def test_command(test_cmd: str, junit_path: str) -> str:
    quoted = shlex.quote(junit_path)
    if PLACEHOLDER in test_cmd:
        return test_cmd.replace(PLACEHOLDER, quoted)
    return f"{test_cmd} --junitxml={quoted}"


def commands_fingerprint(test_cmd: str | None, build_cmd: str | None) -> str:
    """What a suite run is filed under beside its commit: a digest of the commands that made it."""
    text = f"test-cmd\0{test_cmd or ''}\0build-cmd\0{build_cmd or ''}"
    return hashlib.sha256(text.encode()).hexdigest()[:12]


class SuiteArms(ArmKind):
    """Suite arms, built ones tested with ``test_cmd`` after ``build_cmd``."""

    store_kind = SUITE_KIND

    def __init__(self, repo: str | None = None, test_cmd: str | None = None, build_cmd: str | None = None):
        self.repo = repo
        self.test_cmd = test_cmd
        self.build_cmd = build_cmd

    def load(self, path: str) -> SuiteRun:
        return load_run(path)

    def filed(self, store: Store, commit: str) -> str | None:
        path = store.path_for(self.store_kind, commit, commands_fingerprint(self.test_cmd, self.build_cmd))
        return path if os.path.isfile(path) else None

    def import_path(self, tree: str) -> list[str]:
        # The worktree's own code first, ahead of any copy installed from the user's
        # checkout (an editable install would otherwise win); a src/ layout too.
        src = os.path.join(tree, "src")
        return [tree] + ([src] if os.path.isdir(src) else [])

    def env(self, env: dict, scratch: str) -> dict:
        return {**env, ENV_VAR: os.path.join(scratch, JUNIT_NAME)}

    def make(self, ref, commit, tree, scratch, env, build_output, log, say) -> str:
        junit_path = os.path.join(scratch, JUNIT_NAME)
        command = test_command(self.test_cmd, junit_path)
        say(f"{commit[:10]}: tests: {command}")
        code, printed = log.run(command, tree, env)
        if not os.path.isfile(junit_path) or os.path.getsize(junit_path) == 0:
            raise log.failure("test command", code, printed, commit, ref, why=" and wrote no JUnit XML")
        document = run_document(
            parse_junit(junit_path),
            commit=commit,
            repo=os.path.abspath(self.repo),
            test_cmd=self.test_cmd,
            build_cmd=self.build_cmd,
            created=datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        )
        converted = os.path.join(scratch, "run.json")
        write_json(converted, document)
        return converted

    def file(self, store: Store, commit: str, path: str) -> str:
        return store.file(self.store_kind, commit, commands_fingerprint(self.test_cmd, self.build_cmd), path)


def label(arm: Arm) -> str:
    """What the views call an arm: the file the user named, else the short commit."""
    if arm.commit is None and arm.ref == arm.path:
        return arm.ref
    return (arm.commit or arm.content.commit or arm.ref)[:10]


def describe(arm: Arm) -> dict:
    """What the comparison document says of a suite arm."""
    return {"label": label(arm), "origin": arm.source.value, "source": arm.path,
            "commit": arm.commit or arm.content.commit}
