"""The comparison document as a terminal view (rich), rendered from the JSON document only.

Its console reads no markup: test ids hold brackets (``test_x[red]``), which rich would
take for a style and drop; every style here is a :class:`~rich.text.Text` span."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from flagos_doctor import output
from flagos_doctor.suite.compare import SCHEMA
from flagos_doctor.suite.model import TOTAL_KEYS

#: At most this many rows per list; the rest are counted (the JSON has them all).
MAX_ROWS = 40
_STYLE = {"regression": "bold red", "fix": "green", "newly skipped": "yellow", "change": "cyan"}


@output.register(SCHEMA, output.TERMINAL, soft_wrap=True, highlight=False, markup=False)
def show(document: dict, console: Console) -> None:
    arms = document["arms"]
    coll = document["collection"]
    console.print(Text.assemble(("suite compare  ", "bold"), f"A: {arms['a']['label']}  ->  B: {arms['b']['label']}"))
    console.print()
    if coll["same"]:
        console.print(Text(f"Collected sets: the same {arms['a']['totals']['collected']} tests in both arms", "green"))
    else:
        console.print(Text(
            f"Collected sets DIFFER: {coll['only_a']['count']} only in A, {coll['only_b']['count']} only in B, "
            f"{coll['common']} in both (the totals below count them)", "bold yellow"))
        table = Table(show_edge=False, pad_edge=False, box=None)
        for column in ("", "file", "tests", "outcomes", "note"):
            table.add_column(column)
        for side, arm in (("only_a", "A"), ("only_b", "B")):
            for group in coll[side]["files"]:
                brief = ", ".join(f"{group['totals'][k]} {k}" for k in TOTAL_KEYS[1:] if group["totals"][k])
                table.add_row(f"  only in {arm}", group["file"], str(len(group["tests"])), brief, group["note"])
        console.print(table)
        names = [(t, arm) for side, arm in (("only_a", "A"), ("only_b", "B"))
                 for g in coll[side]["files"] for t in g["tests"]]
        for test, arm in names[:MAX_ROWS]:
            console.print(f"    {arm} only: {test}", highlight=False)
        if len(names) > MAX_ROWS:
            console.print(f"    ... and {len(names) - MAX_ROWS} more (--json has them all)")
    for renamed in coll["renamed"]:
        console.print(f"  renamed: {renamed['a']} -> {renamed['b']} ({renamed['rule']})", highlight=False)
    console.print()

    table = Table(title=None, show_edge=False, box=None, pad_edge=False)
    table.add_column("Totals")
    for key in TOTAL_KEYS:
        table.add_column(key, justify="right")
    table.add_row(f"A {arms['a']['label']}", *(str(arms["a"]["totals"][k]) for k in TOTAL_KEYS))
    table.add_row(f"B {arms['b']['label']}", *(str(arms["b"]["totals"][k]) for k in TOTAL_KEYS))
    if not coll["same"]:
        common = document["common_totals"]
        table.add_row("A, tests both ran", *(str(common["a"][k]) for k in TOTAL_KEYS))
        table.add_row("B, tests both ran", *(str(common["b"][k]) for k in TOTAL_KEYS))
    console.print(table)
    console.print()

    _transitions(console, "Transitions (regressions first)", document["transitions"])
    flaky = document["flaky"]
    if flaky["list"]:
        _transitions(console, f"Flaky, reported apart ({flaky['list']})", flaky["transitions"])
        if flaky["unmatched"]:
            console.print(f"  flaky entries matching no test: {', '.join(flaky['unmatched'])}", highlight=False)
    console.print(f"{document['counts']['unchanged']} tests unchanged.")
    console.print()
    style = "bold red" if document["regressions"] else ("bold yellow" if not coll["same"] else "bold green")
    console.print(Text.assemble(("Verdict: ", "bold"), (document["verdict"], style)))


def _transitions(console: Console, title: str, transitions: list[dict]) -> None:
    console.print(Text(title, "bold"))
    if not transitions:
        console.print("  none")
        return
    shown = transitions[:MAX_ROWS]
    width = min(max(len(t["test"]) for t in shown), 70)
    for t in shown:
        line = Text("  ")
        line.append(f"{t['kind']:<14}", _STYLE.get(t["kind"], ""))
        line.append(f"{t['test']:<{width}}  {t['from'] + ' -> ' + t['to']:<20}")
        if t.get("was"):
            line.append(f"  (was {t['was']})")
        if t["message"]:
            line.append(f"  {t['message']}", "dim")
        console.print(line)
    if len(transitions) > MAX_ROWS:
        console.print(f"  ... and {len(transitions) - MAX_ROWS} more (--json has them all)")
