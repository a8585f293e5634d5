"""Small helpers shared by the terminal and Markdown views."""

from __future__ import annotations

from flagos_doctor.probe.finding import label


def where_text(where: dict | None) -> str:
    """``file:function line N`` or ``writer unknown``."""
    if not where or not where.get("function"):
        return "writer unknown"
    return f"{label(where)} line {where['line']}"


def value_text(value: dict | None) -> str:
    if value is None:
        return "(absent)"
    at = value.get("defined_at")
    return f"{value['repr']}" + (f" [{at}]" if at and at not in value["repr"] else "")


def interesting_probes(document: dict) -> list[dict]:
    """Probes that were written, read, or are not their original, in event order."""
    order = {}
    for event in document.get("events", []):
        order.setdefault(event["probe"], event["seq"])
    probes = [p for p in document.get("probes", []) if p["name"] in order or p.get("original") is False]
    probes += [p for p in document.get("probes", []) if p.get("resolved") is False and p["kind"] == "attr"]
    return sorted(probes, key=lambda p: order.get(p["name"], 10**9))


#: What the child did, by the document's ``outcome``: "ok" is that it ran to its end, which says
#: nothing of the findings (a stale guard is an error of a child that ran fine).
OUTCOME_WORDS = {"ok": "ran to its end", "timeout": "timed out", "crashed": "crashed",
                 "import-failed": "an import failed"}


def outcome_words(outcome: str | None) -> str:
    return OUTCOME_WORDS.get(outcome, f"outcome {outcome}")


def headline(document: dict) -> str:
    counts = {s: sum(1 for f in document["findings"] if f["severity"] == s) for s in ("error", "warning", "info")}
    parts = [f"{n} {s}{'s' if n != 1 else ''}" for s, n in counts.items() if n]
    stack = document.get("stack") or "default"
    python = (document.get("python") or {}).get("version") or "?"
    return (
        f"stack {stack} ({', '.join(document.get('imports') or [])}), Python {python}: "
        f"{outcome_words(document['outcome'])}; " + (", ".join(parts) if parts else "no findings")
    )


def event_line(event: dict) -> str:
    if event["kind"] == "read":
        if event.get("creates_driver"):
            return (f"#{event['seq']} read by {where_text(event['where'])}: creates Triton's driver; "
                    f"is_active(): {event.get('is_active')}")
        saw = f"saw #{event['saw']}" if event.get("saw") else "saw the original"
        return f"#{event['seq']} read by {where_text(event['where'])} ({saw})"
    how = ""
    if event.get("inferred"):
        how = " (inferred from the bytecode)"
    elif not event.get("writer_known") and event.get("noticed_at"):
        how = f" (noticed at {where_text(event['noticed_at'])})"
    via = f" via {', '.join(event['via'])}" if event.get("via") else ""
    verb = "deleted by" if event["kind"] == "delete" else "set by"
    return f"#{event['seq']} {verb} {where_text(event['where'])}{how}{via} -> {value_text(event.get('value'))}"


def probe_lines(document: dict, probe: dict) -> tuple[list[dict], str | None]:
    """A probe's events to list one by one, and a line summing up the rest: reads by torch's
    own code and the standard library (many, during torch.compile) are counted, except those
    a finding cites as evidence."""
    events = {e["seq"]: e for e in document.get("events", [])}
    cited = {seq for f in document.get("findings", []) for seq in f.get("events", [])}
    shown, folded = [], []
    for seq in sorted(probe.get("write_events", []) + probe.get("reads", [])):
        event = events.get(seq)
        if event is None:
            continue
        if event["kind"] == "read" and event.get("by") in ("torch", "stdlib") and seq not in cited:
            folded.append(event)
        else:
            shown.append(event)
    if not folded:
        return shown, None
    files = sorted({e["where"].get("file") or "?" for e in folded})
    more = f" and {len(files) - 3} more files" if len(files) > 3 else ""
    return shown, (f"{len(folded)} read{'s' if len(folded) != 1 else ''} by torch's own code or the standard "
                   f"library (#{folded[0]['seq']}..#{folded[-1]['seq']}: {', '.join(files[:3])}{more})")


def state_text(probe: dict) -> str:
    if probe.get("resolved") is False:
        return "not imported"
    if probe.get("kind") == "env":
        return "unchanged" if probe.get("original") else "changed"
    return "original" if probe.get("original") else "replaced"
