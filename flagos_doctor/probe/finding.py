"""One finding of the probe: its shape and the words every rule uses
(:mod:`.findings` and :mod:`.hazards` both build on it)."""

from __future__ import annotations

SEVERITIES = ("error", "warning", "info")


def label(where: dict | None) -> str:
    """``torch_fl/__init__.py:_alias_cuda_to_flagos``, or ``an unknown writer``."""
    if not where or not where.get("function"):
        return "an unknown writer"
    return f"{where['file']}:{where['function']}"


def make_finding(kind, severity, probe, message, events) -> dict:
    """A finding: ``kind``, ``severity`` (of :data:`SEVERITIES`), ``probe``, ``message``, ``events`` (by ``seq``)."""
    return {"kind": kind, "severity": severity, "probe": probe, "message": message, "events": sorted(set(events))}


def first_line(text: str | None, limit: int = 300) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."
