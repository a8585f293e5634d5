"""The results file of a survey and its journal: :class:`ResultsFile`, their only writer.

It owns the file format: it reads a results file and its journal back (checked field by
field, each case against :mod:`.case`), builds the results document
(:func:`.document.build`) from what it holds, and writes both files; confirm and replay
record what they find through its ``record_*`` methods.

``<output>.journal`` is the write path: one JSON line per event as it happens (the
profiles of an overload, each case, the end of an overload), so a survey killed with
SIGKILL loses at most the case in flight. ``<output>`` is the results document (schema
``flagos-doctor/survey/1``), compacted from what the journal holds and replaced atomically
each time another 1/COMPACTIONS of the route set has finished (and at the end): writing it,
which costs the size of the whole route set, after every overload made a survey of 50,000
routes quadratic. Opening a survey loads both,
refuses a file made with another setup (any field :mod:`.comparable` records, naming the
first that differs), compacts them into a fresh results file and journal, and says what remains.
"""

from __future__ import annotations

import json
import os

from flagos_doctor import files, redact
from flagos_doctor.errors import BadInput
from flagos_doctor.results import case as case_record, document as results, model
from flagos_doctor.results.comparable import check_resumable

#: About how many times a survey rewrites its results file before the end.
COMPACTIONS = 20

#: The kinds of a journal line.
JOURNAL_KINDS = ("header", "profiles", "case", "end", "drop")


class ResultsFile:
    """Finished overloads, partial ones, and the files that keep them."""

    def __init__(self, output: str, comparable: dict, routes: list[str] | None = None):
        self.output = os.path.abspath(output)
        self.path = self.output + ".journal"
        self.comparable = dict(comparable)
        self.routes = list(routes or [])  # the route set, in order
        self.provenance: dict = {}  # the document's provenance (the survey fills it in)
        self.measured: dict[str, str] = {}  # overload -> when its verdict was measured
        self.finished: dict[str, list[dict]] = {}  # overload -> cases, complete
        self.partial: dict[str, list[dict]] = {}  # overload -> cases recorded so far
        self.profiles: dict[str, list[str]] = {}  # overload -> its profiles, as the worker said
        self.previous: dict | None = None  # the results document found on disk
        self._seen: list[tuple[dict, str]] = []  # comparable fields found, and where
        self._fd: int | None = None
        self._ended_since = 0  # overloads finished since the results file was last written
        self.compactions = 0  # results file rewrites while the survey ran

    # -- opening -------------------------------------------------------------------------
    def load(self) -> None:
        """Read what an earlier run of the same survey left (results file, then journal)."""
        if os.path.exists(self.output):
            document = results.load(self.output)
            check_resumable(document.get("comparable", {}), self.comparable, self.output)
            self._seen.append((document.get("comparable", {}), self.output))
            self.previous = document
            for name, entry in document.get("overloads", {}).items():
                if entry["verdict"] != model.PENDING:  # checked: a PENDING one has no cases
                    cases = entry.get("cases", [])  # a file may leave an empty list out
                    self.finished[name] = list(cases)
                    self.profiles[name] = entry.get("profiles") or [c["profile"] for c in cases]
                elif entry.get("partial_cases"):
                    self.partial[name] = list(entry["partial_cases"])
                    if entry.get("profiles"):
                        self.profiles[name] = entry["profiles"]
        if os.path.exists(self.path):
            self._replay()

    def _replay(self) -> None:
        text = files.read_regular_text(self.path, files.MAX_JSON_BYTES, "journal")
        lines = text.splitlines()
        for number, line in enumerate(lines, start=1):
            try:
                record = json.loads(line)
            except (ValueError, RecursionError):
                continue  # the torn last line of a killed run
            files.refuse_lone_surrogates(record, f"{self.path}:{number}", line)
            self._apply(record, f"{self.path}:{number}")

    def _apply(self, record, where: str) -> None:
        """One journal line, checked (BadInput naming the line), applied."""
        if not isinstance(record, dict):
            raise BadInput(f"journal line is {type(record).__name__}, expected an object", where)
        kind = record.get("kind")
        if kind not in JOURNAL_KINDS:
            raise BadInput(f"field 'kind' is {record.get('kind')!r}, not one of {', '.join(JOURNAL_KINDS)}", where)
        if kind == "header":
            found = record.get("comparable", {})
            if not isinstance(found, dict):
                raise BadInput(f"field 'comparable' is {type(found).__name__}, expected an object", where)
            check_resumable(found, self.comparable, where)
            self._seen.append((found, where))
            return
        name = record.get("overload")
        if not isinstance(name, str):
            raise BadInput(f"field 'overload' is {name!r}, expected an overload's name", where)
        if kind == "profiles":
            profiles = record.get("profiles")
            if not isinstance(profiles, list) or not all(isinstance(p, str) for p in profiles):
                raise BadInput("field 'profiles' is not a list of profile names", where)
            self.profiles[name] = profiles
        elif kind == "case":
            case = case_record.check({k: v for k, v in record.items() if k not in ("kind", "overload")}, where, "case")
            cases = self.partial.setdefault(name, [])
            cases[:] = [c for c in cases if c["profile"] != case["profile"]] + [case]
        elif kind == "end":
            self.finished[name] = self.partial.pop(name, [])
        elif kind == "drop":
            self.finished.pop(name, None)
            self.partial.pop(name, None)

    def extend(self, more: dict) -> None:
        """Add comparability fields learnt once a worker started; check them against what was found."""
        for found, where in self._seen:
            check_resumable(found, more, where, names=tuple(more))
        self.comparable.update(more)

    def drop(self, names) -> None:
        """Forget ``names`` (``--rerun``): they run again from scratch."""
        for name in names:
            self.finished.pop(name, None)
            self.partial.pop(name, None)
            self.profiles.pop(name, None)

    # -- the document, and writing it -------------------------------------------------------
    def document(self) -> dict:
        """The results document of what is recorded so far."""
        return results.build(self.provenance, self.comparable, self.routes, self.finished, self.partial,
                             self.profiles, self.measured)

    def save(self) -> dict:
        """Write the results file (the journal unchanged); the document written."""
        document = self.document()
        files.write_json(self.output, document)
        return document

    def start(self) -> None:
        """Write the state so far and a fresh journal holding the partial overloads."""
        self.save()
        lines = [{"kind": "header", "comparable": self.comparable}]
        for name, cases in sorted(self.partial.items()):
            if name in self.profiles:
                lines.append({"kind": "profiles", "overload": name, "profiles": self.profiles[name]})
            lines.extend({"kind": "case", "overload": name, **case} for case in cases)
        files.atomic_write_text(self.path, "".join(json.dumps(line, sort_keys=True) + "\n" for line in lines))
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND)
        self._ended_since = 0

    def compact_due(self, route_count: int) -> bool:
        """Whether enough overloads finished since the last write to rewrite the results file."""
        return self._ended_since >= max(1, route_count // COMPACTIONS)

    def compact(self) -> None:
        """Write what the journal holds as the results file. The journal is
        left to grow (appends cost what they add); it is rewritten short when a survey is
        resumed, and removed when one completes."""
        self.save()
        self._ended_since = 0
        self.compactions += 1

    def checkpoint(self) -> None:
        """Write the results file and restart the journal from it (:meth:`start`): what the
        journal held is in the results file now, so later changes of finished cases
        (confirmation, saved with :meth:`save`) are not undone by a replay of the journal
        after a kill."""
        self.start()

    # -- while running ---------------------------------------------------------------------
    def _append(self, record: dict) -> None:
        data = (json.dumps(redact.scrub_environ(record), sort_keys=True) + "\n").encode()
        view = memoryview(data)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as exc:  # a full disk: one line; every record before this one is kept
            raise files.write_failed(self.path, exc) from None

    def record_profiles(self, name: str, profiles: list[str]) -> None:
        if self.profiles.get(name) != profiles:
            self.profiles[name] = list(profiles)
            self._append({"kind": "profiles", "overload": name, "profiles": list(profiles)})

    def record_case(self, name: str, case: dict) -> None:
        self._append({"kind": "case", "overload": name, **case})
        cases = self.partial.setdefault(name, [])
        cases[:] = [c for c in cases if c["profile"] != case["profile"]] + [case]

    def record_end(self, name: str) -> None:
        self._append({"kind": "end", "overload": name})
        self.finished[name] = self.partial.pop(name, [])
        self._ended_since += 1

    # -- what confirm and replay found (saved with :meth:`save`) ---------------------------
    def record_repeat(self, case: dict, status: str, kept: dict) -> list[str]:
        """One more run of ``case`` (confirm): its status, and ``kept`` of its record
        (:data:`.case.FIELDS`' ``repeat_details``); every run's status, the first's first."""
        statuses = case.setdefault("repeats", [case["status"]])
        statuses.append(status)
        case.setdefault("repeat_details", []).append(kept)
        return statuses

    def record_settled(self, case: dict, status: str, detail: str) -> bool:
        """``case`` is ``status`` after confirm or replay (:func:`.case.settle`: its first run
        kept in ``first_run``); True when this is the first change of it."""
        return case_record.settle(case, status, detail)

    def record_flaky(self, case: dict) -> None:
        """``case`` gave differing outcomes: FLAKY, its first run's detail kept."""
        case["status"] = model.FLAKY

    def record_baseline(self, case: dict, status: str, detail: str) -> None:
        case["baseline"] = {"status": status, "detail": detail}

    def record_replay(self, case: dict, runs: int, cases: int, came_back: bool, known: bool = False) -> None:
        case["replay"] = {"runs": runs, "cases": cases, "came_back": came_back, **({"known": True} if known else {})}

    def record_poisoned_by(self, victim: dict, culprit: dict) -> None:
        """The replay found what poisoned ``victim``: {overload, profile} or {overload: None, cases}."""
        victim["poisoned_by"] = culprit

    def record_poisoned(self, culprit: dict, victim: list) -> None:
        """``culprit`` left the device context poisoned for ``victim`` [overload, profile]."""
        culprit.setdefault("poisoned", []).append(list(victim))

    def remaining_profiles(self, name: str) -> list[str] | None:
        """The profiles of a partial overload still to run (``None``: all of them)."""
        if name not in self.partial or name not in self.profiles:
            return None
        done = {case["profile"] for case in self.partial[name]}
        return [p for p in self.profiles[name] if p not in done]

    def close(self, complete: bool) -> dict:
        """Write the final document (returned); the journal goes once nothing in it is needed any more."""
        document = self.save()
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        if complete and not self.partial:
            try:
                os.unlink(self.path)
            except OSError:
                pass
        return document
