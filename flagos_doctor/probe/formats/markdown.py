"""The probe document as Markdown for an issue: findings up front, long parts in <details>."""

from __future__ import annotations

from flagos_doctor.markdown import cell
from flagos_doctor.probe.formats.common import event_line, headline, interesting_probes, state_text, value_text


def format(document: dict) -> str:
    out = ["## flagos-doctor probe", "", f"**{headline(document)}**", ""]
    for notice in document.get("notices", []):
        out.append(f"> {notice}")
    if document.get("interrupted"):
        info = document["interrupted"]
        out += [f"> The child stopped during `{info.get('phase')}`: {info['reason']}.", ""]
    out += ["### Findings", ""]
    if not document["findings"]:
        out.append("None.")
    for finding in document["findings"]:
        probe = f" `{finding['probe']}`" if finding.get("probe") else ""
        evidence = f" (events {', '.join('#' + str(s) for s in finding['events'])})" if finding["events"] else ""
        out.append(f"- **{finding['severity']}** `{finding['kind']}`{probe}: {finding['message']}{evidence}")
    out += ["", "### Steps", "", "| step | result | seconds |", "|---|---|---|"]
    for outcome in document.get("outcomes", []):
        result = outcome.get("value") if outcome["ok"] else "FAILED: " + outcome.get("error", "").strip().splitlines()[0][:200]
        out.append(f"| `{cell(outcome['step'])}` | {cell(result)} | {outcome['seconds']:.1f} |")
    events = {e["seq"]: e for e in document.get("events", [])}
    out += ["", "<details><summary>Probes and their writers</summary>", ""]
    for probe in interesting_probes(document):
        state = state_text(probe)
        call = f", answers `{probe['call']['repr']}`" if probe.get("call", {}).get("ok") else ""
        out.append(f"- `{probe['name']}` ({state}{call})")
        for seq in sorted(probe.get("write_events", []) + probe.get("reads", [])):
            if seq in events:
                out.append(f"  - {cell(event_line(events[seq]))} — phase `{events[seq]['phase']}`")
        if probe.get("final") is not None and probe.get("kind") != "env":
            out.append(f"  - final: `{cell(value_text(probe['final']))}`")
    out += ["", "</details>", ""]
    out += [f"<details><summary>All events ({len(events)})</summary>", "",
            "| # | kind | probe | where | phase | value |", "|---|---|---|---|---|---|"]
    for event in document.get("events", []):
        where = event["where"]
        at = f"{where['file']}:{where['function']} line {where['line']}" if where.get("function") else "unknown"
        out.append(f"| {event['seq']} | {event['kind']} | `{cell(event['probe'])}` | {cell(at)} | "
                   f"{cell(event['phase'])} | {cell(value_text(event.get('value')) if event.get('value') else '')} |")
    out += ["", "</details>", ""]
    child = document.get("child") or {}
    if child.get("stderr_tail") and document["outcome"] != "ok":
        out += [f"<details><summary>stderr tail (child {child.get('ended')})</summary>", "", "```",
                child["stderr_tail"], "```", "", "</details>", ""]
    python = document.get("python") or {}
    out.append(f"<sub>Python {python.get('version')} ({python.get('executable')}), {document.get('platform')}</sub>")
    return "\n".join(out) + "\n"
