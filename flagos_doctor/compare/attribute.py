"""Whose failure is it: a survey of an integration stack (torch_fl) held against a survey of
the same cases through flag_gems alone. A pure function, no I/O.

:func:`attribute` takes two results documents of schema ``flagos-doctor/survey/1``: ``a``
the stack under suspicion (``--stack torch_fl``), ``b`` the kernels alone (``--stack
flag_gems``) over the same overloads, and returns a document of schema
``flagos-doctor/attribution/1``::

    comparable    bool: the cases are the same cases (CASE_FIELDS agree)
    differences   [{field, a, b}]: the CASE_FIELDS that differ
    context       [{field, a, b}]: fields that differ by design (stack, device, route set)
    counts        {class: failing cases of A in it}
    overloads     {name: {classes: {class: n}, cases: [{profile, class, a: {status, route,
                  detail}, b: {status, route, detail} | null, baseline: {...} | null}]}}
    integration   [names]: overloads with a case that fails only under A (torch_fl's bugs)
    arms          {a: {label, stack, ...}, b: {...}}

Every failing case of A (WRONG, ERROR, MISSING_FUNCTION, CRASH, TIMEOUT) gets one class,
the first rule that holds:

* ``missing_function``: A's binding calls a FlagGems function the installed flag_gems lacks
  (version drift between torch_fl's bindings and flag_gems; B calls what flag_gems has);
* ``native``: the native path fails it too: a per-case ``baseline`` {status, detail} (in A's
  case or B's) whose status is not PASS, or B fails it with evidence that no kernel of B's ran
  (flag_gems alone does not register every overload torch_fl routes to a FlagGems function;
  such a case runs torch's own kernel there);
* ``flag_gems``: B fails the same case too, through its kernel (or dying, which leaves no
  evidence): FlagGems' own bug;
* ``integration``: B passes the same case through its kernel: it fails only under A (a
  torch_fl integration bug: device checks, dtype handling, boxing, argument forwarding);
* ``unattributed``: nothing to hold it against: B has no counted outcome for the case (not
  surveyed there, PENDING, INVALID_CASE, UNVERIFIABLE, NO_SCHEMA), or B passed it without its
  kernel running (the FlagGems function A calls was never run alone).

Only what changes the cases makes two surveys incomparable: the fields
:mod:`flagos_doctor.results.comparable` compares, but the stack, the device type and the
route set, which differ by design and are shown.
"""

from __future__ import annotations

from flagos_doctor import arms
from flagos_doctor.results import comparable, model
from flagos_doctor.results.comparable import CONTEXT, lookup

ATTRIBUTION_SCHEMA = "flagos-doctor/attribution/1"

MISSING = "missing_function"
NATIVE = "native"
FLAG_GEMS = "flag_gems"
INTEGRATION = "integration"
UNATTRIBUTED = "unattributed"
#: The classes, in the order the views show them.
CLASSES = (INTEGRATION, FLAG_GEMS, NATIVE, MISSING, UNATTRIBUTED)
#: What each class means, for the views.
MEANING = {
    INTEGRATION: "fails only under A: the integration's bug",
    FLAG_GEMS: "fails with flag_gems alone too: FlagGems' bug",
    NATIVE: "fails on the native path too (or alone without a kernel)",
    MISSING: "A's binding calls a function flag_gems lacks",
    UNATTRIBUTED: "alone: no counted outcome, or no kernel ran",
}

#: A case of A that failed on the device.
FAILING = (model.WRONG, model.ERROR, model.MISSING_FUNCTION, model.CRASH, model.TIMEOUT)
#: Compared fields that differ by design between a stack and its kernels alone.
BY_DESIGN = ("stack", "device_type", "route_set_sha256")
#: The rest of the compared fields must agree for the cases to be the same cases.
CASE_FIELDS = tuple(name for name in comparable.COMPARED if name not in BY_DESIGN)

_DETAIL = 200


def _baseline_failed(*cases: dict | None) -> dict | None:
    for case in cases:
        baseline = (case or {}).get("baseline")
        if isinstance(baseline, dict) and baseline.get("status") not in (None, model.PASS):
            return baseline
    return None


def classify(case_a: dict, case_b: dict | None) -> str:
    """The class of one failing case of A, given the same case of B (None when B lacks it)."""
    if case_a["status"] == model.MISSING_FUNCTION:
        return MISSING
    if _baseline_failed(case_a, case_b):
        return NATIVE
    status_b = (case_b or {}).get("status")
    if status_b in FAILING:
        return FLAG_GEMS if _kernel_may_have_run(case_b) else NATIVE
    if status_b == model.PASS and case_b.get("route") == model.ROUTE_KERNEL:
        return INTEGRATION
    return UNATTRIBUTED


def _kernel_may_have_run(case: dict) -> bool:
    """False only on evidence that no kernel of the stack ran for ``case``: a CPU fallback,
    or no kernel seen in a case that ran to its end (a crash or timeout leaves no evidence)."""
    route = case.get("route")
    if route == model.ROUTE_KERNEL:
        return True
    if route == model.ROUTE_UNKNOWN and case.get("status") in (model.CRASH, model.TIMEOUT):
        return True
    return False


def _view(case: dict | None) -> dict | None:
    if case is None:
        return None
    return {"status": case.get("status"), "route": case.get("route"), "detail": (case.get("detail") or "")[:_DETAIL]}


def attribute(a: dict, b: dict, *, label_a: str = "A", label_b: str = "B") -> dict:
    """Attribute every failing case of ``a`` against ``b``; return the attribution document."""
    differences = comparable.differences(a, b, CASE_FIELDS)
    overloads: dict = {}
    counts = {name: 0 for name in CLASSES}
    for name, entry in sorted((a.get("overloads") or {}).items()):
        cases_b = {case.get("profile"): case for case in ((b.get("overloads") or {}).get(name) or {}).get("cases") or []}
        rows = []
        for case in entry.get("cases") or []:
            if case.get("status") not in FAILING:
                continue
            other = cases_b.get(case.get("profile"))
            kind = classify(case, other)
            counts[kind] += 1
            rows.append({
                "profile": case.get("profile"), "class": kind, "a": _view(case), "b": _view(other),
                "baseline": _baseline_failed(case, other),
            })
        if rows:
            classes = {kind: sum(row["class"] == kind for row in rows) for kind in CLASSES}
            overloads[name] = {"classes": {k: v for k, v in classes.items() if v}, "cases": rows}
    arms = {}
    for key, label, document in (("a", label_a, a), ("b", label_b, b)):
        arms[key] = {"label": label, "stack": lookup(document, comparable.PATHS["stack"])}
        arms[key].update({name: lookup(document, paths) for name, paths in CONTEXT
                          if name in ("flag_gems", "torch_fl commit", "torch", "device")})
    return {
        "schema": ATTRIBUTION_SCHEMA,
        "comparable": not differences,
        "differences": differences,
        "context": comparable.differences(a, b, BY_DESIGN),
        "counts": counts,
        "overloads": overloads,
        "integration": sorted(name for name, entry in overloads.items() if INTEGRATION in entry["classes"]),
        "arms": arms,
    }


def exit_code(attribution: dict, fail_on: str) -> int:
    """1 when a case fails only under A (``--fail-on regression``, the default) or when any
    case of A fails (``any``); 0 otherwise or with ``never`` (:func:`flagos_doctor.arms.exit_code`)."""
    counts = attribution["counts"]
    return arms.exit_code(fail_on, counts[INTEGRATION], any(counts.values()))
