"""Why a failure happened (:mod:`flagos_doctor.probe.causes`), on real stacks in real children
with real torch and real Triton: the seed's libcuda failure reproduced on CPU
(``seedreplica``) and its fix, the demo's ``torch.compile`` failure through dynamo, a stale
guard that raises; and the two kinds of real writes that misled the probe (a saved original
read back through a class attribute, torch's config modules)."""

from __future__ import annotations

import importlib.util
import os

import pytest

from conftest import PROBE_COMPILE
from test_probe import STACKS, events, findings, line_of, probe
from flagos_doctor.probe import causes

DEMO = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(STACKS))), "flagos_doctor", "demo", "__init__.py")


def source_line(path: str, text: str, after: str | None = None) -> int:
    """The line of ``text`` in ``path`` (after the line holding ``after``)."""
    started = after is None
    with open(path) as handle:
        for number, line in enumerate(handle, start=1):
            started = started or (after in line)
            if started and text in line:
                return number
    raise AssertionError(f"{text!r} not in {path}")


def package_file(module: str, relative: str) -> str:
    return os.path.join(os.path.dirname(importlib.util.find_spec(module).origin), relative)


@pytest.fixture(scope="module")
def replica():
    return probe(PROBE_COMPILE, stack="seedreplica")


def test_seed_replica_fails_in_triton_libcuda_and_the_cause_names_reader_probe_writer_branch(replica):
    compiled = replica["outcomes"][-1]
    assert compiled["step"] == "exercise: torch.compile(fn, fullgraph=True)" and not compiled["ok"]
    assert "libcuda.so cannot found" in compiled["error"]
    assert compiled["traceback"][-1]["function"] == "libcuda_dirs"
    first = replica["findings"][0]
    assert first["kind"] == "failure-cause" and first["severity"] == "error"
    assert first["probe"] == "torch.cuda.is_available"
    (cause,) = findings(replica, "failure-cause")
    is_active = source_line(package_file("triton", "backends/nvidia/driver.py"), "return torch.cuda.is_available()",
                            after="class CudaDriver")
    redirect = source_line(DEMO, "torch.cuda.is_available = torch.flagos.is_available", after="def _alias_cuda_to_flagos")
    assert cause["message"].startswith("torch.compile(fn, fullgraph=True) failed: InductorError: AssertionError: "
                                       "libcuda.so cannot found! in triton/backends/nvidia/driver.py:")
    assert (f"triton/backends/nvidia/driver.py:{is_active} (CudaDriver.is_active) asked torch.cuda.is_available(), "
            f"which flagos_doctor/demo/__init__.py:{redirect} (_alias_cuda_to_flagos) redirected to answer True "
            "(the original answers False), and so Triton's nvidia backend answered is_active() True, and Triton "
            "chose its nvidia driver") in cause["message"]
    (read,) = [e for e in events(replica, "torch.cuda.is_available", "read") if e["seq"] in cause["events"]]
    assert read["by"] == "library" and read["answer"]["repr"] == "True" and read["original_answer"]["repr"] == "False"
    (failed,) = findings(replica, "exercise-failed")
    assert "Cause: see the failure-cause finding" in failed["message"]
    # The Triton driver rule is subsumed: the cause says it, once.
    assert not findings(replica, "triton-driver")


def test_torch_own_reads_are_recorded_with_their_caller(replica):
    reads = [e for e in events(replica, "torch.cuda.is_available", "read") if e["by"] == "torch"]
    dynamo = source_line(package_file("torch", "_dynamo/convert_frame.py"), "if torch.cuda.is_available():",
                         after="def preserve_global_state")
    assert any(e["where"]["file"] == "torch/_dynamo/convert_frame.py" and e["where"]["line"] == dynamo
               and e["step"] == "exercise: torch.compile(fn, fullgraph=True)" for e in reads)


def test_seed_replica_fixed_keeps_the_original_and_gets_no_false_cause():
    document = probe(PROBE_COMPILE, stack="seedreplica_fixed")
    compiled = document["outcomes"][-1]
    assert not compiled["ok"] and "0 active drivers" in compiled["error"]  # no Triton backend on CPU
    assert not findings(document, "failure-cause")
    (failed,) = findings(document, "exercise-failed")
    assert failed["message"].endswith(causes.no_cause({}))


def test_a_stale_guard_that_raises_says_so_and_is_the_import_failures_cause():
    document = probe(stack="raisestack", exercise=False)
    assert document["outcome"] == "import-failed"
    assert [f["kind"] for f in document["findings"]][:3] == ["failure-cause", "import-failed", "stale-guard"]
    (stale,) = findings(document, "stale-guard")
    assert "then it raised AssertionError: Torch not compiled with CUDA enabled, which failed import raisestack" \
        in stale["message"]
    assert "returned" not in stale["message"]
    (cause,) = findings(document, "failure-cause")
    guard = line_of("raisestack", "if torch.cuda.is_available():")
    assert (f"raisestack/__init__.py:{guard} (_check_capability) asked torch.cuda.is_available(), which "
            f"raisestack/__init__.py:{line_of('raisestack', 'torch.cuda.is_available = lambda')} (_patch_cuda_probe) "
            f"redirected to answer True") in cause["message"]
    assert f"into line {guard + 1}: `return torch.cuda.get_device_capability()`" in cause["message"]


@pytest.fixture(scope="module")
def tensornew():
    return probe(stack="tensornew", exercise=False, watch=[
        "torch.Tensor.__new__", "torch._dynamo.config.suppress_errors", "torch._inductor.config.max_autotune"])


def test_saved_original_read_back_through_a_class_attribute_is_read(tensornew):
    assert tensornew["saved_originals"][0]["probe"] == "torch.Tensor.__old_new__"
    assert tensornew["saved_originals"][0]["read"] is True
    assert not findings(tensornew, "orphan-original")
    (read,) = events(tensornew, "torch.Tensor.__old_new__", "read")
    assert read["where"]["line"] == line_of("tensornew", "torch.Tensor.__new__ = torch.Tensor.__old_new__")
    assert read["restores"] == "torch.Tensor.__new__"
    assert [f["kind"] for f in tensornew["findings"]] == ["patched-and-restored", "patched-and-restored"]


def test_config_module_writes_name_their_file_and_line(tensornew):
    (write,) = events(tensornew, "torch._dynamo.config.suppress_errors", "write")
    assert write["writer_known"] and write["where"]["file"] == "tensornew/__init__.py"
    assert write["where"]["line"] == line_of("tensornew", "torch._dynamo.config.suppress_errors = True")
    patched = events(tensornew, "torch._inductor.config.max_autotune", "write")
    assert [e["value"]["repr"] for e in patched] == ["True", "False"]
    assert {e["where"]["line"] for e in patched} == {line_of("tensornew", "with torch._inductor.config.patch")}
    assert not [n for n in tensornew["notices"] if "config" in n]


def test_the_engine_takes_a_failure_without_its_step_as_explain_gives_it(replica):
    # ``flagos-doctor explain`` hands over the events and the failure, without the probe's step.
    compiled = replica["outcomes"][-1]
    failure = {"error": compiled["error"], "type": "InductorError", "traceback": compiled["traceback"],
               "what": "python repro.py"}
    decisions = replica["facts"]["decisions"]
    (cause,) = causes.find_causes(replica["events"], failure, decisions)
    assert cause["probe"] == "torch.cuda.is_available" and cause["how"] == "decided-call"
    assert cause["reader"]["file"] == "triton/backends/nvidia/driver.py"
    frame = next(f for f in compiled["traceback"] if f["function"] == "_create_driver")
    assert frame["code"] == "return active_drivers[0]()"  # the line's text: what a cause chain reads
    assert cause["frame"] == {k: frame[k] for k in ("file", "line", "function")}
    assert cause["frame"]["file"] == "triton/runtime/driver.py"
    assert cause["writer"]["file"] == "flagos_doctor/demo/__init__.py"
    assert (cause["answer"], cause["original_answer"]) == ("True", "False")
    assert cause["message"].startswith("python repro.py failed: InductorError: AssertionError: libcuda.so cannot found!")
    # Without the read that decided it, no cause: HIP's is_active() read the same probe, but the
    # driver's creation says HIP answered no; Inductor's get_cuda_device_context read it in its
    # own `if` and returned; dynamo's preserve_global_state (on the traceback) took its `if`'s
    # branch, which ran to its end before the compile went on. The engine says so rather than guess.
    assert causes.find_causes([e for e in replica["events"] if e["seq"] != cause["read"]], failure, decisions) == []
