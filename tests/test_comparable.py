"""One definition of what makes two surveys comparable (:mod:`flagos_doctor.results.comparable`),
checked where it is used, on real survey runs: a resume, the store's fingerprint, and
``survey --compare``."""

from __future__ import annotations

import copy
import json
import os

import pytest

from conftest import REPO_ROOT, run_cli
from flagos_doctor.compare import attribute, diff
from flagos_doctor.results import comparable
from flagos_doctor.results import resultsfile as journal
from flagos_doctor.survey.spec import DEFAULT_SPEC

OPS = "abs,neg"


def survey(folder, *args):
    return run_cli("survey", "--stack", "demo", "--ops", OPS, "--no-store", "-q", *args, cwd=str(folder))


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Two real runs of the demo: the default spec, and one that also calls ``abs`` random."""
    folder = tmp_path_factory.mktemp("runs")
    with open(DEFAULT_SPEC, encoding="utf-8") as handle:
        text = handle.read()
    assert "\nrandom_ops:\n" in text
    (folder / "abs-random.yaml").write_text(text.replace("\nrandom_ops:\n", "\nrandom_ops:\n  - abs\n"))
    plain = survey(folder, "-o", "plain.json")
    assert plain.returncode == 0, plain.stderr
    random = survey(folder, "--spec", "abs-random.yaml", "-o", "random.json")
    assert random.returncode == 0, random.stderr
    return folder


def read(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def write(path, document: dict) -> str:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    return str(path)


def test_resume_compare_and_attribution_use_the_one_definition():
    assert journal.check_resumable is comparable.check_resumable
    assert diff.differences is comparable.differences
    assert set(attribute.CASE_FIELDS) | set(attribute.BY_DESIGN) == set(comparable.COMPARED)


def test_the_survey_records_exactly_the_recorded_fields(runs):
    assert set(read(runs / "plain.json")["comparable"]) == set(comparable.RECORDED)


def test_committed_results_keep_the_fingerprints_they_were_filed_under():
    # What the results fingerprint gave before the definition moved: runs already in
    # a store are found again by their fingerprint (timing hints, matrix queries).
    filed = {
        "flag_gems-4.2.0-h200-harness1.json": "a8520bc975ff1fd2",
        "flag_gems-5.0.2-h200-harness1.json": "4393e91b5d68a25b",
        "flag_gems-5.0.2-h200-harness2.json": "2e8e7a5b21476bf9",
        "stock-torch-routes-flag_gems-5.0.2-h200-harness2.json": "1661fa90e7fcb926",
        # filed after the definition moved (harness 4, 2026-12-01 evening)
        "flag_gems-4.2.0-h200.json": "c13685b3c87b66cb",
        "flag_gems-5.0.2-h200-harness4.json": "c73a89cb1f811700",  # was flag_gems-5.0.2-h200.json
        "stock-torch-routes-flag_gems-5.0.2-h200.json": "a41d98c8ccf3db49",
        "flag_gems-5.0.2-torch_fl-routes-h200.json": "9bf7e987d3f341dc",
        "torch_fl-1adbc97-flag_gems-5.0.2-h200.json": "ebd9d3094f0dee63",
        # harness 5 (2026-12-01, late evening)
        "flag_gems-5.0.2-h200.json": "69b894f8606275cf",
    }
    for name, fingerprint in filed.items():
        record = read(os.path.join(REPO_ROOT, "surveys", "results", name))["comparable"]
        assert comparable.fingerprint(record) == fingerprint, name
        # The store key is the folder, not part of the fingerprint; every other field is.
        assert comparable.fingerprint({**record, "store_key": "elsewhere"}) == fingerprint
        assert comparable.fingerprint({**record, "torch": "0.0.0"}) != fingerprint


def test_another_spec_is_refused_by_resume_and_by_compare_naming_the_field(runs):
    # Resuming the default-spec run with the other spec: its spec_sha256 differs.
    resumed = survey(runs, "--spec", "abs-random.yaml", "-o", "plain.json")
    assert resumed.returncode == 2
    assert "comparable.spec_sha256" in resumed.stderr and "plain.json" in resumed.stderr
    # Comparing the two runs: the spec part that differs is named.
    compared = run_cli("survey", "--compare", str(runs / "plain.json"), str(runs / "random.json"), "-q")
    assert compared.returncode == 2
    assert "not comparable" in compared.stderr and "random_ops" in compared.stderr
    assert "profiles" not in compared.stderr and "tolerances" not in compared.stderr


@pytest.mark.parametrize("field, compared", [("route_set_sha256", True), ("stack", True), ("torch", False),
                                             ("store_key", False)])
def test_each_recorded_field_refuses_a_resume_and_compared_ones_a_comparison(runs, tmp_path, field, compared):
    original = read(runs / "plain.json")
    changed = copy.deepcopy(original)
    changed["comparable"][field] = "other"
    # Provenance says the same (compare reads it first), as a run made that way would.
    if field == "route_set_sha256":
        changed["provenance"]["routes"][field] = "other"
    else:
        changed["provenance"][field] = "other"
    path = write(tmp_path / "changed.json", changed)
    # A complete results file runs nothing and starts no worker (issue 27), so the stack's
    # own fields (torch, the store key) are found changed by a run that adds cases: --rerun.
    resumed = survey(tmp_path, "-o", "changed.json", "--rerun")
    assert resumed.returncode == 2, resumed.stderr
    assert f"comparable.{field}" in resumed.stderr
    compared_run = run_cli("survey", "--compare", str(runs / "plain.json"), path, "--json", "-", "-q")
    if compared:
        assert compared_run.returncode == 2
        assert "not comparable" in compared_run.stderr and field in compared_run.stderr
        assert [d["field"] for d in json.loads(compared_run.stdout)["differences"]] == [field]
    else:  # what one compares runs across: the code under test, torch's version
        assert compared_run.returncode == 0, compared_run.stderr
        assert json.loads(compared_run.stdout)["comparable"] is True
