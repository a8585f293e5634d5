"""Each promise of flagos_doctor/explain/markdown.py's docstrings, one test each, on the
documents of two real explain runs (tests/golden/judged: the seed's reproducer on the demo
stack; its tests under pytest, one failing by the alias, one by a plain wrong assertion),
loaded, not run again. The page's budget family (within it, failures kept, each part shown
or named as left out, at several budgets and paths) is tests/test_explain.py's.
scripts/mutation runs these first."""

from __future__ import annotations

import copy
import json
import os

import pytest

from conftest import REPO_ROOT
from flagos_doctor.explain import markdown
from flagos_doctor.probe.formats.common import interesting_probes

JUDGED = os.path.join(REPO_ROOT, "tests", "golden", "judged")


def load(name: str) -> dict:
    with open(os.path.join(JUDGED, f"explain-seed-{name}.json"), encoding="utf-8") as handle:
        return json.load(handle)


@pytest.fixture()
def demo() -> dict:
    return load("demo")


@pytest.fixture()
def tests_run() -> dict:
    return load("tests")


def test_each_failure_is_listed_with_where_it_was_raised_and_each_of_its_causes(demo):
    lines = markdown.failures_lines(demo)
    (failure,) = demo["failures"]
    frame = failure["traceback"][-1]
    assert lines[:2] == ["### Failures", ""] and lines[-1] == ""
    assert lines[2].startswith(f"- **#{failure['id']}** uncaught exception: ")
    assert lines[2].endswith(f" (raised in `{frame['file']}:{frame['function']}, line {frame['line']}`)")
    causes = [line for line in lines if line.startswith("  - **cause**: ")]
    assert [c.split(": ", 1)[1] for c in causes] == [c["message"] for c in demo["causes"]]
    assert markdown.failures_lines(demo, level="####")[0] == "#### Failures"


def test_a_failure_without_a_cause_says_so_and_a_run_without_failures_says_none(tests_run):
    lines = markdown.failures_lines(tests_run)
    plain = [i for i, line in enumerate(lines) if "test_plain_wrong_assertion" in line]
    assert plain and lines[plain[0] + 1].startswith("  - no cause found")
    assert markdown.failures_lines({**tests_run, "failures": [], "causes": []})[2] == "None."


def test_a_cause_said_again_points_to_the_failure_that_said_it_first(demo):
    doc = copy.deepcopy(demo)
    second = {**doc["failures"][0], "id": 70}
    doc["causes"] += [{**c, "id": c["id"] + 10, "failure": 70} for c in doc["causes"]]
    second["causes"] = [c["id"] + 10 for c in demo["causes"]]
    doc["failures"].append(second)
    lines = markdown.failures_lines(doc)
    pointers = [line for line in lines if line.startswith("  - **cause**: the same ")]
    first = demo["failures"][0]["id"]
    assert len(pointers) == len(demo["causes"]) and all(f"as failure #{first} " in line for line in pointers)


def test_only_so_many_failures_are_listed_and_the_rest_counted(tests_run):
    doc = copy.deepcopy(tests_run)
    doc["failures"] = [{**doc["failures"][1], "id": n} for n in range(30)]  # 30 without a cause
    lines = markdown.failures_lines(doc)
    assert sum(line.startswith("- **#") for line in lines) == 25
    assert "- 5 more failures not listed (0 with a cause, 5 without): the JSON (`--json`) has every one." in lines


def test_the_findings_list_errors_and_warnings_and_count_the_rest(demo):
    lines = markdown.findings_lines(demo)
    assert lines[:2] == ["### Findings of the run", ""] and lines[-1] == ""
    listed = [f for f in demo["findings"] if f["severity"] in ("error", "warning")]
    assert len([line for line in lines if line.startswith("- **")]) == len(listed)
    first = listed[0]
    probe = f" `{first['probe']}`" if first.get("probe") else ""
    assert f"- **{first['severity']}** {first['kind']}{probe}: {first['message']}" in lines
    info = {**first, "severity": "info"}
    assert markdown.findings_lines({"findings": [info]})[2:] == ["- 1 more of severity info: the JSON has them.", ""]
    assert markdown.findings_lines({"findings": []}) == [] and markdown.findings_lines({}) == []


def test_a_traceback_block_holds_its_last_thirty_frames_and_the_error():
    frames = [{"file": f"f{n}.py", "line": n, "function": "g"} for n in range(40)]
    lines = markdown.traceback_lines({"traceback": frames, "error": "  E: " + "x" * 2000 + "  "})
    assert lines[0] == lines[-1] == "```" and len(lines) == 33
    assert lines[1] == "f10.py:10 in g" and lines[30] == "f39.py:39 in g"
    assert lines[31] == "E: " + "x" * 997
    assert markdown.traceback_lines({"error": None}) == ["```", "", "```"]


def test_the_page_puts_headline_command_tests_and_notices_before_the_failures(tests_run):
    doc = {**tests_run, "notices": ["a notice"]}
    page = markdown.render(doc)
    head = page.split("### Failures", 1)[0]
    assert head.startswith("## flagos-doctor explain\n\n**")
    assert "Command: `" in head and "Tests: 2 failed" in head and "> a notice" in head
    assert "Tests:" not in markdown.render({**tests_run, "tests": None}).split("### Failures", 1)[0]


def test_tracebacks_probes_and_events_go_in_details_blocks_while_the_budget_holds(demo):
    page = markdown.render(demo)
    assert page.count("<details>") == page.count("</details>") >= 3
    assert f"Traceback of failure #{demo['failures'][0]['id']}" in page and "Watched probes the run wrote" in page
    assert f"All events ({len(demo['events'])})" in page
    python = demo.get("python") or {}
    assert page.rstrip().endswith(f"<sub>Python {python.get('version')} ({python.get('executable')}), "
                                  f"{demo.get('platform')}</sub>")
    for event in demo["events"]:
        assert f"| {event['seq']} | {event['kind']} |" in page


def test_a_probe_the_run_never_wrote_is_not_among_the_watched_probes(demo):
    doc = copy.deepcopy(demo)
    for probe in doc["probes"]:
        probe["write_events"] = []
    page = markdown.render(doc)
    assert "Watched probes the run wrote" not in page and "All events (" in page


def test_an_event_whose_frame_has_no_function_is_where_unknown(demo):
    doc = copy.deepcopy(demo)
    doc["events"][0]["where"] = {"file": "x.py", "line": 1}
    page = markdown.render(doc)
    assert f"| {doc['events'][0]['seq']} | {doc['events'][0]['kind']} | `" in page
    row = [line for line in page.splitlines() if line.startswith(f"| {doc['events'][0]['seq']} |")][0]
    assert "| unknown |" in row


def test_each_written_probe_is_listed_with_its_writes_and_reads_and_their_steps(demo):
    page = markdown.render(demo, max_chars=10**6)
    block = page.split("Watched probes the run wrote", 1)[1].split("</details>", 1)[0]
    events = {e["seq"]: e for e in demo["events"]}
    written = [p for p in interesting_probes(demo) if p.get("write_events")]
    assert written and [line[3:-1] for line in block.splitlines() if line.startswith("- `")] == [p["name"] for p in written]
    for probe in written:
        for seq in probe["write_events"] + probe.get("reads", []):
            assert f" — step `{events[seq]['step']}`" in block
    steps = [line for line in block.splitlines() if line.startswith("  - ")]
    assert len(steps) == sum(len(p["write_events"]) + len(p.get("reads", [])) for p in written)


def test_a_document_without_python_facts_still_ends_with_its_line(demo):
    doc = {k: v for k, v in demo.items() if k != "python"}
    assert markdown.render(doc).rstrip().endswith(f"<sub>Python None (None), {demo.get('platform')}</sub>")


def test_the_budget_drops_the_events_first_then_the_probes_then_tracebacks_and_findings(demo, monkeypatch):
    # the order is the page's priorities (markdown.Page keeps the lowest first, then in page
    # order, while they fit): findings and tracebacks 1, the watched probes 2, the events 3
    added = []

    class Recording(markdown.Page):
        def add(self, lines, priority=0, what=None):
            added.append((what, priority))
            super().add(lines, priority, what)

        def add_table(self, title, head, rows, priority, what, **options):
            added.append((what, priority))
            super().add_table(title, head, rows, priority, what, **options)

    monkeypatch.setattr(markdown, "Page", Recording)
    markdown.render(demo)
    optional = [(what, priority) for what, priority in added if priority]
    failure = demo["failures"][0]["id"]
    assert optional == [("the run's findings", 1), (f"the traceback of failure #{failure}", 1),
                        ("the watched probes", 2), ("events", 3)]
    assert all(priority == 0 for what, priority in added if what is None)  # headline, failures, the last line
