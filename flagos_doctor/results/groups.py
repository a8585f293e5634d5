"""Failures grouped by cause: a pure function of case records, no I/O.

Hundreds of failing cases often share one cause (FlagGems 4.2.0 on Triton 3.6: 525 ERROR
cases are one launcher mismatch, ``function takes exactly 25 arguments (21 given)`` with
the numbers varying). :func:`signature` normalises a case's detail into the cause: the
exception type and message with numbers, quoted names, shapes and addresses masked; for a
WRONG case, the kind of mismatch (``dtype int64 != float32``, ``shape mismatch``,
``values differ``). Cases with one ``(status, signature)`` form one group.

Written against the results schema generically: any status other than PASS is grouped,
including statuses this module does not know (FLAKY, a missing-function status...), shown
as they are.

A group (:func:`failure_groups`)::

    status      the cases' status
    signature   the normalised cause
    cases       how many cases
    overloads   how many overloads they belong to
    members     [[overload, profile]] every case, in overload order
    examples    [{overload, profile, detail}] the first few, details as recorded
"""

from __future__ import annotations

import re

from flagos_doctor.results.model import NO_SCHEMA, NOT_COUNTED, PASS, WRONG

#: How many example cases a group keeps with their full detail.
EXAMPLES = 3
#: A signature longer than this is cut (messages that embed source text run on).
SIGNATURE_MAX = 160

_ADDRESS = re.compile(r"0x[0-9a-fA-F]+")
_TORCH_SIZE = re.compile(r"torch\.Size\(\[[^\]]*\]\)")
_LIST = re.compile(r"\[[\d\s,.+-]*\]")
_TUPLE = re.compile(r"\(\s*-?\d+\s*,[\d\s,-]*\)")
# A quote right after a letter is an apostrophe ("Doesn't"), not the start of a name.
_QUOTED = re.compile(r"(?<![A-Za-z])'[^'\n]*'|\"[^\"\n]*\"")
_ATEN = re.compile(r"\baten::[A-Za-z0-9_.]+")
# Digits inside a word (float32, cu130, 4D) belong to the word.
_NUMBER = re.compile(r"(?<![A-Za-z_\d])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![A-Za-z_\d])")
_SPACE = re.compile(r"\s+")
_WRONG_DTYPE = re.compile(r"dtype (\S+) != (\S+)")


def mask(message: str) -> str:
    """``message`` with what varies between cases of one cause masked, on one line."""
    text = _SPACE.sub(" ", message).strip()
    text = _ADDRESS.sub("0xADDR", text)
    text = _TORCH_SIZE.sub("SHAPE", text)
    text = _LIST.sub("SHAPE", text)
    text = _TUPLE.sub("SHAPE", text)
    text = _ATEN.sub("aten::NAME", text)
    text = _QUOTED.sub(lambda m: m.group(0)[0] + "NAME" + m.group(0)[0], text)
    text = _NUMBER.sub("N", text)
    if len(text) > SIGNATURE_MAX:
        text = text[: SIGNATURE_MAX - 1] + "…"
    return text


def _wrong_kind(detail: str) -> str:
    dtype = _WRONG_DTYPE.search(detail)
    if dtype:
        return f"dtype {dtype.group(1)} != {dtype.group(2)}"
    if "shape" in detail:
        return "shape mismatch"
    if "differ" in detail:
        return "values differ"
    return mask(detail)


def signature(case: dict) -> str | None:
    """The normalised cause of ``case``; None for a PASS."""
    status = case.get("status")
    if status == PASS:
        return None
    detail = str(case.get("detail") or "")
    if status == WRONG:
        return _wrong_kind(detail)
    first = detail.strip().splitlines()[0] if detail.strip() else ""
    return mask(first) if first else "(no detail)"


def failure_groups(overloads: dict) -> list[dict]:
    """The non-PASS cases of ``overloads`` (a results document's ``overloads``), grouped by
    ``(status, signature)``, largest first."""
    found: dict = {}
    for name in sorted(overloads):
        for case in (overloads[name] or {}).get("cases") or []:
            cause = signature(case)
            if cause is None:
                continue
            key = (str(case.get("status")), cause)
            group = found.get(key)
            if group is None:
                group = found[key] = {"status": key[0], "signature": cause, "cases": 0, "overloads": 0,
                                      "members": [], "examples": []}
            group["cases"] += 1
            if not group["members"] or group["members"][-1][0] != name:
                group["overloads"] += 1
            group["members"].append([name, case.get("profile")])
            if len(group["examples"]) < EXAMPLES:
                group["examples"].append({"overload": name, "profile": case.get("profile"), "detail": case.get("detail")})
    return sorted(found.values(), key=lambda g: (-g["cases"], g["status"], g["signature"]))


#: Statuses whose groups are not failures of the stack: the verdicts do not count them
#: (INVALID_CASE, UNVERIFIABLE, FLAKY) or they are no case of a kernel (NO_SCHEMA). Lists
#: of "failures" (the survey's summary, the compare's largest causes) leave them out.
NOT_FAILURES = NOT_COUNTED + (NO_SCHEMA,)


def counted(found: list[dict]) -> list[dict]:
    """The groups of ``found`` whose status the verdicts count as a failure, in order."""
    return [group for group in found if group["status"] not in NOT_FAILURES]


def overloads_named(members: list, limit: int = 3, quote=str) -> str:
    """The first ``limit`` overloads of a group's ``members``, each through ``quote``, and
    how many more: ``_softmax, abs, neg +10``."""
    names = list(dict.fromkeys(overload for overload, _profile in members))
    shown = ", ".join(quote(name) for name in names[:limit])
    return shown + (f" +{len(names) - limit}" if len(names) > limit else "")


def describe(group: dict) -> str:
    """One line for a group: ``525 ERROR cases: TypeError: ..., in 180 overloads``."""
    cases = group["cases"]
    overloads = group["overloads"]
    return (f"{cases} {group['status']} case{'s' if cases != 1 else ''}: {group['signature']}, "
            f"in {overloads} overload{'s' if overloads != 1 else ''}")


def compared_groups(overloads_a: dict, overloads_b: dict) -> list[dict]:
    """The failure groups of two runs side by side, largest first.

    Each: ``status``, ``signature``, ``a`` and ``b`` ({cases, overloads}, zeros when the
    run has no such group), ``presence`` (``only in A``, ``only in B`` or ``in both``) and
    ``members`` {a, b} as in :func:`failure_groups`.
    """
    empty = {"cases": 0, "overloads": 0, "members": []}
    side_a = {(g["status"], g["signature"]): g for g in failure_groups(overloads_a)}
    side_b = {(g["status"], g["signature"]): g for g in failure_groups(overloads_b)}
    merged = []
    for key in set(side_a) | set(side_b):
        ga, gb = side_a.get(key, empty), side_b.get(key, empty)
        presence = "in both" if key in side_a and key in side_b else ("only in A" if key in side_a else "only in B")
        merged.append({
            "status": key[0], "signature": key[1], "presence": presence,
            "a": {"cases": ga["cases"], "overloads": ga["overloads"]},
            "b": {"cases": gb["cases"], "overloads": gb["overloads"]},
            "examples": (ga.get("examples") or gb.get("examples") or [])[:EXAMPLES],
            "members": {"a": ga["members"], "b": gb["members"]},
        })
    return sorted(merged, key=lambda g: (-max(g["a"]["cases"], g["b"]["cases"]), g["status"], g["signature"]))


def _side(view: dict | None) -> str:
    if view is None:
        return "absent"
    if view.get("signature"):
        return f"{view.get('status')}: {view['signature']}"
    return str(view.get("status"))


def change_groups(cases_changed: list[dict]) -> list[dict]:
    """The changed cases of a comparison grouped by what they went from and to (status and
    cause on each side), regressions first, then largest first.

    Each: ``from``, ``to`` (``PASS``, ``absent`` or ``STATUS: signature``), ``cases``,
    ``overloads``, ``regression`` (every member's change is a regression: a change the
    native path shares is not, so it is grouped apart from the same change that is) and
    ``members`` [[overload, profile]].
    """
    found: dict = {}
    for change in cases_changed:
        regression = bool(change.get("regression"))
        key = (_side(change.get("from")), _side(change.get("to")), regression)
        group = found.get(key)
        if group is None:
            group = found[key] = {"from": key[0], "to": key[1], "cases": 0, "overloads": 0,
                                  "regression": regression, "members": [], "_names": set()}
        group["cases"] += 1
        if change["overload"] not in group["_names"]:
            group["_names"].add(change["overload"])
            group["overloads"] += 1
        group["members"].append([change["overload"], change.get("profile")])
    for group in found.values():
        del group["_names"]
    return sorted(found.values(), key=lambda g: (not g["regression"], -g["cases"], g["from"], g["to"]))
