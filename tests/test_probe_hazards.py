"""Latent hazards on a small real stack (``tests/fixtures/probe_stacks/latentstack``): a guard
that reads the probe its own stack replaced, where both answer alike on this machine."""

from __future__ import annotations

from test_probe import findings, line_of, probe


def test_guard_reading_the_replaced_probe_is_a_latent_hazard_with_the_other_decision():
    document = probe(imports=["latentstack"], exercise=False)
    assert [f["kind"] for f in document["findings"]] == ["latent-hazard"]
    (hazard,) = findings(document, "latent-hazard")
    guard = line_of("latentstack", "if torch.cuda.is_available():")
    shim = line_of("latentstack", "torch.cuda.is_available = lambda")
    assert hazard["severity"] == "warning" and hazard["probe"] == "torch.cuda.is_available"
    assert hazard["message"].startswith(
        f"latentstack/__init__.py:_alias_cuda (line {guard}) read torch.cuda.is_available after "
        f"latentstack/__init__.py:_patch_cuda_shim (line {shim}) had replaced it")
    assert "the replacement and the original both answer False" in hazard["message"]
    assert (f"had it answered True, `if torch.cuda.is_available():` (line {guard}) would take "
            f"line {guard + 1}: `return`; with False it takes no branch") in hazard["message"]
    assert "Nothing keeps the original" in hazard["message"]
    (decision,) = document["facts"]["decisions"]
    assert decision["original_answer"]["repr"] == decision["replaced_answer"]["repr"] == "False"


def test_reading_the_saved_original_is_no_hazard():
    document = probe({"LATENTSTACK_READS_SAVED": "1"}, imports=["latentstack"], exercise=False)
    assert document["findings"] == []
    assert document["facts"]["decisions"] == []
    assert [s["read"] for s in document["saved_originals"]] == [True]


def test_a_test_the_answer_alone_does_not_decide_says_what_decides_it():
    # H200's "with True it takes None": the read's answer leaves the branch to the other operand.
    document = probe({"LATENTSTACK_OR_TEST": "1"}, imports=["latentstack"], exercise=False)
    (hazard,) = findings(document, "latent-hazard")
    guard = line_of("latentstack", "or _forced():  # the rest")
    assert (f"had it answered True, `if torch.cuda.is_available() or _forced():` (line {guard}) would take "
            f"line {guard + 1}: `return`; with False this answer alone does not decide the test: `_forced()` "
            "decides which branch it takes.") in hazard["message"]
    assert "None" not in hazard["message"]
