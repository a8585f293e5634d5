"""Each promise of flagos_doctor/explain/validate.py's docstrings, one test each, through its
two documented functions: ``record`` (a line of explain's side channel) and ``document``
(an ``explain --json`` document). A malformed one is BadInput naming its place, never a
traceback; a well-formed one comes back as it is. scripts/mutation runs these first."""

from __future__ import annotations

import copy

import pytest

from flagos_doctor.errors import BadInput
from flagos_doctor.explain import validate

WHERE = "side.jsonl:7"
FRAME = {"file": "seed.py", "line": 3, "function": "<module>"}
SCHEMA = "flagos-doctor/explain/1"


def refused(value, message: str) -> BadInput:
    with pytest.raises(BadInput) as caught:
        validate.record(value, WHERE)
    assert caught.value.where.startswith(WHERE) and message in caught.value.message, caught.value.message
    return caught.value


# -- record: the record types and their own fields ----------------------------------------
def test_a_record_of_each_known_type_with_its_fields_comes_back_as_it_is():
    records = [
        {"record": "hello", "pid": 12}, {"record": "event", "seq": 1, "kind": "write", "probe": "torch.device"},
        {"record": "saved", "seq": 2, "probe": "torch.cuda.is_available", "saves": "x"}, {"record": "phase", "name": "a"},
        {"record": "notice", "text": "t"}, {"record": "driver", "seq": 3}, {"record": "final"},
        {"record": "failure", "kind": "exception", "error": None, "type": "E", "traceback": [FRAME]},
        {"record": "test", "nodeid": "t.py::a", "when": "call", "outcome": "failed"},
        {"record": "dropped", "events": {}}, {"record": "lost", "records": 0}, {"record": "done"},
    ]
    for value in records:
        assert validate.record(copy.deepcopy(value), WHERE) == value


def test_a_value_not_an_object_or_of_an_unknown_type_is_refused_as_not_the_watchs():
    refused([1, 2], "a JSON list, not a record: the file was written by something other than the watch")
    refused({"record": "hacked"}, "an unknown record 'hacked': the file was written by something other than the watch")
    refused({"pid": 1}, "an unknown record None")


def test_a_records_own_field_missing_or_of_another_type_is_named():
    refused({"record": "hello"}, "a 'hello' record without a valid 'pid' (got NoneType)")
    refused({"record": "hello", "pid": "12"}, "a 'hello' record without a valid 'pid' (got str)")
    refused({"record": "lost", "records": True}, "a 'lost' record without a valid 'records' (got bool)")  # a bool is no int
    refused({"record": "failure", "kind": "exit", "error": None, "type": None, "traceback": []},
            "a 'failure' record with 'kind' 'exit', expected one of exception, test")


def test_a_field_that_may_be_null_may_be_null_and_nothing_else():
    base = {"record": "failure", "kind": "exception", "type": None, "traceback": []}
    assert validate.record({**base, "error": None}, WHERE)["error"] is None
    refused({**base, "error": 5}, "without a valid 'error' (got int)")


# -- record: the optional fields' shapes ------------------------------------------------
def event(**fields) -> dict:
    return {"record": "event", "seq": 1, "kind": "read", "probe": "torch.cuda.is_available", **fields}


def test_an_optional_field_may_be_absent_and_is_checked_when_there():
    assert validate.record(event(), WHERE) == event()
    assert validate.record(event(where=FRAME, via=["a"], saw=None), WHERE)["via"] == ["a"]
    error = refused(event(where="seed.py:3"), "field 'where' is str, not of the shape the watch writes")
    assert error.where == f"{WHERE} (a 'event' record)"


def test_a_list_of_a_shape_checks_each_item_and_names_its_index():
    assert validate.record(event(callers=[FRAME, FRAME]), WHERE)
    refused(event(callers=[FRAME, {**FRAME, "line": "3"}]), "field 'callers[1].line' is str")
    refused(event(callers=FRAME), "field 'callers' is dict")  # a list is asked for


def test_a_mapping_of_a_shape_checks_each_value_and_names_its_key():
    assert validate.record(event(is_active={"nvidia": True, "amd": None}), WHERE)
    refused(event(is_active={"nvidia": "yes"}), "field 'is_active['nvidia']' is str")
    refused(event(is_active=[True]), "field 'is_active' is list")
    # a key from the file is named in at most 40 characters, whatever its length
    error = refused(event(is_active={"k" * 5000: "yes"}), "field 'is_active[")
    named = error.message.split("is_active[", 1)[1].split("]' is str", 1)[0]
    assert len(named) == 40 and "..." in named


def test_a_required_inner_field_must_be_there_the_others_may_be_absent():
    assert validate.record(event(value={"repr": "True"}), WHERE)  # defined_at absent
    refused(event(value={"defined_at": "x.py:1"}), "field 'value' has no 'repr', which the watch writes")
    refused(event(value={"repr": 1}), "field 'value.repr' is int")


def test_a_bool_is_not_an_int_anywhere_in_a_shape():
    refused(event(saw=True), "field 'saw' is bool")
    refused(event(where={**FRAME, "line": False}), "field 'where.line' is bool")


def test_a_shape_of_several_options_takes_any_and_names_the_field_when_none_fits():
    assert validate.record(event(answer=None), WHERE) and validate.record(event(answer={"repr": "1", "ok": True}), WHERE)
    refused(event(answer=["1"]), "field 'answer' is list, not of the shape the watch writes")


def test_the_final_records_probes_and_facts_are_checked_to_their_depth():
    probe = {"name": "torch.device", "kind": "attr", "call": {"repr": "x", "ok": None}}
    decision = {"probe": "p", "original_answer": {"repr": "True"}, "replaced_answer": {"repr": "False"}}
    good = {"record": "final", "probes": [probe], "facts": {"env": {"CUDA": {"final": None}}, "decisions": [decision]}}
    assert validate.record(copy.deepcopy(good), WHERE) == good
    assert validate.record({"record": "final", "facts": None}, WHERE)  # a run that recorded none
    refused({"record": "final", "probes": [{"kind": "attr"}]}, "field 'probes[0]' has no 'name'")
    refused({**good, "facts": {"decisions": [{**decision, "replaced_answer": None}]}},
            "field 'facts.decisions[0].replaced_answer' is NoneType")
    refused({**good, "facts": {"env": {"CUDA": {"original": "1"}}}}, "field 'facts.env['CUDA']' has no 'final'")


# -- record: a failure's traceback, test and causes --------------------------------------
def failure(**fields) -> dict:
    return {"record": "failure", "kind": "exception", "error": "E: x", "type": "E", "traceback": [FRAME], **fields}


def test_each_frame_of_a_failures_traceback_has_its_file_line_and_function():
    assert validate.record(failure(), WHERE)
    refused(failure(traceback=["seed.py:3"]), "a traceback frame is str, not an object")
    for key, kind, bad in (("file", "str", 3), ("line", "int", "3"), ("line", "int", True), ("function", "str", None)):
        refused(failure(traceback=[FRAME, {**FRAME, key: bad}]), f"a traceback frame without {kind} '{key}'")


def test_a_test_failure_names_its_node_id_and_causes_are_a_list():
    assert validate.record(failure(kind="test", test="t.py::a"), WHERE)
    refused(failure(kind="test"), "a test failure without its node id 'test'")
    refused(failure(kind="test", test=7), "a test failure without its node id 'test'")
    assert validate.record(failure(causes=[]), WHERE)
    refused(failure(causes={"0": 1}), "a failure whose 'causes' is not a list")


# -- document ------------------------------------------------------------------------------
def doc(**fields) -> dict:
    return {"schema": SCHEMA, "program": {"command": ["python", "x.py"], "returncode": 1, "ended": "exit"},
            "stack": "demo", "causes": [{"id": 0, "failure": 0, "message": "m"}],
            "failures": [{"id": 0, "kind": "exception", "error": "E", "causes": [0], "traceback": [FRAME]}], **fields}


def document_refused(value, message: str, field: str = "") -> BadInput:
    with pytest.raises(BadInput) as caught:
        validate.document(value, SCHEMA, "run.json")
    assert message in caught.value.message, caught.value.message
    assert caught.value.where == "run.json" + (f": field {field}" if field else ""), caught.value.where
    return caught.value


def test_a_well_formed_document_comes_back_as_it_is():
    good = doc(notices=["n"], processes=[{}], tests={"counts": {}})
    assert validate.document(copy.deepcopy(good), SCHEMA, "run.json") == good
    assert validate.document(doc(stack=None, tests=None), SCHEMA, "run.json")  # both may be null


def test_another_schema_is_refused_naming_both():
    document_refused(doc(schema="flagos-doctor/explain/0"),
                     "field 'schema' is 'flagos-doctor/explain/0'; this flagos-doctor reads flagos-doctor/explain/1")


def test_the_program_is_an_object_with_its_command_return_code_and_end():
    document_refused(doc(program=None), "field 'program' is missing or not an object")
    document_refused(doc(program={"command": "python x.py", "returncode": 1, "ended": "exit"}),
                     "a program without a valid 'command'", "program")
    document_refused(doc(program={"command": [], "returncode": False, "ended": "exit"}),
                     "a program without a valid 'returncode'", "program")


def test_stack_notices_processes_and_tests_have_their_shapes():
    document_refused(doc(stack=3), "field 'stack' is not a string")
    document_refused(doc(notices="n"), "field 'notices' is not a list of strings")
    document_refused(doc(notices=["n", 2]), "field 'notices' is not a list of strings")
    document_refused(doc(processes={}), "field 'processes' is not a list of objects")
    document_refused(doc(processes=[{}, "p"]), "field 'processes' is not a list of objects")
    document_refused(doc(tests={}), "field 'tests' is neither null nor an object with 'counts'")
    document_refused(doc(tests=[]), "field 'tests' is neither null nor an object with 'counts'")


def test_causes_and_failures_are_lists_of_objects_with_their_fields():
    document_refused(doc(causes=None), "field 'causes' is not a list of objects")
    document_refused(doc(causes=[{"id": 0, "failure": 0, "message": "m"}, 1]), "field 'causes' is not a list of objects")
    document_refused(doc(causes=[{"id": "0", "failure": 0, "message": "m"}]), "a cause without a valid 'id'",
                     "causes[0]")
    document_refused(doc(failures={}), "field 'failures' is not a list of objects")
    document_refused(doc(failures=[{"id": 0, "kind": "exit", "error": None, "causes": []}, "f"]),
                     "field 'failures' is not a list of objects")
    document_refused(doc(failures=[{"id": 0, "kind": "crash", "error": None, "causes": []}]),
                     "a failure with 'kind' 'crash', expected one of exception, test, exit", "failures[0]")
    document_refused(doc(failures=[{"id": 0, "kind": "exit", "error": None, "causes": [], "traceback": [{}]}]),
                     "a traceback frame without", "failures[0]")


def test_a_failure_names_only_causes_the_document_has():
    assert validate.document(doc(failures=[{"id": 0, "kind": "exit", "error": None, "causes": []}]), SCHEMA, "run.json")
    document_refused(doc(failures=[{"id": 0, "kind": "exit", "error": None, "causes": [0, 4]}]),
                     "cause id 4 is not among the document's causes", "failures[0]")
