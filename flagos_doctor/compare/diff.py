"""The comparison of two survey results documents: a pure function, no I/O.

:func:`compare` takes two documents of schema ``flagos-doctor/survey/1`` and returns a
document of schema ``flagos-doctor/compare/1``::

    comparable        bool: every compared field agrees (:mod:`..results.comparable`)
    differences       [{field, a, b}]: the compared fields that differ
    census_identical  bool: both census digests present and equal
    census_sha256     {a, b}
    summary           {rows: [{name, a, b, delta}], a: {...}, b: {...}}
    transitions       [{overload, from, to, kind, mark}]: verdict changes, regressions first
    cases_changed     [{overload, profile, from: {status, route[, baseline]}|null, to: ..., regression}]
    flaky_only        bool: cases changed, and each of them is FLAKY on one side or the other
    sticky_traced     [{arm, overload, profile, status, poisoned_by}]: cases whose first run
                      in that arm failed with a sticky device error another case of its
                      worker left behind, traced by replay (:mod:`..survey.replay`): the
                      survey's noise, told so that a difference in their records is explained
    change_groups     [{from, to, cases, overloads, regression, members}]: the changed cases
                      grouped by status and cause on each side (:mod:`..results.groups`)
    failure_groups    [{status, signature, presence, a, b, examples, members}]: the
                      failures of both runs grouped by cause, side by side
    regressions       number of overloads that regressed (``regressed_overloads`` names them)
    fixes, changes    numbers of overloads fixed / otherwise changed (``changed_overloads``
                      names the latter)
    unchanged         number of overloads whose verdict and cases are all unchanged
    unsurveyed        number of overloads PENDING in both runs (neither ran them, as in a
                      survey of a few ``--ops`` out of a whole conf): not "unchanged"
    arms              {a: {...}, b: {...}}: label and provenance highlights of each run

Rules (the survey's words, :mod:`flagos_doctor.results.model`):

* an overload *regressed* when its verdict got worse (by ``VERDICT_RANK``), when it became
  FAILED from anything else (``newly failing``, including an overload new in B), or when
  one of its cases went from PASS to anything else but FLAKY or a failure its baseline
  shares (neither is the stack's failure: ``lost a PASS case``), or from a loud failure
  (:data:`LOUD_FAILURES`) to WRONG that its baseline does not share (``now returns wrong
  values``: an error the user saw became a silent wrong answer);
* it is *fixed* when its verdict got better (and is not FAILED);
* any other verdict change (to or from NO_SCHEMA, PENDING, or an overload present in one
  arm only) is a plain *change*, unless a case of it lost a PASS (above: a PASS case gone
  from B, the overload NO_SCHEMA or unsurveyed there, is a lost PASS); so is an overload whose verdict is the same but whose
  cases changed (an ERROR of another cause, WRONG to ERROR, a WRONG case now passing): no
  changed case goes uncounted.

A changed case's ``mark`` says which rule it met: ``lost a PASS case``, ``now returns
wrong values``, or None.
"""

from __future__ import annotations

from flagos_doctor import arms
from flagos_doctor.results import case as case_record, groups
from flagos_doctor.results.comparable import CONTEXT, differences, lookup
from flagos_doctor.results.model import (
    CRASH, ERROR, FAILED, FLAKY, MISSING_FUNCTION, PASS, PENDING, TIMEOUT, VERDICT_RANK, VERDICTS, WRONG,
    poisoned_by_text,
)

COMPARE_SCHEMA = "flagos-doctor/compare/1"
#: Failures the user sees (a raise, a dead worker, a hang, a missing function): one that
#: turns into WRONG hides the failure, a regression.
LOUD_FAILURES = (ERROR, CRASH, TIMEOUT, MISSING_FUNCTION)
LOST_PASS = "lost a PASS case"
NOW_WRONG = "now returns wrong values"


def _cases_by_profile(entry: dict | None) -> dict:
    cases = (entry or {}).get("cases") or []
    return {case.get("profile"): case for case in cases if isinstance(case, dict)}


def _case_view(case: dict | None) -> dict | None:
    if case is None:
        return None
    view = {name: case.get(name) for name in case_record.compared()}  # status, route and any field declared compared
    # The baseline says whether the native path shares a failure. It runs for any case
    # whose first run failed, so beside a PASS it tells only how the survey got there (a
    # first run poisoned by another case, on the H200: native_dropout "PASS -> PASS").
    if view["status"] != PASS and (case.get("baseline") or {}).get("status"):
        view["baseline"] = case["baseline"]["status"]
    return view


def _sticky_traced(arm: str, overloads: dict) -> list[dict]:
    """The cases of one arm whose first run another case poisoned (``poisoned_by``)."""
    return [{"arm": arm, "overload": name, "profile": case.get("profile"), "status": case.get("status"),
             "poisoned_by": case["poisoned_by"]}
            for name, entry in sorted(overloads.items()) for case in entry.get("cases", [])
            if isinstance(case.get("poisoned_by"), dict)]


def case_text(view: dict | None) -> str:
    """A case view in words, for the renderers: ``WRONG (kernel), and the native path is WRONG too``."""
    if view is None:
        return "absent"
    text = f"{view.get('status')} ({view.get('route')})"
    if view.get("cause"):
        text += f": {view['cause']}"
    native = view.get("baseline")
    if native is None:
        return text
    if native == view.get("status"):
        return f"{text}, and the native path is {native} too"
    return f"{text}; the native path: {native}"


def _counts_against(view: dict | None) -> bool:
    """Whether a case's outcome is the stack's own: not FLAKY, not a failure its baseline shares."""
    return view is not None and view["status"] != FLAKY and view.get("baseline") != view["status"]


def _with_signature(view: dict | None, case: dict | None) -> dict | None:
    """A changed case's view with its cause, for grouping (equality is on status and route)."""
    if view is None:
        return None
    cause = groups.signature(case)
    return {**view, "signature": cause} if cause else view


def case_regression(before: dict | None, after: dict | None) -> str | None:
    """Which regression a case's change ``before -> after`` is (its mark), or None."""
    if before is None:
        return None
    if before["status"] == PASS and (after is None or (after["status"] != PASS and _counts_against(after))):
        return LOST_PASS
    if before["status"] in LOUD_FAILURES and after is not None and after["status"] == WRONG and _counts_against(after):
        return NOW_WRONG
    return None


def classify(before: str | None, after: str | None) -> tuple[str, str]:
    """``(kind, mark)`` of a verdict change ``before -> after`` (None: absent from that arm).

    kind is ``regression``, ``fix`` or ``change``; mark is ``newly failing``, ``worse``,
    ``better``, ``added``, ``removed`` or ``changed``.
    """
    if after == FAILED and before != FAILED:
        return "regression", "newly failing"
    if before in VERDICT_RANK and after in VERDICT_RANK:
        if VERDICT_RANK[after] < VERDICT_RANK[before]:
            return "regression", "worse"
        return "fix", "better"
    if before is None:
        return "change", "added"
    if after is None:
        return "change", "removed"
    return "change", "changed"


def _census_counts(document: dict) -> dict:
    """Overload counts by verdict, case counts by status and by route, from the overloads
    and cases themselves (an older summary lacks some; a checked one agrees)."""
    verdicts: dict = {}
    statuses: dict = {}
    routes: dict = {}
    cases = 0
    for entry in document["overloads"].values():
        verdicts[entry["verdict"]] = verdicts.get(entry["verdict"], 0) + 1
        for case in entry.get("cases", []):  # a file may leave an empty list out
            cases += 1
            statuses[case.get("status")] = statuses.get(case.get("status"), 0) + 1
            routes[case.get("route")] = routes.get(case.get("route"), 0) + 1
    return {"verdicts": verdicts, "cases": cases, "statuses": statuses, "routes": routes}


def _summary_rows(a: dict, b: dict) -> dict:
    sa, sb = a.get("summary", {}), b.get("summary", {})  # a checked file has one; a caller's document may not
    ca, cb = _census_counts(a), _census_counts(b)
    rows = []

    def row(name, va, vb):
        delta = vb - va if isinstance(va, int) and isinstance(vb, int) else None
        rows.append({"name": name, "a": va, "b": vb, "delta": delta})

    for key in ("registered", "tested", "basic", "strict"):
        row(key, sa.get(key), sb.get(key))
    va_verdicts, vb_verdicts = ca["verdicts"], cb["verdicts"]
    for verdict in VERDICTS:  # a checked file has no other
        row(f"verdict {verdict}", va_verdicts.get(verdict, 0), vb_verdicts.get(verdict, 0))
    row("cases", ca["cases"], cb["cases"])
    st_a, st_b = ca["statuses"], cb["statuses"]
    for status in sorted(set(st_a) | set(st_b), key=str):
        row(f"cases {status}", st_a.get(status, 0), st_b.get(status, 0))
    for route in sorted(set(ca["routes"]) | set(cb["routes"]), key=str):
        row(f"route {route}", ca["routes"].get(route, 0), cb["routes"].get(route, 0))
    if "fallback_passes" in sa or "fallback_passes" in sb:
        row("PASS via cpu_fallback", sa.get("fallback_passes", 0), sb.get("fallback_passes", 0))
    if "native_also" in sa or "native_also" in sb:
        row("failures the native path shares", sa.get("native_also", 0), sb.get("native_also", 0))
    return {"rows": rows, "a": sa, "b": sb}


_KIND_ORDER = {"regression": 0, "fix": 1, "change": 2}


class _Tally:
    """What :func:`compare` gathers, overload by overload."""

    def __init__(self):
        self.transitions: list[dict] = []
        self.cases_changed: list[dict] = []
        self.signed: list[dict] = []  # the changed cases with their causes, for the change groups
        self.regressed: dict[str, set] = {}  # overload -> the marks of its regressed cases
        self.fixed: set = set()
        self.changed: set = set()
        self.unchanged = 0
        self.unsurveyed = 0

    def overload(self, name: str, entry_a: dict | None, entry_b: dict | None) -> None:
        verdict_a = entry_a.get("verdict") if entry_a is not None else None
        verdict_b = entry_b.get("verdict") if entry_b is not None else None
        overload_changed = verdict_a != verdict_b
        if overload_changed:
            kind, mark = classify(verdict_a, verdict_b)
            self.transitions.append({"overload": name, "from": verdict_a, "to": verdict_b, "kind": kind, "mark": mark})
            if kind == "regression":
                self.regressed.setdefault(name, set())
            else:
                (self.fixed if kind == "fix" else self.changed).add(name)
        cases_a, cases_b = _cases_by_profile(entry_a), _cases_by_profile(entry_b)
        for profile in list(cases_a) + [p for p in cases_b if p not in cases_a]:
            overload_changed = self.case(name, profile, cases_a.get(profile), cases_b.get(profile)) or overload_changed
        if overload_changed and verdict_a == verdict_b and name not in self.regressed:
            self.changed.add(name)  # the same verdict, other cases: counted, never "0 other changes"
        if not overload_changed and verdict_a == verdict_b == PENDING and not cases_a:
            self.unsurveyed += 1  # nothing was measured: saying "unchanged" would claim a check
        elif not overload_changed:
            self.unchanged += 1

    def case(self, name: str, profile, case_a: dict | None, case_b: dict | None) -> bool:
        """Record one case's change; False when it did not change."""
        view_a, view_b = _case_view(case_a), _case_view(case_b)
        if view_a == view_b and view_a["status"] in LOUD_FAILURES + (WRONG,):  # never both absent
            cause_a, cause_b = groups.signature(case_a), groups.signature(case_b)
            if cause_a != cause_b:  # the same status of another cause: a changed failure, shown with its causes
                view_a, view_b = {**view_a, "cause": cause_a}, {**view_b, "cause": cause_b}
        if view_a == view_b:
            return False
        mark = case_regression(view_a, view_b)
        self.cases_changed.append({"overload": name, "profile": profile, "from": view_a, "to": view_b,
                                   "regression": mark is not None, "mark": mark})
        self.signed.append({"overload": name, "profile": profile, "regression": mark is not None,
                            "from": _with_signature(view_a, case_a), "to": _with_signature(view_b, case_b)})
        if mark is not None:
            self.regressed.setdefault(name, set()).add(mark)
        return True

    def settle(self) -> None:
        """An overload whose verdict is unchanged (or even "better") but lost a PASS case or
        now returns wrong values is a regression too; its transition, if any, then sorts
        with the regressions."""
        for transition in self.transitions:
            if transition["overload"] in self.regressed and transition["kind"] != "regression":
                self.fixed.discard(transition["overload"])
                self.changed.discard(transition["overload"])
                transition["kind"] = "regression"
                transition["mark"] += "".join(f", {m}" for m in sorted(self.regressed[transition["overload"]]))
        self.transitions.sort(key=lambda t: (_KIND_ORDER[t["kind"]], t["overload"]))
        self.cases_changed.sort(key=lambda c: (not c["regression"], c["overload"], str(c["profile"])))


def compare(a: dict, b: dict, *, label_a: str = "A", label_b: str = "B", force: bool = False) -> dict:
    """Compare results documents ``a`` and ``b``; return the comparison document.

    Never raises on a well-formed pair: refusing incomparable runs is the caller's choice
    (``comparable`` and ``differences`` say why); ``force`` is only recorded.
    """
    diffs = differences(a, b)
    over_a, over_b = a["overloads"], b["overloads"]
    tally = _Tally()
    for name in sorted(set(over_a) | set(over_b)):
        tally.overload(name, over_a.get(name), over_b.get(name))
    tally.settle()
    cases_changed = tally.cases_changed
    digest_a, digest_b = a.get("census_sha256"), b.get("census_sha256")
    return {
        "schema": COMPARE_SCHEMA,
        "comparable": not diffs,
        "forced": bool(force and diffs),
        "differences": diffs,
        "census_identical": bool(digest_a) and digest_a == digest_b,
        "census_sha256": {"a": digest_a, "b": digest_b},
        "summary": _summary_rows(a, b),
        "transitions": tally.transitions,
        "cases_changed": cases_changed,
        "flaky_only": bool(cases_changed) and all(
            FLAKY in ((c["from"] or {}).get("status"), (c["to"] or {}).get("status")) for c in cases_changed),
        "sticky_traced": _sticky_traced("a", over_a) + _sticky_traced("b", over_b),
        "change_groups": groups.change_groups(tally.signed),
        "failure_groups": groups.compared_groups(over_a, over_b),
        "regressions": len(tally.regressed),
        "regressed_overloads": sorted(tally.regressed),
        "case_regressions": sum(1 for c in cases_changed if c["regression"]),
        "fixes": len(tally.fixed),
        "changes": len(tally.changed),
        "changed_overloads": sorted(tally.changed),
        "unchanged": tally.unchanged,
        "unsurveyed": tally.unsurveyed,
        "arms": {
            "a": {"label": label_a, "context": {name: lookup(a, paths) for name, paths in CONTEXT}},
            "b": {"label": label_b, "context": {name: lookup(b, paths) for name, paths in CONTEXT}},
        },
    }


#: Overloads a headline names beside a count (the lists below it name them all).
HEADLINE_NAMES = 3


def regression_text(case: dict) -> str:
    """A changed case's regression in words (``regression: now returns wrong values``), or ``""``."""
    if not case.get("regression"):
        return ""
    return f"regression: {case['mark']}" if case.get("mark") else "regression"


def why_changed(comparison: dict, overload: str) -> str:
    """What happened to one regressed or changed overload, in words, from the document:
    its verdict transition, else its changed cases (``7 cases ERROR -> WRONG: now returns
    wrong values``, ``2 cases ERROR -> ERROR``)."""
    for transition in comparison.get("transitions") or []:
        if transition["overload"] == overload:
            return f"{transition['from'] or 'absent'} -> {transition['to'] or 'absent'}, {transition['mark']}"
    cases = [c for c in comparison.get("cases_changed") or [] if c["overload"] == overload]
    marks = sorted({c["mark"] for c in cases if c.get("mark")})
    moves: dict = {}
    for c in cases:
        if c.get("mark") or not marks:
            move = f"{(c['from'] or {}).get('status', 'absent')} -> {(c['to'] or {}).get('status', 'absent')}"
            moves[move] = moves.get(move, 0) + 1
    text = ", ".join(f"{n} case{'s' if n > 1 else ''} {move}" for move, n in moves.items())
    return f"{text}: {', '.join(marks)}" if marks else text


def named(comparison: dict, key: str, quote=str, limit: int = HEADLINE_NAMES) -> str:
    """`` (name: why, ...)`` for the overloads of ``key`` (``regressed_overloads``,
    ``changed_overloads``), the first ``limit`` of them; empty when there are none."""
    names = comparison.get(key) or []
    if not names:
        return ""
    shown = [f"{quote(name)}: {why_changed(comparison, name)}" for name in names[:limit]]
    more = f", {len(names) - limit} more" if len(names) > limit else ""
    return f" ({'; '.join(shown)}{more})"


def sticky_text(entry: dict) -> str:
    """A traced sticky error in words, for the renderers."""
    return (f"{entry['arm'].upper()}: {entry['overload']} [{entry.get('profile')}] is {entry.get('status')}; "
            f"its first run's sticky device error was left by {poisoned_by_text(entry['poisoned_by'])} (replayed)")


def exit_code(comparison: dict, fail_on: str) -> int:
    """0 or 1 for ``--fail-on any|regression|never`` (:func:`flagos_doctor.arms.exit_code`):
    a regressed overload; any verdict, case or census that differs."""
    differs = bool(comparison["transitions"] or comparison["cases_changed"] or not comparison["census_identical"])
    return arms.exit_code(fail_on, comparison["regressions"], differs)
