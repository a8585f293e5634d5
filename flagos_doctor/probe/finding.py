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


def skipped_words(skipped: dict | None, shown: int = 8) -> str:
    """``lines 83-113 never ran; they would have written torch.device (line 109), ...``: what a
    branch kept from running (a decision's ``skipped``, :func:`flagos_doctor.probe.decisions.skipped_code`)."""
    if not skipped:
        return ""
    first, last = skipped["lines"]
    span = f"line {first}" if first == last else f"lines {first}-{last}"
    direct = [w for w in skipped.get("writes", []) if not w.get("via")]
    named = [f"{w['name']} (line {w['line']})" for w in direct]
    named += [f"`{c['call']}` (line {c['line']}) -> " + ", ".join(c["writes"][:shown]) for c in skipped.get("calls", [])]
    if not named:
        return f"{span} never ran"
    more = f", and {len(named) - shown} more" if len(named) > shown else ""
    return f"{span} never ran, which would have written {', '.join(named[:shown])}{more}"


class Run:
    """What every finding rule reads: one run's document (a probe's, or the probe-shaped part
    of an explain run), its events and decisions, looked up once.

    A rule is ``rule(run) -> list[finding]`` (:func:`make_finding`); the one list of rules is
    :data:`flagos_doctor.probe.findings.RULES`. A rule that builds on another's findings asks
    :meth:`once` for them, so each rule runs once per run whoever asks first."""

    def __init__(self, document: dict):
        self.document = document
        self.events: list[dict] = document.get("events", [])
        self.by_seq = {e["seq"]: e for e in self.events}
        self.probes = {p["name"]: p for p in document.get("probes", [])}
        self.saved = {s["saves"]: s for s in document.get("saved_originals", [])}
        self.facts: dict = document.get("facts") or {}
        self.decisions: list[dict] = self.facts.get("decisions") or []
        self._memo: dict = {}

    def once(self, rule):
        """``rule(self)``, computed once per run."""
        if rule not in self._memo:
            self._memo[rule] = rule(self)
        return self._memo[rule]
