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
    reads = sum(1 for e in document["events"] if e["kind"] == "read" and e.get("answer") and e.get("original_answer")
                and e["answer"].get("repr") != e["original_answer"].get("repr"))
    return (f"{text} (the run made {reads} read{'s' if reads != 1 else ''} of a probe answering otherwise "
            "than its original, none on this failure's path)")
