"""Verdicts and the summary: pure functions of case records (standard library only).

A case record is a dict with at least ``profile``, ``status`` and ``route``. The rules are
upstream harness v4's: INVALID_CASE and UNVERIFIABLE cases do not count; an overload with
no counted case is UNTESTED; all counted cases passing is STRICT, some is BASIC_ONLY, none
is FAILED. An overload the installed torch lacks is NO_SCHEMA, one not run yet PENDING.

Two more kinds of case do not count, since neither says anything about the stack: a FLAKY
case (run again, it gave differing outcomes), and a failure its baseline shares (the same
case on the stack's native path, stock torch for FlagGems, failed the same way:
:func:`is_native_also`). The summary counts both apart.
"""

from __future__ import annotations

from collections import Counter

from flagos_doctor.results import model


def is_native_also(case: dict) -> bool:
    """A failure that the stack's native path shares: the case, not the stack, is at fault."""
    baseline = case.get("baseline") or {}
    return case["status"] in model.FAILURES and baseline.get("status") == case["status"]


def counts(case: dict) -> bool:
    """Whether a case counts towards its overload's verdict."""
    return case["status"] not in model.NOT_COUNTED and not is_native_also(case)


def verdict(cases: list[dict] | None) -> str:
    """The verdict of one overload from its case records (``None``: not run, PENDING)."""
    if cases is None:
        return model.PENDING
    if any(case["status"] == model.NO_SCHEMA for case in cases):
        return model.NO_SCHEMA
    counted = [case for case in cases if counts(case)]
    passed = [case for case in counted if case["status"] == model.PASS]
    if not counted:
        return model.UNTESTED
    if len(passed) == len(counted):
        return model.STRICT
    return model.BASIC_ONLY if passed else model.FAILED


def is_fallback_pass(case: dict) -> bool:
    """A PASS whose evidence says the stack ran it through its CPU fallback."""
    return case["status"] == model.PASS and case.get("route") == model.ROUTE_FALLBACK


def summarize(route_set: list[str], overloads: dict[str, dict]) -> dict:
    """The summary of a survey over ``route_set``; overloads not in ``overloads`` are PENDING.

    ``overloads`` maps a name to ``{"cases": [...]}``. Returns the stable keys of the
    results file (``registered``, ``tested``, ``basic``, ``strict``, ``verdicts``,
    ``statuses``) and, apart, how CPU fallback and the evidence of routes figure in it, and
    ``missing_functions`` {overload: the FlagGems function its binding calls that the
    installed flag_gems lacks}, from its MISSING_FUNCTION cases; and
    the failures the native path shares (``native_also``: how many cases, and where).
    """
    verdicts: Counter = Counter()
    statuses: Counter = Counter()
    routes: Counter = Counter()
    tested = basic = strict = 0
    fallback_overloads = []
    fallback_passes = 0
    missing_functions = {}
    native_also: Counter = Counter()
    for name in route_set:
        entry = overloads.get(name)
        cases = None if entry is None else entry["cases"]
        result = verdict(cases)
        verdicts[result] += 1
        if cases is None:
            continue
        counted = [case for case in cases if counts(case)]
        if result != model.NO_SCHEMA:
            tested += bool(counted)
            basic += any(case["status"] == model.PASS for case in counted)
            strict += result == model.STRICT
        for case in cases:
            statuses[case["status"]] += 1
            if case["status"] == model.MISSING_FUNCTION:
                missing_functions[name] = model.missing_from_detail(case.get("detail", "")) or "?"
            routes[case.get("route", model.ROUTE_UNKNOWN)] += 1
            if is_native_also(case):
                native_also[name] += 1
        passes = [case for case in cases if is_fallback_pass(case)]
        fallback_passes += len(passes)
        if passes:
            fallback_overloads.append(name)
    return {
        "registered": len(route_set),
        "tested": tested,
        "basic": basic,
        "strict": strict,
        "verdicts": {name: verdicts[name] for name in model.VERDICTS if verdicts[name]},
        "statuses": {name: statuses[name] for name in model.CASE_STATUSES if statuses[name]},
        "routes": dict(sorted(routes.items())),
        "fallback_passes": fallback_passes,
        "fallback_overloads": sorted(fallback_overloads),
        "missing_functions": dict(sorted(missing_functions.items())),
        "native_also": sum(native_also.values()),
        "native_also_overloads": sorted(native_also),
    }


def settle(statuses: list[str], excused: list[int] = ()) -> str:
    """A case's status from all its runs' (the survey's first): FLAKY when it passed in some
    run and failed in another; when every run failed, the way it failed most often (ties
    in the order of ``model.FAILURES``), so a case that is WRONG once and ERROR twice (a
    flag_gems 4.2.0 kernel on Triton 3.6) is a failure in every run, not FLAKY.

    The runs at ``excused`` (a TIMEOUT spent compiling: :func:`flagos_doctor.survey.confirm.stopped_compiling`) say
    nothing of the stack and are left out while another run remains (harness 6): a timeout
    spent compiling is never FLAKY."""
    statuses = [status for index, status in enumerate(statuses) if index not in set(excused)] or statuses
    if len(set(statuses)) == 1:
        return statuses[0]
    if not all(status in model.FAILURES for status in statuses):
        return model.FLAKY
    return max(model.FAILURES, key=lambda status: (statuses.count(status), -model.FAILURES.index(status)))
