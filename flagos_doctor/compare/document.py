"""A comparison document read back (``ci-merge`` reads each vendor box's): checked before use.

A box's ``comparison.json`` comes from a runner any pull request can run code on, so it is
evidence, not truth: :func:`load` takes it only when it has the shape :func:`flagos_doctor.
compare.diff.compare` writes and its counts agree with the overloads it lists (a file saying
``regressions: 0`` beside two regressed overloads, or holding only its schema, is refused).
Every refusal is a BadInput naming the file and the field.
"""

from __future__ import annotations

from flagos_doctor import files
from flagos_doctor.compare.diff import COMPARE_SCHEMA
from flagos_doctor.errors import BadInput

_KINDS = ("regression", "fix", "change")


def _what(value) -> str:
    """A value read in a refusal: missing, a number as it is, else its type."""
    if value is None:
        return "missing"
    return str(value) if isinstance(value, (bool, int, float)) else f"a {type(value).__name__}"


def _typed(document: dict, name: str, kind, where: str, optional: bool = False):
    """``document[name]`` when it is of ``kind`` (an int is never a bool, and never negative)."""
    value = document.get(name)
    if value is None and optional:
        return value
    if not isinstance(value, kind) or (kind is int and (isinstance(value, bool) or value < 0)):
        word = {int: "a count (0 or more)", list: "a list", dict: "an object", bool: "true or false"}[kind]
        raise BadInput(f"field '{name}' is {_what(value)}, expected {word}", where)
    return value


def _names(document: dict, name: str, where: str) -> list[str]:
    names = _typed(document, name, list, where)
    if not all(isinstance(item, str) for item in names) or len(set(names)) != len(names):
        raise BadInput(f"field '{name}' is not a list of distinct overload names", where)
    return names


def _records(document: dict, name: str, fields: dict, where: str) -> list[dict]:
    """The list ``name`` of objects whose ``fields`` (name -> allowed types) hold."""
    records = _typed(document, name, list, where)
    for index, record in enumerate(records):
        if not isinstance(record, dict):
            raise BadInput(f"field '{name}[{index}]' is {_what(record)}, expected an object", where)
        for field, types in fields.items():
            if not isinstance(record.get(field), types):
                raise BadInput(f"field '{name}[{index}].{field}' is {_what(record.get(field))}", where)
    return records


def _check_counts(document: dict, where: str) -> None:
    """Each count agrees with the overloads listed beside it."""
    regressed = set(_names(document, "regressed_overloads", where))
    changed = set(_names(document, "changed_overloads", where))
    transitions = _records(document, "transitions", {"overload": str, "from": (str, type(None)), "to": (str, type(None)),
                                                     "kind": str, "mark": str}, where)
    cases = _records(document, "cases_changed", {"overload": str, "from": (dict, type(None)), "to": (dict, type(None)),
                                                 "regression": bool, "mark": (str, type(None))}, where)
    for count, listed in (("regressions", len(regressed)), ("changes", len(changed)),
                          ("fixes", sum(t["kind"] == "fix" for t in transitions))):
        if _typed(document, count, int, where) != listed:
            raise BadInput(f"field '{count}' is {document[count]}, but the document lists {listed}", where)
    _typed(document, "unchanged", int, where)
    for transition in transitions:
        if transition["kind"] not in _KINDS:
            raise BadInput(f"a transition's kind is {transition['kind'][:40]!r}, expected one of {', '.join(_KINDS)}", where)
    said_regressed = {t["overload"] for t in transitions if t["kind"] == "regression"}
    said_regressed |= {c["overload"] for c in cases if c["regression"]}
    if said_regressed != regressed or regressed & changed:
        odd = sorted(said_regressed ^ regressed or regressed & changed)[0]
        raise BadInput(f"field 'regressed_overloads' disagrees with its transitions and changed cases "
                       f"(about {odd[:200]!r})", where)


def check(document: dict, where: str) -> dict:
    """``document`` when it is a comparison this version reads, whole and consistent."""
    if document.get("schema") != COMPARE_SCHEMA:
        raise BadInput(f"field 'schema' is {str(document.get('schema'))[:80]!r}; this flagos-doctor reads "
                       f"{COMPARE_SCHEMA}", where)
    arms = _typed(document, "arms", dict, where)
    for side in ("a", "b"):
        _typed(arms, side, dict, f"{where}: field 'arms'", optional=True)
    _typed(document, "routed_at", dict, where, optional=True)
    for name, at in (document.get("routed_at") or {}).items():
        if not isinstance(at, dict) or not isinstance(at.get("file"), str) or not isinstance(at.get("line"), int):
            raise BadInput(f"field 'routed_at' of {name[:200]!r} is not {{file, line}}", where)
    if _typed(document, "refused", bool, where, optional=True):
        _records(document, "differences", {"field": str}, where)
        return document
    _typed(document, "census_identical", bool, where)
    _check_counts(document, where)
    return document


def _text_of(value, where: str, at: str = "") -> None:
    """BadInput when a string of ``value`` (a key too) holds a lone surrogate (``"\\ud800"``
    in the JSON): no UTF-8 file, comment or terminal could then show it."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise BadInput(f"a lone surrogate (\\u{ord(value[_surrogate(value)]):04x}) in {at or 'the document'}: "
                           "not text", where) from None
    elif isinstance(value, dict):
        for key, item in value.items():
            _text_of(key, where, f"a key of {at or 'the document'}")
            _text_of(item, where, f"field '{key[:80]}'" if not at else at)
    elif isinstance(value, list):
        for item in value:
            _text_of(item, where, at)


def _surrogate(text: str) -> int:
    return next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")


def load(path: str) -> dict:
    """The comparison of ``path``, checked (:func:`check`); BadInput naming the file otherwise."""
    document = files.load_json(path, "flagos-doctor/compare/")
    _text_of(document, path)
    return check(document, path)
