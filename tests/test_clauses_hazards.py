"""Each promise of flagos_doctor/probe/hazards.py's docstrings (latent-hazard, no-device,
vendor-branch, and the folds that say a finding once), one test each, on probe documents
written out here in the shapes the probe records. The real runs (latentstack, the real
torch_fl on CPU and on the H200, flag_gems) are in tests/golden/judged, surveys/h200 and
tests/test_probe_hazards.py; scripts/mutation runs these first."""

from __future__ import annotations

from flagos_doctor.probe import hazards
from flagos_doctor.probe.finding import Run
from flagos_doctor.probe.findings import judge

PROBE = "torch.cuda.is_available"
WRITE = {"seq": 3, "kind": "write", "probe": PROBE, "where": {"file": "stack/shim.py", "line": 12, "function": "_shim"},
         "writer_known": True, "value": {"repr": "<function stack.shim.answer>", "defined_at": "stack/shim.py:5"}}


def read(seq, line, file="stack/guard.py", function="_guard", saw=3):
    return {"seq": seq, "kind": "read", "probe": PROBE, "saw": saw, "where": {"file": file, "line": line, "function": function}}


def entry(line, file="stack/guard.py", same=True, **decision):
    original = {"ok": True, "repr": "False"}
    return {"probe": PROBE, "file": file, "line": line, "saw": 3, "original_answer": original,
            "replaced_answer": original if same else {"ok": True, "repr": "True"}, "decision": decision}


BRANCH = dict(kind="branch", answer=False, evaluated=True, statement="if torch.cuda.is_available():",
              statement_line=20, now="line 23: `return None`", other="line 21: `return 'cuda'`")


def latent(decisions, events=(WRITE,), saved=()):
    return hazards.latent_hazards(Run({"events": list(events), "saved_originals": list(saved),
                                       "facts": {"decisions": decisions}}))


def test_a_replaced_probe_read_where_both_answers_agree_is_a_latent_hazard_saying_what_the_other_answer_decides():
    (found,) = latent([entry(20, **BRANCH)], events=[WRITE, read(4, 20)])
    assert found == {
        "kind": "latent-hazard", "severity": "warning", "probe": PROBE, "events": [3, 4],
        "message": "stack/guard.py:_guard (line 20) read torch.cuda.is_available after stack/shim.py:_shim (line 12) had "
                   "replaced it (with stack/shim.py:5). Here the replacement and the original both answer False, so the "
                   "read decides as the original would; had it answered True, `if torch.cuda.is_available():` (line 20) "
                   "would take line 21: `return 'cuda'`; with False it takes line 23: `return None`. Nothing keeps the "
                   "original: save it before replacing it, and read that."}


def test_answers_that_differ_here_are_left_to_the_stale_guard_and_triton_rules():
    assert latent([entry(20, same=False, **BRANCH)], events=[WRITE, read(4, 20)]) == []


def test_a_saved_original_is_named_and_its_write_is_evidence():
    keep = {"probe": "torch.cuda._native", "saves": PROBE, "seq": 2, "read": False}
    (found,) = latent([entry(20, **BRANCH)], events=[WRITE, read(4, 20)], saved=[keep])
    assert found["message"].endswith(" The original is saved as torch.cuda._native (#2): read that instead.")
    assert found["events"] == [2, 3, 4]


def test_each_reading_line_is_its_own_hazard_but_triton_reads_of_one_driver_are_one():
    two = latent([entry(20, **BRANCH), entry(30, **BRANCH)], events=[WRITE, read(4, 20), read(5, 30)])
    assert [f["events"] for f in two] == [[3, 4], [3, 5]]
    triton = dict(kind="triton-driver", evaluated=True, answer=True, is_active={"nvidia": True, "amd": False},
                  active_backends=["nvidia"])
    nvidia = entry(50, file="triton/backends/nvidia/driver.py", **triton)
    amd = entry(60, file="triton/backends/amd/driver.py", **triton)
    (found,) = latent([nvidia, amd])
    # no read event at those lines: the readers are named from the decisions
    assert found["message"].startswith("triton/backends/nvidia/driver.py line 50, triton/backends/amd/driver.py "
                                       "line 60 read torch.cuda.is_available after ")
    assert "had it answered True, Triton's backends would answer is_active() nvidia: True, amd: False: Triton would " \
           "create the nvidia backend's driver (evaluated here with the probe answering the other way)." in found["message"]


def test_reads_of_another_write_or_another_line_are_not_this_hazards_readers():
    events = [WRITE, read(4, 20), read(5, 20, saw=9), read(6, 21)]
    (found,) = latent([entry(20, **BRANCH)], events=events)
    assert found["events"] == [3, 4]


def test_an_unknown_writer_and_a_value_without_a_definition_are_said_plainly():
    unknown = {**WRITE, "where": {"file": None, "line": None, "function": None}, "value": {"repr": "<lambda>"}}
    (found,) = latent([entry(20, **BRANCH)], events=[unknown, read(4, 20)])
    assert " after an unknown writer (line None) had replaced it (with <lambda>). " in found["message"]
    (found,) = latent([entry(20, **BRANCH)], events=[read(4, 20)])  # the write is not among the events
    assert " after an unknown writer (line None) had replaced it (with None). " in found["message"]


def test_what_both_answer_is_said_even_when_it_raises_or_is_missing():
    raising = entry(20, **BRANCH)
    raising["original_answer"] = raising["replaced_answer"] = {"ok": False, "repr": "RuntimeError: no driver"}
    (found,) = latent([raising], events=[WRITE, read(4, 20)])
    assert "both answer raises RuntimeError: no driver, so" in found["message"]
    missing = entry(20, **BRANCH)
    missing["original_answer"] = missing["replaced_answer"] = {}
    (found,) = latent([missing], events=[WRITE, read(4, 20)])
    assert "both answer ?, so" in found["message"]


def test_the_other_answer_when_this_one_alone_does_not_decide_names_the_rest_of_the_test():
    undecided = dict(BRANCH, now=None, statement="if torch.cuda.is_available() and get_capability() >= (9, 0):")
    (found,) = latent([entry(20, **undecided)], events=[WRITE, read(4, 20)])
    assert found["message"].split("decides as the original would; ")[1].startswith(
        "had it answered True, `if torch.cuda.is_available() and get_capability() >= (9, 0):` (line 20) would take "
        "line 21: `return 'cuda'`; with False this answer alone does not decide the test: `get_capability() >= (9, 0)` "
        "decides which branch it takes.")


def test_the_rest_of_a_test_is_its_other_operands_or_the_rest_of_the_test():
    rest = hazards._rest_of_test
    assert rest("if torch.cuda.is_available() and a and b():", PROBE) == "`a` and `b()`"
    assert rest("while ok or torch.cuda.is_available():", PROBE) == "`ok`"
    assert rest("... if flag and torch.cuda.is_available() else ...", PROBE) == "`flag`"
    assert rest("if torch.cuda.is_available():", PROBE) == "the rest of the test"  # not an and/or
    assert rest("if torch.cuda.is_available() and torch.cuda.is_available():", PROBE) == "the rest of the test"
    assert rest("if (:", PROBE) == "the rest of the test"
    # only a call of the probe's own name is the read
    assert rest("if is_available and x.is_available():", PROBE) == "`is_available`"
    assert rest("if torch.cuda.is_available() and torch.cuda.device_count() > 1:", PROBE) == \
        "`torch.cuda.device_count() > 1`"


def test_a_triton_read_without_one_active_backend_says_triton_would_have_no_driver():
    triton = dict(kind="triton-driver", evaluated=True, answer=False, is_active={"nvidia": False, "amd": False},
                  active_backends=[])
    (found,) = latent([entry(50, file="triton/backends/nvidia/driver.py", **triton)])
    assert "had it answered False, Triton's backends would answer is_active() nvidia: False, amd: False: Triton would " \
           "have no driver (0 backends active) (evaluated here" in found["message"]


def test_a_triton_read_whose_active_backends_were_not_recorded_counts_none():
    triton = dict(kind="triton-driver", evaluated=True, answer=False, is_active={})
    (found,) = latent([entry(50, file="triton/backends/nvidia/driver.py", **triton)])
    assert "Triton would have no driver (0 backends active)" in found["message"]


def test_what_cannot_be_evaluated_says_why_or_that_there_is_no_record():
    (found,) = latent([entry(20, kind="other", evaluated=False, why="the source cannot be read (OSError)")],
                      events=[WRITE, read(4, 20)])
    assert found["message"].endswith("decides as the original would; what the other answer would decide cannot be "
                                      "evaluated here: the source cannot be read (OSError). Nothing keeps the original: "
                                      "save it before replacing it, and read that.")
    (found,) = latent([entry(20)], events=[WRITE, read(4, 20)])
    assert "cannot be evaluated here: no record." in found["message"]
    unrecorded = {key: value for key, value in entry(20).items() if key != "decision"}
    (found,) = latent([unrecorded], events=[WRITE, read(4, 20)])
    assert "cannot be evaluated here: no record." in found["message"]
    unevaluated_triton = entry(50, file="triton/backends/nvidia/driver.py", kind="triton-driver", evaluated=False,
                               why="no backend to ask")
    (found,) = latent([unevaluated_triton])
    assert "cannot be evaluated here: no backend to ask." in found["message"]


def facts(**more):
    return {"privateuse1": "flagos", "device_count": {"ok": True, "repr": "0"}, **more}


RENAME = {"seq": 1, "kind": "write", "probe": "PrivateUse1 backend name", "where": {}}


def test_a_registered_device_with_none_is_one_error_naming_why():
    vendor = {"build_accelerator": {"ok": True, "repr": "'musa'"}, "libcuda": {"ok": True, "repr": "False"},
              "is_nvidia_cuda_available": {"ok": True, "repr": "False"}}
    (found,) = hazards.no_device(Run({"facts": facts(torch_fl=vendor), "events": [RENAME, {**RENAME, "seq": 2}]}))
    assert found == {"kind": "no-device", "severity": "error", "probe": "torch.flagos", "events": [1],
                     "message": "The 'flagos' device is registered, but torch.flagos.device_count() answers 0: this "
                                "machine has no flagos device (torch_fl was built for ACCELERATOR=musa; no CUDA driver "
                                "(libcuda) can be loaded)."}
    no_gpu = {"libcuda": {"ok": True, "repr": "True"}, "is_nvidia_cuda_available": {"ok": True, "repr": "False"}}
    (found,) = hazards.no_device(Run({"facts": facts(torch_fl=no_gpu)}))
    assert found["message"].endswith("has no flagos device (the CUDA driver finds no NVIDIA GPU).")
    (found,) = hazards.no_device(Run({"facts": facts()}))
    assert found["message"].endswith("has no flagos device.") and found["events"] == []
    gpu = {"libcuda": {"ok": True, "repr": "True"}, "is_nvidia_cuda_available": {"ok": True, "repr": "True"}}
    (found,) = hazards.no_device(Run({"facts": facts(torch_fl=gpu)}))  # CUDA works: no reason of its own
    assert found["message"].endswith("has no flagos device.")


def test_a_device_count_that_is_not_zero_or_not_known_or_no_device_registered_is_no_finding():
    assert hazards.no_device(Run({"facts": facts(device_count={"ok": True, "repr": "1"})})) == []
    assert hazards.no_device(Run({"facts": facts(device_count={"ok": False, "repr": "0"})})) == []
    assert hazards.no_device(Run({"facts": facts(privateuse1="privateuseone")})) == []
    assert hazards.no_device(Run({"facts": facts(privateuse1=None)})) == []
    # a device module without device_count(): nothing recorded, nothing said
    assert hazards.no_device(Run({"facts": {"privateuse1": "flagos"}})) == []


def test_a_latent_hazard_whose_read_a_stale_guard_names_is_said_once_there():
    stale = {"kind": "stale-guard", "events": [3, 4]}
    covered = {"kind": "latent-hazard", "events": [3, 4]}
    other = {"kind": "latent-hazard", "events": [3, 5]}
    write_only = {"kind": "latent-hazard", "events": [4, 9]}  # only its read seqs (after the write) count
    assert hazards.drop_covered_hazards([stale, covered, other, write_only]) == [stale, other, write_only]


DRIVER = {"seq": 7, "kind": "read", "probe": "triton.runtime.driver.active", "creates_driver": True,
          "where": {"file": "triton/runtime/driver.py", "line": 8, "function": "_create_driver"},
          "is_active": {"nvidia": False, "amd": False}, "raised": "RuntimeError: 0 active drivers ([]). There should only be one."}


def test_the_failures_a_missing_device_explains_are_listed_in_it_not_found_again():
    device = {"kind": "no-device", "severity": "error", "events": [1], "message": "No device."}
    failed = {"kind": "exercise-failed", "events": [], "message": "torch.ones failed: RuntimeError: x."}
    driver = {"kind": "triton-driver", "events": [7], "message": "... and 0 Triton backends answered is_active()"}
    # only a triton-driver finding that no backend would create is a consequence
    other_driver = {"kind": "triton-driver", "events": [7], "message": "... and 2 Triton backends answered"}
    stale = {"kind": "stale-guard", "events": [7], "message": "it read ... 0 Triton backends ..."}
    kept = hazards.fold_into_no_device([device, failed, driver, other_driver, stale], {"events": [DRIVER]})
    assert kept == [device, other_driver, stale]
    assert device["events"] == [1, 7]
    assert device["message"] == (
        "No device. Because of it: torch.ones failed: RuntimeError: x; Triton has no driver (triton/runtime/driver.py:"
        "_create_driver line 8 created it; no backend is active: nvidia: False, amd: False; creating it raised "
        "RuntimeError: 0 active drivers ([]). There should only be one.). Nothing can run on this device here: survey "
        "on a machine that has one.")


def test_a_driver_finding_without_its_event_stays_and_no_consequence_says_none():
    device = {"kind": "no-device", "events": [1], "message": "No device."}
    lost = {"kind": "triton-driver", "events": [7], "message": "0 Triton backends"}
    bare = {"kind": "triton-driver", "events": [], "message": "0 Triton backends"}
    quiet = {**DRIVER, "raised": None}
    assert hazards.fold_into_no_device([device, lost, bare], {"events": []}) == [device, lost, bare]
    assert device["message"] == "No device. Nothing can run on this device here: survey on a machine that has one."
    device["message"] = "No device."
    hazards.fold_into_no_device([device, lost], {"events": [quiet]})
    assert device["message"].endswith("no backend is active: nvidia: False, amd: False). Nothing can run on this "
                                      "device here: survey on a machine that has one.")


def test_what_creating_the_driver_raised_is_its_first_line_cut_at_120_characters():
    device = {"kind": "no-device", "events": [1], "message": "No device."}
    driver = {"kind": "triton-driver", "events": [7], "message": "0 Triton backends"}
    long = {**DRIVER, "raised": "RuntimeError: " + "x" * 200 + "\nsecond line"}
    hazards.fold_into_no_device([device, driver], {"events": [long]})
    said = device["message"].split("creating it raised ")[1].split(")")[0]
    assert said == "RuntimeError: " + "x" * 103 + "..." and len(said) == 120


def test_without_a_missing_device_nothing_is_folded():
    found = [{"kind": "exercise-failed", "events": [], "message": "x."}]
    assert hazards.fold_into_no_device(found, {"events": []}) == found


def vendor_doc(value, nvidia=None, libcuda=None, file="torch_fl/__init__.py", env=None):
    vendor = {}
    if nvidia is not None:
        vendor["is_nvidia_cuda_available"] = {"ok": True, "repr": nvidia}
    if libcuda is not None:
        vendor["libcuda"] = {"ok": True, "repr": libcuda}
    events = [] if value is None else [{"seq": 5, "kind": "write", "probe": "$GEMS_VENDOR", "value": {"repr": repr(value)},
                                        "where": {"file": file, "line": 40, "function": "_set_vendor"}}]
    return Run({"events": events, "facts": {"torch_fl": vendor, "env": {"GEMS_VENDOR": env or {}}}})


def test_the_vendor_branch_that_set_gems_vendor_is_named_with_why():
    (found,) = hazards.vendor_branch(vendor_doc("ascend", nvidia="False", libcuda="False"))
    assert found == {"kind": "vendor-branch", "severity": "info", "probe": "$GEMS_VENDOR", "events": [5],
                     "message": "torch_fl set GEMS_VENDOR='ascend' in torch_fl/__init__.py:_set_vendor (line 40): its "
                                "Ascend fallback branch, because nothing had set GEMS_VENDOR and its NVIDIA branch found "
                                "no NVIDIA GPU (is_nvidia_cuda_available() answers False: no CUDA driver (libcuda) can "
                                "be loaded)."}
    (found,) = hazards.vendor_branch(vendor_doc("ascend", nvidia="False", libcuda="True"))
    assert found["message"].endswith("answers False: the CUDA driver sees no GPU).")
    (found,) = hazards.vendor_branch(vendor_doc("ascend", nvidia="False"))  # libcuda not recorded
    assert found["message"].endswith("answers False: the CUDA driver sees no GPU).")
    (found,) = hazards.vendor_branch(vendor_doc("ascend"))
    assert found["message"].endswith("its Ascend fallback branch.")
    (found,) = hazards.vendor_branch(vendor_doc("ascend", nvidia="True"))  # set for another reason: none given
    assert found["message"].endswith("its Ascend fallback branch.")
    (found,) = hazards.vendor_branch(vendor_doc("nvidia", nvidia="True"))
    assert found["message"].endswith("its NVIDIA CUDA branch, because its NVIDIA branch found an NVIDIA GPU "
                                     "(is_nvidia_cuda_available() answers True).")
    (found,) = hazards.vendor_branch(vendor_doc("nvidia", nvidia="False"))
    assert found["message"].endswith("its NVIDIA CUDA branch.")
    (found,) = hazards.vendor_branch(vendor_doc("metax", nvidia="True"))  # another branch: no NVIDIA reason
    assert found["message"].endswith("its MetaX branch.")
    (found,) = hazards.vendor_branch(vendor_doc("mthreads"))
    assert found["message"].endswith("its Moore Threads MUSA branch.")
    (found,) = hazards.vendor_branch(vendor_doc("newchip"))
    assert found["message"].endswith("its GEMS_VENDOR='newchip' branch.")


def test_a_gems_vendor_given_before_torch_fl_wins_and_is_said_so():
    (found,) = hazards.vendor_branch(vendor_doc(None, env={"original": "metax"}))
    assert found == {"kind": "vendor-branch", "severity": "info", "probe": "$GEMS_VENDOR", "events": [],
                     "message": "GEMS_VENDOR was 'metax' before torch_fl was imported; torch_fl's vendor branches only "
                                "set it when unset (setdefault), so the value given wins."}
    assert hazards.vendor_branch(vendor_doc(None)) == []
    assert hazards.vendor_branch(Run({"events": [], "facts": {"torch_fl": {}, "env": {}}})) == []


def test_only_torch_fls_own_writes_are_its_vendor_branch_and_only_for_torch_fl():
    assert hazards.vendor_branch(vendor_doc("nvidia", file="flag_gems/__init__.py")) == []
    deleted = vendor_doc("nvidia")
    deleted.events[0]["kind"] = "delete"
    assert hazards.vendor_branch(deleted) == []  # torch_fl removing it set no branch
    assert hazards.vendor_branch(Run({"events": vendor_doc("nvidia").events, "facts": {}})) == []
    # a write from C (setenv) has no writer and no file: not torch_fl's, and no stop
    unknown = vendor_doc("metax", file=None)
    assert hazards.vendor_branch(unknown) == []
    unknown.events.insert(0, vendor_doc("ascend").events[0])
    (found,) = hazards.vendor_branch(unknown)
    assert found["message"].startswith("torch_fl set GEMS_VENDOR='ascend'")


def test_the_hazard_rules_run_through_judge_and_their_folds_apply():
    document = {"events": [RENAME], "facts": facts(decisions=[]),
                "outcomes": [{"step": "exercise: torch.ones", "ok": False, "error": "RuntimeError: no device"}]}
    kinds = [f["kind"] for f in judge(document)]
    assert kinds == ["no-device"]  # the exercise failure is folded into it
