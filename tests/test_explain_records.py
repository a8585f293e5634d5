"""What ``explain`` and ``report --explain`` trust: a malformed side-channel record or explain
document is one line naming where, exit 2 (``report`` before any probing); ``--stack`` is
checked as probe checks it; ``report --explain`` probes the stack the document names."""

from __future__ import annotations

import json
import os

import pytest

from conftest import FIXTURES, run_cli

EXPLAIN = os.path.join(FIXTURES, "explain")


def assert_one_line(done, *words):
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    for word in words:
        assert word in lines[0], lines[0]


@pytest.mark.parametrize("line, says", [
    ("[1, 2]", "a JSON list, not a record"),
    ('"text"', "a JSON str, not a record"),
    ('{"record": "event", "seq": 1, "kind": "read"}', "'probe'"),
    ('{"record": "failure", "kind": "weird", "error": "x", "type": null, "traceback": []}', "'kind' 'weird'"),
    ('{"record": "failure", "kind": "exception", "error": "x", "type": null, "traceback": "tb"}', "'traceback'"),
    ('{"record": "failure", "kind": "exception", "error": "x", "type": null, "traceback": [{"file": "a", "line": 1}]}',
     "'function'"),
    ('{"record": "test", "when": "call", "outcome": "failed"}', "'nodeid'"),
    # Fields inside a record, as the watch writes them (each was an exit 3)
    ('{"record": "event", "seq": 1, "kind": "read", "probe": "p", "where": null}', "field 'where'"),
    ('{"record": "event", "seq": 1, "kind": "read", "probe": "p", "callers": [null]}', "field 'callers[0]'"),
    ('{"record": "event", "seq": 1, "kind": "read", "probe": "p", "value": {}}', "no 'repr'"),
    ('{"record": "event", "seq": 1, "kind": "read", "probe": "p", "is_active": 1}', "field 'is_active'"),
    ('{"record": "driver", "seq": 1, "raised": 1}', "field 'raised'"),
    ('{"record": "final", "probes": [{}]}', "no 'name'"),
    ('{"record": "final", "facts": {"env": {"GEMS_VENDOR\\n": {}}}}', "field 'facts.env['GEMS_VENDOR\\n']' has no 'final'"),
    ('{"record": "final", "facts": {"decisions": [{"probe": "p", "original_answer": null}]}}',
     "field 'facts.decisions[0].original_answer'"),
])
def test_a_malformed_side_channel_record_is_one_line_and_exit_2(tmp_path, line, says):
    done = run_cli("explain", "--json", str(tmp_path / "why.json"), "--",
                   "python", os.path.join(EXPLAIN, "forges_a_record.py"), line, cwd=str(tmp_path))
    assert_one_line(done, "explain's side-channel file ", ".jsonl, line ", says)
    assert not (tmp_path / "why.json").exists()


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("explained")
    done = run_cli("explain", "--stack", "demo", "--json", str(tmp / "why.json"), "--",
                   "python", os.path.join(EXPLAIN, "raises.py"), cwd=str(tmp))
    assert done.returncode == 1, done.stderr
    return json.loads((tmp / "why.json").read_text())


@pytest.mark.parametrize("change, says", [
    (lambda d: d.update(failures="a string"), "field 'failures'"),
    (lambda d: d["failures"][0].update(causes=[99]), "cause id 99"),
    (lambda d: d.pop("program"), "field 'program'"),
    (lambda d: d["failures"][0]["traceback"][0].pop("function"), "'function'"),
    (lambda d: d.update(schema="flagos-doctor/explain/9"), "flagos-doctor/explain/9"),
])
def test_report_refuses_a_malformed_explain_document_before_probing(explained, tmp_path, change, says):
    document = json.loads(json.dumps(explained))
    change(document)
    path = tmp_path / "why.json"
    path.write_text(json.dumps(document))
    done = run_cli("report", "--explain", str(path))
    assert_one_line(done, str(path), says)


def test_report_probes_the_stack_the_explain_document_names(explained, tmp_path):
    path = tmp_path / "why.json"
    path.write_text(json.dumps(explained))
    assert explained["stack"] == "demo"
    done = run_cli("report", "--explain", str(path), "--json", str(tmp_path / "report.json"), "--markdown",
                   str(tmp_path / "report.md"))
    assert done.returncode == 0, done.stderr
    bundle = json.loads((tmp_path / "report.json").read_text())
    assert bundle["stack"]["requested"] == "demo"
    assert "flagos_doctor.demo" in json.dumps(bundle["probe"])


def test_explain_refuses_a_stack_it_cannot_find_as_probe_does(tmp_path):
    done = run_cli("explain", "--stack", "nosuchmod", "--", "python", os.path.join(EXPLAIN, "raises.py"),
                   cwd=str(tmp_path))
    probe = run_cli("probe", "--stack", "nosuchmod", cwd=str(tmp_path))
    assert_one_line(done, "--stack", "nosuchmod")
    assert probe.returncode == 2 and done.stderr == probe.stderr


def test_report_of_a_document_naming_a_stack_it_cannot_find_says_where_the_name_came_from(explained, tmp_path):
    document = dict(explained, stack="nosuchmod_zz")
    path = tmp_path / "why.json"
    path.write_text(json.dumps(document))
    done = run_cli("report", "--explain", str(path))
    assert_one_line(done, f"{path}: field stack: no stack or importable module 'nosuchmod_zz'", "give --stack")


def test_what_a_program_plants_in_the_side_channel_folder_is_never_read_as_records(tmp_path):
    # A FIFO (read, it hung explain), a link to /dev/zero (it exhausted memory), a folder
    # (exit 3), a link to a forged file: each said in a notice; the watch's own file still read.
    done = run_cli("explain", "--json", str(tmp_path / "why.json"), "--",
                   "python", os.path.join(EXPLAIN, "plants_in_the_channel.py"), "plant", cwd=str(tmp_path),
                   timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "folder mode 0o700\nplanted\n"
    document = json.loads((tmp_path / "why.json").read_text())
    assert document["program"]["watched"] and document["program"]["finished"]
    said = [n for n in document["notices"] if "side-channel folder held" in n]
    for name, kind in (("1.jsonl", "a FIFO"), ("2.jsonl", "a symbolic link"), ("3.jsonl", "a directory"),
                       ("4.jsonl", "a symbolic link")):
        assert any(f"'{name}', {kind}: not written by the watch" in n for n in said), said
    assert len(said) == 4


def test_a_side_channel_folder_the_program_replaced_by_a_link_is_not_followed(tmp_path):
    done = run_cli("explain", "--json", str(tmp_path / "why.json"), "--",
                   "python", os.path.join(EXPLAIN, "plants_in_the_channel.py"), "remove", cwd=str(tmp_path),
                   timeout=120)
    assert done.returncode == 0, done.stderr
    document = json.loads((tmp_path / "why.json").read_text())
    assert any("side-channel folder could not be read (Not a directory)" in n for n in document["notices"])
    assert os.path.isdir("/etc")
