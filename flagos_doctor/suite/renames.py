"""Tests renamed between two arms, matched conservatively.

A rename is only claimed where nothing else could explain the difference, so that a
rename can never hide a change: every rule needs identical outcomes, test for test, and a
match that is unique both ways (two candidates alike: no match, both stay listed as
collected-set differences). In the order they are tried:

1. ``file moved``: a file with no test left in B and a file with no test in A holding the
   same classes and test names (with their parametrisations), with the same outcomes;
2. ``class renamed``: in one file, a class gone from B and a class new in B holding the
   same test names, with the same outcomes;
3. ``function renamed``: in one file and class, a test function gone from B and one new in
   B with the same parametrisation suffixes (none, for a plain test), with the same outcomes.

A test whose parametrisation ids changed (``test_p[1]`` -> ``test_p[one]``) is not matched.
"""

from __future__ import annotations

from collections import defaultdict

from flagos_doctor.suite.model import TestResult

FILE_MOVED = "file moved"
CLASS_RENAMED = "class renamed"
FUNCTION_RENAMED = "function renamed"


def find_renames(
    gone: dict[str, TestResult], new: dict[str, TestResult],
    all_a: dict[str, TestResult], all_b: dict[str, TestResult],
) -> list[tuple[str, str, str]]:
    """``(id in A, id in B, rule)`` for each test matched; ``gone`` and ``new`` are the tests
    in one arm only, ``all_a`` and ``all_b`` the whole arms."""
    gone = {i: t for i, t in gone.items() if t.name}  # file-level entries are never renamed
    new = {i: t for i, t in new.items() if t.name}
    pairs: list[tuple[str, str, str]] = []
    rules = (
        (FILE_MOVED, lambda t: (), lambda t: t.file, lambda t: (t.cls, t.name)),
        (CLASS_RENAMED, lambda t: (t.file,), lambda t: (t.file, t.cls), lambda t: t.name),
        (FUNCTION_RENAMED, lambda t: (t.file, t.cls), lambda t: (t.file, t.cls, t.base), lambda t: t.params),
    )
    for rule, scope_of, unit_of, member_of in rules:
        units_a = {unit_of(t) for t in all_a.values() if t.name}
        units_b = {unit_of(t) for t in all_b.values() if t.name}
        # Units wholly in one arm: every test of the unit is in ``gone`` (or ``new``).
        gone_units = _group(gone, unit_of, lambda u: u not in units_b)
        new_units = _group(new, unit_of, lambda u: u not in units_a)
        if rule == CLASS_RENAMED:  # a class, not the module-level functions
            gone_units = {u: ts for u, ts in gone_units.items() if u[1]}
            new_units = {u: ts for u, ts in new_units.items() if u[1]}
        by_signature_a = defaultdict(list)
        by_signature_b = defaultdict(list)
        for unit, tests in gone_units.items():
            by_signature_a[(scope_of(tests[0]), _signature(tests, member_of))].append(tests)
        for unit, tests in new_units.items():
            by_signature_b[(scope_of(tests[0]), _signature(tests, member_of))].append(tests)
        for signature, candidates in by_signature_a.items():
            others = by_signature_b.get(signature, [])
            if len(candidates) != 1 or len(others) != 1:
                continue
            members_b = {member_of(t): t for t in others[0]}
            for test in candidates[0]:
                partner = members_b[member_of(test)]
                pairs.append((test.id, partner.id, rule))
                gone.pop(test.id)
                new.pop(partner.id)
    return pairs


def _group(tests: dict[str, TestResult], unit_of, keep) -> dict:
    units = defaultdict(list)
    for test in tests.values():
        unit = unit_of(test)
        if keep(unit):
            units[unit].append(test)
    return units


def _signature(tests: list[TestResult], member_of) -> frozenset:
    return frozenset((member_of(t), t.outcome) for t in tests)
