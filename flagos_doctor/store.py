"""The results store: every survey (and suite) run filed by commit, as asv files results.

Layout, plain files a person can open::

    <root>/<kind>/<key>/<fingerprint>.json
    <root>/<kind>/<key>/<fingerprint>@2.json   the next run of the same setup (@3, ...)
    <root>/logs/<kind>/<key>.log          the commands run to make a run of a commit

``kind`` is ``survey`` or ``suite``; ``key`` is the torch_fl commit (full hash, ``-dirty``
appended for a dirty checkout) or, where there is no commit, the stack and its version
(``flag_gems-5.0.2``); ``fingerprint`` is a short digest of the run's setup (route set,
spec, device type...; for a survey :func:`flagos_doctor.results.comparable.fingerprint`),
so runs on one commit with another setup live side by side, and each run of one setup
is kept (a survey run three times was one file); the same results filed again is not a run.

Default root: ``$FLAGOS_DOCTOR_STORE``, else ``$XDG_DATA_HOME/flagos-doctor/results``
(``~/.local/share/flagos-doctor/results``): per user, outside any checkout, so a
worktree build or a ``git clean`` never loses results.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from flagos_doctor import files, redact
from flagos_doctor.errors import BadInput

#: The kinds of run the store files.
SURVEY_KIND = "survey"
SUITE_KIND = "suite"

_SAFE = re.compile(r"[^A-Za-z0-9._+-]")
#: Between a fingerprint and the number of a later run of the same setup (never in a safe name).
RUN_MARK = "@"


def _same_text(path: str, text: str) -> bool:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read() == text
    except (OSError, UnicodeDecodeError):
        return False


def default_root() -> str:
    if os.environ.get("FLAGOS_DOCTOR_STORE"):
        return os.environ["FLAGOS_DOCTOR_STORE"]
    data_home = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return os.path.join(data_home, "flagos-doctor", "results")


def safe_name(text: str) -> str:
    """``text`` made safe as one path component."""
    return _SAFE.sub("_", text) or "_"


@dataclass(frozen=True)
class Entry:
    kind: str
    key: str
    fingerprint: str
    path: str


class Store:
    def __init__(self, root: str | None = None):
        self.root = os.path.abspath(root or default_root())

    def path_for(self, kind: str, key: str, fingerprint: str) -> str:
        return os.path.join(self.root, kind, safe_name(key), safe_name(fingerprint) + ".json")

    def log_path(self, kind: str, key: str) -> str:
        """Where the commands run to make a ``kind`` run of ``key`` (a build, a survey, the
        tests) log their output: beside the runs, where :meth:`entries` does not look."""
        return os.path.join(self.root, "logs", kind, safe_name(key) + ".log")

    def file(self, kind: str, key: str, fingerprint: str, source_path: str) -> str:
        """Copy a finished results file into the store (atomically, scrubbed of secrets as
        every write is); return its new path. A full disk or a lost permission is a
        BadInput naming the store's file (nothing of the source is lost)."""
        with open(source_path, encoding="utf-8") as handle:
            text = handle.read()
        first = self.path_for(kind, key, fingerprint)
        target, number = first, 1
        while os.path.lexists(target):
            if _same_text(target, redact.scrub_environ(text)):
                return target  # this very results file, filed before (a resumed, complete run)
            number += 1
            target = f"{first[:-5]}{RUN_MARK}{number}.json"
        files.atomic_write_text(target, text)
        return target

    def entries(self, kind: str) -> list[Entry]:
        folder = os.path.join(self.root, kind)
        found = []
        if not os.path.isdir(folder):
            return found
        for key in sorted(os.listdir(folder)):
            key_dir = os.path.join(folder, key)
            if not os.path.isdir(key_dir):
                continue
            for name in sorted(os.listdir(key_dir)):
                if name.endswith(".json"):
                    fingerprint = name[:-5].split(RUN_MARK)[0]
                    found.append(Entry(kind, key, fingerprint, os.path.join(key_dir, name)))
        return found

    def lookup(self, kind: str, ref: str, fingerprint: str | None = None) -> str:
        """Resolve ``ref`` (a results file, or a commit prefix / key in the store) to a path.

        Raises BadInput when nothing matches or when the prefix is ambiguous.
        """
        files.refuse_special(ref)
        if os.path.isfile(ref):
            return ref
        matches = [e for e in self.entries(kind) if e.key.startswith(ref)]
        if fingerprint is not None and len(matches) > 1:
            matches = [e for e in matches if e.fingerprint == fingerprint] or matches
        if not matches:
            raise BadInput(f"no results file and no {kind} run filed under {ref!r} in the store {self.root}", ref)
        keys = sorted({e.key for e in matches})
        if len(keys) > 1:
            raise BadInput(f"ambiguous: {ref!r} matches {', '.join(keys)}", ref)
        if len(matches) > 1:
            newest = max(matches, key=lambda e: os.path.getmtime(e.path))
            return newest.path
        return matches[0].path


class Culprits:
    """The cases a replay found leaving a sticky device error behind on one stack
    (:mod:`flagos_doctor.survey.replay`), latest first, in ``<root>/culprits/<stack>.json``:
    the next survey of the stack tries them first. The same culprit poisoned a case in
    every torch_fl survey of a week (both arms of a compare too); a bisection for it costs
    several replays, a known culprit one. A hint, never a verdict: a known culprit counts
    only when its replay brings the error back, so a file that cannot be read is no list."""

    SCHEMA = "flagos-doctor/culprits/1"
    SCHEMA_PREFIX = "flagos-doctor/culprits/"
    KEEP = 50

    def __init__(self, store: Store, stack: str):
        self.path = os.path.join(store.root, "culprits", safe_name(stack) + ".json")

    def known(self) -> list[tuple[str, str]]:
        try:
            document = files.load_json(self.path, self.SCHEMA_PREFIX)
            return [(str(overload), str(profile)) for overload, profile in document.get("culprits", [])]
        except (BadInput, OSError, TypeError, ValueError):
            return []

    def remember(self, culprit: tuple[str, str]) -> None:
        found = [tuple(culprit)] + [c for c in self.known() if c != tuple(culprit)]
        try:
            files.write_json(self.path, {"schema": self.SCHEMA, "culprits": [list(c) for c in found[: self.KEEP]]})
        except BadInput:
            pass  # a store that cannot be written loses a hint, not a result
