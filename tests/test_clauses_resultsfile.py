"""ResultsFile's clauses (flagos_doctor/results/resultsfile.py), on the class itself: what
confirm and replay record is kept once checkpointed (and why the checkpoint is needed), a
resume keeps what ran and says what remains, a --rerun drop, another setup refused where it
was found, the compaction rate, when the journal goes, a secret scrubbed before it is
journalled. The SIGKILL promise itself is tests/test_clauses_journal.py's."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT  # noqa: F401  (conftest puts this checkout first on PYTHONPATH)


SETUP = {"harness_version": "flagos-doctor-survey/test", "stack": "demo"}


def case(profile: str, status: str = "PASS", detail: str = "") -> dict:
    return {"profile": profile, "status": status, "route": "kernel", "detail": detail}


def opened(tmp_path, routes=("abs", "neg"), setup=SETUP):
    """A ResultsFile for r.json as a survey opens it: what an earlier run left loaded, then
    a fresh results file and journal started."""
    from flagos_doctor.results.resultsfile import ResultsFile
    record = ResultsFile(str(tmp_path / "r.json"), setup, list(routes))
    record.load()
    record.start()
    return record


def test_what_confirm_and_replay_record_is_kept_once_checkpointed(tmp_path):
    # A kill after the confirmation: the results file holds what it found, and the journal,
    # restarted by checkpoint(), does not undo it when the next run replays it.
    record = opened(tmp_path)
    record.record_profiles("abs", ["1d", "2d"])
    record.record_case("abs", case("1d", "ERROR", "boom"))
    record.record_case("abs", case("2d", "WRONG", "max diff 1"))
    record.record_end("abs")
    record.checkpoint()
    first, second = record.finished["abs"]
    assert record.record_repeat(first, "ERROR", {"detail": "boom"}) == ["ERROR", "ERROR"]
    record.record_repeat(first, "PASS", {})
    record.record_flaky(first)
    record.record_baseline(second, "WRONG", "native too")
    record.record_replay(second, 3, 41, True, known=True)
    assert record.record_settled(second, "PASS", "") is True and record.record_settled(second, "PASS", "") is False
    record.record_poisoned_by(second, {"overload": "neg", "profile": "1d"})
    record.record_poisoned(first, ["neg", "1d"])
    record.save()  # as confirm does; then SIGKILL: no close()
    again = opened(tmp_path)
    first, second = again.finished["abs"]
    assert (first["status"], first["repeats"], first["repeat_details"], first["poisoned"]) == (
        "FLAKY", ["ERROR", "ERROR", "PASS"], [{"detail": "boom"}, {}], [["neg", "1d"]])
    assert first["detail"] == "boom"  # a FLAKY case keeps its first run's detail
    assert second["baseline"] == {"status": "WRONG", "detail": "native too"}
    assert second["replay"] == {"runs": 3, "cases": 41, "came_back": True, "known": True}
    assert (second["status"], second["first_run"]) == ("PASS", {"status": "WRONG", "detail": "max diff 1"})
    assert second["poisoned_by"] == {"overload": "neg", "profile": "1d"}
    record.record_replay(second, 1, 1, False)  # not known: no such key
    assert second["replay"] == {"runs": 1, "cases": 1, "came_back": False}


def test_without_the_checkpoint_a_replayed_journal_would_undo_them(tmp_path):
    # Why checkpoint() exists: the journal's case lines are the main run's, and a replay
    # puts them back over what the results file holds.
    record = opened(tmp_path)
    record.record_case("abs", case("1d", "ERROR", "boom"))
    record.record_end("abs")
    record.record_settled(record.finished["abs"][0], "PASS", "")
    record.save()
    assert opened(tmp_path).finished["abs"][0]["status"] == "ERROR"


def test_a_resume_keeps_what_ran_and_says_what_remains(tmp_path):
    record = opened(tmp_path, routes=("abs", "neg", "ceil"))
    record.record_profiles("abs", ["1d"])
    record.record_case("abs", case("1d"))
    record.record_end("abs")
    record.record_profiles("neg", ["1d", "2d", "3d"])
    record.record_case("neg", case("2d", "ERROR"))
    record.record_case("neg", case("2d"))  # the same profile again: the later record wins
    record._append({"kind": "profiles", "overload": "ceil", "profiles": ["1d"]})
    # killed here; the next run opens it
    again = opened(tmp_path, routes=("abs", "neg", "ceil"))
    assert again.finished == {"abs": [case("1d")]} and again.partial == {"neg": [case("2d")]}
    assert again.remaining_profiles("neg") == ["1d", "3d"]
    assert again.remaining_profiles("ceil") is None and again.remaining_profiles("abs") is None
    # the fresh journal holds the partial overload (its profiles and cases) behind a header
    lines = [json.loads(line) for line in open(again.path, encoding="utf-8")]
    assert [line["kind"] for line in lines] == ["header", "profiles", "case"]
    assert lines[0]["comparable"] == SETUP and lines[1]["profiles"] == ["1d", "2d", "3d"]
    document = json.loads(open(again.output, encoding="utf-8").read())
    assert document["overloads"]["neg"]["partial_cases"] == [case("2d")] and not document["complete"]
    # profiles the worker says again are not journalled twice
    size = os.path.getsize(again.path)
    again.record_profiles("neg", ["1d", "2d", "3d"])
    assert os.path.getsize(again.path) == size
    # --rerun: what was recorded of an overload dropped before the journal restarts
    from flagos_doctor.results.resultsfile import ResultsFile
    again.close(complete=False)
    rerun = ResultsFile(again.output, SETUP, ["abs", "neg", "ceil"])
    rerun.load()
    rerun.drop(["neg", "abs"])
    assert (rerun.finished, rerun.partial, rerun.profiles) == ({}, {}, {})
    rerun.start()
    third = opened(tmp_path, routes=("abs", "neg", "ceil"))
    assert (third.finished, third.partial) == ({}, {})


def test_a_journal_line_drop_forgets_an_overload(tmp_path):
    record = opened(tmp_path)
    record.record_case("abs", case("1d"))
    record.record_end("abs")
    record.record_case("neg", case("1d"))
    record._append({"kind": "drop", "overload": "abs"})
    record._append({"kind": "drop", "overload": "neg"})
    again = opened(tmp_path)
    assert again.finished == {} and again.partial == {}


def test_another_setup_is_refused_where_it_was_found(tmp_path):
    from flagos_doctor.errors import BadInput
    record = opened(tmp_path)
    record.record_case("abs", case("1d"))
    other = {**SETUP, "stack": "torch_fl"}
    with pytest.raises(BadInput) as refused:
        opened(tmp_path, setup=other)
    # the results file is read first: named, not the journal behind it
    assert str(refused.value).startswith(f"{tmp_path / 'r.json'}: field 'comparable.stack' is 'demo' there")
    # a field learnt once a worker started: checked against every record found
    record.close(complete=False)
    again = opened(tmp_path)
    with pytest.raises(BadInput) as refused:
        again.extend({"harness_version": "flagos-doctor-survey/other"})
    assert "comparable.harness_version" in str(refused.value)
    # agreeing with every record found (one that lacks the field does not agree): taken
    again.extend({"harness_version": SETUP["harness_version"]})
    with pytest.raises(BadInput):
        again.extend({"device_name": "cpu"})


@pytest.mark.parametrize("routes, ended, due", [(40, 1, False), (40, 2, True), (10, 1, True), (0, 1, True)])
def test_the_results_file_is_rewritten_each_twentieth_of_the_route_set(tmp_path, routes, ended, due):
    from flagos_doctor.results.resultsfile import COMPACTIONS
    assert COMPACTIONS == 20
    record = opened(tmp_path)
    for index in range(ended):
        record.record_case("abs", case(f"p{index}"))
        record.record_end("abs")
    assert record.compact_due(routes) is due
    record.compact()
    assert record.compactions == 1 and record.compact_due(routes) is False
    # the compaction wrote the results file: what ended is in it
    assert json.loads(open(record.output, encoding="utf-8").read())["overloads"]["abs"]["verdict"] == "STRICT"
    record.record_case("neg", case("1d"))
    record.record_end("neg")
    assert record.compact_due(1)
    record.checkpoint()  # a checkpoint writes the results file too: the count starts again
    assert record.compact_due(1) is False


@pytest.mark.parametrize("complete, partial, kept", [(True, False, False), (False, False, True), (True, True, True)])
def test_the_journal_goes_only_when_the_survey_completed_with_nothing_partial(tmp_path, complete, partial, kept):
    record = opened(tmp_path)
    record.record_case("abs", case("1d"))
    if not partial:
        record.record_end("abs")
    document = record.close(complete)
    assert os.path.exists(record.path) is kept and document == json.loads(open(record.output, encoding="utf-8").read())


def test_a_secret_in_a_case_is_scrubbed_before_it_reaches_the_journal(tmp_path):
    record = opened(tmp_path)
    record.record_case("abs", case("1d", "ERROR", "connect failed: HF_TOKEN=hf_abcdefghijklmnop0123"))
    text = open(record.path, encoding="utf-8").read()
    assert "hf_abcdefghijklmnop0123" not in text and "HF_TOKEN=" in text


def test_a_finished_overload_read_back_without_its_profiles_gets_its_cases_profiles(tmp_path):
    record = opened(tmp_path)
    record.record_case("abs", case("2d"))
    record.record_case("abs", case("1d"))
    record.record_end("abs")
    record.close(complete=False)
    assert "profiles" not in json.loads(open(record.output, encoding="utf-8").read())["overloads"]["abs"]
    assert opened(tmp_path).profiles["abs"] == ["1d", "2d"]  # the results file's order


def test_a_settled_case_keeps_its_first_run_once(tmp_path):
    # case.settle / first_run: the survey's own run is the first of its repeats (a FLAKY
    # case's status is not its first run's), kept the first time confirm or replay changes it
    record = opened(tmp_path)
    record.record_case("abs", case("1d", "ERROR", "boom"))
    record.record_end("abs")
    flaky = record.finished["abs"][0]
    record.record_repeat(flaky, "PASS", {})
    record.record_flaky(flaky)
    assert record.record_settled(flaky, "WRONG", "replayed") is True
    assert flaky["first_run"] == {"status": "ERROR", "detail": "boom"}
    assert record.record_settled(flaky, "PASS", "") is False and flaky["first_run"]["status"] == "ERROR"
    assert (flaky["status"], flaky["detail"]) == ("PASS", "")
    # asked again later (confirm words a FLAKY case's details from it): the kept first run
    from flagos_doctor.results.case import first_run
    record.record_case("neg", case("1d", "WRONG", "max diff 2"))
    record.record_end("neg")
    settled = record.finished["neg"][0]
    record.record_settled(settled, "PASS", "")
    assert first_run(settled) == {"status": "WRONG", "detail": "max diff 2"}


def test_a_field_the_worker_derives_is_derived_for_each_case(monkeypatch):
    # case.derived: each WORKER field declared with derive, its value where not None
    from flagos_doctor.results import case as case_record
    monkeypatch.setitem(case_record.FIELDS, "words", case_record.Field(
        (int,), case_record.WORKER, derive=lambda record, outcome: len(record["detail"].split()) or None))
    monkeypatch.setitem(case_record.FIELDS, "late", case_record.Field(
        (int,), case_record.CONFIRM, derive=lambda record, outcome: 1))  # not the worker's: never derived
    assert case_record.derived(case("1d", "ERROR", "two words"), {}) == {"words": 2}
    assert case_record.derived(case("1d"), {}) == {}  # None: left out
    assert case_record.compared() == ("status", "route")


def test_a_journal_line_that_cannot_be_written_is_one_line_and_the_lines_before_it_are_kept(tmp_path):
    # A real write failure: the process may write no file past 8 KiB (RLIMIT_FSIZE, its
    # SIGXFSZ ignored: the write fails with EFBIG, as on a full disk).
    script = f"""
import json, resource, signal, sys
sys.path.insert(0, {REPO_ROOT!r})
from flagos_doctor.errors import BadInput
from flagos_doctor.results.resultsfile import ResultsFile
record = ResultsFile("r.json", {SETUP!r}, ["abs"])
record.load()
record.start()
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (8192, 8192))
record.record_case("abs", {{"profile": "1d", "status": "PASS", "route": "kernel", "detail": ""}})
try:
    record.record_case("abs", {{"profile": "2d", "status": "ERROR", "route": "kernel", "detail": "x" * 20000}})
except BadInput as exc:
    print(exc)
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=str(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"{tmp_path / 'r.json.journal'}: cannot write: File too large; its previous version is kept"
    assert opened(tmp_path).partial == {"abs": [case("1d")]}  # the torn line after it passed over


def test_each_checkpoint_closes_the_journal_it_restarts(tmp_path):
    # a survey checkpoints after each confirmation pass: no descriptor is left behind by one
    record = opened(tmp_path)
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        record.checkpoint()
    assert len(os.listdir("/proc/self/fd")) == before
    record.close(complete=True)
    assert len(os.listdir("/proc/self/fd")) == before - 1 and not os.path.exists(record.path)


def test_a_journal_without_its_results_file_is_still_checked_against_the_setup(tmp_path):
    # the results file gone (removed by hand), its journal left: the journal's header is the
    # setup found, refused at once and again for a field learnt later
    from flagos_doctor.errors import BadInput
    from flagos_doctor.results.resultsfile import ResultsFile
    record = opened(tmp_path)
    record.record_case("abs", case("1d"))
    os.unlink(record.output)
    with pytest.raises(BadInput) as refused:
        opened(tmp_path, setup={**SETUP, "stack": "torch_fl"})
    assert str(refused.value).startswith(f"{record.path}:1: field 'comparable.stack' is 'demo' there")
    again = ResultsFile(record.output, SETUP, ["abs", "neg"])
    again.load()
    assert again.previous is None and again.partial == {"abs": [case("1d")]}
    with pytest.raises(BadInput) as refused:
        again.extend({"harness_version": "flagos-doctor-survey/other"})
    assert str(refused.value).startswith(f"{record.path}:1: field 'comparable.harness_version'")


def test_a_completed_survey_read_back_is_its_results_file_alone(tmp_path):
    # no journal left: the results file is what was found, its setup checked for fields
    # learnt later, and kept as the previous document (its measured times, its provenance)
    from flagos_doctor.errors import BadInput
    from flagos_doctor.results.resultsfile import ResultsFile
    record = opened(tmp_path)
    record.record_case("abs", case("1d"))
    record.record_end("abs")
    record.close(complete=False)  # neg never ran: the journal stays; remove it as a completed run does
    os.unlink(record.path)
    again = ResultsFile(record.output, SETUP, ["abs", "neg"])
    again.load()
    assert again.previous == json.loads(open(record.output, encoding="utf-8").read())
    assert again.finished == {"abs": [case("1d")]}
    with pytest.raises(BadInput) as refused:
        again.extend({"harness_version": "flagos-doctor-survey/other"})
    assert str(refused.value).startswith(f"{record.output}: field 'comparable.harness_version'")


def test_profiles_said_and_what_remains_in_the_same_run(tmp_path):
    from flagos_doctor.results.resultsfile import ResultsFile
    record = opened(tmp_path)
    record.record_profiles("abs", ["1d", "2d"])
    record.record_case("abs", case("1d"))
    assert record.remaining_profiles("abs") == ["2d"]
    record.record_case("neg", case("1d"))  # its worker never said its profiles: all of them remain
    assert record.remaining_profiles("neg") is None
    # closed twice (an error path closes what a finally closes again): the second is harmless
    record.close(complete=False)
    record.close(complete=False)
    assert ResultsFile(str(tmp_path / "other.json"), SETUP).routes == []  # no route set given: none


def test_what_a_compaction_wrote_of_a_partial_overload_is_read_back_without_the_journal(tmp_path):
    from flagos_doctor.results.resultsfile import ResultsFile
    record = opened(tmp_path)
    record.record_profiles("neg", ["1d", "2d"])
    record.record_case("neg", case("2d"))
    record.compact()
    os.unlink(record.path)  # the journal lost: the results file alone
    again = ResultsFile(record.output, SETUP, ["abs", "neg"])
    again.load()
    assert again.partial == {"neg": [case("2d")]} and again.remaining_profiles("neg") == ["1d"]


def test_a_torn_line_after_an_overloads_end_leaves_it_finished(tmp_path):
    record = opened(tmp_path)
    record.record_case("abs", case("1d"))
    record.record_end("abs")
    with open(record.path, "a", encoding="utf-8") as handle:
        handle.write('{"kind": "case", "overload": "neg", "prof')  # the kill, mid-write
    assert opened(tmp_path).finished == {"abs": [case("1d")]}


def test_a_finished_overload_with_no_cases_read_back_stays_finished(tmp_path):
    # an UNTESTED overload whose file left out its empty case list: measured, not run again
    from flagos_doctor.results.resultsfile import ResultsFile
    record = opened(tmp_path)
    record.record_profiles("abs", [])
    record.record_end("abs")
    record.close(complete=False)
    os.unlink(record.path)
    document = json.loads(open(record.output, encoding="utf-8").read())
    assert document["overloads"]["abs"]["verdict"] == "UNTESTED"
    del document["overloads"]["abs"]["cases"]
    with open(record.output, "w", encoding="utf-8") as handle:
        json.dump(document, handle)
    again = ResultsFile(record.output, SETUP, ["abs", "neg"])
    again.load()
    assert again.finished == {"abs": []} and again.partial == {}
