"""``explain``'s document as Markdown for an issue: each failure and its cause up front;
tracebacks, the watched probes and the events in ``<details>``, while the budget holds."""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.explain import SCHEMA
from flagos_doctor.explain.common import command_text, failure_title, headline, no_cause_text, raised_at, tests_text
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, code, details
from flagos_doctor.probe.formats.common import event_line, interesting_probes, value_text


def failures_lines(document: dict, level: str = "###") -> list[str]:
    """The failures and their causes (the part ``report --explain`` embeds too)."""
    causes = {c["id"]: c for c in document["causes"]}
    out = [f"{level} Failures", ""]
    if not document["failures"]:
        out.append("None.")
    for failure in document["failures"]:
        at = raised_at(failure)
        out.append(f"- **#{failure['id']}** {failure_title(failure)}" + (f" (raised in {code(at)})" if at else ""))
        for cause_id in failure["causes"]:
            out.append(f"  - **cause**: {causes[cause_id]['message']}")
        if not failure["causes"]:
            out.append(f"  - {no_cause_text(document)}")
    return out + [""]


def traceback_lines(failure: dict) -> list[str]:
    frames = failure.get("traceback") or []
    return ["```", *[f"{f['file']}:{f['line']} in {f['function']}" for f in frames[-30:]],
            (failure.get("error") or "").strip()[:1000], "```"]


@output.register(SCHEMA, "markdown")
def render(document: dict, max_chars: int = DEFAULT_MAX_CHARS,
           full_record: str = "the JSON of `explain --json PATH -- CMD`") -> str:
    page = Page(max_chars, full_record)
    out = ["## flagos-doctor explain", "", f"**{headline(document)}**", "",
           f"Command: {code(command_text(document))}", ""]
    tests = tests_text(document)
    if tests:
        out += [f"Tests: {tests}", ""]
    for notice in document.get("notices", []):
        out.append(f"> {notice}")
    page.add(out + [""] + failures_lines(document))
    for failure in document["failures"]:
        if failure.get("traceback"):
            page.add(details(f"Traceback of failure #{failure['id']}", traceback_lines(failure)), 1,
                     f"the traceback of failure #{failure['id']}")
    events = {e["seq"]: e for e in document.get("events", [])}
    out = []
    for probe in interesting_probes(document):
        if not probe.get("write_events"):
            continue
        out.append(f"- `{probe['name']}`")
        for seq in sorted(probe.get("write_events", []) + probe.get("reads", [])):
            if seq in events:
                out.append(f"  - {cell(event_line(events[seq]))} — step `{events[seq]['step']}`")
    if out:
        page.add(details("Watched probes the run wrote", out), 2, "the watched probes")
    rows = []
    for event in document.get("events", []):
        where = event["where"]
        at = f"{where['file']}:{where['function']} line {where['line']}" if where.get("function") else "unknown"
        value = value_text(event.get("value")) if event.get("value") else ""
        rows.append(f"| {event['seq']} | {event['kind']} | `{cell(event['probe'])}` | {cell(at)} | "
                    f"{cell(event['step'])} | {cell(value)} |")
    page.add_table(f"All events ({len(rows)})", ["| # | kind | probe | where | step | value |",
                                                  "|---|---|---|---|---|---|"], rows, 3, "events")
    python = document.get("python") or {}
    page.add([f"<sub>Python {python.get('version')} ({python.get('executable')}), {document.get('platform')}</sub>"])
    return page.text()
