"""The probe document as Markdown for an issue: findings up front, long parts in <details>.

The page stays under a character budget (:class:`~flagos_doctor.markdown.Page`): headline,
findings and steps always; the stderr tail of a crash next; the probes' writers, then the
event list, while they fit."""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, summary_text
from flagos_doctor.probe import SCHEMA
from flagos_doctor.probe.formats.common import event_line, headline, interesting_probes, probe_lines, state_text, value_text


def _folded(summary: str, lines: list[str]) -> list[str]:
    """A ``<details>`` block in the probe page's own layout (summary on the opening line)."""
    return [f"<details><summary>{summary_text(summary)}</summary>", "", *lines, "", "</details>", ""]


@output.register(SCHEMA, "markdown")
def render(document: dict, max_chars: int = DEFAULT_MAX_CHARS,
           full_record: str = "the probe's JSON (`probe --json PATH`)") -> str:
    page = Page(max_chars, full_record)
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
    page.add(out + [""])
    out = []
    for probe in interesting_probes(document):
        state = state_text(probe)
        call = f", answers `{probe['call']['repr']}`" if probe.get("call", {}).get("ok") else ""
        out.append(f"- `{probe['name']}` ({state}{call})")
        shown, folded = probe_lines(document, probe)
        for event in shown:
            out.append(f"  - {cell(event_line(event))} — phase `{event['phase']}`")
        if folded:
            out.append(f"  - {cell(folded)}")
        if probe.get("final") is not None and probe.get("kind") != "env":
            out.append(f"  - final: `{cell(value_text(probe['final']))}`")
    page.add(_folded("Probes and their writers", out), 2, "the probes and their writers")
    rows = []
    for event in document.get("events", []):
        where = event["where"]
        at = f"{where['file']}:{where['function']} line {where['line']}" if where.get("function") else "unknown"
        rows.append(f"| {event['seq']} | {event['kind']} | `{cell(event['probe'])}` | {cell(at)} | "
                    f"{cell(event['phase'])} | {cell(value_text(event.get('value')) if event.get('value') else '')} |")
    page.add_table(f"All events ({len(events)})", ["| # | kind | probe | where | phase | value |", "|---|---|---|---|---|---|"],
                   rows, 3, "events", fold=_folded)
    child = document.get("child") or {}
    if child.get("stderr_tail") and document["outcome"] != "ok":
        page.add(_folded(f"stderr tail (child {child.get('ended')})", ["```", child["stderr_tail"], "```"]),
                 1, "the child's stderr tail")
    python = document.get("python") or {}
    page.add([f"<sub>Python {python.get('version')} ({python.get('executable')}), {document.get('platform')}</sub>"])
    return page.text()
