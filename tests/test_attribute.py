"""``survey --compare A B --attribute``: real surveys of two stacks that break kernels
differently (the fault stack as torch_fl, the kernel stack as flag_gems alone), attributed."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FAULT_ENV, FIXTURES, run_cli
from flagos_doctor.compare import attribute as attribution
from flagos_doctor.results import model

FAULT_CONF = os.path.join(FIXTURES, "fault.conf")
OPS = "abs,floor,ceil,log1p,expm1,trunc"


@pytest.fixture(scope="module")
def surveys(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("attribute")
    env = FAULT_ENV
    for stack, name in (("faultstack", "a.json"), ("kernelstack", "b.json")):
        # No repeats: attribution reads each case's status, route and native baseline (kept),
        # never a repeat; the faultstack's repeats were two rounds of fresh workers importing flag_gems.
        done = run_cli("survey", "--stack", stack, "--conf", FAULT_CONF, "--ops", OPS, "--no-store", "-q",
                       "--repeats", "0", "-o", name, env=env, cwd=str(tmp))
        with open(tmp / name, encoding="utf-8") as handle:
            statuses = {case["status"] for entry in json.load(handle)["overloads"].values() for case in entry["cases"]}
        # exit 1 exactly when a case crashed or timed out (faultstack's trunc does)
        assert done.returncode == (1 if statuses & {"CRASH", "TIMEOUT"} else 0), done.stderr
    return tmp


def _attribute(tmp, *extra):
    return run_cli("survey", "--compare", str(tmp / "a.json"), str(tmp / "b.json"), "--attribute", *extra, cwd=str(tmp))


def test_each_failure_gets_its_owner(surveys):
    done = _attribute(surveys, "--json", "att.json", "--markdown", "att.md")
    assert done.returncode == 1, done.stderr  # ceil fails only under A
    with open(surveys / "att.json", encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["schema"] == attribution.ATTRIBUTION_SCHEMA and doc["comparable"]
    assert {d["field"] for d in doc["context"]} == {"stack"}
    classes = {name: set(entry["classes"]) for name, entry in doc["overloads"].items()}
    assert classes == {"floor": {attribution.FLAG_GEMS}, "ceil": {attribution.INTEGRATION},
                       "log1p": {attribution.MISSING}, "trunc": {attribution.UNATTRIBUTED}}
    # trunc crashes under A on a 1-d input; alone no kernel of the stack runs it (CPU fallback)
    (crash,) = doc["overloads"]["trunc"]["cases"]
    assert crash["a"]["status"] == model.CRASH and crash["b"]["route"] == model.ROUTE_FALLBACK
    assert doc["integration"] == ["ceil"]
    for case in doc["overloads"]["ceil"]["cases"]:
        assert case["a"]["status"] == model.WRONG and case["b"]["status"] == model.PASS
        assert case["b"]["route"] == model.ROUTE_KERNEL
    for case in doc["overloads"]["floor"]["cases"]:
        assert case["a"]["status"] == model.ERROR and "kernelstack: floor kernel is broken" in case["b"]["detail"]
    assert doc["counts"][attribution.INTEGRATION] == len(doc["overloads"]["ceil"]["cases"]) > 0
    flat = " ".join(done.stdout.split())
    assert "1 overload(s) fail only under" in flat and ": ceil" in flat
    markdown = (surveys / "att.md").read_text()
    assert "| integration | " in markdown and "<details>" in markdown and "`ceil`" in markdown


def test_fail_on_never_and_json_to_stdout(surveys):
    done = _attribute(surveys, "--fail-on", "never", "--json", "-")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["integration"] == ["ceil"]


def test_refuses_cases_that_are_not_the_same_cases(surveys):
    with open(surveys / "b.json", encoding="utf-8") as handle:
        doc = json.load(handle)
    doc["provenance"]["spec"]["tolerances"] = {"float32": {"atol": 1.0, "rtol": 1.0}}  # as if run with another spec
    (surveys / "c.json").write_text(json.dumps(doc))
    done = run_cli("survey", "--compare", str(surveys / "a.json"), str(surveys / "c.json"), "--attribute", cwd=str(surveys))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "tolerances" in lines[0] and "not the same cases" in lines[0]
    forced = run_cli("survey", "--compare", str(surveys / "a.json"), str(surveys / "c.json"), "--attribute", "--force",
                     "-q", cwd=str(surveys))
    assert forced.returncode == 1


def test_a_failing_native_baseline_comes_first():
    """The baseline a survey records per case (issue 14): a native failure is nobody's alone."""
    case_a = {"profile": "p", "status": model.WRONG, "baseline": {"status": model.WRONG, "detail": "native too"}}
    assert attribution.classify(case_a, {"profile": "p", "status": model.PASS}) == attribution.NATIVE
    case_a["baseline"] = {"status": model.PASS, "detail": ""}
    assert attribution.classify(case_a, {"profile": "p", "status": model.PASS, "route": model.ROUTE_KERNEL}) == attribution.INTEGRATION
    assert attribution.classify(case_a, None) == attribution.UNATTRIBUTED
    assert attribution.classify(case_a, {"profile": "p", "status": model.INVALID_CASE}) == attribution.UNATTRIBUTED


def test_what_ran_alone_decides():
    """A case alone that no kernel ran is not evidence about the kernel A calls."""
    failing = {"profile": "p", "status": model.ERROR}
    fallback_pass = {"profile": "p", "status": model.PASS, "route": model.ROUTE_FALLBACK}
    assert attribution.classify(failing, fallback_pass) == attribution.UNATTRIBUTED
    unknown_pass = {"profile": "p", "status": model.PASS, "route": model.ROUTE_UNKNOWN}
    assert attribution.classify(failing, unknown_pass) == attribution.UNATTRIBUTED
    wrong_without_kernel = {"profile": "p", "status": model.WRONG, "route": model.ROUTE_UNKNOWN}
    assert attribution.classify(failing, wrong_without_kernel) == attribution.NATIVE
    crashed = {"profile": "p", "status": model.CRASH, "route": model.ROUTE_UNKNOWN}  # died: no evidence either way
    assert attribution.classify(failing, crashed) == attribution.FLAG_GEMS


def test_report_markdown_names_the_missing_functions(surveys):
    """The survey A (its log1p binding calls a function flag_gems 5.0.2 lacks) in a bug report."""
    done = run_cli("report", "--stack", "demo", "--survey", str(surveys / "a.json"), "--markdown", "r.md",
                   cwd=str(surveys))
    assert done.returncode == 0, done.stderr  # a report was written (docs/report.md)
    text = (surveys / "r.md").read_text()
    assert "<summary>1 overload calls a function flag_gems 5.0.2 lacks</summary>" in text
    assert "- `log1p` calls `flag_gems.ops.log1p`" in text
