"""Each promise of flagos_doctor/explain/terminal.py's docstring (the failures and their
causes, then the run's findings, then a one-line count of the watched probes the run wrote;
bounded whatever the number of failures; text from the program never read as markup), on
the documents of two real explain runs (tests/golden/judged), rendered by rich to plain
text. scripts/mutation runs these first."""

from __future__ import annotations

import copy
import io
import json
import os

from rich.console import Console

from conftest import REPO_ROOT
from flagos_doctor.explain import terminal
from flagos_doctor.probe.formats.common import interesting_probes

JUDGED = os.path.join(REPO_ROOT, "tests", "golden", "judged")


def load(name: str) -> dict:
    with open(os.path.join(JUDGED, f"explain-seed-{name}.json"), encoding="utf-8") as handle:
        return json.load(handle)


def shown(document: dict) -> list[str]:
    """The view as a terminal shows it (markup applied), a line each."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=10_000, color_system=None, highlight=False, soft_wrap=True)
    terminal.show(document, console)
    return buffer.getvalue().splitlines()


def test_the_failures_come_first_with_where_each_was_raised_and_its_causes():
    demo = load("demo")
    out = shown(demo)
    (failure,) = demo["failures"]
    frame = failure["traceback"][-1]
    start = out.index("Failures")
    assert out[start + 1].startswith(f"  FAIL #{failure['id']} uncaught exception: ")
    assert out[start + 2] == f"    raised in {frame['file']}:{frame['function']}, line {frame['line']}"
    assert [line[len("    CAUSE "):] for line in out if line.startswith("    CAUSE ")] == [c["message"] for c in demo["causes"]]
    assert start < out.index("Findings of the run (what the probe says of the same events)")
    assert out.index("Findings of the run (what the probe says of the same events)") < [
        i for i, line in enumerate(out) if line.startswith("Watched probes the run wrote: ")][0]


def test_the_headline_notices_and_tests_lead():
    tests_run = {**load("tests"), "notices": ["a [bold]notice[/bold]"]}
    out = shown(tests_run)
    assert out[1].startswith("flagos-doctor explain: ") and out[2] == "note: a [bold]notice[/bold]"
    assert out[3] == "Tests: 2 failed"
    assert not any(line.startswith("Tests:") for line in shown({**tests_run, "tests": None}))


def test_a_failure_without_a_cause_or_a_frame_and_a_run_without_failures():
    tests_run = load("tests")
    out = shown(tests_run)
    plain = [i for i, line in enumerate(out) if "test_plain_wrong_assertion" in line][0]
    assert out[plain + 1].startswith("    raised in ") and out[plain + 2].startswith("    no cause found")
    frameless = copy.deepcopy(tests_run)
    frameless["failures"][1]["traceback"] = []
    out = shown(frameless)
    plain = [i for i, line in enumerate(out) if "test_plain_wrong_assertion" in line][0]
    assert out[plain + 1].startswith("    no cause found")
    out = shown({**tests_run, "failures": [], "causes": []})
    assert out[out.index("Failures") + 1] == "  none"


def test_however_many_failures_the_view_lists_so_many_and_counts_the_rest():
    doc = load("tests")
    doc["failures"] = [{**doc["failures"][1], "id": n} for n in range(3000)]
    out = shown(doc)
    assert sum(line.startswith("  FAIL #") for line in out) == 25
    assert "  2975 more failures not listed (0 with a cause, 2975 without): the JSON (`--json`) has every one" in out


def test_the_findings_each_say_severity_kind_probe_and_message_and_the_rest_are_counted():
    demo = load("demo")
    out = shown(demo)
    for finding in [f for f in demo["findings"] if f["severity"] in ("error", "warning")]:
        probe = f" {finding['probe']}" if finding.get("probe") else ""
        at = out.index(f"  {finding['severity'].upper()} {finding['kind']}{probe}")
        assert out[at + 1] == f"    {finding['message']}"
    info = {**demo["findings"][0], "severity": "info"}
    out = shown({**demo, "findings": [info]})
    assert "  1 more of severity info: the JSON has them" in out
    assert not any(line.startswith("Findings of the run") for line in shown({**demo, "findings": []}))


def test_the_written_probes_are_one_line_with_where_the_rest_is():
    demo = load("demo")
    out = shown(demo)
    (line,) = [line for line in out if line.startswith("Watched probes the run wrote: ")]
    written = [p for p in interesting_probes(demo) if p.get("write_events")]
    assert line.startswith(f"Watched probes the run wrote: {len(written)} probe")
    assert out[out.index(line) + 1] == "  each write and read: --json PATH, or --markdown PATH"
    none_written = copy.deepcopy(demo)
    for probe in none_written["probes"]:
        probe["write_events"] = []
    assert not any(line.startswith("Watched probes") for line in shown(none_written))


def test_text_from_the_program_is_shown_as_it_is_never_as_markup():
    doc = load("tests")
    doc["failures"][1]["error"] = "AssertionError: [red]not markup[/red] [/bold]"
    doc["failures"][1]["traceback"][-1]["file"] = "[link=x]t.py"
    out = shown(doc)
    assert any(line.endswith("AssertionError: [red]not markup[/red] [/bold]") for line in out)
    assert any(line.startswith("    raised in [link=x]t.py:") for line in out)


def test_on_a_terminal_a_long_line_stays_one_line_and_only_the_views_own_styles_colour_it(capsys, monkeypatch):
    # a path or an error message copied from the terminal must come out whole; numbers and
    # paths in the program's text are not coloured as if the view meant them
    import functools

    from flagos_doctor import console as console_module
    from flagos_doctor import output

    # stderr a 60-column colour terminal, as rich sees it (every version: no environment)
    monkeypatch.setattr(console_module, "Console",
                        functools.partial(Console, force_terminal=True, width=60, color_system="standard"))
    doc = load("tests")
    doc["failures"][1]["error"] = "AssertionError: " + "x" * 150
    output.emit(doc, {}, terminal=output.STDERR)
    text = capsys.readouterr().err
    assert any(line.endswith("AssertionError: " + "x" * 150) for line in text.splitlines())
    assert "Tests: 2 failed\n" in text  # no style on the count
