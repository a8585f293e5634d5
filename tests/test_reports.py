"""Reports that fit a bug issue: failures grouped by cause, Markdown under a budget, the
terminal view of a large comparison, the support matrix, and the small things a user sees.

The large inputs are the committed H200 surveys (``surveys/results/``): FlagGems 4.2.0 and
5.0.2 on CUDA, whose comparison made 107,871 characters of Markdown before the budget.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import stat

import pytest

from conftest import REPO_ROOT, run_cli
from test_compare import BEFORE, K, PASS, after_doc, results, write

from flagos_doctor.compare.diff import compare
from flagos_doctor.store import Store
from flagos_doctor.results import document as results_mod, groups, verdicts

H200 = os.path.join(REPO_ROOT, "surveys", "results")
OLD = os.path.join(H200, "flag_gems-4.2.0-h200-harness1.json")  # the harness-1 pair
NEW = os.path.join(H200, "flag_gems-5.0.2-h200-harness1.json")
LAUNCHER = "TypeError: function takes exactly N arguments (N given)"
CLOSING = re.compile(r"<sub>Left out to stay under ([\d,]+) characters: (.+)\. The full record: (.+)\.</sub>\n$")


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


# -- failure signatures and groups -----------------------------------------------------
@pytest.mark.parametrize("detail,expected", [
    ("TypeError: function takes exactly 25 arguments (21 given)", LAUNCHER),
    ("TypeError: function takes exactly 30 arguments (23 given)", LAUNCHER),
    ("reference: NotImplementedError: Could not run 'aten::max_pool2d_backward' with arguments from the 'CPU' backend",
     "reference: NotImplementedError: Could not run 'NAME' with arguments from the 'NAME' backend"),
    ("RuntimeError: shape '[2, 3]' is invalid for input of size 7", "RuntimeError: shape 'NAME' is invalid for input of size N"),
    ("RuntimeError: expected torch.Size([32, 1]) got (32,) at 0x7f3a2c001234",
     "RuntimeError: expected SHAPE got SHAPE at 0xADDR"),
    ("AssertionError: Doesn't support stride 2 in padding = 'same' mode",
     "AssertionError: Doesn't support stride N in padding = 'NAME' mode"),
    ("AssertionError: Input must be a 4D tensor (N, C, H, W)", "AssertionError: Input must be a 4D tensor (N, C, H, W)"),
    ("CompilationError: at 29:15:\n    x = tl.load(ptr)\n", "CompilationError: at N:N:"),
])
def test_signature_masks_what_varies(detail, expected):
    assert groups.signature({"status": "ERROR", "detail": detail}) == expected


@pytest.mark.parametrize("detail,expected", [
    ("output: dtype int64 != float32", "dtype int64 != float32"),
    ("output 1: dtype float16 != float32", "dtype float16 != float32"),
    ("output 1: shape (32,) != (32, 1)", "shape mismatch"),
    ("output: 352 of 1536 values differ, worst at [0, 0, 2, 0]: -0.00278 vs 0 (atol 0.001, rtol 0.001)", "values differ"),
    ("output: 1 of 32 values differ", "values differ"),
])
def test_wrong_cases_group_by_the_kind_of_mismatch(detail, expected):
    assert groups.signature({"status": "WRONG", "detail": detail}) == expected


def test_groups_of_the_h200_flag_gems_4_survey():
    document = _load(OLD)
    found = groups.failure_groups(document["overloads"])
    top = found[0]
    # The one fact that matters in 4.2.0: its ERRORs are one launcher mismatch.
    assert (top["status"], top["signature"]) == ("ERROR", LAUNCHER)
    launcher = sum(1 for entry in document["overloads"].values() for case in entry["cases"]
                   if re.fullmatch(r"TypeError: function takes exactly \d+ arguments \(\d+ given\)", case["detail"]))
    assert top["cases"] == launcher == len(top["members"]) == 525
    assert top["overloads"] == len({name for name, _ in top["members"]})
    assert [g["cases"] for g in found] == sorted((g["cases"] for g in found), reverse=True)
    # Every case that did not pass is in exactly one group.
    failing = sum(1 for entry in document["overloads"].values() for case in entry["cases"] if case["status"] != "PASS")
    assert sum(g["cases"] for g in found) == failing
    assert groups.describe(top) == f"525 ERROR cases: {LAUNCHER}, in {top['overloads']} overloads"
    assert len(top["examples"]) == groups.EXAMPLES and top["examples"][0]["detail"].startswith("TypeError")


def test_unknown_statuses_are_grouped_as_they_are():
    overloads = {
        "abs": {"verdict": "BASIC_ONLY", "cases": [
            {"profile": "p1", "status": "FLAKY", "detail": "WRONG then PASS", "repeats": ["WRONG", "PASS"]},
            {"profile": "p2", "status": "MISSING_FUNCTION", "detail": "flag_gems has no abs_out"},
            {"profile": "p3", "status": "PASS", "detail": ""},
        ]},
    }
    found = {(g["status"], g["signature"]) for g in groups.failure_groups(overloads)}
    assert found == {("FLAKY", "WRONG then PASS"), ("MISSING_FUNCTION", "flag_gems has no abs_out")}


def test_results_documents_carry_their_groups():
    records = {"neg": [{"profile": "a", "status": "ERROR", "route": K, "detail": "TypeError: takes 3 (2 given)"},
                       {"profile": "b", "status": "ERROR", "route": K, "detail": "TypeError: takes 4 (1 given)"}],
               "abs": [{"profile": "a", "status": PASS, "route": K, "detail": ""}]}
    document = results_mod.build({}, {}, ["abs", "neg"], records)
    assert document["failure_groups"] == [{
        "status": "ERROR", "signature": "TypeError: takes N (N given)", "cases": 2, "overloads": 1,
        "members": [["neg", "a"], ["neg", "b"]],
        "examples": [{"overload": "neg", "profile": "a", "detail": "TypeError: takes 3 (2 given)"},
                     {"overload": "neg", "profile": "b", "detail": "TypeError: takes 4 (1 given)"}],
    }]


def test_survey_summary_shows_groups_largest_first():
    from rich.console import Console

    from flagos_doctor.survey import progress

    out = io.StringIO()
    progress.show_summary(_load(OLD), Console(file=out, width=400), "r.json")
    text = out.getvalue()
    assert "failures by cause (15 groups)" in text
    first = text.index(f"525 ERROR cases: {LAUNCHER}")
    assert first < text.index("30 ERROR cases: CompilationError: at N:N:")
    assert "more groups" in text
    # Cases the verdicts do not count are one line, not "failures" (184 INVALID_CASE among them).
    assert "INVALID_CASE cases" not in text
    assert "not counted by the verdicts: 361 INVALID_CASE, 5 NO_SCHEMA case(s), in 46 groups by cause" in text


def test_survey_summary_of_a_run_with_no_failure_lists_none():
    from rich.console import Console

    from flagos_doctor.survey import progress

    document = results({"abs": [("2d_f32", PASS, K), ("1d_f32", "INVALID_CASE", "-")]})
    document["overloads"]["abs"]["cases"][1]["detail"] = "reference: NotImplementedError: no"
    document.pop("failure_groups", None)
    out = io.StringIO()
    progress.show_summary(document, Console(file=out, width=400), "r.json")
    text = out.getvalue()
    assert "failures by cause" not in text
    assert "not counted by the verdicts: 1 INVALID_CASE case(s), in 1 groups by cause" in text


def test_comparison_groups_changes_and_failures_by_cause():
    comparison = compare(_load(OLD), _load(NEW), label_a="4.2.0", label_b="5.0.2")
    by_sides = {(g["from"], g["to"]): g for g in comparison["change_groups"]}
    fixed = by_sides[(f"ERROR: {LAUNCHER}", "PASS")]
    assert fixed["cases"] == len(fixed["members"]) and fixed["cases"] > 400 and not fixed["regression"]
    assert sum(g["cases"] for g in comparison["change_groups"]) == len(comparison["cases_changed"])
    regressions = [g for g in comparison["change_groups"] if g["regression"]]
    assert regressions and comparison["change_groups"][: len(regressions)] == regressions
    assert sum(g["cases"] for g in regressions) == comparison["case_regressions"]
    launcher = next(g for g in comparison["failure_groups"] if g["signature"] == LAUNCHER)
    assert launcher["presence"] == "only in A" and launcher["a"]["cases"] == 525 and launcher["b"]["cases"] == 0
    assert len(launcher["members"]["a"]) == 525


# -- Markdown within the budget --------------------------------------------------------
def test_compare_markdown_of_the_h200_runs_fits_the_budget(tmp_path):
    json_path = tmp_path / "cmp.json"
    done = run_cli("survey", "--compare", OLD, NEW, "--force", "--markdown", "-", "--json", str(json_path), "-q",
                   "--store", str(tmp_path / "store"))
    assert done.returncode == 1, done.stderr  # 24 regressions, 20 of them ERROR -> WRONG
    text = done.stdout
    assert len(text) <= 60_000
    # Summary and what changed first, the largest groups next, then the long lists.
    assert text.index("- regressions: **24** (") < text.index("What changed, by cause") < text.index("Failures by cause")
    assert text.index("Failures by cause") < text.index("verdict transitions</summary>")
    assert f"525 ERROR cases: {LAUNCHER}, in " in text and "overloads, only in A" in text
    closing = CLOSING.search(text)
    assert closing, text[-600:]
    assert closing.group(1) == "60,000" and "changed cases" in closing.group(2)
    assert closing.group(3) == f"`{json_path}`"
    full = json.loads(json_path.read_text())
    assert len(full["cases_changed"]) == 1450  # the JSON keeps everything the page left out (6 changed ERROR causes)


@pytest.mark.parametrize("budget", [4_000, 20_000])
def test_compare_markdown_respects_a_smaller_budget(budget):
    from flagos_doctor.compare import markdown

    comparison = json.loads(json.dumps(compare(_load(OLD), _load(NEW), label_a="4.2.0", label_b="5.0.2", force=True)))
    text = markdown.render(comparison, max_chars=budget)
    assert len(text) <= budget
    assert "census byte-identical" in text and "largest causes of failure" in text and CLOSING.search(text)


def test_small_comparison_is_whole_and_has_no_closing_line():
    from flagos_doctor.compare import markdown

    comparison = json.loads(json.dumps(compare(results(BEFORE), after_doc())))
    text = markdown.render(comparison)
    assert "Left out" not in text
    assert "| `neg` | 2d_f32 | PASS (kernel) | WRONG (kernel) | regression: lost a PASS case |" in text


def test_report_attaches_a_forced_comparison_within_the_budget(tmp_path):
    plain = run_cli("report", "--import", "json", "--compare", OLD, NEW, "--json", str(tmp_path / "b.json"),
                    "--markdown", str(tmp_path / "plain.md"), "--timeout", "60")
    assert plain.returncode == 0, plain.stderr
    bundle = json.loads((tmp_path / "b.json").read_text())
    assert "not comparable" in bundle["compare"]["error"] and "route_set_sha256" in bundle["compare"]["error"]
    assert "--force" in (tmp_path / "plain.md").read_text()

    forced = run_cli("report", "--import", "json", "--compare", OLD, NEW, "--force", "--survey", OLD,
                     "--markdown", str(tmp_path / "forced.md"), "--max-chars", "30000", "--timeout", "60")
    assert forced.returncode == 0, forced.stderr
    text = (tmp_path / "forced.md").read_text()
    assert len(text) <= 30_000
    assert "compared anyway (--force)" in text and "| Platform |" in text
    assert text.index("### Survey") < text.index("#### Failures by cause") < text.index("### Survey comparison")
    assert "| 525 | " in text and LAUNCHER in text
    assert CLOSING.search(text) and "report --json PATH" in CLOSING.search(text).group(3)


def test_probe_markdown_fits_a_small_budget(tmp_path):
    done = run_cli("probe", "--stack", "demo", "--no-exercise", "--markdown", "-", "--max-chars", "2500", "-q",
                   env={"FLAGOS_DEMO_SEED_BUG": "1"})
    assert done.returncode == 1, done.stderr
    text = done.stdout
    assert len(text) <= 2500
    assert "### Findings" in text and "stale-guard" in text  # the findings always stay
    closing = CLOSING.search(text)
    assert closing and "events" in closing.group(2) and "probe --json PATH" in closing.group(3)


def _junit(path, outcomes: dict) -> str:
    cases = []
    for name, failed in outcomes.items():
        body = f'<failure message="AssertionError: {name} is off by {len(name)}">traceback {"x" * 80}</failure>' if failed else ""
        cases.append(f'<testcase classname="tests.test_big" name="{name}" time="0.01">{body}</testcase>')
    path.write_text('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">'
                    + "".join(cases) + "</testsuite></testsuites>")
    return str(path)


def test_suite_markdown_of_a_large_comparison_fits_the_budget(tmp_path):
    names = [f"test_case_{i:05d}" for i in range(3000)]
    a = _junit(tmp_path / "a.xml", {n: False for n in names})
    b = _junit(tmp_path / "b.xml", {n: True for n in names})
    done = run_cli("suite", "--compare", a, b, "--markdown", "-", "--max-chars", "20000", "-q",
                   "--store", str(tmp_path / "store"))
    assert done.returncode == 1, done.stderr
    text = done.stdout
    assert len(text) <= 20_000
    assert "#### Totals" in text and "3000 transitions (the first" in text
    assert "transitions: " in CLOSING.search(text).group(2)


# -- the terminal view of a large comparison -------------------------------------------
def test_terminal_view_of_a_large_comparison_is_a_summary_unless_all(tmp_path):
    store = str(tmp_path / "store")
    short = run_cli("survey", "--compare", OLD, NEW, "--force", "--store", store)
    assert short.returncode == 1, short.stderr
    lines = short.stdout.splitlines()
    assert len(lines) < 200, len(lines)
    assert "--all shows every line" in short.stdout
    assert "What changed, by cause (" in short.stdout and LAUNCHER in short.stdout
    every = run_cli("survey", "--compare", OLD, NEW, "--force", "--all", "--store", store)
    assert every.returncode == 1, every.stderr
    assert "--all shows every line" not in every.stdout
    changed = [line for line in every.stdout.splitlines() if re.search(r" -> (absent|[A-Z_]+ \()", line)]
    assert len(changed) == 1450  # 6 of them an ERROR of another cause, shown with both causes
    # Outside a terminal nothing wraps at 80 columns: each digest stays whole on its line.
    digests = compare(_load(OLD), _load(NEW))["census_sha256"]
    assert f"(A {digests['a']}, B {digests['b']})" in every.stdout


# -- the support matrix ----------------------------------------------------------------
def test_matrix_of_the_two_h200_files(tmp_path):
    out = tmp_path / "m.json"
    done = run_cli("matrix", OLD, NEW, "--json", str(out), "--csv", str(tmp_path / "m.csv"),
                   "--markdown", str(tmp_path / "m.md"))
    assert done.returncode == 0, done.stderr
    matrix = json.loads(out.read_text())
    assert matrix["schema"] == "flagos-doctor/matrix/1"
    assert [c["label"] for c in matrix["columns"]] == ["flag_gems 4.2.0 · NVIDIA H200", "flag_gems 5.0.2 · NVIDIA H200"]
    assert matrix["columns"][0]["note"] is None
    assert "route_set_sha256" in matrix["columns"][1]["note"]  # another route set: shown, with a note
    for column, path in zip(matrix["totals"], (OLD, NEW)):
        summary = _load(path)["summary"]
        assert column["verdicts"] == {k: v for k, v in summary["verdicts"].items() if v}
        assert column["overloads"] == summary["registered"]
    names = set(_load(OLD)["overloads"]) | set(_load(NEW)["overloads"])
    assert [r["overload"] for r in matrix["rows"]] == sorted(names)
    row = next(r for r in matrix["rows"] if r["overload"] == "_log_softmax_backward_data")
    assert [c["verdict"] for c in row["cells"]] == ["FAILED", "STRICT"]
    only_new = next(r for r in matrix["rows"] if r["overload"] == "_is_all_true")
    assert only_new["cells"][0] is None
    rows = list(csv.reader(io.StringIO((tmp_path / "m.csv").read_text())))
    assert rows[0] == ["overload", "family", "flag_gems 4.2.0 · NVIDIA H200", "flag_gems 5.0.2 · NVIDIA H200"]
    # The family is the survey's (results.model.family: the name before the first "."), leading "_" kept.
    assert ["_log_softmax_backward_data", "_log_softmax_backward_data", "FAILED", "STRICT"] in rows
    assert len(rows) == 1 + len(names)
    text = (tmp_path / "m.md").read_text()
    assert len(text) <= 60_000 and "Left out" not in text
    assert "| `_log_softmax_backward_data` | FAILED | STRICT |" in text
    assert "| FAILED | 66 | 9 |" in text
    assert "flag_gems 4.2.0 · NVIDIA H200" in done.stdout and "_is_all_true" in done.stdout


def test_matrix_markdown_splits_by_family_under_a_small_budget():
    done = run_cli("matrix", OLD, NEW, "--markdown", "-", "--max-chars", "9000")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert len(text) <= 9000
    assert "### Overloads, by op family" in text and "<summary>" in text
    closing = CLOSING.search(text)
    assert closing and "families " in closing.group(2)


def test_matrix_of_store_entries_by_prefix_and_query(tmp_path):
    store = Store(str(tmp_path / "store"))
    store.file("survey", "flag_gems-4.2.0", "f" * 16, OLD)
    store.file("survey", "flag_gems-5.0.2", "f" * 16, NEW)
    demo = write(tmp_path, "demo.json", results(BEFORE))
    store.file("survey", "demo-0.1.0", "d" * 16, demo)
    by_query = run_cli("matrix", "stack=flag_gems", "--store", store.root, "--json", "-")
    assert by_query.returncode == 0, by_query.stderr
    matrix = json.loads(by_query.stdout)
    assert [c["store_key"] for c in matrix["columns"]] == ["flag_gems-4.2.0", "flag_gems-5.0.2"]
    assert all(c["source"] == "store" for c in matrix["columns"])
    by_prefix = run_cli("matrix", "flag_gems-5", "demo", "--store", store.root, "--json", "-")
    assert by_prefix.returncode == 0, by_prefix.stderr
    matrix = json.loads(by_prefix.stdout)
    assert [c["label"] for c in matrix["columns"]] == ["flag_gems 5.0.2 · NVIDIA H200", "demo 0.1.0 · demo"]
    assert {"stack", "device_type", "route_set_sha256"} <= {d["field"] for d in matrix["columns"][1]["differences"]}
    everything = run_cli("matrix", "key=*", "--store", store.root, "--json", "-")
    assert len(json.loads(everything.stdout)["columns"]) == 3
    missing = run_cli("matrix", "nothing-here", "--store", store.root)
    assert missing.returncode == 2 and "nothing-here" in missing.stderr and "Traceback" not in missing.stderr
    bad = run_cli("matrix", "colour=blue", "--store", store.root)
    assert bad.returncode == 2 and "FIELD=GLOB" in bad.stderr


def test_matrix_shows_native_also_and_flaky_marks(tmp_path):
    document = results(BEFORE)
    neg = document["overloads"]["abs"]["cases"][2]  # abs 2d_f16 is WRONG
    neg["baseline"] = {"status": "WRONG", "detail": "stock CUDA differs too"}
    # A failure whose native path fails another way is the stack's: counted, and not marked
    # (the survey's rule; the matrix once marked it, 21 overloads of 5.0.2 where the survey said 18).
    document["overloads"]["neg"]["cases"][2]["status"] = "ERROR"
    document["overloads"]["neg"]["cases"][2]["baseline"] = {"status": "WRONG", "detail": "another way"}
    document["overloads"]["sin"]["cases"][2]["status"] = "FLAKY"
    document["overloads"]["sin"]["cases"][2]["repeats"] = ["WRONG", "PASS", "PASS"]
    # The verdicts and summary the survey writes for these cases (a reader refuses others):
    # abs's one failure is the native path's too and sin's is FLAKY, neither counted.
    done_cases = {name: {"cases": entry["cases"]} for name, entry in document["overloads"].items()}
    for entry in document["overloads"].values():
        entry["verdict"] = verdicts.verdict(entry["cases"])
    document["summary"] = verdicts.summarize(list(document["overloads"]), done_cases)
    path = write(tmp_path, "marked.json", document)
    done = run_cli("matrix", path, "--json", "-", "--store", str(tmp_path / "store"))
    matrix = json.loads(done.stdout)
    cells = {r["overload"]: r["cells"][0] for r in matrix["rows"]}
    assert cells["abs"]["marks"] == ["native-also"] and cells["sin"]["marks"] == ["flaky"]
    assert cells["neg"]["marks"] == []
    assert matrix["totals"][0]["marks"] == {"native-also": 1, "flaky": 1}
    text = run_cli("matrix", path, "--markdown", "-", "--store", str(tmp_path / "store")).stdout
    assert "| `abs` | STRICT† |" in text and "| `sin` | STRICT~ |" in text and "| `neg` | BASIC_ONLY |" in text
    assert "† the stack's native path fails these cases the same way (not counted)" in text


# -- the small things ------------------------------------------------------------------
@pytest.mark.parametrize("umask,mode", [(0o022, 0o644), (0o027, 0o640)])
def test_output_files_follow_the_umask(tmp_path, umask, mode):
    a = write(tmp_path, "a.json", results(BEFORE))
    b = write(tmp_path, "b.json", after_doc())
    old = os.umask(umask)
    try:
        done = run_cli("survey", "--compare", a, b, "--json", str(tmp_path / "c.json"),
                       "--markdown", str(tmp_path / "c.md"), "-q", "--fail-on", "never")
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    for name in ("c.json", "c.md"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == mode, name


def test_help_has_completion_and_no_bool_placeholders():
    shown = {}  # each command's help, read once
    for command in ([], ["probe"], ["survey"], ["report"], ["suite"], ["matrix"]):
        done = run_cli(*command, "--help", env={"COLUMNS": "200"})
        assert done.returncode == 0, done.stderr
        assert "<bool>" not in done.stdout and "--no-no-store" not in done.stdout, command
        shown[" ".join(command)] = done.stdout
    top = shown[""]
    assert "--install-completion" in top and "--show-completion" in top and "matrix" in top
    survey = shown["survey"]
    assert "--no-store " in survey and "--all " in survey and "--max-chars" in survey


def test_survey_results_and_census_follow_the_umask(tmp_path):
    old = os.umask(0o027)
    try:
        done = run_cli("survey", "--stack", "demo", "--ops", "abs", "-o", str(tmp_path / "r.json"),
                       "--census", str(tmp_path / "c.txt"), "--no-store", "-q", cwd=str(tmp_path))
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    for name in ("r.json", "c.txt"):
        assert stat.S_IMODE(os.stat(tmp_path / name).st_mode) == 0o640, name
    found = json.loads((tmp_path / "r.json").read_text())["failure_groups"]
    assert [(g["status"], g["signature"], g["members"]) for g in found] == [
        ("INVALID_CASE", "reference: NotImplementedError: \"NAME\" not implemented for 'NAME'", [["abs", "2d-bool"]])]


def test_page_keeps_priorities_in_page_order_and_names_what_it_left_out():
    from flagos_doctor.markdown import Page

    page = Page(3_000, "`full.json`")
    page.add(["# summary", ""])
    page.add(["x" * 1_500], 3, "the long tail")
    page.add_table("Groups", ["| n |", "|---|"], [f"| {i} |" for i in range(400)], 1, "groups", folded=False)
    page.add(["## always", ""])
    text = page.text()
    assert len(text) <= 3_000
    assert text.index("# summary") < text.index("Groups (the first") < text.index("## always")
    assert "x" * 1_500 not in text
    closing = CLOSING.search(text)
    assert re.fullmatch(r"the long tail; groups: \d+ of 400 rows", closing.group(2))
    assert closing.group(3) == "`full.json`"
    roomy = Page(60_000)
    roomy.add(["# summary"])
    roomy.add_table("Groups", ["| n |", "|---|"], ["| 1 |"], 1, "groups")
    assert "Left out" not in roomy.text() and "<summary>Groups</summary>" in roomy.text()


def test_probe_markdown_of_the_h200_probe_fits_a_small_budget():
    from flagos_doctor.probe.formats import markdown

    document = _load(os.path.join(REPO_ROOT, "surveys", "h200", "probe-flag_gems.json"))
    whole = markdown.render(document)
    assert "Left out" not in whole and "<summary>All events (8)</summary>" in whole
    small = markdown.render(document, max_chars=3_000)
    assert len(small) <= 3_000 < len(whole)
    assert "### Findings" in small and "### Steps" in small
    assert re.fullmatch(r"the probes and their writers; events: \d of 8 rows", CLOSING.search(small).group(2))


def test_shell_completion_completes_commands_and_options():
    import subprocess
    import sys

    def complete(words: str, index: int) -> str:
        # As the installed `flagos-doctor` script runs: the program name picks the variable.
        done = subprocess.run(
            [sys.executable, "-c", "import sys; sys.argv = ['flagos-doctor']; from flagos_doctor.cli import main; main()"],
            capture_output=True, text=True, timeout=120,
            env={**os.environ, "_FLAGOS_DOCTOR_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(index)},
        )
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert complete("flagos-doctor ma", 1).split() == ["matrix"]
    assert "--no-store" in complete("flagos-doctor survey --no-s", 2).split()


def test_a_cause_quoting_backticks_stays_inline_code():
    from flagos_doctor.compare import markdown

    detail = "RuntimeError: Negation, the `-` operator, on a bool tensor is not supported."
    a = results({"neg": [("2d_f32", PASS, K)]})
    b = results({"neg": [("2d_f32", "ERROR", K)]})
    b["overloads"]["neg"]["cases"][0]["detail"] = detail
    text = markdown.render(json.loads(json.dumps(compare(a, b))))
    assert "| `` ERROR: RuntimeError: Negation, the `-` operator, on a bool tensor is not supported. `` |" in text
