"""The committed H200 documents render byte-identical: every view of every command, pinned
by its text in tests/golden/<view>.txt.

A change of a single byte in any view fails here, naming the first line that differs. When a
view is changed on purpose, ``scripts/regen-golden`` writes the views again (a diff of
tests/golden to review and commit) and the commit says why. The golden files are made by the
code they check, so the facts a reader would check by hand are also asserted on their own
below (test_*_states_*), computed here from the input files, not by the views.

The CLI runs the survey compare, the attribution, the matrix and the suite compare as a user
would (stdout and stderr both pinned); the probe and report documents, which no command
reads back, render through their views in-process.
"""

from __future__ import annotations

import io
import json
import os

import pytest
from rich.console import Console

from conftest import REPO_ROOT, run_cli

RESULTS = "surveys/results"
H200_DOCS = os.path.join(REPO_ROOT, "surveys", "h200")
FLAG_GEMS_4 = f"{RESULTS}/flag_gems-4.2.0-h200-harness1.json"  # the harness-1 pair
FLAG_GEMS_5 = f"{RESULTS}/flag_gems-5.0.2-h200-harness1.json"
TORCH_FL_OLD = f"{RESULTS}/torch_fl-5c9d6f4-sample-flag_gems-5.0.2-h200.json"
TORCH_FL_NEW = f"{RESULTS}/torch_fl-ceb4821-sample-flag_gems-5.0.2-h200.json"
TORCH_FL = f"{RESULTS}/torch_fl-1adbc97-flag_gems-5.0.2-h200.json"
GEMS_ON_TORCH_FL_ROUTES = f"{RESULTS}/flag_gems-5.0.2-torch_fl-routes-h200.json"

#: One committed file per view, the view's text as it renders: tests/golden/<view>.txt. A
#: re-pin is ``scripts/regen-golden`` and a reviewable diff of these files.
GOLDEN = os.path.join(REPO_ROOT, "tests", "golden")
PINS = sorted(name[: -len(".txt")] for name in os.listdir(GOLDEN) if name.endswith(".txt"))

JUNIT_A = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3" failures="0" errors="0" skipped="0">
<testcase classname="tests.test_ops" name="test_add" time="0.010"/>
<testcase classname="tests.test_ops" name="test_mul" time="0.020"/>
<testcase classname="tests.test_ops" name="test_div" time="0.030"/>
</testsuite></testsuites>
"""
JUNIT_B = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3" failures="1" errors="0" skipped="1">
<testcase classname="tests.test_ops" name="test_add" time="0.010"/>
<testcase classname="tests.test_ops" name="test_mul" time="0.020"><failure message="assert 2 == 3">E assert 2 == 3</failure></testcase>
<testcase classname="tests.test_ops" name="test_sub" time="0.030"><skipped message="no device"/></testcase>
</testsuite></testsuites>
"""


def _cli(renderings: dict, name: str, tmp_path, *args, code: int, files: dict | None = None, cwd=REPO_ROOT) -> None:
    """Run the CLI from the repository root (paths in the documents stay relative) and keep
    its stdout, stderr and each file it wrote."""
    done = run_cli(*args, "--store", str(tmp_path / "store"), cwd=cwd)
    assert done.returncode == code, (name, done.returncode, done.stderr[-2000:])
    renderings[f"{name}.stdout"] = done.stdout
    if done.stderr or f"{name}.stderr" in PINS:
        renderings[f"{name}.stderr"] = done.stderr
    for suffix, path in (files or {}).items():
        renderings[f"{name}.{suffix}"] = open(path, encoding="utf-8").read()


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _in_process(renderings: dict) -> None:
    from flagos_doctor import output
    from flagos_doctor.files import dump_json
    from flagos_doctor.probe.formats import markdown as probe_markdown, terminal  # noqa: F401  (registers the view)
    from flagos_doctor.report import markdown as report_markdown
    from flagos_doctor.survey import progress

    probe = _load(os.path.join(H200_DOCS, "probe-h200-torch_fl-ready.json"))
    renderings["probe-torch_fl-ready.md"] = probe_markdown.render(probe)
    renderings["probe-torch_fl-ready.md-small"] = probe_markdown.render(probe, 2_000, "`probe.json`")
    renderings["probe-torch_fl-ready.terminal"] = output.plain(probe)
    renderings["probe-torch_fl-ready.json"] = dump_json(probe)
    report = _load(os.path.join(H200_DOCS, "report-h200-torch_fl-ready.json"))
    renderings["report-torch_fl-ready.md"] = report_markdown.render(report)
    renderings["report-torch_fl-ready.md-small"] = report_markdown.render(report, max_chars=4_000, full_record="`r.json`")
    out = io.StringIO()
    progress.show_summary(_load(os.path.join(REPO_ROOT, FLAG_GEMS_4)), Console(file=out, width=200), "r.json")
    renderings["survey-summary-4.2.0.terminal"] = out.getvalue()


@pytest.fixture(scope="module")
def renderings(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("pins")
    found: dict[str, str] = {}
    md, js = str(tmp / "x.md"), str(tmp / "x.json")
    _cli(found, "compare-4.2.0-5.0.2", tmp, "survey", "--compare", FLAG_GEMS_4, FLAG_GEMS_5, "--force",
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js})
    _cli(found, "compare-4.2.0-5.0.2-all", tmp, "survey", "--compare", FLAG_GEMS_4, FLAG_GEMS_5, "--force", "--all", code=1)
    _cli(found, "compare-4.2.0-5.0.2-md-on-stdout", tmp, "survey", "--compare", FLAG_GEMS_4, FLAG_GEMS_5, "--force",
         "--markdown", "-", code=1)
    _cli(found, "compare-5c9d6f4-ceb4821", tmp, "survey", "--compare", TORCH_FL_OLD, TORCH_FL_NEW,
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js})  # sum.IntList_out: ERROR -> WRONG
    _cli(found, "attribute", tmp, "survey", "--compare", TORCH_FL, GEMS_ON_TORCH_FL_ROUTES, "--attribute", "--force",
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js})
    csv, page = str(tmp / "x.csv"), str(tmp / "x.html")
    _cli(found, "matrix", tmp, "matrix", FLAG_GEMS_4, FLAG_GEMS_5, "--markdown", md, "--json", js, "--csv", csv,
         "--html", page, code=0, files={"md": md, "json": js, "csv": csv, "html": page})
    (tmp / "a.xml").write_text(JUNIT_A)
    (tmp / "b.xml").write_text(JUNIT_B)
    # Relative names: the terminal view aligns its columns to the arms' paths.
    _cli(found, "suite", tmp, "suite", "--compare", "a.xml", "b.xml",
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js}, cwd=str(tmp))
    _in_process(found)
    # Paths of this run's temporary directory are not part of any view's shape.
    return {name: text.replace(str(tmp), "TMP") for name, text in found.items()}


def golden(name: str) -> str:
    with open(os.path.join(GOLDEN, f"{name}.txt"), encoding="utf-8", newline="") as handle:
        return handle.read()


def test_every_pinned_view_was_rendered(renderings):
    if os.environ.get("GOLDEN_WRITE"):  # scripts/regen-golden
        for name in PINS:
            if name not in renderings:
                os.unlink(os.path.join(GOLDEN, f"{name}.txt"))
        for name, text in renderings.items():
            with open(os.path.join(GOLDEN, f"{name}.txt"), "w", encoding="utf-8", newline="") as handle:
                handle.write(text)
        return
    assert sorted(renderings) == PINS


@pytest.mark.parametrize("name", PINS)
def test_view_is_byte_identical(renderings, name):
    expected, got = golden(name), renderings[name]
    if got != expected:
        lines, wanted = got.splitlines(), expected.splitlines()
        first = next((n for n, (a, b) in enumerate(zip(lines, wanted)) if a != b), min(len(lines), len(wanted)))
        shown = lambda text: text[first] if first < len(text) else "<end>"  # noqa: E731
        pytest.fail(f"{name} differs from tests/golden/{name}.txt at line {first + 1}:\n"
                    f"  rendered: {shown(lines)!r}\n  golden:   {shown(wanted)!r}\n"
                    "(a change on purpose: scripts/regen-golden, and say why in the commit)")


# -- facts stated beside the golden files, computed from the inputs, not by the views --------
def verdict_counts(path: str) -> dict:
    document = _load(os.path.join(REPO_ROOT, path))
    counts: dict = {}
    for entry in document["overloads"].values():
        counts[entry["verdict"]] = counts.get(entry["verdict"], 0) + 1
    return {"registered": len(document["overloads"]), **counts}


def test_the_compare_states_the_counts_of_its_inputs():
    a, b = verdict_counts(FLAG_GEMS_4), verdict_counts(FLAG_GEMS_5)
    assert (a["registered"], b["registered"], a["STRICT"], b["STRICT"]) == (308, 433, 39, 323)
    text = golden("compare-4.2.0-5.0.2.stdout")
    assert f" registered            │  {a['registered']} │  {b['registered']} │  +{b['registered'] - a['registered']} " in text
    assert f" strict                │   {a['STRICT']} │  {b['STRICT']} │  +{b['STRICT'] - a['STRICT']} " in text


def test_the_matrix_has_one_row_per_overload_of_either_file_with_its_verdicts():
    a = _load(os.path.join(REPO_ROOT, FLAG_GEMS_4))["overloads"]
    b = _load(os.path.join(REPO_ROOT, FLAG_GEMS_5))["overloads"]
    rows = golden("matrix.csv").splitlines()[1:]
    assert len(rows) == len(set(a) | set(b)) == 436
    for row in rows:
        name, _family, left, right = row.split(",")
        assert left == (a[name]["verdict"] if name in a else ""), row
        assert right == (b[name]["verdict"] if name in b else ""), row


def test_the_suite_compare_states_what_the_junit_files_say():
    text = golden("suite.stdout")
    assert "A a.xml                    3       3       0       0        0" in text  # 3 testcases, none failed
    assert "B a.xml" not in text and "B b.xml                    3       1       1       0        1" in text
    assert "regression    tests/test_ops.py::test_mul  passed -> failed      assert 2 == 3" in text
    assert JUNIT_B.count("<testcase") == 3 and JUNIT_B.count("<failure") == 1 and JUNIT_B.count("<skipped") == 1


@pytest.fixture(scope="module")
def demo_probe(tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "probe.json"
    run_cli("probe", "--stack", "demo", "--json", str(out), "-q")
    return json.loads(out.read_text())


@pytest.mark.parametrize("message", [
    "RuntimeError: " + "x" * 5000,  # one word of 5,000 characters
    "the guard reads " + "torch.cuda.is_available " * 200,  # 4,800 characters of words
    "first line\n" + "y " * 900 + "\nlast line",
], ids=["one-word", "words", "lines"])
def test_a_probe_finding_of_thousands_of_characters_is_wrapped_and_cut_in_the_terminal(message, demo_probe):
    # A real probe document (the demo's), one finding's message made long.
    from flagos_doctor import output
    from flagos_doctor.probe.formats import terminal

    document = json.loads(json.dumps(demo_probe))
    assert document["findings"]
    document["findings"][0]["message"] = message
    text = output.plain(document, width=100)
    rest = text[text.index(document["findings"][0]["kind"]):].splitlines()[1:]
    block = "\n".join(rest[:next(i for i, line in enumerate(rest + [""]) if not line.startswith("    "))])
    assert all(len(line) <= 100 for line in block.splitlines()), block
    assert len(block) < terminal.MAX_MESSAGE + 300
    assert f"{len(message) - terminal.MAX_MESSAGE:,} more characters: --json has them" in " ".join(block.split())
