"""Clauses of the probe's finding rules (flagos_doctor/probe/findings.py, hazards.py) that no
other fixture reaches, each on a real probe run of a real fixture stack through the CLI.

The stale-guard rule has two ways in: the stack saved the original it redirected (every other
stale-guard fixture does), or it saved none and the redirect answers otherwise than the
original (``answers_differ``), which only ``nosavebug`` exercises. When the answers agree,
the read is a redirect the stack means to use: no stale guard, a latent hazard instead."""

from __future__ import annotations

import json
import os

import pytest

import test_probe
from conftest import FIXTURES, run_cli
from flagos_doctor.probe import causes
from flagos_doctor.probe.findings import judge

STACKS = os.path.join(FIXTURES, "probe_stacks")


def probe(tmp_path, *imports, env=None):
    out = tmp_path / "probe.json"
    done = run_cli("probe", *(a for name in imports for a in ("--import", name)), "--no-exercise", "-q",
                   "--json", str(out), env={"PYTHONPATH": STACKS, **(env or {})})
    assert out.exists(), done.stderr[-3000:]
    return done, json.loads(out.read_text())


def line_of(text: str) -> int:
    return test_probe.line_of("nosavebug", text)


def kinds(document) -> dict:
    return {f["kind"]: f for f in document["findings"]}


@pytest.fixture(scope="module")
def nosave(tmp_path_factory):
    return probe(tmp_path_factory.mktemp("nosave"), "nosavebug")


def test_a_redirect_that_saved_no_original_is_a_stale_guard_when_the_answers_differ(nosave):
    done, document = nosave
    assert document["saved_originals"] == []
    is_available = next(p for p in document["probes"] if p["name"] == "torch.cuda.is_available")
    assert (is_available["call"]["repr"], is_available["original_call"]["repr"]) == ("True", "False")
    stale = kinds(document)["stale-guard"]
    guard, redirect = line_of("if torch.cuda.is_available():"), line_of("torch.cuda.is_available = device.is_available")
    assert stale["severity"] == "error" and stale["probe"] == "torch.cuda.is_available"
    assert stale["message"].startswith(
        f"nosavebug/__init__.py:_alias_guard read torch.cuda.is_available at line {guard} after "
        f"nosavebug/__init__.py:_redirect_cuda_probe (line {redirect}) had redirected it")
    assert "which answers True" in stale["message"] and "The original is saved" not in stale["message"]
    [write] = [e for e in document["events"] if e["kind"] == "write" and e["probe"] == "torch.cuda.is_available"]
    [read] = [e for e in document["events"] if e["kind"] == "read" and e["probe"] == "torch.cuda.is_available"
              and e["where"]["function"] == "_alias_guard"]
    assert stale["events"] == [write["seq"], read["seq"]]  # no saved original to point at
    # the probe's disagreement is a warning (not info) because a stale guard read it
    assert kinds(document)["probe-disagreement"]["severity"] == "warning"
    assert done.returncode == 1  # an error-level finding


def test_a_redirect_answering_as_the_original_is_no_stale_guard(tmp_path):
    done, document = probe(tmp_path, "nosavebug", env={"NOSAVEBUG_ANSWER": "native"})
    is_available = next(p for p in document["probes"] if p["name"] == "torch.cuda.is_available")
    assert is_available["call"]["repr"] == is_available["original_call"]["repr"] == "False"
    found = kinds(document)
    assert "stale-guard" not in found and "probe-disagreement" not in found
    # the guard would decide otherwise were the replacement to answer True: a latent hazard, a warning
    assert found["latent-hazard"]["severity"] == "warning"
    assert f"(line {line_of('if torch.cuda.is_available():')})" in found["latent-hazard"]["message"]
    assert done.returncode == 0  # warnings do not fail the probe


# The alias-missing rule's conditions, on facts written out here in the probe's shapes (the
# real runs: seedbug, the demo under the seed bug, torch_fl on CPU, in tests/golden/judged).

def alias_facts(**more):
    return {"privateuse1": "flagos", "native_cuda_available": {"ok": True, "repr": "False"},
            "cuda_maps_to": {"ok": True, "repr": "'cuda'"}, **more}


def alias_findings(facts):
    return [f for f in judge({"events": [], "facts": facts}) if f["kind"] == "alias-missing"]


def test_the_alias_is_owed_by_a_registered_flagos_device_on_a_machine_without_cuda():
    (found,) = alias_findings(alias_facts())
    assert found["message"].startswith('torch.device("cuda") gives \'cuda\', not \'flagos\': flagos is registered')
    (found,) = alias_findings(alias_facts(cuda_maps_to={"ok": False, "repr": "RuntimeError: no cuda"}))
    assert found["message"].startswith('torch.device("cuda") raises RuntimeError: no cuda, not \'flagos\'')


def test_no_alias_is_owed_without_a_registered_device_even_where_one_is_declared():
    assert alias_findings(alias_facts(privateuse1=None, alias_declared=True)) == []
    assert alias_findings(alias_facts(privateuse1="privateuseone", alias_declared=True)) == []
    (declared,) = alias_findings(alias_facts(privateuse1="seeddev", alias_declared=True))
    assert "not 'seeddev'" in declared["message"]


def test_no_alias_is_owed_where_cuda_answers_or_the_alias_is_turned_off_or_already_there():
    assert alias_findings(alias_facts(native_cuda_available={"ok": True, "repr": "True"})) == []
    assert alias_findings(alias_facts(native_cuda_available={"ok": False, "repr": "RuntimeError: x"})) == []
    assert alias_findings(alias_facts(alias_turned_off=True)) == []
    assert alias_findings(alias_facts(cuda_maps_to={"ok": True, "repr": "'flagos'"})) == []


def test_what_was_not_recorded_owes_nothing():
    # the child records torch.device("cuda") and the native answer only once torch is imported
    assert alias_findings({k: v for k, v in alias_facts().items() if k != "cuda_maps_to"}) == []
    assert alias_findings({k: v for k, v in alias_facts().items() if k != "native_cuda_available"}) == []


def test_a_document_without_facts_is_judged_by_the_rules_that_need_none():
    # a child that died before its final state records no facts: its crash is still said
    document = {"events": [{"seq": 1, "kind": "read", "probe": "triton.runtime.driver.active", "creates_driver": True,
                            "where": {"file": "x.py", "line": 1, "function": "f"}, "active_backends": [],
                            "is_active": {}}],
                "outcome": "crashed", "interrupted": {"reason": "killed by SIGSEGV", "phase": "import x"}}
    assert [f["kind"] for f in judge(document)] == ["crash", "triton-driver"]


def test_an_exercise_failure_is_info_only_where_nothing_could_run():
    failed = [{"step": "exercise: a tensor on cuda", "ok": False, "error": "RuntimeError: x",
               "traceback": [{"file": "t.py", "line": 2, "function": "f"}]}]

    def severity(facts):
        (found,) = [f for f in judge({"events": [], "facts": facts, "outcomes": failed}) if f["kind"] == "exercise-failed"]
        return found["severity"], found["message"]

    # no device registered and no CUDA: nothing to exercise on this machine
    assert severity({"native_cuda_available": {"ok": True, "repr": "False"}}) == (
        "info", "a tensor on cuda failed: RuntimeError: x (raised in t.py:f, line 2). " + causes.no_cause({}))
    # CUDA answers (or a device is registered): the failure is worth a look
    assert severity({"native_cuda_available": {"ok": True, "repr": "True"}})[0] == "warning"
    assert severity({"privateuse1": "flagos", "native_cuda_available": {"ok": True, "repr": "False"}})[0] == "warning"
    assert severity({"privateuse1": "privateuseone", "native_cuda_available": {"ok": True, "repr": "False"}})[0] == "info"


def test_a_probe_patched_and_restored_is_an_attribute_or_a_variable_never_a_saved_original_or_a_state():
    where = {"file": "s.py", "line": 3, "function": "f"}
    writes = [{"seq": n, "kind": kind, "probe": "p", "where": where, "phase": "import s"}
              for n, kind in ((1, "write"), (2, "delete"))]
    for kind, said in (("attr", True), ("env", True), ("saved", False), ("state", False)):
        document = {"events": writes, "probes": [{"name": "p", "kind": kind, "original": True}]}
        assert ("patched-and-restored" in [f["kind"] for f in judge(document)]) is said, kind


def test_a_failed_import_without_frames_of_its_own_says_no_place():
    # importlib raises a missing module from frozen frames, which the probe leaves out
    outcome = {"step": "import no_such_stack", "ok": False, "traceback": [],
               "error": "ModuleNotFoundError: No module named 'no_such_stack'"}
    (found,) = [f for f in judge({"events": [], "outcomes": [outcome]}) if f["kind"] == "import-failed"]
    assert found["message"] == ("import no_such_stack failed: ModuleNotFoundError: No module named 'no_such_stack'. "
                                + causes.no_cause({}))


# The stale-guard rule's two ways in (a saved original, or answers that differ), on a
# document written out here: the stack's redirect, then its own guard reading it.

GUARDED = "torch.cuda.is_available"


def guard_document(call=("True",), original_call=("False",), saved=False, value=True):
    write = {"seq": 2, "kind": "write", "probe": GUARDED, "writer_known": True, "step": "import stack",
             "phase": "stack/compat.py:_redirect", "where": {"file": "stack/compat.py", "line": 10, "function": "_redirect"},
             "value": {"repr": "<function yes>", "defined_at": "stack/compat.py:3"}}
    read = {"seq": 3, "kind": "read", "probe": GUARDED, "saw": 2, "step": "import stack", "phase": "stack/guard.py:_guard",
            "where": {"file": "stack/guard.py", "line": 20, "function": "_guard"}}
    if value:
        read["value"] = {"repr": "<function yes>", "defined_at": "stack/compat.py:3"}
    probe = {"name": GUARDED, "final": {"repr": "<function yes>", "defined_at": "stack/compat.py:3"}}
    for key, answer in (("call", call), ("original_call", original_call)):
        if answer:
            probe[key] = {"ok": True, "repr": answer[0]}
    document = {"events": [write, read], "probes": [probe], "saved_originals": []}
    if saved:
        document["events"].insert(0, {"seq": 1, "kind": "write", "probe": "torch.cuda._native", "saves": GUARDED,
                                      "writer_known": True, "where": write["where"], "phase": write["phase"]})
        document["saved_originals"] = [{"probe": "torch.cuda._native", "saves": GUARDED, "seq": 1, "read": False}]
    return document


def stale_guards(document):
    return [f["message"] for f in judge(document) if f["kind"] == "stale-guard"]


def test_a_guard_on_a_redirect_whose_answer_differs_is_stale():
    assert stale_guards(guard_document()) == [
        "stack/guard.py:_guard read torch.cuda.is_available at line 20 after stack/compat.py:_redirect (line 10) had "
        "redirected it; it saw the redirected probe (stack/compat.py:3), which answers True; _guard wrote no watched "
        "probe after that."]


def test_answers_not_both_recorded_cannot_differ():
    assert stale_guards(guard_document(call=None)) == []
    assert stale_guards(guard_document(original_call=None)) == []
    assert stale_guards(guard_document(call=("False",))) == []


def test_a_saved_original_makes_the_read_stale_whatever_the_answers():
    (message,) = stale_guards(guard_document(call=("False",), saved=True))
    assert message.endswith("The original is saved as torch.cuda._native (#1); read that instead.")


def test_a_read_whose_value_was_not_recorded_says_so():
    (message,) = stale_guards(guard_document(value=False))
    assert "it saw the redirected probe (None); _guard wrote" in message  # and claims no answer


def test_a_guard_on_a_redirect_that_raises_claims_no_answer():
    document = guard_document()
    document["probes"][0]["call"] = {"ok": False, "repr": "RuntimeError: no driver"}
    (message,) = stale_guards(document)
    assert "it saw the redirected probe (stack/compat.py:3); _guard wrote" in message


def writers_document(final=None, kind="attr"):
    events = [{"seq": n, "kind": "write", "probe": "p", "value": {"repr": value}, "phase": "import s",
               "where": {"file": f"s/{name}.py", "line": n, "function": name}}
              for n, name, value in ((1, "first", "'a'"), (2, "second", "'b'"))]
    probe = {"name": "p", "kind": kind, "original": False}
    if final:
        probe["final"] = {"repr": final}
    return {"events": events, "probes": [probe]}


def multiple_writers(document):
    return [f["message"] for f in judge(document) if f["kind"] == "multiple-writers"]


def test_the_last_writer_wins_with_the_final_value_else_the_last_write():
    (message,) = multiple_writers(writers_document(final="'c'"))
    assert message == ("p was written by 2 writers: s/first.py:first (line 1) -> s/second.py:second (line 2); "
                       "the last one wins: 'c'.")
    (message,) = multiple_writers(writers_document())
    assert message.endswith("the last one wins: 'b'.")
    # a saved original is set, read back and deleted by design: never several writers
    assert multiple_writers(writers_document(kind="saved")) == []


def test_a_probe_without_a_recorded_answer_disagrees_with_nothing():
    probe = {"name": "torch.cuda.is_available", "original_call": {"ok": True, "repr": "False"}}
    assert [f for f in judge({"events": [], "probes": [probe]}) if f["kind"] == "probe-disagreement"] == []


def test_only_writes_after_the_read_in_the_guards_own_phase_are_what_it_wrote_after():
    document = guard_document()
    phase = "stack/guard.py:_guard"
    document["events"] += [
        {"seq": 4, "kind": "read", "probe": "torch.cuda.device_count", "phase": phase, "where": {}},  # a read
        {"seq": 5, "kind": "write", "probe": "torch.device", "phase": "stack/other.py:_later", "where": {}}]  # elsewhere
    document["events"].insert(0, {"seq": 1, "kind": "write", "probe": "torch.device", "phase": phase, "where": {}})  # before
    (message,) = stale_guards(document)
    assert "; _guard wrote no watched probe after that." in message


def test_a_decision_entry_without_its_decision_says_no_branch():
    document = guard_document()
    document["facts"] = {"decisions": [{"probe": GUARDED, "file": "stack/guard.py", "line": 20, "saw": 2,
                                        "original_answer": {"ok": True, "repr": "False"},
                                        "replaced_answer": {"ok": True, "repr": "True"}}]}
    (message,) = stale_guards(document)
    assert "; _guard wrote no watched probe after that." in message


def test_a_child_that_died_before_any_phase_died_during_start_up():
    (crash,) = judge({"events": [], "outcome": "crashed", "interrupted": {"reason": "killed by SIGSEGV"}})
    assert crash["message"].startswith("The child died (killed by SIGSEGV) during phase 'start-up'. Events up to")


def test_the_alias_evidence_names_the_first_rename_only():
    renames = [{"seq": n, "kind": "write", "probe": "PrivateUse1 backend name", "where": {}} for n in (1, 2)]
    (found,) = [f for f in judge({"events": renames, "facts": alias_facts()}) if f["kind"] == "alias-missing"]
    assert found["events"] == [1]


def test_a_triton_driver_chosen_without_cuda_is_said_only_for_nvidias():

    def drivers(active):
        event = {"seq": 1, "kind": "read", "probe": "triton.runtime.driver.active", "creates_driver": True,
                 "where": {"file": "t.py", "line": 1, "function": "f"}, "active_backends": active,
                 "is_active": {name: True for name in active}}
        facts = {"native_cuda_available": {"ok": True, "repr": "False"}}
        return [f["message"] for f in judge({"events": [event], "facts": facts}) if f["kind"] == "triton-driver"]

    assert "Triton chose NVIDIA's driver" in drivers(["nvidia"])[0]
    assert drivers(["amd"]) == []


def test_a_failed_step_is_explained_through_the_frames_of_its_chained_errors():
    document = guard_document()
    document["outcomes"] = [{"step": "import stack", "ok": False, "error": "RuntimeError: x", "traceback": [],
                             "causes": [{"error": "OSError: y", "at": {"file": "stack/guard.py", "line": 21,
                                                                      "function": "_guard"}}]}]
    document["probes"][0]["original_call"] = {"ok": True, "repr": "False"}
    document["events"][1].update(answer={"ok": True, "repr": "True"}, original_answer={"ok": True, "repr": "False"})
    assert [f["kind"] for f in judge(document)][:2] == ["failure-cause", "import-failed"]


def test_a_guard_read_before_a_crash_is_judged_without_a_final_value():
    document = guard_document()
    del document["probes"][0]["final"]  # the child died before its final state
    (message,) = stale_guards(document)
    assert "it saw the redirected probe (stack/compat.py:3); _guard wrote" in message


def test_a_driver_a_failure_cause_names_is_said_there_unless_no_backend_answered():
    from flagos_doctor.probe.findings import _drop_explained_drivers

    cause = {"kind": "failure-cause", "events": [2, 7]}
    named = {"kind": "triton-driver", "events": [7], "message": "Triton chose NVIDIA's driver ..."}
    none_active = {"kind": "triton-driver", "events": [7], "message": "... and 0 Triton backends answered is_active()"}
    elsewhere = {"kind": "triton-driver", "events": [9], "message": "Triton chose NVIDIA's driver ..."}
    bare = {"kind": "triton-driver", "events": [], "message": "Triton chose NVIDIA's driver ..."}
    assert _drop_explained_drivers([cause, named, none_active, elsewhere, bare]) == [cause, none_active, elsewhere, bare]


def restored_document(*writes):
    """A probe written by ``writes`` ((seq, kind, file, line)) and back to its original at the end."""
    events = [{"seq": seq, "kind": kind, "probe": "p", "phase": "import s", "value": None if kind == "delete" else {"repr": "1"},
               "where": {"file": file, "line": line, "function": file and "patch"}} for seq, kind, file, line in writes]
    return {"events": events, "probes": [{"name": "p", "kind": "attr", "original": True}]}


def test_a_patch_and_its_undo_name_each_writers_lines_once():
    # a setattr helper patches and restores from one line; a dict write has no writer, no line
    document = restored_document((1, "write", "s/h.py", 4), (2, "write", "s/h.py", 4), (3, "write", "s/h.py", 9),
                                 (4, "write", None, None))
    (found,) = [f for f in judge(document) if f["kind"] == "patched-and-restored"]
    assert found["message"] == ("p was patched and restored by s/h.py:patch (lines 4, 9), an unknown writer "
                                "(4 writes, during import s); its final value is the original.")


def test_a_guard_raised_only_where_a_frame_of_its_own_function_in_its_own_file_failed_the_step():
    def said(*frames):
        document = guard_document()
        document["outcomes"] = [{"step": "import stack", "ok": False, "error": "RuntimeError: boom",
                                 "traceback": [{"file": f, "function": fn, "line": 1} for f, fn in frames]}]
        (message,) = stale_guards(document)
        return message

    assert said(("stack/__init__.py", "<module>"), ("stack/guard.py", "_guard")).endswith(
        "which answers True; then it raised RuntimeError: boom, which failed import stack.")
    # the same file's module code, or a function of that name in another file, is not the guard
    for frames in ((("stack/guard.py", "<module>"),), (("other/guard.py", "_guard"),)):
        assert said(*frames).endswith("which answers True; _guard wrote no watched probe after that."), frames


def test_a_redirect_that_is_not_a_python_function_is_named_by_its_repr():
    document = guard_document()
    document["events"][1]["value"] = {"repr": "functools.partial(<built-in function bool>, 1)", "defined_at": None}
    (message,) = stale_guards(document)
    assert "it saw the redirected probe (functools.partial(<built-in function bool>, 1))" in message


def test_several_writers_of_a_probe_deleted_at_the_end():
    document = restored_document((1, "write", "s/a.py", 3), (2, "delete", "s/b.py", 7))
    document["probes"][0].update(original=False, final=None)
    (found,) = [f for f in judge(document) if f["kind"] == "multiple-writers"]
    assert found["severity"] == "warning"  # a value, then none: not the same value
    assert found["message"] == ("p was written by 2 writers: s/a.py:patch (line 3) -> s/b.py:patch (line 7); "
                                "at the end it is absent.")


def test_a_guard_outside_a_function_hands_its_branch_to_its_caller_by_line():
    document = guard_document()
    document["events"][1]["phase"] = "import stack"  # module-level code: the phase is the step
    decision = {"kind": "branch", "statement": "if torch.cuda.is_available():", "statement_line": 20,
                "now": "line 21: `x = 1`", "through": {"line": 40, "function": "main", "file": "stack/guard.py"}}
    entry = {"probe": GUARDED, "file": "stack/guard.py", "line": 20, "saw": 2, "decision": decision,
             "original_answer": {"ok": True, "repr": "False"}, "replaced_answer": {"ok": True, "repr": "True"}}
    document["facts"] = {"decisions": [entry]}
    (message,) = stale_guards(document)
    assert message.endswith("which answers True; so its caller (line 40), given that answer, took the branch of "
                            "`if torch.cuda.is_available():` (line 20) into line 21: `x = 1`.")
    del decision["through"]
    (message,) = stale_guards(document)
    assert message.endswith("which answers True; so it took the branch of `if torch.cuda.is_available():` (line 20) "
                            "into line 21: `x = 1`.")


def test_errors_in_findings_are_cut_at_200_characters():
    long = "RuntimeError: " + "e" * 300
    document = guard_document()
    document["outcomes"] = [{"step": "import stack", "ok": False, "error": long,
                             "traceback": [{"file": "stack/guard.py", "function": "_guard", "line": 21}],
                             "causes": [{"error": long, "at": None}]}]
    said = " ".join(f["message"] for f in judge(document))
    cut = long[:197] + "..."
    assert f"then it raised {cut}, which failed import stack" in said  # the stale guard
    assert f"Caused by: {cut}." in said  # the import failure's chained error
    driver = {"seq": 1, "kind": "read", "probe": "triton.runtime.driver.active", "creates_driver": True,
              "where": {"file": "t.py", "line": 1, "function": "f"}, "active_backends": [], "is_active": {}, "raised": long}
    (found,) = [f for f in judge({"events": [driver]}) if f["kind"] == "triton-driver"]
    assert found["message"].endswith(f" Creating it raised {cut}.")


def test_a_failed_imports_evidence_is_the_last_three_events_of_its_step():
    events = [{"seq": n, "kind": "write", "probe": f"p{n}", "step": "import s" if n > 1 else "import torch",
               "where": {"file": "s/a.py", "line": n, "function": "f"}} for n in range(1, 6)]
    outcome = {"step": "import s", "ok": False, "error": "RuntimeError: x", "traceback": []}
    (found,) = [f for f in judge({"events": events, "outcomes": [outcome]}) if f["kind"] == "import-failed"]
    assert found["events"] == [3, 4, 5]


def test_the_redirect_triton_followed_was_written_before_its_driver():
    write = {"kind": "write", "probe": "torch.cuda.is_available", "where": {"file": "s/a.py", "line": 7, "function": "f"}}
    driver = {"seq": 2, "kind": "read", "probe": "triton.runtime.driver.active", "creates_driver": True,
              "where": {"file": "t.py", "line": 1, "function": "g"}, "active_backends": ["nvidia"],
              "is_active": {"nvidia": True}}
    facts = {"native_cuda_available": {"ok": True, "repr": "False"}}
    after = {**write, "seq": 3, "where": {"file": "s/b.py", "line": 9, "function": "later"}}
    (found,) = [f for f in judge({"events": [{**write, "seq": 1}, driver, after], "facts": facts})
                if f["kind"] == "triton-driver"]
    assert "(redirected by s/a.py:f, line 7)" in found["message"] and found["events"] == [1, 2]


def test_an_orphan_original_whose_save_was_not_recorded_names_an_unknown_writer():
    # explain keeps at most 5,000 events of a kind per process: the save itself can be gone
    keep = {"probe": "torch.cuda._native", "saves": GUARDED, "seq": 9, "read": False}
    (found,) = judge({"events": [], "saved_originals": [keep], "final_state": True})
    assert found["kind"] == "orphan-original" and found["events"] == [9]
    assert found["message"].startswith("an unknown writer ") and found["message"].endswith(
        f"saved the original {GUARDED} as torch.cuda._native, but nothing read it afterwards.")
