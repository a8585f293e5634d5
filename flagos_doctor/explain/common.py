"""Words the terminal and Markdown views of ``explain`` share."""

from __future__ import annotations


def command_text(document: dict) -> str:
    """The command as a shell would take it back (``python -c 'import x'``)."""
    import shlex

    return shlex.join(document["program"]["command"])


def headline(document: dict) -> str:
    """``python repro.py, Python 3.11.7: exited with status 1; 1 failure, 1 with a cause``."""
    program = document["program"]
    python = (document.get("python") or {}).get("version") or "?"
    failures = document["failures"]
    explained = sum(1 for f in failures if f["causes"])
    parts = [f"{len(failures)} failure{'s' if len(failures) != 1 else ''}"]
    if failures:
        parts.append(f"{explained} with a cause")
    stack = f" (stack {document['stack']})" if document.get("stack") else ""
    return f"{command_text(document)}{stack}, Python {python}: {program['ended']}; {', '.join(parts)}"


def failure_title(failure: dict) -> str:
    """``test tests/t.py::test_x (call): AssertionError: ...``, first line only."""
    what = {"exception": "uncaught exception", "exit": "exit", "test": f"test {failure.get('test')}"}[failure["kind"]]
    if failure["kind"] == "test" and failure.get("when") not in (None, "call"):
        what += f" ({failure['when']})"
    if failure.get("role"):  # not the program's own process: which one
        what += f" in {failure['role']} (pid {failure.get('process')})"
    error = (failure.get("error") or "").strip().splitlines()
    return f"{what}: {error[0][:300] if error else ''}"


def raised_at(failure: dict) -> str | None:
    frames = failure.get("traceback") or []
    if not frames:
        return None
    last = frames[-1]
    return f"{last['file']}:{last['function']}, line {last['line']}"


def tests_text(document: dict) -> str | None:
    tests = document.get("tests")
    if not tests:
        return None
    counts = tests["counts"]
    return ", ".join(f"{n} {outcome}" for outcome, n in sorted(counts.items())) or "no tests ran"


def no_cause_text(document: dict) -> str:
    """What a failure without a cause says (with the run's count of such reads, where the
    document still holds its events: ``report`` keeps only their count)."""
    text = "no cause found: no read of a redirected or replaced probe on its path"
    if "events" not in document:
        return text
    if not any(e["kind"] == "write" for e in document["events"]):  # the usual slip: `import torch` alone
        return ("no cause found: nothing wrote a watched probe in this run, so no stack had patched torch when it "
                "failed (a program imports its stack itself; --stack only names it)")
    reads = sum(1 for e in document["events"] if e["kind"] == "read" and e.get("answer") and e.get("original_answer")
                and e["answer"].get("repr") != e["original_answer"].get("repr"))
    return (f"{text} (the run made {reads} read{'s' if reads != 1 else ''} of a probe answering otherwise "
            "than its original, none on this failure's path)")


#: Failures listed in a view (those with a cause first); the rest are counted. With 3,000
#: failing tests the views stay within their budgets (a screen's worth; the Markdown's chars).
SHOWN_FAILURES = 25
#: Probes named in the terminal's folded list of what the run wrote.
SHOWN_PROBES = 8
#: Findings of these severities are listed; the others are counted.
LISTED_SEVERITIES = ("error", "warning")


def shown_failures(document: dict, limit: int = SHOWN_FAILURES) -> tuple[list[dict], str | None]:
    """The failures a view lists (with a cause first, then in order) and the sentence for the
    rest (``None`` when all are shown)."""
    failures = document["failures"]
    ordered = [f for f in failures if f["causes"]] + [f for f in failures if not f["causes"]]
    shown = sorted(ordered[:limit], key=lambda f: f["id"])
    left = ordered[limit:]
    if not left:
        return shown, None
    with_cause = sum(1 for f in left if f["causes"])
    return shown, (f"{len(left)} more failure{'s' if len(left) != 1 else ''} not listed ({with_cause} with a cause, "
                   f"{len(left) - with_cause} without): the JSON (`--json`) has every one")


def cause_texts(document: dict) -> dict[int, str]:
    """Each cause's words, by id: the full message the first time a read is a cause, then a
    pointer to that failure (3,000 tests failing on one skipped alias say the chain once)."""
    first: dict[tuple, int] = {}
    out = {}
    for cause in document["causes"]:
        key = (cause.get("read"), cause.get("write"), cause.get("how"))
        if key in first:
            frame = cause.get("frame") or {}
            out[cause["id"]] = (f"the same {'chain' if cause.get('how') == 'skipped-write' else 'cause'} as failure "
                                f"#{first[key]} (here at {frame.get('file')}:{frame.get('line')})")
        else:
            first[key] = cause["failure"]
            out[cause["id"]] = cause["message"]
    return out


def listed_findings(document: dict) -> tuple[list[dict], str | None]:
    """The run's findings a view lists (errors and warnings) and a count of the rest."""
    found = document.get("findings") or []
    listed = [f for f in found if f["severity"] in LISTED_SEVERITIES]
    rest = len(found) - len(listed)
    return listed, (f"{rest} more of severity info: the JSON has them" if rest else None)


def written_probes_text(document: dict, probes: list[dict]) -> str:
    """``9 probes (torch.cuda.is_available: 1 write, 5 reads; ...)``: the folded list."""
    parts = [f"{p['name']} ({len(p.get('write_events') or [])} write{'s' if len(p.get('write_events') or []) != 1 else ''}"
             + (f", {len(p['reads'])} read{'s' if len(p['reads']) != 1 else ''}" if p.get("reads") else "") + ")"
             for p in probes[:SHOWN_PROBES]]
    more = f", and {len(probes) - SHOWN_PROBES} more" if len(probes) > SHOWN_PROBES else ""
    return f"{len(probes)} probe{'s' if len(probes) != 1 else ''}: {', '.join(parts)}{more}"
