"""The figures the README and docs/ quote from committed runs, checked against the files
they come from; every relative link resolving; the docs' prose within its budget.

A figure is kept in the docs only if it is in :func:`expected_sentences` (or produced by a
script that writes it); each entry renders the sentence the doc must contain from the JSON,
so a changed file or a changed sentence fails here. Whitespace is compared collapsed (docs
wrap lines). The command blocks of the docs are run by tests/test_doc_blocks.py.
"""

from __future__ import annotations

import datetime
import glob
import json
import os
import re
from decimal import ROUND_HALF_UP, Decimal
from functools import cache

import pytest

from conftest import REPO_ROOT

H200 = "surveys/h200"
RESULTS = "surveys/results"


@cache
def load(path: str) -> dict:
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
        return json.load(handle)


def text_of(path: str) -> str:
    with open(os.path.join(REPO_ROOT, path), encoding="utf-8") as handle:
        return handle.read()


def doc_text(path: str) -> str:
    return " ".join(text_of(path).split())


def f1(value: float) -> str:
    """One decimal, half up (as a person rounds 13.15 s), with thousands separators."""
    return f"{Decimal(str(value)).quantize(Decimal('0.1'), rounding=ROUND_HALF_UP):,}"


def f0(value: float) -> str:
    return f"{Decimal(str(value)).quantize(Decimal('1'), rounding=ROUND_HALF_UP):,}"


def benchmark(name: str) -> dict:
    return load(f"{H200}/{name}.json")


def survey(name: str) -> dict:
    return load(f"{RESULTS}/{name}.json")["summary"]


def census(name: str) -> str:
    return load(f"{RESULTS}/{name}.json")["census_sha256"]


def slashed(counts: dict, keys: str) -> str:
    return " / ".join(str(counts.get(key, 0)) for key in keys.split())


VERDICTS = "STRICT BASIC_ONLY FAILED UNTESTED NO_SCHEMA"


def verdict_rows(*names: str) -> list[str]:
    """The rows of a table of surveys side by side: verdicts, and what the rows compare."""
    return ["| verdicts STRICT / BASIC_ONLY / FAILED / UNTESTED / NO_SCHEMA | "
            + " | ".join(slashed(survey(n)["verdicts"], VERDICTS) for n in names) + " |"]


def torch_fl_minutes_seconds() -> str:
    provenance = load(f"{RESULTS}/torch_fl-1adbc97-flag_gems-5.0.2-h200.json")["provenance"]
    started, ended = (datetime.datetime.fromisoformat(provenance[key]) for key in ("started", "ended"))
    return f"{(ended - started).total_seconds():.0f} s"


def expected_sentences():
    """``(doc, sentence)`` for every figure kept in the docs, rendered from its file."""
    cold, warm = benchmark("survey-full-cold-9e9a732"), benchmark("survey-full-warm-9e9a732")
    reference = cold["reference"]
    nohints = benchmark("survey-full-cold-nohints")
    h2, h2warm = benchmark("survey-full-cold-6f42a96"), benchmark("survey-full-warm-6f42a96")
    main_code, h4 = benchmark("survey-full-cold-21f972e"), benchmark("survey-full-cold-b8e812e")
    time_went = cold["where_the_time_went"]
    speed_cold = benchmark("survey-speed-cold")["figures"][0]
    speed_warm = benchmark("survey-speed-warm")["figures"][0]
    scale = benchmark("survey-speed-2gpu")["figures"][0]
    fg4, fg5 = survey("flag_gems-4.2.0-h200"), survey("flag_gems-5.0.2-h200-harness4")
    stock = survey("stock-torch-routes-flag_gems-5.0.2-h200")
    h2_survey = survey("flag_gems-5.0.2-h200-harness2")
    tfl = survey("torch_fl-1adbc97-flag_gems-5.0.2-h200")
    tfl_bindings = load(f"{RESULTS}/torch_fl-1adbc97-flag_gems-5.0.2-h200.json")["provenance"]["flag_gems_bindings"]
    attribution = load(f"{H200}/torch_fl-vs-flag_gems-5.0.2.json")["counts"]
    plain, plain_warm = benchmark("survey-full-cold-5bfa189"), benchmark("survey-full-warm-5bfa189")
    plain_again = benchmark("survey-full-cold-again")
    plain_lock = plain["where_the_time_went"]["triton_in_cases"]
    locked_before, warm_before = benchmark("survey-full-cold-2271ae7"), benchmark("survey-full-warm-2271ae7")
    again_before = benchmark("survey-full-cold-again-2271ae7")
    before_cases = locked_before["where_the_time_went"]["triton_in_cases"]
    full_a = load(f"{RESULTS}/torch_fl-5c9d6f4-flag_gems-5.0.2-h200-harness6.json")
    full_b = load(f"{RESULTS}/torch_fl-ceb4821-flag_gems-5.0.2-h200-harness6.json")
    full_compare = load(f"{H200}/compare-5c9d6f4-ceb4821-full.json")
    tfl6 = load(f"{RESULTS}/torch_fl-1adbc97-flag_gems-5.0.2-h200-harness6.json")
    branch29 = load(f"{RESULTS}/flag_gems-5.0.2-branch-2.9-h200.json")
    h200_readme = "surveys/h200/README.md"
    truth, tfl_doc = "docs/hardware.md", "docs/torch_fl.md"
    earlier = "surveys/h200/earlier-runs.md"  # the runs before issue 43, moved out of docs/benchmarks.md
    return [
        (h200_readme, f"Cold **{f1(plain['seconds'])} s**, warm **{f1(plain_warm['seconds'])} s**, "
                      f"{plain['workers']} workers picked, {plain['overloads']} overloads, {plain['cases']:,} cases"),
        (h200_readme, f"{len(tfl6['overloads'])} routes in {f1(tfl6['provenance']['runs'][-1]['seconds'])} s"),
        (h200_readme, f"**{f1(branch29['provenance']['runs'][-1]['seconds'])} s**, "
                      f"{branch29['provenance']['runs'][-1]['workers']} workers"),
        (earlier, f"cold **{f1(plain['seconds'])} s** and **{f1(plain_again['seconds'])} s** (target 240 s: met), "
                f"warm **{f1(plain_warm['seconds'])} s** (target 60 s: met)"),
        (earlier, f"cold **{f1(locked_before['seconds'])} s** and **{f1(again_before['seconds'])} s** (target 240 s: "
                f"not met), warm **{f1(warm_before['seconds'])} s**"),
        (h200_readme, f"Cold **{f1(locked_before['seconds'])} s** and **{f1(again_before['seconds'])} s**, warm "
                      f"**{f1(warm_before['seconds'])} s**"),
        (h200_readme, f"the second cold run **{f1(plain_again['seconds'])} s**"),
        (h200_readme, f"In the first cold run {plain_lock['compile_lock_waits']} compilations waited "
                      f"{f1(plain_lock['compile_lock_seconds'])} s in all for another worker compiling the same "
                      f"kernel; Triton compiled {plain_lock['compiles']:,} kernels in the cases and its cache holds "
                      f"{plain['where_the_time_went']['triton_cache']['kernels_compiled']:,} (at `2271ae7`: "
                      f"{before_cases['compiles']:,} compilations for "
                      f"{locked_before['where_the_time_went']['triton_cache']['kernels_compiled']:,} kernels"),
        (h200_readme, f"A took {f1(full_a['provenance']['runs'][-1]['seconds'])} s on cold caches, "
                      f"B {f1(full_b['provenance']['runs'][-1]['seconds'])} s on A's"),
        (h200_readme, f"Changes: the {len(full_compare['cases_changed'])} cases of the five overloads ceb4821 changed"),
        ("README.md", f"the {plain['overloads']} overloads flag_gems {plain['stack']['flag_gems']} registers, with the "
                      f"plain default command on one H200: {f1(plain['seconds'])} s on empty caches, "
                      f"{f1(plain_warm['seconds'])} s warm"),
        ("docs/hardware.md", f"cold {f1(cold['seconds'])} s, warm {f1(warm['seconds'])} s"),
        ("docs/hardware.md", f"with repeats and the `cuda` baseline ({torch_fl_minutes_seconds()}, 14 workers)"),
        (earlier, f"cold **{f1(cold['seconds'])} s** (target 300 s: **met**); warm **{f1(warm['seconds'])} s**"),
        (earlier, f"(`{cold['census_sha256'][:8]}…`); per-overload reference {f1(reference['seconds'])} s on "
                f"{reference['overloads']} overloads, {f1(reference['seconds_per_overload'])} s an overload, "
                f"**extrapolated** to {f0(reference['extrapolated_seconds'])} s for {cold['overloads']}: "
                f"**{f1(reference['ratio_extrapolated'])}x** cold"),
        (earlier, f"cold **{f1(nohints['seconds'])} s** (target 300 s: met, with less room)"),
        (earlier, f"harness 2: **{f1(h2['seconds'])} s** cold, {f1(h2warm['seconds'])} s warm, reference "
                f"{f1(h2['reference']['seconds'])} s on the 26 (with shared autotuning), extrapolated "
                f"{f1(h2['reference']['ratio_extrapolated'])}x"),
        (earlier, f"**{f1(main_code['seconds'])} s** (`survey-full-cold-21f972e.json`)"),
        (earlier, f"harness 4: **{f1(h4['seconds'])} s** in two calls (`survey-full-cold-b8e812e.json`, case seconds "
                f"{f0(h4['where_the_time_went']['case_seconds_sum'])})"),
        (earlier, f"The cases add up to {f0(time_went['case_seconds_sum'])} s of worker time "
                f"({f0(h4['where_the_time_went']['case_seconds_sum'])} s under harness 4): "
                f"{f0(time_went['triton_in_cases']['compile_seconds'])} s of it is Triton compiling "
                f"{time_went['triton_in_cases']['compiles']:,} kernels"),
        (earlier, f"Worker starts: {time_went['worker_starts']['count']}, median "
                f"{f1(time_went['worker_starts']['median_s_per_call'][0])} s"),
        (earlier, f"pooled {f1(speed_cold['pooled_s'])} s vs per-overload {f1(speed_cold['per_overload_s'])} s: "
                f"**{f1(speed_cold['ratio'])}x**"),
        (earlier, f"pooled {f1(speed_warm['pooled_s'])} s vs per-overload {f1(speed_warm['per_overload_s'])} s: "
                f"**{f1(speed_warm['ratio'])}x**"),
        (earlier, f"one GPU {f1(scale['one_device_s'])} s vs two GPUs {f1(scale['all_devices_s'])} s: "
                f"**{scale['speedup']}x**"),
        (truth, f"the full Markdown, {len(text_of(f'{H200}/compare-flag_gems-4.2.0-5.0.2.md')):,} characters"),
        (truth, f"| registered | {fg4['registered']} | {fg5['registered']} |"),
        (truth, f"| tested | {fg4['tested']} | {fg5['tested']} |"),
        (truth, f"| basic (at least one case passes) | {fg4['basic']} | {fg5['basic']} |"),
        (truth, f"| strict (every counted case passes) | {fg4['strict']} | {fg5['strict']} |"),
        *[(truth, row) for row in verdict_rows("flag_gems-4.2.0-h200", "flag_gems-5.0.2-h200-harness4")],
        (truth, "| cases PASS / WRONG / ERROR / FLAKY / INVALID_CASE | "
                f"{slashed(fg4['statuses'], 'PASS WRONG ERROR FLAKY INVALID_CASE')} | "
                f"{slashed(fg5['statuses'], 'PASS WRONG ERROR FLAKY INVALID_CASE')} |"),
        (truth, f"| failures stock CUDA shares (`native_also`, not counted) | {fg4['native_also']} | "
                f"{fg5['native_also']} |"),
        (truth, f"census byte-identical: no (A {census('flag_gems-4.2.0-h200')}, B "
                f"{census('flag_gems-5.0.2-h200-harness4')})"),
        ("docs/hardware.md", f"({h2_survey['statuses'].get('FLAKY', 0)} FLAKY, "
                             f"{len(h2_survey['native_also_overloads'])} overloads with failures stock CUDA shares)"),
        ("docs/hardware.md", f"`surveys/results/stock-torch-routes-flag_gems-5.0.2-h200.json`: "
                             f"{stock['statuses']['WRONG']} WRONG, {stock['statuses']['ERROR']} ERROR"),
        ("docs/README.md", f"the survey of all {tfl['registered']} `flagos_python` routes"),
        (tfl_doc, f"tested {tfl['tested']} basic {tfl['basic']} strict {tfl['strict']}"),
        (tfl_doc, "cases: " + " ".join(f"{k}={v}" for k, v in sorted(tfl["statuses"].items()))),
        (tfl_doc, f"**{len(tfl['missing_functions'])} overloads call FlagGems functions that flag_gems 5.0.2 does "
                  f"not have** ({tfl['statuses']['MISSING_FUNCTION']} cases"),
        (tfl_doc, f"{tfl_bindings['calls']} FlagGems functions called, {len(tfl_bindings['missing'])} missing in 5.0.2"),
        (tfl_doc, f"**{tfl['native_also']} failing cases also fail on torch_fl's own `cuda` route**"),
        *[(tfl_doc, f"| {cls} | {attribution[cls]} |") for cls in ("integration", "flag_gems", "native",
                                                                    "missing_function")],
        (tfl_doc, f"census byte-identical: no (A {census('torch_fl-5c9d6f4-sample-flag_gems-5.0.2-h200')}, "
                  f"B {census('torch_fl-ceb4821-sample-flag_gems-5.0.2-h200')})"),
    ]


SENTENCES = expected_sentences()


@pytest.mark.parametrize("doc, sentence", SENTENCES, ids=[f"{d}: {s[:50]}" for d, s in SENTENCES])
def test_figure_matches_its_file(doc, sentence):
    assert " ".join(sentence.split()) in doc_text(doc)


def test_torch_fl_verdict_table_matches_its_file():
    # The terminal table is boxed, so it is read row by row.
    text = doc_text("docs/torch_fl.md")
    summary = survey("torch_fl-1adbc97-flag_gems-5.0.2-h200")
    for verdict, count in [*summary["verdicts"].items(), ("registered", summary["registered"])]:
        assert f"│ {verdict} │ {count} │" in text, verdict


DOCS = ["README.md", "surveys/h200/README.md", *sorted(os.path.relpath(p, REPO_ROOT)
                              for p in glob.glob(os.path.join(REPO_ROOT, "docs", "**", "*.md"), recursive=True))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path: str) -> set[str]:
    """GitHub's anchors of a Markdown file's headings."""
    with open(path, encoding="utf-8") as handle:
        headings = [line.lstrip("#").strip() for line in handle if line.startswith("#")]
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in headings}


@pytest.mark.parametrize("doc", DOCS)
def test_relative_links_resolve(doc):
    with open(os.path.join(REPO_ROOT, doc), encoding="utf-8") as handle:
        text = handle.read()
    broken = []
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(REPO_ROOT, os.path.dirname(doc), path)) if path \
            else os.path.join(REPO_ROOT, doc)
        # ../shared is beside the clone, not in it: not checked here.
        if os.path.relpath(full, REPO_ROOT).startswith(os.pardir):
            continue
        if not os.path.exists(full) or (anchor and full.endswith(".md") and anchor not in anchors(full)):
            broken.append(target)
    assert not broken, broken


def test_the_committed_whole_conf_compare_is_what_the_command_makes_of_its_two_runs(tmp_path):
    # surveys/h200/README.md: the H200's two arms, compared again here; its only changes are
    # the five overloads ceb4821 changed, and the sticky error replay traced in A is named.
    from conftest import run_cli

    a = f"{RESULTS}/torch_fl-5c9d6f4-flag_gems-5.0.2-h200-harness6.json"
    b = f"{RESULTS}/torch_fl-ceb4821-flag_gems-5.0.2-h200-harness6.json"
    made = tmp_path / "compare.json"
    done = run_cli("survey", "--compare", a, b, "--json", str(made), "--markdown", str(tmp_path / "compare.md"),
                   cwd=REPO_ROOT)
    assert done.returncode == 1, done.stderr  # sum.IntList_out: ERROR -> WRONG, a regression
    assert made.read_text() == text_of(f"{H200}/compare-5c9d6f4-ceb4821-full.json")
    assert (tmp_path / "compare.md").read_text() == text_of(f"{H200}/compare-5c9d6f4-ceb4821-full.md")
    comparison = json.loads(made.read_text())
    assert {c["overload"] for c in comparison["cases_changed"]} == {
        "cumsum.out", "sum.out", "sum.IntList_out", "mm.out", "softshrink.out"}
    assert comparison["regressed_overloads"] == ["sum.IntList_out"] and comparison["fixes"] == 4
    assert comparison["changes"] == 0 and comparison["changed_overloads"] == []
    assert {(c["from"]["status"], c["to"]["status"], c["mark"]) for c in comparison["cases_changed"]
            if c["overload"] == "sum.IntList_out"} == {("ERROR", "WRONG", "now returns wrong values")}
    assert [(t["arm"], t["overload"], t["poisoned_by"]["overload"]) for t in comparison["sticky_traced"]] == [
        ("a", "native_dropout", "native_batch_norm_backward")]


#: docs/*.md, the pages a newcomer reads, at most this many characters in all (issue 31):
#: reference, not history; the hardware runs' outputs live in surveys/.
DOCS_BUDGET = 120_000


def test_docs_fit_their_budget():
    pages = glob.glob(os.path.join(REPO_ROOT, "docs", "*.md"))
    sizes = {os.path.basename(p): len(text_of(p)) for p in pages}
    assert len(sizes) >= 8 and sum(sizes.values()) <= DOCS_BUDGET, sorted(sizes.items(), key=lambda kv: -kv[1])
