"""The rich terminal view of ``explain`` (on stderr: stdout is the program's)."""

from __future__ import annotations

from rich.markup import escape

from flagos_doctor import output
from flagos_doctor.explain import SCHEMA
from flagos_doctor.explain.common import failure_title, headline, no_cause_text, raised_at, tests_text
from flagos_doctor.probe.formats.common import event_line, interesting_probes


def lines(document: dict) -> list[str]:
    out = ["", f"[bold]flagos-doctor explain[/bold]: {escape(headline(document))}"]
    for notice in document.get("notices", []):
        out.append(f"[dim]note: {escape(notice)}[/dim]")
    tests = tests_text(document)
    if tests:
        out.append(f"Tests: {escape(tests)}")
    causes = {c["id"]: c for c in document["causes"]}
    out += ["", "[bold]Failures[/bold]"]
    if not document["failures"]:
        out.append("  none")
    for failure in document["failures"]:
        out.append(f"  [red]FAIL[/red] #{failure['id']} {escape(failure_title(failure))}")
        at = raised_at(failure)
        if at:
            out.append(f"    [dim]raised in {escape(at)}[/dim]")
        for cause_id in failure["causes"]:
            out.append(f"    [bold red]CAUSE[/bold red] {escape(causes[cause_id]['message'])}")
        if not failure["causes"]:
            out.append(f"    [dim]{escape(no_cause_text(document))}[/dim]")
    events = {e["seq"]: e for e in document.get("events", [])}
    probes = [p for p in interesting_probes(document) if p.get("write_events")]
    if probes:
        out += ["", "[bold]Watched probes the run wrote[/bold] (each write, and reads after a redirect)"]
    for probe in probes:
        out.append(f"  [bold]{escape(probe['name'])}[/bold]")
        for seq in sorted(probe.get("write_events", []) + probe.get("reads", []))[:12]:
            event = events.get(seq)
            if event is not None:
                out.append(f"    {escape(event_line(event))}  [dim]({escape(event['step'])})[/dim]")
    return out


@output.register(SCHEMA, "terminal", highlight=False, soft_wrap=True)
def show(document: dict, console) -> None:
    for line in lines(document):
        console.print(line)
