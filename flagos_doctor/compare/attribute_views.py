"""The terminal and Markdown views of an attribution document (:mod:`.attribute`).

Both render from the JSON document only: a table of classes, then one row per overload with
a failing case, then the evidence of every case that fails only under A (its error under A,
its outcome alone), the part a bug report needs. The Markdown stays under a character
budget (:class:`~flagos_doctor.markdown.Page`): the classes always, the evidence next, the
overloads while they fit.
"""

from __future__ import annotations

from rich.markup import escape

from flagos_doctor import output
from flagos_doctor.compare.attribute import ATTRIBUTION_SCHEMA, CLASSES, INTEGRATION, MEANING
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, Page, cell


def _title(doc: dict) -> str:
    a, b = doc["arms"]["a"], doc["arms"]["b"]
    return f"failures of {a['label']} ({a.get('stack')}) held against {b['label']} ({b.get('stack')})"


def _classes(entry: dict) -> str:
    return ", ".join(f"{kind} {count}" for kind, count in entry["classes"].items())


def _evidence(doc: dict):
    """(overload, case) of every case that fails only under A."""
    for name, entry in doc["overloads"].items():
        for case in entry["cases"]:
            if case["class"] == INTEGRATION:
                yield name, case


@output.register(ATTRIBUTION_SCHEMA, output.TERMINAL)
def show_terminal(doc: dict, console) -> None:
    from rich.table import Table

    console.print(f"[bold]{escape(_title(doc))}")  # labels are the user's paths: text, not markup
    for item in doc["context"]:
        console.print(f"  {item['field']}: {item['a']} vs {item['b']} (differs by design)", markup=False)
    table = Table()
    table.add_column("class")
    table.add_column("failing cases of A", justify="right")
    table.add_column("meaning")
    for kind in CLASSES:
        table.add_row(kind, str(doc["counts"][kind]), MEANING[kind])
    console.print(table)
    if doc["overloads"]:
        rows = Table(title="overloads with a failing case")
        rows.add_column("overload")
        rows.add_column("cases by class")
        for name, entry in doc["overloads"].items():
            rows.add_row(escape(name), _classes(entry))
        console.print(rows)
    for name, case in _evidence(doc):
        console.print("[red]integration[/] " + escape(
            f"{name} [{case['profile']}]: A {case['a']['status']} (route {case['a'].get('route')}) "
            f"{case['a']['detail']}; alone {case['b']['status']} (route {case['b'].get('route')})"))
    integration = doc["integration"]
    console.print(f"{len(integration)} overload(s) fail only under {doc['arms']['a']['label']}"
                  + (": " + ", ".join(integration) if integration else ""), markup=False)


@output.register(ATTRIBUTION_SCHEMA, "markdown")
def render_markdown(doc: dict, heading_level: int = 2, max_chars: int = DEFAULT_MAX_CHARS,
                    full_record: str = "the attribution's JSON (`survey --compare A B --attribute --json PATH`)") -> str:
    page = Page(max_chars, full_record)
    hashes = "#" * heading_level
    out = [f"{hashes} {_title(doc)}", ""]
    for item in doc["context"]:
        out.append(f"- {item['field']}: `{cell(item['a'])}` vs `{cell(item['b'])}` (differs by design)")
    out += ["", "| class | failing cases of A | meaning |", "|---|---:|---|"]
    out += [f"| {kind} | {doc['counts'][kind]} | {MEANING[kind]} |" for kind in CLASSES]
    out.append("")
    page.add(out)
    rows = [f"| `{cell(name)}` | {cell(_classes(entry))} |" for name, entry in doc["overloads"].items()]
    if doc["overloads"]:
        page.add_table(f"Overloads with a failing case ({len(doc['overloads'])})",
                       ["| overload | cases by class |", "|---|---|"], rows, 2, "overloads with a failing case")
    evidence = [
        f"| `{cell(name)}` | {cell(case['profile'])} | {cell(case['a']['status'])}: {cell(case['a']['detail'])} "
        f"| {cell(case['a'].get('route'))} | {cell(case['b']['status'])} ({cell(case['b'].get('route'))}) |"
        for name, case in _evidence(doc)
    ]
    if evidence:
        page.add_table(f"Fails only under {cell(doc['arms']['a']['label'])}: the evidence ({len(evidence)} cases)",
                       ["| overload | profile | under A | route under A | alone |", "|---|---|---|---|---|"],
                       evidence, 1, "the evidence of cases failing only under A")
    return page.text()
