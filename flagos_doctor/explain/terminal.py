"""The rich terminal view of ``explain`` (on stderr: stdout is the program's): the failures and
their causes, then the run's findings, then a one-line count of the watched probes the run
wrote (the JSON has each event). Bounded whatever the number of failures (:data:`SHOWN_FAILURES`)."""

from __future__ import annotations

from rich.markup import escape

from flagos_doctor import output
from flagos_doctor.explain import SCHEMA
from flagos_doctor.explain.common import (cause_texts, failure_title, headline, listed_findings, no_cause_text,
                                          raised_at, shown_failures, tests_text, written_probes_text)
from flagos_doctor.probe.formats.common import interesting_probes

_COLOUR = {"error": "red", "warning": "yellow", "info": "dim"}


def failure_lines(document: dict) -> list[str]:
    texts = cause_texts(document)
    shown, left = shown_failures(document)
    out = ["", "[bold]Failures[/bold]"]
    if not document["failures"]:
        out.append("  none")
    for failure in shown:
        out.append(f"  [red]FAIL[/red] #{failure['id']} {escape(failure_title(failure))}")
        at = raised_at(failure)
        if at:
            out.append(f"    [dim]raised in {escape(at)}[/dim]")
        for cause_id in failure["causes"]:
            out.append(f"    [bold red]CAUSE[/bold red] {escape(texts[cause_id])}")
        if not failure["causes"]:
            out.append(f"    [dim]{escape(no_cause_text(document))}[/dim]")
    if left:
        out.append(f"  [dim]{escape(left)}[/dim]")
    return out


def finding_lines(document: dict) -> list[str]:
    listed, rest = listed_findings(document)
    if not listed and not rest:
        return []
    out = ["", "[bold]Findings of the run[/bold] (what the probe says of the same events)"]
    for finding in listed:
        colour = _COLOUR[finding["severity"]]
        probe = f" {finding['probe']}" if finding.get("probe") else ""
        out.append(f"  [{colour}]{finding['severity'].upper()}[/{colour}] {escape(finding['kind'] + probe)}")
        out.append(f"    {escape(finding['message'])}")
    if rest:
        out.append(f"  [dim]{escape(rest)}[/dim]")
    return out


def lines(document: dict) -> list[str]:
    out = ["", f"[bold]flagos-doctor explain[/bold]: {escape(headline(document))}"]
    for notice in document.get("notices", []):
        out.append(f"[dim]note: {escape(notice)}[/dim]")
    tests = tests_text(document)
    if tests:
        out.append(f"Tests: {escape(tests)}")
    out += failure_lines(document) + finding_lines(document)
    probes = [p for p in interesting_probes(document) if p.get("write_events")]
    if probes:
        out += ["", f"[bold]Watched probes the run wrote[/bold]: {escape(written_probes_text(document, probes))}",
                "  [dim]each write and read: --json PATH, or --markdown PATH[/dim]"]
    return out


@output.register(SCHEMA, "terminal", highlight=False, soft_wrap=True)
def show(document: dict, console) -> None:
    for line in lines(document):
        console.print(line)
