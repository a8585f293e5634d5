"""``explain``'s document as Markdown for an issue: each failure and its cause up front;
tracebacks, the watched probes and the events in ``<details>``, while the budget holds:
the events are the first left out, then the watched probes, then the run's findings and
the tracebacks (the page's priorities, :class:`flagos_doctor.markdown.Page`)."""

from __future__ import annotations

from flagos_doctor import output
from flagos_doctor.explain import SCHEMA
from flagos_doctor.explain.common import (cause_texts, command_text, failure_title, headline, listed_findings,
                                          no_cause_text, raised_at, shown_failures, tests_text)
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell, code, details
from flagos_doctor.probe.formats.common import event_line, interesting_probes, value_text


def failures_lines(document: dict, level: str = "###") -> list[str]:
    """The failures and their causes (the part ``report --explain`` embeds too): at most
    :data:`~flagos_doctor.explain.common.SHOWN_FAILURES`, the rest counted; a cause said
    again is a pointer to the failure that said it first."""
    texts = cause_texts(document)
    shown, left = shown_failures(document)
    out = [f"{level} Failures", ""]
    if not document["failures"]:
        out.append("None.")
    for failure in shown:
        at = raised_at(failure)
        out.append(f"- **#{failure['id']}** {failure_title(failure)}" + (f" (raised in {code(at)})" if at else ""))
        for cause_id in failure["causes"]:
            out.append(f"  - **cause**: {texts[cause_id]}")
        if not failure["causes"]:
            out.append(f"  - {no_cause_text(document)}")
    if left:
        out.append(f"- {left}.")
    return out + [""]


def findings_lines(document: dict, level: str = "###") -> list[str]:
    """The run's findings (stale-guard, alias-missing, ...), errors and warnings listed."""
    listed, rest = listed_findings(document)
    if not listed and not rest:
        return []
    out = [f"{level} Findings of the run", ""]
    for finding in listed:
        probe = f" `{finding['probe']}`" if finding.get("probe") else ""
        out.append(f"- **{finding['severity']}** {finding['kind']}{probe}: {finding['message']}")
    if rest:
        out.append(f"- {rest}.")
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
    page.add(findings_lines(document), 1, "the run's findings")
    for failure in shown_failures(document)[0]:
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
