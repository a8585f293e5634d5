"""Each failure of the program, given its causes: issue 24's causal engine
(:func:`flagos_doctor.probe.causes.find_causes`) over the run's events, once per failure.

Pure and parent side. A failed test is judged on the reads its own step recorded (the
tracer records a read once per line, state and step, so each test has its own), so a
test is never blamed for a read another test made; an uncaught exception on every read of
the run; a bare non-zero exit has no traceback to walk, and so no cause.
"""

from __future__ import annotations

import shlex

from flagos_doctor.probe import causes as engine


def engine_failure(failure: dict, command: str) -> dict:
    """An ``explain`` failure in the engine's shape (``error``, ``traceback``, ``type``, ``what``,
    ``step``, ``causes``)."""
    test = failure.get("test")
    return {
        "error": failure.get("error"), "traceback": failure.get("traceback") or [],
        "type": (failure.get("type") or "").rsplit(".", 1)[-1] or None,
        "what": f"test {test}" if test else command,
        "step": f"test {test}" if test else None,
        "causes": failure.get("raised_from") or [],
    }


def causes(document: dict) -> list[dict]:
    """Every failure's causes, numbered (``id``), each naming its ``failure``."""
    command = shlex.join(document["program"]["command"])
    decisions = (document.get("facts") or {}).get("decisions") or []
    out = []
    for failure in document["failures"]:
        for cause in engine.find_causes(document["events"], engine_failure(failure, command), decisions):
            out.append({"id": len(out) + 1, "failure": failure["id"], **cause})
    return out
