"""Each failure of the program, given its causes: issue 24's causal engine
(:func:`flagos_doctor.probe.causes.find_causes`) over the run's events, once per failure.

Pure and parent side. A failed test is judged on the reads its own step recorded (the
tracer records a read once per line, state and step, so each test has its own), so a
test is never blamed for a read another test made; an uncaught exception on every read of
the run; a bare non-zero exit has no traceback to walk, and so no cause.

On a machine without the stack's device (the probe's ``no-device`` finding: the device is
registered and its ``device_count()`` answers 0) a failure the engine gives no cause gets
that one (``how``: ``no-device``) when it failed on the device: its traceback runs through
the package that registered it and its error says a device is missing or invalid (torch_fl's
allocator: "invalid device index") or names the device. Both are asked for: torch_fl's alias
mode is a frame of every torch call, so a shape error, or cpu and meta tensors on "the same
device", pass through it too, and the program's own errors may name a device.
"""

from __future__ import annotations

import re
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


def _device_package(document: dict) -> str | None:
    """The top folder of the file that registered the device (``torch_fl/``), from the
    write of the PrivateUse1 backend name."""
    for event in document.get("events") or []:
        if event["kind"] == "write" and event["probe"] == "PrivateUse1 backend name":
            file = (event.get("where") or {}).get("file") or ""
            return file.split("/", 1)[0] + "/" if "/" in file else None
    return None


def no_device_cause(document: dict, failure: dict, what: str) -> dict | None:
    """The ``no-device`` cause of ``failure`` (module doc), or None."""
    finding = next((f for f in document.get("findings") or [] if f["kind"] == "no-device"), None)
    package = _device_package(document)
    error = failure.get("error") or ""
    if finding is None or package is None:
        return None
    name = finding["probe"].rsplit(".", 1)[-1]  # torch.flagos
    if not re.search(rf"invalid device|device (index|ordinal)|no (\w+ )?devices?\b|\b{re.escape(name)}\b", error, re.I):
        return None
    frames = [frame for frame in failure.get("traceback") or [] if (frame.get("file") or "").startswith(package)]
    if not frames:
        return None
    frame = frames[-1]
    count = finding["probe"] + ".device_count()"
    return {"probe": finding["probe"], "how": "no-device", "frame": frame, "events": finding["events"],
            "message": f"{what} failed: {error.strip().splitlines()[0][:300]}; it ran on the device through "
                       f"{frame['file']}:{frame['line']} ({frame['function']}), and this machine has none "
                       f"({count} answers 0: the no-device finding below): run it where the device is."}


def causes(document: dict) -> list[dict]:
    """Every failure's causes, numbered (``id``), each naming its ``failure``."""
    command = shlex.join(document["program"]["command"])
    decisions = (document.get("facts") or {}).get("decisions") or []
    out = []
    for failure in document["failures"]:
        shaped = engine_failure(failure, command)
        found = engine.find_causes(document["events"], shaped, decisions)
        if not found and failure["kind"] != "exit":
            found = [cause for cause in [no_device_cause(document, failure, shaped["what"])] if cause]
        for cause in found:
            out.append({"id": len(out) + 1, "failure": failure["id"], **cause})
    return out
