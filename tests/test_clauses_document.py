"""The results-file validation (flagos_doctor/results/document.py: check, load), each clause
through a reader of results files, the CLI's ``matrix``: a file of the wrong shape is one line
naming the file and the first field at fault, exit 2, before any work."""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest

from conftest import REPO_ROOT, run_cli

SAMPLE = os.path.join(REPO_ROOT, "surveys", "results", "torch_fl-ceb4821-sample-flag_gems-5.0.2-h200.json")


@pytest.fixture(scope="module")
def sample():
    with open(SAMPLE, encoding="utf-8") as handle:
        return json.load(handle)


def first(document):
    name = next(n for n, e in document["overloads"].items() if e.get("cases"))
    return name, document["overloads"][name]


def set_path(document, dotted, value):
    holder = document
    *parents, last = dotted.split(".")
    for part in parents:
        holder = holder[part]
    holder[last] = value


def refused(tmp_path, document) -> str:
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(document))
    done = run_cli("matrix", str(path), cwd=str(tmp_path))
    assert done.returncode == 2 and done.stdout == "", (done.returncode, done.stdout[-500:], done.stderr[-500:])
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"flagos-doctor: error: {path}: "), done.stderr
    return lines[0].split(f"{path}: ", 1)[1]


def test_a_good_file_is_read(tmp_path, sample):
    path = tmp_path / "good.json"
    path.write_text(json.dumps(sample))
    done = run_cli("matrix", str(path), cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("schema, says", [
    ("flagos-doctor/survey/2", "field 'schema' is 'flagos-doctor/survey/2': made by another version of flagos-doctor; "
                               "this one reads flagos-doctor/survey/1"),
    ("flagos-doctor/probe/1", "field 'schema' is 'flagos-doctor/probe/1', expected flagos-doctor/survey/N"),
    (None, "field 'schema' is None"),
])
def test_another_or_a_newer_schema(tmp_path, sample, schema, says):
    document = copy.deepcopy(sample)
    document["schema"] = schema
    assert refused(tmp_path, document).startswith(says)


@pytest.mark.parametrize("field, value, says", [
    ("overloads", [], "field 'overloads' is missing or not an object: not a survey results file"),
    ("summary", None, "field 'summary' is missing or not an object: not a survey results file"),
    ("summary.registered", "308", "field 'summary.registered' is str, expected a"),
    ("summary.tested", True, "field 'summary.tested' is bool, expected a"),  # a bool is no count
    ("complete", 1, "field 'complete' is int, expected a bool"),
    ("census_sha256", 5, "field 'census_sha256' is int, expected a str or null"),
    ("provenance.torch", 2, "field 'provenance.torch' is int, expected a str or null"),
    ("provenance.torch_fl", 3, "field 'provenance.torch_fl' is int, expected an object or a str or null"),
    ("routes", {}, "field 'routes' is dict, expected a list"),
    ("provenance", [], "field 'provenance' is list, expected an object"),
    ("summary.verdicts", {"STRICT": "3"}, "field 'summary.verdicts."),
    ("summary.statuses", {"PASS": False}, "field 'summary.statuses."),
])
def test_the_shape_of_every_field_a_reader_uses(tmp_path, sample, field, value, says):
    document = copy.deepcopy(sample)
    set_path(document, field, value)
    message = refused(tmp_path, document)
    assert message.startswith(says), message
    if says.endswith("."):  # a count of the wrong type: the key and the value are named
        (key, bad), = value.items()
        assert key in message and message.endswith(f"is {bad!r}, expected a count"), message


def test_null_where_a_field_may_be_null_is_read(tmp_path, sample):
    document = copy.deepcopy(sample)
    document["census_sha256"] = None
    document["provenance"]["torch_fl"] = None
    path = tmp_path / "nulls.json"
    path.write_text(json.dumps(document))
    assert run_cli("matrix", str(path), cwd=str(tmp_path)).returncode == 0


def test_overloads_verdicts_and_cases(tmp_path, sample):
    def with_(change):
        document = copy.deepcopy(sample)
        name, entry = first(document)
        change(document, name, entry)
        return refused(tmp_path, document), name

    says, name = with_(lambda d, n, e: d["overloads"].__setitem__(n, "STRICT"))
    assert says == f"field 'overloads.{name}' is str, expected an object"
    says, name = with_(lambda d, n, e: e.__setitem__("verdict", "MAYBE"))
    assert says.startswith(f"field 'overloads.{name}.verdict' is 'MAYBE', not a verdict (STRICT, BASIC_ONLY")
    says, name = with_(lambda d, n, e: e.__setitem__("cases", {"a": 1}))
    assert says == f"field 'overloads.{name}.cases' is dict, expected a list of cases"
    says, name = with_(lambda d, n, e: e["cases"].__setitem__(0, "PASS"))
    assert says == f"field 'overloads.{name}.cases[0]' is str, expected a case (an object)"
    says, name = with_(lambda d, n, e: e["cases"][0].__setitem__("profile", 3))
    assert says == f"field 'overloads.{name}.cases[0].profile' is 3, expected a string"
    says, name = with_(lambda d, n, e: e["cases"][0].pop("status"))
    assert says == f"field 'overloads.{name}.cases[0].status' is missing: every case has one"
    says, name = with_(lambda d, n, e: e["cases"][0].pop("profile"))
    assert says == f"field 'overloads.{name}.cases[0].profile' is missing: every case has one"
    # JSON true is no number (Python's bool is an int): refused where a count is declared
    says, name = with_(lambda d, n, e: e["cases"][0].__setitem__("worker_order", True))
    assert says == f"field 'overloads.{name}.cases[0].worker_order' is True, expected an integer"
    says, name = with_(lambda d, n, e: e["cases"][0].__setitem__("seconds", False))
    assert says == f"field 'overloads.{name}.cases[0].seconds' is False, expected an integer or a number"
    says, name = with_(lambda d, n, e: e["cases"][0].__setitem__("status", "GOOD"))
    assert says.startswith(f"field 'overloads.{name}.cases[0].status' is 'GOOD', not a case status (PASS, WRONG")
    says, name = with_(lambda d, n, e: e["cases"][0].__setitem__("route", 1))
    assert says == f"field 'overloads.{name}.cases[0].route' is 1, expected a string"
    says, name = with_(lambda d, n, e: e.__setitem__("partial_cases", [{"profile": "x", "status": "NOPE"}]))
    assert says.startswith(f"field 'overloads.{name}.partial_cases[0].status' is 'NOPE', not a case status")
    says, name = with_(lambda d, n, e: e.__setitem__("verdict", "PENDING"))
    assert says == (f"field 'overloads.{name}.cases' holds {len(first(sample)[1]['cases'])} cases of a PENDING "
                    "overload (the cases of an unfinished one are its partial_cases)")


def test_build_makes_the_document_from_the_case_records():
    # document.build's clauses: every route in the route set's order; a finished overload's
    # verdict from its cases, in its spec's profile order (others after, by name), with when
    # it was measured and its profiles where known; an unfinished one PENDING with no cases,
    # what ran of it as partial_cases (in order, with its profiles); complete when all
    # finished; summary and census of the finished ones only.
    from flagos_doctor.results import census, document, verdicts

    def case(profile, status="PASS"):
        return {"profile": profile, "status": status, "route": "kernel", "detail": ""}

    finished = {"abs": [case("z"), case("1d", "WRONG"), case("2d"), case("a")], "neg": [case("1d")]}
    partial = {"ceil": [case("1d"), case("2d")], "floor": []}
    profiles = {"abs": ["2d", "1d"], "ceil": ["2d", "1d"], "floor": ["1d"], "neg": ["1d"]}  # not by name
    routes = ["neg", "floor", "ceil", "abs"]
    built = document.build({"stack": "demo"}, {"harness_version": "x"}, routes, finished, partial, profiles,
                           {"abs": "2026-12-03T00:00:00"})
    assert list(built["overloads"]) == routes and built["routes"] == routes and built["complete"] is False
    assert [c["profile"] for c in built["overloads"]["abs"]["cases"]] == ["2d", "1d", "a", "z"]
    assert built["overloads"]["abs"] == {"verdict": "BASIC_ONLY", "cases": built["overloads"]["abs"]["cases"],
                                         "measured": "2026-12-03T00:00:00", "profiles": ["2d", "1d"]}
    assert built["overloads"]["neg"] == {"verdict": "STRICT", "cases": [case("1d")], "profiles": ["1d"]}
    assert built["overloads"]["ceil"] == {"verdict": "PENDING", "cases": [], "partial_cases": [case("2d"), case("1d")],
                                          "profiles": ["2d", "1d"]}
    assert built["overloads"]["floor"] == {"verdict": "PENDING", "cases": []}  # nothing ran: no partial list
    done = {name: {"cases": built["overloads"][name]["cases"]} for name in ("abs", "neg")}
    assert built["summary"] == verdicts.summarize(routes, done) and built["summary"]["verdicts"]["PENDING"] == 2
    assert built["census_sha256"] == census.census_sha256(census.census_text(done))
    assert [group["members"] for group in built["failure_groups"]] == [[["abs", "1d"]]]
    # its census: the finished cases, a line each (the PENDING ones have none yet)
    assert len(document.census_of(built).splitlines()) == 5
    # the optional inputs left out: no profiles, no measured, nothing partial; all finished: complete
    plain = document.build({}, {}, ["neg"], {"neg": [case("b"), case("a")]})
    assert plain["overloads"] == {"neg": {"verdict": "STRICT", "cases": [case("a"), case("b")]}} and plain["complete"]
    unfinished = document.build({}, {}, ["neg", "abs"], {"neg": [case("a")]})
    assert unfinished["overloads"]["abs"] == {"verdict": "PENDING", "cases": []} and not unfinished["complete"]
    # a spec's digest does not depend on the order its keys were written in
    assert document.spec_sha256({"b": [2], "a": 1}) == hashlib.sha256(b'{"a": 1, "b": [2]}').hexdigest()


def test_a_census_digest_in_a_file_is_never_trusted(tmp_path, sample):
    from flagos_doctor.results import document
    forged = copy.deepcopy(sample)
    forged["census_sha256"] = "0" * 64
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(forged))
    assert document.load(str(path))["census_sha256"] == document.load(SAMPLE)["census_sha256"] != "0" * 64


def test_check_names_the_schema_it_reads_without_calling_another_document_newer(sample):
    from flagos_doctor.errors import BadInput
    from flagos_doctor.results import document
    for schema, says in (("flagos-doctor/probe/1", "field 'schema' is 'flagos-doctor/probe/1': this one reads "),
                         (3, "field 'schema' is 3: this one reads "), (None, "field 'schema' is None: this one reads ")):
        with pytest.raises(BadInput) as refused:
            document.check({**copy.deepcopy(sample), "schema": schema}, "x.json")
        assert str(refused.value).startswith(f"x.json: {says}")


def test_fields_a_file_may_leave_out_are_read(tmp_path, sample):
    # an older summary without statuses; a finished overload whose empty case list is left out
    from flagos_doctor.results import document, verdicts
    older = copy.deepcopy(sample)
    del older["summary"]["statuses"]
    older["overloads"]["zz_no_cases"] = {"verdict": "UNTESTED"}
    older["routes"].append("zz_no_cases")
    finished = {n: {"cases": e.get("cases", [])} for n, e in older["overloads"].items() if e["verdict"] != "PENDING"}
    older["summary"].update({k: v for k, v in verdicts.summarize(older["routes"], finished).items()
                             if k in older["summary"]})
    path = tmp_path / "older.json"
    path.write_text(json.dumps(older))
    read = document.load(str(path))
    assert read["overloads"]["zz_no_cases"] == {"verdict": "UNTESTED"} and "statuses" not in read["summary"]


def test_a_file_without_its_route_set_has_no_summary_to_recompute(tmp_path, sample):
    from flagos_doctor.results import document
    older = copy.deepcopy(sample)
    del older["routes"]
    older["summary"]["registered"] += 1  # nothing to recompute it from: read as written
    path = tmp_path / "no-routes.json"
    path.write_text(json.dumps(older))
    assert document.load(str(path))["summary"]["registered"] == sample["summary"]["registered"] + 1


def test_a_summary_figure_this_version_does_not_compute_is_read_as_written(tmp_path, sample):
    from flagos_doctor.results import document
    newer = copy.deepcopy(sample)
    newer["summary"]["from_a_later_version"] = 7
    path = tmp_path / "newer.json"
    path.write_text(json.dumps(newer))
    assert document.load(str(path))["summary"]["from_a_later_version"] == 7
