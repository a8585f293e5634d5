"""The comparison of two suite runs, as one JSON document (schema ``flagos-doctor/suite-compare/1``).

A pure function of the two runs and the flaky list. The collected sets are compared
first: figures from two runs mean something together only when both ran the same tests,
so the document (and every view of it) says what differs before it gives any total.
"""

from __future__ import annotations

from collections import defaultdict

from flagos_doctor.suite.flaky import FlakyList
from flagos_doctor.suite.model import BAD, SKIPPED, TOTAL_KEYS, SuiteRun, TestResult, totals
from flagos_doctor.suite.renames import find_renames

SCHEMA = "flagos-doctor/suite-compare/1"

#: Transition kinds, in the order they are reported.
REGRESSION = "regression"  # not failing in A, failed or errored in B
FIX = "fix"  # failed or errored in A, passes (or xfails) in B
NEWLY_SKIPPED = "newly skipped"  # ran in A, skipped in B: coverage lost, whatever A's outcome
CHANGE = "change"  # anything else: skipped -> passed, failed -> error, xfailed -> xpassed...
KINDS = (REGRESSION, FIX, NEWLY_SKIPPED, CHANGE)


def transition_kind(before: str, after: str) -> str:
    if after in BAD and before not in BAD:
        return REGRESSION
    if after == SKIPPED:
        return NEWLY_SKIPPED
    if before in BAD and after not in BAD:
        return FIX
    return CHANGE


def compare_runs(a: SuiteRun, b: SuiteRun, arms: dict[str, dict], flaky: FlakyList | None = None) -> dict:
    """The comparison document. ``arms`` holds what is known of each arm ({"a": {...}, "b": {...}}:
    label, source, commit); the totals are added here."""
    flaky = flaky or FlakyList()
    only_a = {i: t for i, t in a.tests.items() if i not in b.tests}
    only_b = {i: t for i, t in b.tests.items() if i not in a.tests}
    renames = find_renames(only_a, only_b, a.tests, b.tests)
    for id_a, id_b, _ in renames:
        only_a.pop(id_a)
        only_b.pop(id_b)

    pairs = [(a.tests[i], b.tests[i]) for i in a.tests if i in b.tests]
    pairs += [(a.tests[id_a], b.tests[id_b]) for id_a, id_b, _ in renames]
    transitions, flaky_transitions = [], []
    for before, after in pairs:
        if before.outcome == after.outcome:
            continue
        entry = {
            "test": after.id,
            "from": before.outcome,
            "to": after.outcome,
            "kind": transition_kind(before.outcome, after.outcome),
            # Why B ended as it did; for a fix, why A had failed.
            "message": after.message or (f"in A: {before.message}" if before.message else ""),
        }
        if after.id != before.id:
            entry["was"] = before.id
        (flaky_transitions if flaky.matches(before.id) or flaky.matches(after.id) else transitions).append(entry)
    order = {k: n for n, k in enumerate(KINDS)}
    transitions.sort(key=lambda t: (order[t["kind"]], t["test"]))
    flaky_transitions.sort(key=lambda t: (order[t["kind"]], t["test"]))

    collection = {
        "same": not only_a and not only_b,
        "common": len(pairs),
        "only_a": _one_side(only_a, own=a, other=b, arm="A"),
        "only_b": _one_side(only_b, own=b, other=a, arm="B"),
        "renamed": [{"a": x, "b": y, "rule": rule} for x, y, rule in sorted(renames)],
    }
    arms = {side: dict(arms.get(side, {})) for side in ("a", "b")}
    arms["a"]["totals"] = totals(a.tests.values())
    arms["b"]["totals"] = totals(b.tests.values())
    counts = {kind: sum(1 for t in transitions if t["kind"] == kind) for kind in KINDS}
    document = {
        "schema": SCHEMA,
        "arms": arms,
        "collection": collection,
        "common_totals": {"a": totals(p[0] for p in pairs), "b": totals(p[1] for p in pairs)},
        "transitions": transitions,
        "flaky": {
            "list": flaky.source,
            "transitions": flaky_transitions,
            "unmatched": flaky.unmatched(list(a.tests) + list(b.tests)),
        },
        "counts": {**counts, "unchanged": sum(1 for x, y in pairs if x.outcome == y.outcome)},
        "regressions": counts[REGRESSION],
    }
    document["verdict"] = verdict(document)
    return document


def _one_side(tests: dict[str, TestResult], own: SuiteRun, other: SuiteRun, arm: str) -> dict:
    """Tests in one arm only, grouped by file, with what they account for in the totals."""
    other_files = {t.file for t in other.tests.values()}
    other_broken = {t.file for t in other.tests.values() if not t.name}  # did not collect there
    by_file = defaultdict(list)
    for test in tests.values():
        by_file[test.file].append(test)
    files = []
    for file in sorted(by_file):
        group = by_file[file]
        elsewhere = "B" if arm == "A" else "A"
        if file in other_broken:
            note = f"did not collect in {elsewhere}"
        elif file not in other_files:
            note = "new in B" if arm == "B" else "gone in B"
        elif len(group) == 1 and not group[0].name:
            note = f"did not collect in {arm}"
        else:
            note = ""
        files.append({"file": file, "note": note, "totals": totals(group), "tests": [t.id for t in group]})
    return {"count": len(tests), "totals": totals(tests.values()), "files": files}


def _figures(counts: dict, keys: list[str], named: bool) -> str:
    if named:
        return " / ".join(f"{counts[k]} {k}" for k in keys)
    return " / ".join(str(counts[k]) for k in keys)


def verdict(document: dict) -> str:
    """One line: the collected-set check, both arms' totals, and the transitions."""
    coll = document["collection"]
    ta, tb = document["arms"]["a"]["totals"], document["arms"]["b"]["totals"]
    parts = []
    if coll["same"]:
        renamed = len(coll["renamed"])
        parts.append(f"same {ta['collected']} collected" + (f" ({renamed} renamed)" if renamed else ""))
    else:
        pieces = []
        for side, arm in (("only_a", "A"), ("only_b", "B")):
            group = coll[side]
            if not group["count"]:
                continue
            files = group["files"]
            where = (f"all in {files[0]['file']}" + (f" ({files[0]['note']})" if files[0]["note"] else "")
                     if len(files) == 1 else f"in {len(files)} files")
            pieces.append(f"{group['count']} only in {arm}, {where}")
        parts.append(f"collected sets differ (A {ta['collected']}, B {tb['collected']}): " + "; ".join(pieces))
    keys = ["failed", "passed"] + [k for k in ("errors", "skipped", "xfailed", "xpassed") if ta[k] or tb[k]]
    parts.append(f"A: {_figures(ta, keys, True)}")
    parts.append(f"B: {_figures(tb, keys, False)}")
    if not coll["same"]:
        ca, cb = document["common_totals"]["a"], document["common_totals"]["b"]
        parts.append(f"on the {ca['collected']} tests both ran: A {_figures(ca, keys, False)}, B {_figures(cb, keys, False)}")
    counts = document["counts"]
    changes = [f"{counts[REGRESSION]} regression" + ("" if counts[REGRESSION] == 1 else "s"),
               f"{counts[FIX]} fix" + ("" if counts[FIX] == 1 else "es")]
    if counts[NEWLY_SKIPPED]:
        changes.append(f"{counts[NEWLY_SKIPPED]} newly skipped")
    if counts[CHANGE]:
        changes.append(f"{counts[CHANGE]} other change" + ("" if counts[CHANGE] == 1 else "s"))
    flaky = len(document["flaky"]["transitions"])
    if flaky:
        changes.append(f"{flaky} flaky apart")
    parts.append(", ".join(changes))
    return "; ".join(parts)


def same_collection_error(document: dict, limit: int = 20) -> str:
    """The one-line message of ``--same-collection``, naming the tests (the first ``limit``)."""
    names = []
    for side, arm in (("only_a", "A"), ("only_b", "B")):
        for group in document["collection"][side]["files"]:
            names += [f"{test} (only in {arm})" for test in group["tests"]]
    shown = ", ".join(names[:limit]) + (f", and {len(names) - limit} more" if len(names) > limit else "")
    return f"collected sets differ (--same-collection), {len(names)} tests in one arm only: {shown}"


__all__ = ["SCHEMA", "KINDS", "TOTAL_KEYS", "compare_runs", "same_collection_error", "transition_kind", "verdict"]
