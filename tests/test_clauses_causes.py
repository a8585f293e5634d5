"""Each promise of flagos_doctor/probe/causes.py's docstrings, one test each, on events and
failures written out here in the shapes its module docstring documents (the engine is a pure
function of them: no torch, no files). The real runs it was built for (the seed's libcuda
failure on CPU, the demo's compile failure, a stale guard that raises) are in
tests/test_probe_causes.py and tests/golden/judged; scripts/mutation runs these first."""

from __future__ import annotations

from flagos_doctor.probe import causes

PROBE = "torch.cuda.is_available"


def at(file, line, function, code=None):
    frame = {"file": file, "line": line, "function": function}
    return {**frame, "code": code} if code is not None else frame


#: The stack's redirect, and the frames of a failed import: the guard, then torch's raise.
REDIRECT = {"seq": 1, "kind": "write", "probe": PROBE, "where": at("stack/compat.py", 10, "_redirect"),
            "writer_known": True, "value": {"repr": "<function stack.device.is_available>"}}
GUARD_FRAME = at("stack/guard.py", 20, "_check")
TORCH_FRAME = at("torch/cuda/__init__.py", 300, "_lazy_init")
FAILURE = {"error": "AssertionError: Torch not compiled with CUDA enabled\nmore text",
           "traceback": [at("stack/__init__.py", 5, "<module>"), GUARD_FRAME, TORCH_FRAME], "step": "import stack"}


def read(seq=2, where=None, answer="True", original="False", step="import stack", saw=1, callers=(), probe=PROBE):
    event = {"seq": seq, "kind": "read", "probe": probe, "step": step, "where": where or at("stack/guard.py", 18, "_check"),
             "saw": saw, "callers": list(callers)}
    if answer is not None:
        event["answer"] = {"ok": True, "repr": answer}
    if original is not None:
        event["original_answer"] = {"ok": True, "repr": original}
    return event


def decision(where=None, probe=PROBE, **fields):
    where = where or at("stack/guard.py", 18, "_check")
    return {"probe": probe, "file": where["file"], "line": where["line"], "saw": 1,
            "replaced_answer": {"ok": True, "repr": "True"}, "original_answer": {"ok": True, "repr": "False"},
            "decision": {"kind": "branch", **fields}}


def test_a_read_on_the_traceback_of_a_redirected_probe_that_answers_otherwise_is_the_cause():
    (cause,) = causes.find_causes([REDIRECT, read()], FAILURE)
    assert cause == {
        "probe": PROBE, "read": 2, "reader": at("stack/guard.py", 18, "_check"),
        "write": 1, "writer": at("stack/compat.py", 10, "_redirect"),
        "answer": "True", "original_answer": "False", "frame": GUARD_FRAME, "how": "on-path",
        "branch": "took the CUDA branch",
        "fix": f"save the original before redirecting {PROBE}, and read that there",
        "message": "import stack failed: AssertionError: Torch not compiled with CUDA enabled in "
                   "torch/cuda/__init__.py:300 (_lazy_init); stack/guard.py:18 (_check) asked torch.cuda.is_available(), "
                   "which stack/compat.py:10 (_redirect) redirected to answer True (the original answers False), and so "
                   "took the CUDA branch; save the original before redirecting torch.cuda.is_available, and read that there.",
        "events": [1, 2]}


def test_a_read_whose_answer_the_original_shares_is_no_cause():
    assert causes.find_causes([REDIRECT, read(answer="False")], FAILURE) == []


def test_a_read_that_saw_no_write_is_no_cause():
    assert causes.find_causes([REDIRECT, read(saw=None)], FAILURE) == []


def test_only_reads_count_and_the_answers_come_from_the_decisions_when_the_read_has_none():
    bare = read(answer=None, original=None)
    written = {**REDIRECT, "seq": 3, "where": GUARD_FRAME}  # a write at the frame is no read
    assert causes.find_causes([REDIRECT, bare, written], FAILURE) == []
    (cause,) = causes.find_causes([REDIRECT, bare], FAILURE, [{**decision(), "decision": {}}])
    assert (cause["answer"], cause["original_answer"]) == ("True", "False")
    # a decision of another line or another probe tells nothing of this read
    assert causes.find_causes([REDIRECT, bare], FAILURE, [decision(at("stack/guard.py", 19, "_check"))]) == []
    assert causes.find_causes([REDIRECT, bare], FAILURE, [decision(probe="torch.cuda.device_count")]) == []


def test_a_read_in_no_frame_of_the_traceback_and_called_from_none_is_no_cause():
    elsewhere = read(where=at("stack/other.py", 18, "_check"), callers=[at("stack/other.py", 40, "_setup")])
    assert causes.find_causes([REDIRECT, elsewhere], FAILURE) == []
    same_file_other_function = read(where=at("stack/guard.py", 30, "_other"))
    assert causes.find_causes([REDIRECT, same_file_other_function], FAILURE) == []


def test_a_frame_matches_by_the_last_part_of_the_function_name():
    # an event names ``Class.method`` or ``outer.<locals>.fn``; a traceback names ``method``
    qualified = read(where=at("stack/guard.py", 18, "Guard._check"))
    (cause,) = causes.find_causes([REDIRECT, qualified], FAILURE)
    assert cause["frame"] == GUARD_FRAME and cause["how"] == "on-path"


def test_a_reader_called_straight_from_a_frame_hands_its_answer_back_to_it():
    probe_fn = read(where=at("stack/device.py", 3, "is_cuda"), callers=[at("stack/guard.py", 18, "_check")])
    (cause,) = causes.find_causes([REDIRECT, probe_fn], FAILURE)
    assert (cause["how"], cause["frame"]) == ("decided-call", GUARD_FRAME)


def test_comprehension_callers_are_passed_through_but_only_the_first_real_caller_counts():
    through = read(where=at("stack/device.py", 3, "is_cuda"),
                   callers=[at("stack/guard.py", 18, "<listcomp>"), at("stack/guard.py", 18, "_check")])
    (cause,) = causes.find_causes([REDIRECT, through], FAILURE)
    assert cause["how"] == "decided-call"
    # the first caller that is not a comprehension is not on the traceback: its caller's is no matter
    deeper = read(where=at("stack/device.py", 3, "is_cuda"),
                  callers=[at("stack/helpers.py", 7, "ask"), at("stack/guard.py", 18, "_check")])
    assert causes.find_causes([REDIRECT, deeper], FAILURE) == []


def test_a_called_reader_whose_own_if_tested_the_answer_decided_by_itself():
    called = read(where=at("stack/device.py", 3, "is_cuda"), callers=[at("stack/guard.py", 18, "_check")])
    own_if = decision(at("stack/device.py", 3, "is_cuda"), statement="if x:", statement_line=3, now="line 4: `return 1`")
    assert causes.find_causes([REDIRECT, called], FAILURE, [own_if]) == []
    # one that hands the answer back (``return torch.cuda.is_available() and ...``) lets the caller decide
    handed = decision(at("stack/device.py", 3, "is_cuda"), through={"line": 18}, statement="if x:", statement_line=3)
    assert len(causes.find_causes([REDIRECT, called], FAILURE, [handed])) == 1
    # a decision that is not a branch is no test of the answer
    assert len(causes.find_causes([REDIRECT, called], FAILURE, [{**own_if, "decision": {"kind": "other"}}])) == 1


def test_a_branch_that_ran_to_its_end_before_the_frame_failed_elsewhere_is_no_cause():
    taken = decision(statement="if torch.cuda.is_available():", statement_line=18, now="line 19: `x = 1`",
                     taken_lines=[19, 19])
    assert causes.find_causes([REDIRECT, read()], FAILURE, [taken]) == []  # the frame failed at line 20
    inside = decision(statement="if torch.cuda.is_available():", statement_line=18, now="line 19: `x = 1`",
                      taken_lines=[19, 20])
    assert len(causes.find_causes([REDIRECT, read()], FAILURE, [inside])) == 1
    # handed to the caller: the branch is not in this frame, so it stays a cause
    through = decision(taken_lines=[19, 19], through={"line": 5}, statement="if x:", statement_line=18, now="line 19: `x`")
    assert len(causes.find_causes([REDIRECT, read()], FAILURE, [through])) == 1
    # a frame without a line, or a decision without the lines: not known, so it stays a cause
    lineless = {**FAILURE, "traceback": [at("stack/__init__.py", 5, "<module>"), at("stack/guard.py", None, "_check"),
                                         TORCH_FRAME]}
    assert len(causes.find_causes([REDIRECT, read()], lineless, [taken])) == 1


def test_only_the_reads_that_decided_the_deepest_frame_are_kept():
    outer = read(seq=3, where=at("stack/__init__.py", 4, "<module>"))
    found = causes.find_causes([REDIRECT, read(), outer], FAILURE)
    assert [c["read"] for c in found] == [2]


def test_only_reads_in_the_failed_step_count_and_without_a_step_every_read_does():
    earlier = read(step="import torch")
    assert causes.find_causes([REDIRECT, earlier], FAILURE) == []
    stepless = {k: v for k, v in FAILURE.items() if k != "step"}
    (cause,) = causes.find_causes([REDIRECT, earlier], stepless)
    assert cause["message"].startswith("the run failed: ")


def test_what_failed_is_named_by_the_failure_or_its_step():
    compile_step = {**FAILURE, "step": "exercise: torch.compile"}
    (cause,) = causes.find_causes([REDIRECT, read(step="exercise: torch.compile")], compile_step)
    assert cause["message"].startswith("torch.compile failed: AssertionError: Torch not compiled with CUDA enabled in ")
    (cause,) = causes.find_causes([REDIRECT, read()], {**FAILURE, "what": "the model's forward"})
    assert cause["message"].startswith("the model's forward failed: ")


def test_the_frames_a_chained_exception_was_raised_at_count_and_the_innermost_is_the_failures_own():
    vendor = at("stack/vendor.py", 9, "_load")
    guard_read = read(where=at("stack/vendor.py", 8, "_load"))
    chained = {**FAILURE, "causes": [{"error": "OSError: libvendor.so", "at": vendor}, {"error": "x", "at": None}]}
    (cause,) = causes.find_causes([REDIRECT, guard_read], chained)
    assert cause["frame"] == vendor
    assert " in torch/cuda/__init__.py:300 (_lazy_init); " in cause["message"]  # the failure's own last frame
    only_chained = {"error": "RuntimeError: x", "traceback": [], "step": "import stack",
                    "causes": [{"error": "OSError: libvendor.so", "at": vendor}]}
    (cause,) = causes.find_causes([REDIRECT, guard_read], only_chained)
    assert " in stack/vendor.py:9 (_load); " in cause["message"]


def test_a_failure_without_frames_has_no_cause():
    assert causes.find_causes([REDIRECT, read()], {**FAILURE, "traceback": []}) == []
    assert causes.find_causes([REDIRECT, read()], {"error": "x"}) == []


def test_an_unknown_writer_is_said_so():
    unknown = {**REDIRECT, "writer_known": False, "where": {"file": None, "line": None, "function": None}}
    (cause,) = causes.find_causes([unknown, read()], FAILURE)
    assert cause["writer"] is None and cause["write"] == 1
    assert "which an unknown writer redirected to answer True" in cause["message"]
    # a write known to no file reads the same
    fileless = {**REDIRECT, "where": {"file": None, "line": None, "function": None}}
    assert "which an unknown writer redirected" in causes.find_causes([fileless, read()], FAILURE)[0]["message"]


def test_a_read_of_a_write_not_recorded_names_no_writer():
    (cause,) = causes.find_causes([read(saw=7)], FAILURE)
    assert (cause["write"], cause["writer"], cause["events"]) == (None, None, [2])
    assert "which an unknown writer redirected" in cause["message"]
    assert cause["fix"].startswith("read the saved original, or leave torch.cuda.is_available answering the native "
                                   "question: stack cannot know of the redirect")


def test_the_fix_depends_on_whose_code_read_and_on_a_saved_original():
    saved = {"seq": 0, "kind": "write", "probe": "torch.cuda._stack_native", "saves": PROBE,
             "where": at("stack/compat.py", 9, "_redirect"), "writer_known": True}
    (cause,) = causes.find_causes([saved, REDIRECT, read()], FAILURE)
    assert cause["fix"] == f"read the saved original torch.cuda._stack_native there, or leave {PROBE} as it was"
    lib_frame = at("lib/probe.py", 3, "check")
    lib = {**FAILURE, "traceback": [lib_frame, TORCH_FRAME]}
    lib_read = read(where=at("lib/probe.py", 2, "check"))
    (cause,) = causes.find_causes([saved, REDIRECT, lib_read], lib)
    assert cause["fix"] == (f"read the saved original, or leave {PROBE} answering the native question: lib cannot know "
                            "of the redirect (the stack's own code can read the saved original torch.cuda._stack_native)")
    (cause,) = causes.find_causes([REDIRECT, lib_read], lib)
    assert cause["fix"].endswith("lib cannot know of the redirect")


TRITON_READ = dict(where=at("triton/backends/nvidia/driver.py", 50, "CudaDriver.is_active"),
                   callers=[at("triton/runtime/driver.py", 8, "_create_driver")])
TRITON_FAILURE = {"error": "RuntimeError: 0 active drivers", "step": "exercise: torch.compile",
                  "traceback": [at("triton/runtime/driver.py", 8, "_create_driver"), at("triton/x.py", 2, "libcuda_dirs")]}


def driver(seq=3, nvidia=True, active=("nvidia",), step="exercise: torch.compile"):
    return {"seq": seq, "kind": "read", "probe": "triton.runtime.driver.active", "step": step, "creates_driver": True,
            "is_active": {"nvidia": nvidia, "amd": False}, "active_backends": list(active)}


def test_a_triton_backend_that_answered_yes_and_was_chosen_is_said_so():
    events = [REDIRECT, driver(), read(seq=4, step="exercise: torch.compile", **TRITON_READ)]
    (cause,) = causes.find_causes(events, TRITON_FAILURE)
    assert cause["branch"] == "Triton's nvidia backend answered is_active() True, and Triton chose its nvidia driver"
    assert cause["how"] == "decided-call" and cause["events"] == [1, 3, 4]


def test_a_triton_backend_that_was_not_the_one_chosen_is_said_without_the_choice():
    events = [REDIRECT, driver(active=("nvidia", "amd")), read(seq=4, step="exercise: torch.compile", **TRITON_READ)]
    (cause,) = causes.find_causes(events, TRITON_FAILURE)
    assert cause["branch"] == "Triton's nvidia backend answered is_active() True"


def test_a_triton_backend_that_said_no_in_the_end_is_no_cause():
    events = [REDIRECT, driver(nvidia=False, active=()), read(seq=4, step="exercise: torch.compile", **TRITON_READ)]
    assert causes.find_causes(events, TRITON_FAILURE) == []


def test_the_driver_a_backend_read_belongs_to_is_the_last_one_before_it_in_its_step():
    later = driver(seq=9, nvidia=False)  # after the read: not its driver
    other_step = driver(seq=0, nvidia=False, step="import torch")
    events = [other_step, REDIRECT, driver(), read(seq=4, step="exercise: torch.compile", **TRITON_READ), later]
    (cause,) = causes.find_causes(events, TRITON_FAILURE)
    assert cause["events"] == [1, 3, 4]
    # no driver creation before it: the read stands alone
    (cause,) = causes.find_causes([REDIRECT, read(seq=4, step="exercise: torch.compile", **TRITON_READ)], TRITON_FAILURE)
    assert cause["events"] == [1, 4] and cause["branch"] == "Triton's nvidia backend answered is_active() True"


def test_a_triton_file_that_is_not_a_backends_is_active_is_plain_code():
    plain = read(seq=4, step="exercise: torch.compile", where=at("triton/backends/nvidia/driver.py", 50, "helper"),
                 callers=[at("triton/runtime/driver.py", 8, "_create_driver")])
    (cause,) = causes.find_causes([REDIRECT, driver(nvidia=False), plain], TRITON_FAILURE)
    assert cause["branch"] == "took the CUDA branch"


def test_the_branch_taken_is_said_from_the_decision_else_in_general_words():
    skipped = decision(statement="if not torch.cuda.is_available():", statement_line=18,
                       now="no branch: it goes on past the if")
    (cause,) = causes.find_causes([REDIRECT, read()], FAILURE, [skipped])
    assert cause["branch"] == "went on past `if not torch.cuda.is_available():` (line 18)"
    into = decision(statement="if torch.cuda.is_available():", statement_line=18, now="line 19: `x = 1`")
    (cause,) = causes.find_causes([REDIRECT, read()], FAILURE, [into])
    assert cause["branch"] == "took the branch of `if torch.cuda.is_available():` (line 18) into line 19: `x = 1`"
    unevaluated = {**into, "decision": {"kind": "branch", "now": None}}
    assert causes.find_causes([REDIRECT, read()], FAILURE, [unevaluated])[0]["branch"] == "took the CUDA branch"
    # a question other than is_available, or an answer other than True: general words
    count = read(probe="torch.cuda.device_count", answer="1", original="0")
    assert causes.find_causes([REDIRECT, count], FAILURE)[0]["branch"] == "took the branch that answer leads to"
    no = read(answer="False", original="True")
    assert causes.find_causes([REDIRECT, no], FAILURE)[0]["branch"] == "took the branch that answer leads to"


def test_a_decision_of_another_line_never_says_this_reads_branch_or_lines():
    elsewhere = decision(at("stack/guard.py", 30, "_check"), statement="if other():", statement_line=30,
                         now="line 31: `y = 2`", taken_lines=[31, 31])
    own = decision(statement="if torch.cuda.is_available():", statement_line=18, now="line 19: `x = 1`",
                   taken_lines=[19, 20])
    (cause,) = causes.find_causes([REDIRECT, read()], FAILURE, [elsewhere, own])  # the frame failed at line 20
    assert cause["branch"] == "took the branch of `if torch.cuda.is_available():` (line 18) into line 19: `x = 1`"


def test_only_is_available_answering_true_is_the_cuda_branch_and_is_active_only_in_a_triton_backend():
    other_question = read(probe="torch.cuda.is_bf16_supported")
    assert causes.find_causes([REDIRECT, other_question], FAILURE)[0]["branch"] == "took the branch that answer leads to"
    own_is_active = read(where=at("stack/guard.py", 18, "is_active"))
    (cause,) = causes.find_causes([REDIRECT, own_is_active], {**FAILURE, "traceback": [at("stack/guard.py", 20, "is_active")]})
    assert cause["branch"] == "took the CUDA branch"


def test_a_driver_created_in_an_earlier_step_is_not_this_reads():
    earlier = driver(seq=0, step="import torch")  # nvidia active there
    (cause,) = causes.find_causes([earlier, REDIRECT, read(seq=4, step="exercise: torch.compile", **TRITON_READ)],
                                  TRITON_FAILURE)
    assert cause["events"] == [1, 4] and cause["branch"] == "Triton's nvidia backend answered is_active() True"


def test_a_long_error_is_cut_to_its_first_line_of_200_characters():
    long = {**FAILURE, "error": "E" * 250}
    (cause,) = causes.find_causes([REDIRECT, read()], long)
    assert f"failed: {'E' * 197}... in " in cause["message"]
    (cause,) = causes.find_causes([REDIRECT, read()], {**FAILURE, "error": "E" * 200})
    assert f"failed: {'E' * 200} in " in cause["message"]
    (cause,) = causes.find_causes([REDIRECT, read()], {**FAILURE, "error": None})
    assert "failed:  in torch/cuda" in cause["message"]


def test_a_frame_without_a_file_is_an_unknown_place():
    fileless = {**FAILURE, "traceback": [at("stack/__init__.py", 5, "<module>"), GUARD_FRAME, {"line": 3}]}
    (cause,) = causes.find_causes([REDIRECT, read()], fileless)
    assert " in an unknown place; " in cause["message"]


#: A guard that read the redirected probe and skipped code writing torch.device; the failure
#: later uses torch.device (the seed: the cuda alias never installed).
SKIPPED = {"lines": [19, 25], "ended_by": "return",
           "writes": [{"name": "torch.device", "line": 24, "stock": {"file": "torch/_device.py", "function": "device"}}]}
CHAIN_DECISION = decision(statement="if torch.cuda.is_available():", statement_line=18,
                          now="line 19: `return`", skipped=SKIPPED)
LATE = {"error": "RuntimeError: Expected one of cpu, cuda device type", "step": "exercise: run",
        "traceback": [at("user/run.py", 3, "main", "x = torch.device('cuda')")]}


def test_a_guard_that_skipped_an_install_the_failure_then_needed_is_a_chain_root_first():
    events = [REDIRECT, read()]
    (cause,) = causes.find_causes(events, LATE, [CHAIN_DECISION])
    assert cause["how"] == "skipped-write" and cause["events"] == [1, 2]
    assert [step["step"] for step in cause["chain"]] == ["redirect", "guard", "skipped", "symptom"]
    assert cause["chain"][2] == {"step": "skipped", "lines": [19, 25], "writes": ["torch.device"]}
    assert cause["chain"][3]["uses"] == "torch.device"
    assert cause["message"] == (
        "run failed: RuntimeError: Expected one of cpu, cuda device type; a chain of causes, root first: "
        "(1) stack/compat.py:10 (_redirect) redirected torch.cuda.is_available to answer True (the original answers "
        "False); (2) stack/guard.py:18 (_check) read it, and took the branch of `if torch.cuda.is_available():` "
        "(line 18) and returned (line 19: `return`); (3) so lines 19-25 never ran, which would have written "
        "torch.device (line 24); (4) user/run.py:3 (main) used torch.device (`x = torch.device('cuda')`), which "
        "that code would have replaced; save the original before redirecting torch.cuda.is_available, and read "
        "that there.")


def test_a_chain_needs_a_skipped_write_differing_answers_a_use_and_the_read():
    events = [REDIRECT, read()]
    same = {**CHAIN_DECISION, "replaced_answer": {"ok": True, "repr": "False"}}
    assert causes.find_chains(events, LATE, [same]) == []
    nothing_skipped = {**CHAIN_DECISION, "decision": {**CHAIN_DECISION["decision"], "skipped": {"lines": [19, 25], "writes": []}}}
    assert causes.find_chains(events, LATE, [nothing_skipped]) == []
    not_a_branch = {**CHAIN_DECISION, "decision": {**CHAIN_DECISION["decision"], "kind": "triton-driver"}}
    assert causes.find_chains(events, LATE, [not_a_branch]) == []
    unused = {**LATE, "traceback": [at("user/run.py", 3, "main", "x = torch.zeros(1)")]}
    assert causes.find_chains(events, unused, [CHAIN_DECISION]) == []
    assert causes.find_chains([REDIRECT], LATE, [CHAIN_DECISION]) == []  # the read is not among the events
    assert causes.find_chains([REDIRECT, read(saw=5)], LATE, [CHAIN_DECISION]) == []
    assert causes.find_chains(events, {**LATE, "traceback": []}, [CHAIN_DECISION]) == []
    assert causes.find_chains(events, LATE, None) == []


def test_a_frame_running_the_stock_function_is_a_use_and_a_method_is_matched_as_a_call():
    stock = {**LATE, "traceback": [at("user/run.py", 3, "main", "go()"), at("torch/_device.py", 7, "device")]}
    (cause,) = causes.find_chains([REDIRECT, read()], stock, [CHAIN_DECISION])
    assert cause["chain"][3]["how"] == "ran stock torch.device" and cause["frame"] == at("torch/_device.py", 7, "device")
    method = {"name": "torch.Tensor.cuda", "line": 22, "method": True}
    with_method = {**CHAIN_DECISION, "decision": {**CHAIN_DECISION["decision"], "skipped": {**SKIPPED, "writes": [method]}}}
    call = {**LATE, "traceback": [at("user/run.py", 3, "main", "y = x.cuda()")]}
    (cause,) = causes.find_chains([REDIRECT, read()], call, [with_method])
    assert cause["chain"][3]["how"] == "used torch.Tensor.cuda (`y = x.cuda()`)"
    named_only = {**LATE, "traceback": [at("user/run.py", 3, "main", "f = Tensor.cuda")]}
    assert causes.find_chains([REDIRECT, read()], named_only, [with_method]) == []


def test_a_function_of_the_stock_name_in_another_file_is_no_use():
    namesake = {**LATE, "traceback": [at("user/run.py", 3, "main", "go()"), at("user/mine.py", 7, "device")]}
    assert causes.find_chains([REDIRECT, read()], namesake, [CHAIN_DECISION]) == []


def test_the_innermost_frame_that_used_a_skipped_write_is_the_symptom():
    two = {**LATE, "traceback": [at("user/run.py", 3, "main", "torch.device('cuda')"),
                                 at("user/lib.py", 9, "make", "return torch.device(kind)")]}
    (cause,) = causes.find_chains([REDIRECT, read()], two, [CHAIN_DECISION])
    assert cause["frame"] == at("user/lib.py", 9, "make")


def test_a_guard_that_hands_its_answer_to_its_caller_is_said_so_in_the_chain():
    handed = {**CHAIN_DECISION, "decision": {**CHAIN_DECISION["decision"], "through": {"line": 40},
                                             "now": "line 19: `x = 1`"}}
    (cause,) = causes.find_chains([REDIRECT, read()], LATE, [handed])
    assert "(2) stack/guard.py:18 (_check) read it and handed the answer to its caller, which took the branch of " \
           "`if torch.cuda.is_available():` (line 18) into line 19: `x = 1`; " in cause["message"]


def test_a_chained_exceptions_frames_can_be_the_symptom_and_an_unknown_writer_is_said_so():
    unknown = {**REDIRECT, "writer_known": False}
    deep = {**LATE, "traceback": [], "causes": [{"error": "x", "at": at("user/run.py", 3, "main", "torch.device('cuda')")}]}
    (cause,) = causes.find_chains([unknown, read()], deep, [CHAIN_DECISION])
    assert cause["message"].startswith("run failed: RuntimeError: Expected one of cpu, cuda device type; a chain of "
                                       "causes, root first: (1) an unknown writer redirected ")
    assert cause["writer"] is None and cause["chain"][0]["where"] is None


def test_no_cause_is_one_plain_sentence():
    assert causes.no_cause({}) == ("No cause found among the probe's records: no frame of its traceback read a "
                                   "redirected probe whose original answers differently.")


def test_a_chain_whose_redirect_was_not_recorded_names_no_writer():
    # explain keeps at most 5,000 events of a kind per process: the write a read saw can be gone
    (cause,) = causes.find_chains([read()], LATE, [CHAIN_DECISION])
    assert cause["write"] is None and cause["writer"] is None and cause["events"] == [2]
    assert cause["chain"][0] == {"step": "redirect", "event": None, "where": None, "answer": "True",
                                 "original_answer": "False"}
    assert "root first: (1) an unknown writer redirected torch.cuda.is_available" in cause["message"]


def test_the_guards_read_is_the_one_at_the_decisions_line():
    elsewhere = read(seq=2, where=at("stack/guard.py", 30, "_check"))
    (cause,) = causes.find_chains([REDIRECT, elsewhere, read(seq=3)], LATE, [CHAIN_DECISION])
    assert cause["read"] == 3 and cause["events"] == [1, 3]


def test_a_frame_on_the_first_line_of_the_branch_taken_is_inside_it():
    first = decision(statement="if torch.cuda.is_available():", statement_line=18, now="line 20: `x = 1`",
                     taken_lines=[20, 25])
    assert len(causes.find_causes([REDIRECT, read()], FAILURE, [first])) == 1  # the frame failed at line 20


def test_a_use_is_found_by_the_last_two_parts_of_the_name_and_its_line_cut_at_120_characters():
    current = {"name": "torch.cuda.current_device", "line": 23}
    by_current = {**CHAIN_DECISION, "decision": {**CHAIN_DECISION["decision"], "skipped": {**SKIPPED, "writes": [current]}}}
    code = "index = cuda.current_device()  # " + "x" * 150
    (cause,) = causes.find_chains([REDIRECT, read()], {**LATE, "traceback": [at("user/run.py", 3, "main", code)]},
                                  [by_current])
    assert cause["chain"][3]["how"] == f"used torch.cuda.current_device (`{code[:120]}`)"


#: The device made elsewhere (a module constant): the failing line names no cuda, and torch's
#: CUDA initialisation is called from it (from C++, so it is the next frame on the traceback).
CUDA_INIT = at("torch/cuda/__init__.py", 522, "_lazy_init", 'raise AssertionError("Torch not compiled with CUDA enabled")')
MADE_ELSEWHERE = {"error": "AssertionError: Torch not compiled with CUDA enabled", "step": "exercise: run",
                  "traceback": [at("user/run.py", 9, "<module>", "main()"), at("user/run.py", 5, "main", "return y.to(DEVICE)"),
                                CUDA_INIT]}
ALIAS_SKIPPED = {"lines": [19, 25], "ended_by": "return",
                 "writes": [{"name": "torch.cuda.current_device", "line": 21},
                            {"name": "torch.Tensor.cuda", "line": 22, "method": True}, {"name": "torch.device", "line": 24}]}
ALIAS_DECISION = {**CHAIN_DECISION, "decision": {**CHAIN_DECISION["decision"], "skipped": ALIAS_SKIPPED}}


def test_a_tensor_operation_reaching_cuda_init_where_the_alias_was_skipped_is_a_chain_whatever_made_the_device():
    (cause,) = causes.find_chains([REDIRECT, read()], MADE_ELSEWHERE, [ALIAS_DECISION])
    symptom = cause["chain"][3]
    assert symptom == {"step": "symptom", "frame": at("user/run.py", 5, "main"), "uses": "torch.device",
                       "how": "gave a tensor operation a cuda device (`return y.to(DEVICE)`), which reached torch's CUDA "
                              "initialisation (torch/cuda/__init__.py:522 (_lazy_init))"}
    assert cause["message"].endswith(
        "(4) user/run.py:5 (main) gave a tensor operation a cuda device (`return y.to(DEVICE)`), which reached torch's "
        "CUDA initialisation (torch/cuda/__init__.py:522 (_lazy_init)), where the skipped alias (torch.device) would "
        "have sent cuda to the stack's device; save the original before redirecting torch.cuda.is_available, and read "
        "that there.")
    # Only Tensor.cuda skipped: it is the alias named; a caller frame without code says none.
    cuda_only = {**ALIAS_DECISION, "decision": {**ALIAS_DECISION["decision"],
                                                "skipped": {**ALIAS_SKIPPED, "writes": ALIAS_SKIPPED["writes"][:2]}}}
    codeless = {**MADE_ELSEWHERE, "traceback": [at("user/run.py", 5, "main"), CUDA_INIT]}
    (cause,) = causes.find_chains([REDIRECT, read()], codeless, [cuda_only])
    assert cause["chain"][3]["uses"] == "torch.Tensor.cuda"
    assert cause["chain"][3]["how"].startswith("gave a tensor operation a cuda device, which reached")
    # The innermost CUDA initialisation decides (a chained one under an outer one).
    twice = {**MADE_ELSEWHERE, "traceback": [at("user/a.py", 1, "f", "run(x)"), CUDA_INIT,
                                             at("user/b.py", 2, "g", "y.to(DEV)"), CUDA_INIT]}
    (cause,) = causes.find_chains([REDIRECT, read()], twice, [ALIAS_DECISION])
    assert cause["frame"] == at("user/b.py", 2, "g")
    # The initialisation raising in a function it calls (one frame under it, or two): found
    # all the same; the caller's code is shown to 120 characters.
    long_line = "y = model(inputs).to(DEVICE)  # " + "x" * 200
    for under in ([at("torch/cuda/__init__.py", 540, "_check_capability")],
                  [at("torch/cuda/__init__.py", 540, "_check_capability"), at("torch/cuda/__init__.py", 560, "_check")]):
        deeper = {**MADE_ELSEWHERE, "traceback": [at("user/run.py", 9, "<module>", "main()"),
                                                  at("user/run.py", 5, "main", long_line), CUDA_INIT, *under]}
        (cause,) = causes.find_chains([REDIRECT, read()], deeper, [ALIAS_DECISION])
        assert cause["chain"][3]["frame"] == at("user/run.py", 5, "main")
        assert f"(`{long_line[:120]}`)" in cause["chain"][3]["how"]


def test_the_alias_symptom_needs_an_is_available_guard_without_cuda_a_skipped_alias_and_init_from_outside_torch_cuda():
    events = [REDIRECT, read()]
    assert len(causes.find_chains(events, MADE_ELSEWHERE, [ALIAS_DECISION])) == 1
    # A real CUDA runtime (the original answers True): cuda was never the alias's to redirect.
    native = {**ALIAS_DECISION, "original_answer": {"ok": True, "repr": "True"}, "replaced_answer": {"ok": True, "repr": "False"}}
    assert causes.find_chains(events, MADE_ELSEWHERE, [native]) == []
    # Another probe's guard.
    other = {**ALIAS_DECISION, "probe": "torch.cuda.device_count"}
    assert causes.find_chains([REDIRECT, read(probe="torch.cuda.device_count")], MADE_ELSEWHERE, [other]) == []
    # Skipped code that writes no alias (torch.cuda.current_device alone).
    no_alias = {**ALIAS_DECISION, "decision": {**ALIAS_DECISION["decision"],
                                               "skipped": {**ALIAS_SKIPPED, "writes": ALIAS_SKIPPED["writes"][:1]}}}
    assert causes.find_chains(events, MADE_ELSEWHERE, [no_alias]) == []
    # torch.cuda's own call reached the initialisation (torch.cuda.init(), a Stream): no alias redirects it.
    from_cuda = {**MADE_ELSEWHERE, "traceback": [at("user/run.py", 5, "main", "torch.cuda.init()"),
                                                 at("torch/cuda/__init__.py", 330, "init", "_lazy_init()"), CUDA_INIT]}
    assert causes.find_chains(events, from_cuda, [ALIAS_DECISION]) == []
    # No CUDA initialisation on the path (a shape error, a plain assertion), or one alone on it.
    shape = {**MADE_ELSEWHERE, "error": "RuntimeError: mat1 and mat2 shapes cannot be multiplied",
             "traceback": [at("user/run.py", 5, "main", "return a @ b")]}
    assert causes.find_chains(events, shape, [ALIAS_DECISION]) == []
    assert causes.find_chains(events, {**MADE_ELSEWHERE, "traceback": [CUDA_INIT]}, [ALIAS_DECISION]) == []
    # A _lazy_init of another file (another package's), or another torch.cuda function.
    elsewhere = at("user/cuda/__init__.py", 5, "_lazy_init")
    assert causes.find_chains(events, {**MADE_ELSEWHERE, "traceback": MADE_ELSEWHERE["traceback"][:2] + [elsewhere]},
                              [ALIAS_DECISION]) == []
    other_function = at("torch/cuda/__init__.py", 600, "current_stream")
    assert causes.find_chains(events, {**MADE_ELSEWHERE, "traceback": MADE_ELSEWHERE["traceback"][:2] + [other_function]},
                              [ALIAS_DECISION]) == []
    # A chained exception's frame alone (its caller unknown) is not the traceback proper.
    chained = {**MADE_ELSEWHERE, "traceback": MADE_ELSEWHERE["traceback"][:2],
               "causes": [{"error": "AssertionError: Torch not compiled with CUDA enabled", "at": CUDA_INIT}]}
    assert causes.find_chains(events, chained, [ALIAS_DECISION]) == []
    # A Windows path is read as the same file.
    windows = {**MADE_ELSEWHERE, "traceback": MADE_ELSEWHERE["traceback"][:2] + [at("torch\\cuda\\__init__.py", 522, "_lazy_init")]}
    assert len(causes.find_chains(events, windows, [ALIAS_DECISION])) == 1
