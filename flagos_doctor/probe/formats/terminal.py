"""The rich terminal view: outcome, steps, each probe's chain of writers, then findings."""

from __future__ import annotations

from rich.markup import escape

from flagos_doctor import output
from flagos_doctor.probe import SCHEMA
from flagos_doctor.probe.formats.common import event_line, headline, interesting_probes, probe_lines, state_text, value_text

_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
#: The most of one finding's message the view shows (an error quoting a 100 KB line was one
#: line of that length); the JSON keeps it whole.
MAX_MESSAGE = 1200
#: A message line longer than this is wrapped at the terminal's width, indented (a shorter
#: one stays one line the terminal folds, as a user copies it).
WRAP_FROM = 300


def message_lines(message: str, width: int) -> list[str]:
    """A finding's message under its heading: a line of more than :data:`WRAP_FROM` characters
    wrapped at ``width``, indented; the whole cut at :data:`MAX_MESSAGE` characters, saying
    how many more the JSON holds."""
    import textwrap

    shown = message if len(message) <= MAX_MESSAGE else (
        f"{message[:MAX_MESSAGE]}… ({len(message) - MAX_MESSAGE:,} more characters: --json has them)")
    out = []
    for line in shown.splitlines() or [""]:
        if len(line) <= WRAP_FROM:
            out.append(f"    {line}")
            continue
        out += textwrap.wrap(line, max(width - 4, 40), initial_indent="    ", subsequent_indent="    ",
                             break_long_words=True, break_on_hyphens=False)
    return out


def lines(document: dict, width: int = 100) -> list[str]:
    """The view as rich markup lines (a finding's message wrapped at ``width``)."""
    out = [f"[bold]flagos-doctor probe[/bold]: {escape(headline(document))}"]
    for notice in document.get("notices", []):
        out.append(f"[dim]note: {escape(notice)}[/dim]")
    out += ["", "[bold]Steps[/bold]"]
    for outcome in document.get("outcomes", []):
        mark = "[green]ok[/green]  " if outcome["ok"] else "[red]FAIL[/red]"
        result = outcome.get("value") if outcome["ok"] else outcome.get("error", "").strip().splitlines()[0][:150]
        out.append(f"  {mark} {escape(outcome['step'])}  [dim]{outcome['seconds']:.1f} s[/dim]  -> {escape(str(result))}")
    if document.get("interrupted"):
        info = document["interrupted"]
        out.append(f"  [red]!![/red]   {escape(str(info.get('phase')))}: {escape(info['reason'])}")
    out += ["", "[bold]Probes[/bold] (each write in order; reads after a redirect)"]
    for probe in interesting_probes(document):
        state = state_text(probe)
        call = f", answers {probe['call']['repr']}" if probe.get("call", {}).get("ok") else ""
        if probe.get("original_call"):
            call += f" (original: {probe['original_call']['repr']})"
        out.append(f"  [bold]{escape(probe['name'])}[/bold]  [dim]{state}{escape(call)}[/dim]")
        shown, folded = probe_lines(document, probe)
        for event in shown:
            out.append(f"    {escape(event_line(event))}  [dim]({escape(event['phase'])})[/dim]")
        if folded:
            out.append(f"    [dim]{escape(folded)}[/dim]")
        if probe.get("final") is not None and probe.get("kind") not in ("env",):
            out.append(f"    [dim]final: {escape(value_text(probe['final']))}[/dim]")
    if document.get("saved_originals"):
        out += ["", "[bold]Saved originals[/bold]"]
        for keep in document["saved_originals"]:
            read = "read later" if keep["read"] else "[yellow]never read[/yellow]"
            out.append(f"  {escape(keep['probe'])} holds the original {escape(keep['saves'])} (#{keep['seq']}): {read}")
    out += ["", "[bold]Findings[/bold]"]
    if not document["findings"]:
        out.append("  none")
    for finding in document["findings"]:
        style = _STYLE[finding["severity"]]
        evidence = ", ".join(f"#{s}" for s in finding["events"])
        out.append(f"  [{style}]{finding['severity'].upper()}[/{style}] [bold]{finding['kind']}[/bold]"
                   + (f" {escape(finding['probe'])}" if finding.get("probe") else "")
                   + (f" [dim](events {evidence})[/dim]" if evidence else ""))
        out += [escape(line) for line in message_lines(finding["message"], width)]
    child = document.get("child") or {}
    if document["outcome"] in ("crashed", "timeout", "import-failed") and child.get("stderr_tail"):
        out += ["", f"[bold]stderr tail[/bold] (child {escape(child.get('ended', ''))})"]
        out += [f"  [dim]{escape(line)}[/dim]" for line in child["stderr_tail"].splitlines()[-15:]]
    return out


@output.register(SCHEMA, output.TERMINAL, highlight=False, soft_wrap=True)
def show(document: dict, console) -> None:
    for line in lines(document, console.width):
        console.print(line, highlight=False)
