"""The matrix document: a pure function of the runs' results documents, no I/O.

:func:`build` returns a document of schema ``flagos-doctor/matrix/1``::

    columns   [{label, ref, path, source, stack, version, device, device_type, commit,
                store_key, fingerprint, spec_sha256, complete, differences, note}]
              one per run; ``differences`` are the comparability fields (route set,
              harness, profiles, tolerances, device type, stack) in which the run
              differs from the first column, and ``note`` says so in words
    verdicts  the verdicts met, in the survey's order, unknown ones after
    rows      [{overload, family, cells: [{verdict, marks, statuses} | null]}]
              one per overload of any run, sorted; a cell is null where that run has
              no such overload; ``statuses`` counts its cases by status
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
from flagos_doctor.results.model import VERDICTS
from flagos_doctor.results.verdicts import is_native_also

MATRIX_SCHEMA = "flagos-doctor/matrix/1"

NATIVE_ALSO = "native-also"
FLAKY = "flaky"
MARKS = {
    NATIVE_ALSO: "the stack's native path fails these cases the same way (not counted)",
    FLAKY: "some cases are FLAKY: repeated runs disagreed",
}
_SPEC_SHA = (("provenance", "spec_sha256"), ("provenance", "spec", "sha256"), ("comparable", "spec_sha256"))


def family(overload: str) -> str:
    """The op family of an overload: its name without the overload suffix and without
    leading and trailing underscores (``add_.Tensor``, ``add.out`` and ``__iadd__`` are
    ``add`` and ``iadd``)."""
    base = overload.split(".", 1)[0].strip("_")
    return base or overload


def cell(entry: dict) -> dict:
    """The matrix cell of one overload's results entry."""
    statuses: dict = {}
    marks = []
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
    return {"verdict": entry.get("verdict"), "marks": [m for m in MARKS if m in marks], "statuses": statuses}


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


def build(runs: list[dict]) -> dict:
    """The matrix of ``runs``: ``[{document, facts, ref, path, source, store_key, fingerprint}]``
    (``facts``: stack, version, device, device_type, commit, store_key)."""
    columns = []
    first = runs[0]["document"] if runs else {}
    # Runs that share a label (the same stack, version and device) are told apart by what
    # names them: the file, else the store entry (a CSV column "#2" said nothing).
    labels = [label(run["facts"]) for run in runs]
    shared = {text for text in labels if labels.count(text) > 1}
    seen_labels: dict = {}
    for index, run in enumerate(runs):
        document, facts = run["document"], run["facts"]
        diffs = differences(first, document) if index else []
        text = labels[index]
        if text in shared:
            text += f" ({_name_of(run)})"
        seen_labels[text] = seen_labels.get(text, 0) + 1
        if seen_labels[text] > 1:
            text += f" #{seen_labels[text]}"
        columns.append({
            **facts, "label": text, "ref": run.get("ref"), "path": run.get("path"), "source": run.get("source"),
            "fingerprint": run.get("fingerprint"), "spec_sha256": lookup(document, _SPEC_SHA),
            "complete": document.get("complete"), "differences": diffs, "note": _note(diffs, document),
        })
    names = sorted({name for run in runs for name in (run["document"].get("overloads") or {})})
    rows = []
    totals = [{"overloads": 0, "verdicts": {}, "marks": {}} for _ in runs]
    met = set()
    for name in names:
        cells = []
        for index, run in enumerate(runs):
            entry = (run["document"].get("overloads") or {}).get(name)
            if entry is None:
                cells.append(None)
                continue
            value = cell(entry)
            cells.append(value)
            total = totals[index]
            total["overloads"] += 1
            verdict = str(value["verdict"])
            met.add(verdict)
            total["verdicts"][verdict] = total["verdicts"].get(verdict, 0) + 1
            for mark in value["marks"]:
                total["marks"][mark] = total["marks"].get(mark, 0) + 1
        rows.append({"overload": name, "family": family(name), "cells": cells})
    order = [v for v in VERDICTS if v in met] + sorted(met - set(VERDICTS))
    used = {mark for total in totals for mark in total["marks"]}
    return {
        "schema": MATRIX_SCHEMA,
        "columns": columns,
        "verdicts": order,
        "rows": rows,
        "totals": totals,
        "marks": {mark: meaning for mark, meaning in MARKS.items() if mark in used},
    }
