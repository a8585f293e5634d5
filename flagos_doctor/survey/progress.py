"""The terminal view of a survey: a live progress bar while it runs, a summary table after.

Both go to stderr (stdout stays free for ``--json -``) and render from plain data: the
progress bar from counts the command hands it, the table from the results document only.
"""

from __future__ import annotations

from rich.markup import escape

from flagos_doctor import output
from flagos_doctor.results import groups, model
from flagos_doctor.stacks import torch_fl_bindings as bindings

_STYLE = {
    model.STRICT: "green", model.BASIC_ONLY: "yellow", model.FAILED: "red", model.UNTESTED: "dim",
    model.NO_SCHEMA: "magenta", model.PENDING: "cyan",
}


class LiveProgress:
    """done/total overloads, the overloads running now, ETA, running verdict counts."""

    def __init__(self, total: int, quiet: bool = False):
        self.quiet = quiet
        self._progress = None
        self._running: dict[str, int] = {}
        self.counts: dict[str, int] = {}
        if quiet or total == 0:
            return
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]survey"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TextColumn("eta"),
            TimeRemainingColumn(),
            TextColumn("{task.fields[counts]}"),
            TextColumn("[dim]{task.fields[current]}"),
            console=Console(stderr=True),
            transient=False,
        )
        self._task = self._progress.add_task("survey", total=total, counts="", current="")
        self._progress.start()

    def _fields(self) -> dict:
        counts = " ".join(
            f"[{_STYLE[v]}]{v.lower()}={self.counts[v]}[/]" for v in model.VERDICTS if self.counts.get(v)
        )
        current = escape(", ".join(sorted(self._running))[:60])
        return {"counts": counts, "current": current}

    def begin(self, name: str) -> None:
        self._running[name] = self._running.get(name, 0) + 1
        if self._progress:
            self._progress.update(self._task, **self._fields())

    def end(self, name: str, verdict: str) -> None:
        self._running.pop(name, None)
        self.counts[verdict] = self.counts.get(verdict, 0) + 1
        if self._progress:
            self._progress.update(self._task, advance=1, **self._fields())

    def note(self, text: str) -> None:
        if self._progress:
            self._progress.console.print(f"[dim]{escape(text)}")

    def stop(self) -> None:
        if self._progress:
            self._progress.update(self._task, current="")
            self._progress.stop()


@output.register(model.RESULTS_SCHEMA, output.TERMINAL)
def show_summary(document: dict, console, output: str | None = None, ran: bool = True) -> None:
    """The final summary table of a results document; ``output``: its results file; ``ran``:
    False when this command ran nothing (the file was complete), so no run's time is shown."""
    from rich.table import Table

    summary = document["summary"]
    provenance = document.get("provenance", {})
    device = (provenance.get("device") or {})
    title = f"survey of {provenance.get('stack', '?')} on {device.get('string', '?')}"
    if device.get("name"):
        title += f" ({device['name']})"
    console.print(f"[bold]{escape(title)}")
    table = Table()
    table.add_column("verdict")
    table.add_column("overloads", justify="right")
    for verdict in model.VERDICTS:
        count = summary["verdicts"].get(verdict, 0)
        if count:
            table.add_row(f"[{_STYLE[verdict]}]{verdict}[/]", str(count))
    table.add_row("[bold]registered", f"[bold]{summary['registered']}")
    console.print(table)
    order = {status: index for index, status in enumerate(model.CASE_STATUSES)}
    statuses = "  ".join(f"{k}={v}" for k, v in sorted(summary["statuses"].items(),
                                                         key=lambda kv: (order.get(kv[0], len(order)), kv[0])))
    routes = "  ".join(f"{k}={v}" for k, v in sorted(summary.get("routes", {}).items()))
    console.print(f"tested {summary['tested']}  basic {summary['basic']}  strict {summary['strict']}")
    console.print(f"cases: {escape(statuses)}")
    console.print(f"routes: {escape(routes)}")
    if summary.get("fallback_passes"):
        names = ", ".join(summary["fallback_overloads"][:8])
        more = len(summary["fallback_overloads"]) - 8
        console.print(
            f"[yellow]{summary['fallback_passes']} PASS case(s) ran through the CPU fallback, not a kernel:[/] "
            f"{escape(names)}{f' (+{more})' if more > 0 else ''}"
        )
    _render_missing(document, console)
    _render_confirmed(document, console)
    _render_groups(document, console)
    bad = [
        (name, case) for name, entry in document["overloads"].items() for case in entry["cases"]
        if case["status"] in (model.CRASH, model.TIMEOUT) or case.get("poison")
    ]
    for name, case in bad[:10]:
        why = case.get("signal") or case.get("poison") or case["detail"]
        culprit = case.get("poisoned_by")
        if culprit:  # its first run's sticky error was another case's (survey/replay.py)
            why = f"{why} in its first run, left there by {model.poisoned_by_text(culprit)} (replayed)"
        console.print(f"[red]{case['status']}[/] " + escape(f"{name} [{case['profile']}]: {why}"))
    if len(bad) > 10:
        console.print(f"[red]... and {len(bad) - 10} more crash/timeout/poison cases")
    _render_times(document, console, ran)
    console.print(f"census sha256 {document['census_sha256'][:16]}  results: {escape(str(output))}")


#: Failure groups the summary shows; the results JSON keeps them all, with every member.
SUMMARY_GROUPS = 8


def _render_groups(document: dict, console) -> None:
    """The failures grouped by cause, largest first (one line each, with examples); the cases
    the verdicts do not count (INVALID_CASE, UNVERIFIABLE, FLAKY, NO_SCHEMA) in one line
    after them.

    Those are questions the CPU reference rejects or cannot answer, cases that passed once
    and failed once, and overloads torch lacks: listed as "failures", they filled the
    summary of a survey whose every verdict was STRICT.
    """
    found = document.get("failure_groups")
    if found is None:
        found = groups.failure_groups(document.get("overloads") or {})
    failing = groups.counted(found)
    if failing:
        console.print(f"[bold]failures by cause[/] ({len(failing)} groups)")
    for group in failing[:SUMMARY_GROUPS]:
        console.print(f"  {escape(groups.describe(group))}  [dim]e.g. {escape(groups.overloads_named(group['members']))}[/]",
                      highlight=False)
    if len(failing) > SUMMARY_GROUPS:
        console.print(f"  [dim]… {len(failing) - SUMMARY_GROUPS} more groups (failure_groups in the results JSON)[/]")
    uncounted = [group for group in found if group["status"] in groups.NOT_FAILURES]
    if uncounted:
        cases: dict = {}
        for group in uncounted:
            cases[group["status"]] = cases.get(group["status"], 0) + group["cases"]
        parts = ", ".join(f"{count} {status}" for status, count in sorted(cases.items()))
        console.print(f"[dim]not counted by the verdicts: {parts} case(s), in {len(uncounted)} groups by cause "
                      f"(failure_groups in the results JSON)[/]", highlight=False)


def _render_missing(document: dict, console) -> None:
    """The overloads whose binding calls a FlagGems function the installed flag_gems lacks
    (their cases), and what the static check of the build found (its provenance)."""
    provenance = document.get("provenance") or {}
    line = bindings.summary_line(document["summary"], provenance.get("flag_gems"))
    if line:
        missing = document["summary"]["missing_functions"]
        shown = ", ".join(f"{name} -> {function}" for name, function in list(missing.items())[:8])
        more = len(missing) - 8
        console.print(f"[magenta]{escape(line)}:[/] {escape(shown)}{f' (+{more})' if more > 0 else ''}")
    static = provenance.get("flag_gems_bindings") or {}
    if static.get("calls"):
        console.print(escape(
            f"static check of {static['library']}: it calls {static['calls']} FlagGems functions, "
            f"{len(static.get('missing') or {})} not in flag_gems {provenance.get('flag_gems')}"
            + (f" ({len(static['overloads'])} bound overloads)" if "overloads" in static else "")))


def _render_confirmed(document: dict, console) -> None:
    """Failures the native path shares, FLAKY cases, and when the verdicts were measured."""
    from flagos_doctor.results.verdicts import is_native_also

    summary = document["summary"]
    label = (document.get("provenance") or {}).get("baseline") or "the native path"
    cases = [(name, case) for name, entry in document["overloads"].items() for case in entry["cases"]]
    shared = [(name, case) for name, case in cases if is_native_also(case)]
    if shared:
        console.print(f"[cyan]{len(shared)} failing case(s) fail the same way on {escape(label)}: not counted[/] "
                      f"(in {len(summary.get('native_also_overloads', []))} overload(s))")
        for name, case in shared[:10]:
            console.print(escape(f"  {name} [{case['profile']}]: {case['status']}, and {label} is {case['status']} too"))
        if len(shared) > 10:
            console.print(f"  ... and {len(shared) - 10} more")
    flaky = [(name, case) for name, case in cases if case["status"] == model.FLAKY]
    for name, case in flaky[:10]:
        console.print("[yellow]FLAKY[/] " + escape(f"{name} [{case['profile']}]: " + ", ".join(case.get("repeats", []))))
    if len(flaky) > 10:
        console.print(f"[yellow]... and {len(flaky) - 10} more FLAKY cases")
    measured: dict = {}
    for entry in document["overloads"].values():
        if entry.get("measured"):
            measured[entry["measured"]] = measured.get(entry["measured"], 0) + 1
    if measured:
        console.print("verdicts measured by the run started " + "; ".join(
            f"{when}: {count}" for when, count in sorted(measured.items())), markup=False)


def _render_times(document: dict, console, ran: bool = True) -> None:
    """This run's time and worker starts, and the slowest cases (a kernel that compiles or
    autotunes for minutes shows here before it shows as a TIMEOUT)."""
    runs = (document.get("provenance") or {}).get("runs") or []
    run = runs[-1] if runs else {}
    starts = run.get("worker_starts") or {}
    if ran and run.get("seconds") is not None:
        line = f"this run: {run['seconds']:.1f} s"
        if starts.get("count"):
            line += f", {starts['count']} worker start(s), median {starts['median_s']} s, longest {starts['max_s']} s"
        console.print(line)
    timed = sorted(
        ((case["seconds"], name, case) for name, entry in document["overloads"].items()
         for case in entry["cases"] if case.get("seconds") is not None),
        key=lambda item: item[0], reverse=True,
    )[:3]
    if timed and timed[0][0] >= 1.0:
        console.print("slowest cases: " + ", ".join(
            f"{name} [{case['profile']}] {seconds:.1f} s" for seconds, name, case in timed), markup=False)
