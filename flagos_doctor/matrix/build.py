"""The matrix document: a pure function of the runs' results documents, no I/O.

:func:`build` returns a document of schema ``flagos-doctor/matrix/1``::

    columns   [{label, ref, path, source, stack, version, device, device_type, commit,
                store_key, fingerprint, spec_sha256, complete, differences, note}]
              one per run; ``differences`` are the comparability fields (route set,
              harness, profiles, tolerances, device type, stack) in which the run
              differs from the first column, and ``note`` says so in words
              plus what the HTML page's headers show: ``flag_gems`` (its version),
              ``date`` (when the survey started) and ``census_sha256``
    verdicts  the verdicts met, in the survey's order, unknown ones after
    rows      [{overload, family, cells: [{verdict, marks, statuses, cases} | null]}]
              one per overload of any run, sorted; a cell is null where that run has
              no such overload (it is not routed there); ``statuses`` counts its cases
              by status; ``cases`` [{profile, status, route, cause}] each case as
              recorded, ``cause`` an index into ``causes`` (null for a PASS)
    causes    [{status, signature, counted, cases: [n per column]}] the runs' failure
              groups (:mod:`flagos_doctor.results.groups`: one per status and normalised
              cause), largest first; ``counted``: the verdicts count it as a failure
    totals    [{overloads, verdicts: {verdict: n}, marks: {mark: n}}] one per column
    marks     {mark: meaning} for the marks that occur

Marks, where the results carry what they need (runs without it simply show none):

* ``native-also``: a failing case fails the same way on the stack's native path (its
  ``baseline`` has its status: :func:`flagos_doctor.results.verdicts.is_native_also`), so
  the verdict does not count it;
* ``flaky``: a case came out FLAKY (its repeats disagreed).

Statuses and verdicts this module does not know are shown as they are.
"""

from __future__ import annotations

import os

from flagos_doctor.results.comparable import differences, lookup
from flagos_doctor.results.groups import NOT_FAILURES, signature
from flagos_doctor.results.model import VERDICTS, family
from flagos_doctor.results.verdicts import is_native_also

MATRIX_SCHEMA = "flagos-doctor/matrix/1"

NATIVE_ALSO = "native-also"
FLAKY = "flaky"
MARKS = {
    NATIVE_ALSO: "the stack's native path fails these cases the same way (not counted)",
    FLAKY: "some cases are FLAKY: repeated runs disagreed",
}
_SPEC_SHA = (("provenance", "spec_sha256"), ("provenance", "spec", "sha256"), ("comparable", "spec_sha256"))


class Causes:
    """The runs' failure groups, numbered as the cells' cases meet them: ``(status,
    signature)`` -> its index and its count of cases in each column."""

    def __init__(self, columns: int):
        self.columns = columns
        self.found: dict = {}

    def index(self, case: dict, column: int) -> int | None:
        cause = signature(case)
        if cause is None:
            return None
        key = (str(case.get("status")), cause)
        group = self.found.get(key)
        if group is None:
            group = self.found[key] = {"index": len(self.found), "cases": [0] * self.columns}
        group["cases"][column] += 1
        return group["index"]

    def listed(self) -> tuple[list[dict], dict]:
        """The groups largest first, and each one's old index -> its place in that list."""
        order = sorted(self.found.items(), key=lambda kv: (-sum(kv[1]["cases"]), kv[0]))
        groups = [{"status": status, "signature": cause, "counted": status not in NOT_FAILURES, "cases": g["cases"]}
                  for (status, cause), g in order]
        return groups, {g["index"]: place for place, (_key, g) in enumerate(order)}


def cell(entry: dict, causes: Causes | None = None, column: int = 0) -> dict:
    """The matrix cell of one overload's results entry; its cases' causes numbered by ``causes``."""
    statuses: dict = {}
    marks = []
    cases = []
    for case in entry.get("cases") or []:
        status = case.get("status")
        statuses[str(status)] = statuses.get(str(status), 0) + 1
        # The survey's own rule (a failure the native path shares the same way, not counted):
        # a looser one marked 21 of 5.0.2's H200 overloads where its summary counts 18.
        if isinstance(case.get("baseline"), dict) and status is not None and is_native_also(case):
            if NATIVE_ALSO not in marks:
                marks.append(NATIVE_ALSO)
        if status == "FLAKY" and FLAKY not in marks:
            marks.append(FLAKY)
        cases.append({"profile": case.get("profile"), "status": status, "route": case.get("route"),
                      "cause": causes.index(case, column) if causes is not None else None})
    return {"verdict": entry.get("verdict"), "marks": [m for m in MARKS if m in marks], "statuses": statuses,
            "cases": cases}


def label(facts: dict) -> str:
    """A column's label: stack and version, device, commit."""
    parts = [" ".join(str(p) for p in (facts.get("stack"), facts.get("version")) if p) or "unknown stack"]
    if facts.get("device"):
        parts.append(str(facts["device"]))
    if facts.get("commit"):
        parts.append(str(facts["commit"])[:12])
    return " · ".join(parts)


def _note(diffs: list[dict], document: dict) -> str | None:
    notes = []
    if diffs:
        fields = ", ".join(d["field"] for d in diffs)
        notes.append(f"not made like column 1: its {fields} {'differs' if len(diffs) == 1 else 'differ'}")
    if document.get("complete") is False:
        notes.append("incomplete run (PENDING overloads)")
    return "; ".join(notes) or None


def _name_of(run: dict) -> str:
    """What names a run among others of one label: its file's name, or its store key and fingerprint."""
    if run.get("source") == "store" and run.get("store_key"):
        return f"{run['store_key']}/{run.get('fingerprint') or ''}".rstrip("/")
    return os.path.basename(run.get("path") or run.get("ref") or "") or "?"


def _column(run: dict, first: dict, index: int, text: str) -> dict:
    document, facts = run["document"], run["facts"]
    diffs = differences(first, document) if index else []
    return {
        **facts, "label": text, "ref": run.get("ref"), "path": run.get("path"), "source": run.get("source"),
        "fingerprint": run.get("fingerprint"), "spec_sha256": lookup(document, _SPEC_SHA),
        "census_sha256": document.get("census_sha256"),
        "complete": document.get("complete"), "differences": diffs, "note": _note(diffs, document),
    }


def _columns(runs: list[dict]) -> list[dict]:
    first = runs[0]["document"] if runs else {}
    # Runs that share a label (the same stack, version and device) are told apart by what
    # names them: the file, else the store entry (a CSV column "#2" said nothing).
    labels = [label(run["facts"]) for run in runs]
    shared = {text for text in labels if labels.count(text) > 1}
    seen_labels: dict = {}
    columns = []
    for index, run in enumerate(runs):
        text = labels[index]
        if text in shared:
            text += f" ({_name_of(run)})"
        seen_labels[text] = seen_labels.get(text, 0) + 1
        if seen_labels[text] > 1:
            text += f" #{seen_labels[text]}"
        columns.append(_column(run, first, index, text))
    return columns


def build(runs: list[dict]) -> dict:
    """The matrix of ``runs``: ``[{document, facts, ref, path, source, store_key, fingerprint}]``
    (``facts``: stack, version, flag_gems, device, device_type, commit, store_key, date)."""
    names = sorted({name for run in runs for name in (run["document"].get("overloads") or {})})
    rows = []
    totals = [{"overloads": 0, "verdicts": {}, "marks": {}} for _ in runs]
    causes = Causes(len(runs))
    met = set()
    for name in names:
        cells = []
        for index, run in enumerate(runs):
            entry = (run["document"].get("overloads") or {}).get(name)
            if entry is None:
                cells.append(None)
                continue
            value = cell(entry, causes, index)
            cells.append(value)
            total = totals[index]
            total["overloads"] += 1
            verdict = str(value["verdict"])
            met.add(verdict)
            total["verdicts"][verdict] = total["verdicts"].get(verdict, 0) + 1
            for mark in value["marks"]:
                total["marks"][mark] = total["marks"].get(mark, 0) + 1
        rows.append({"overload": name, "family": family(name), "cells": cells})
    groups, place = causes.listed()
    for row in rows:  # the causes' numbers as listed, largest first
        for value in row["cells"]:
            for case in (value or {}).get("cases") or ():
                if case["cause"] is not None:
                    case["cause"] = place[case["cause"]]
    order = [v for v in VERDICTS if v in met] + sorted(met - set(VERDICTS))
    used = {mark for total in totals for mark in total["marks"]}
    return {
        "schema": MATRIX_SCHEMA,
        "columns": _columns(runs),
        "verdicts": order,
        "rows": rows,
        "causes": groups,
        "totals": totals,
        "marks": {mark: meaning for mark, meaning in MARKS.items() if mark in used},
    }
