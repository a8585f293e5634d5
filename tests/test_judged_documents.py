"""The probe's rules judged again on the documents of real runs: each document in
tests/golden/judged (real probe and explain runs of the fixture stacks, the demo and the real
torch_fl on CPU, written by ``scripts/regen-judged``) and each committed H200 probe document
is judged anew (``findings.judge``, explain's ``analysis.causes``: pure functions of the
document) and must give the findings and causes stored with it.

Those stored findings were made by the rules they check, so what a reader can check by hand
is stated on its own below (EXPECTED: the findings each fixture was written to show, from
tests/fixtures/probe_stacks/README.md). A rule changed on purpose: ``scripts/regen-judged``,
review the diff of tests/golden/judged, say why in the commit.
"""

from __future__ import annotations

import glob
import json
import os

import pytest

from conftest import REPO_ROOT
from test_probe import line_of

JUDGED = os.path.join(REPO_ROOT, "tests", "golden", "judged")
H200 = os.path.join(REPO_ROOT, "surveys", "h200")
#: Explain documents are judged per process, from views they do not store: their causes
#: are checked instead (test_an_explain_document_judged_again_gives_its_causes).
PROBE_DOCUMENTS = sorted(set(glob.glob(os.path.join(JUDGED, "*.json"))) - set(glob.glob(os.path.join(JUDGED, "explain-*")))) + [
    os.path.join(H200, name) for name in ("probe-h200-torch_fl-ready.json", "probe-flag_gems.json",
                                          "probe-h200-torchclasses.json")]

#: name -> findings the run must have (severity, kind) and must not have: by hand, from what
#: each fixture does (its README), not from the rules' output.
EXPECTED = {
    "seedbug": ({("error", "stale-guard"), ("error", "alias-missing"), ("warning", "orphan-original")}, set()),
    "seedfix": (set(), {"stale-guard", "alias-missing", "orphan-original"}),
    "nosavebug": ({("error", "stale-guard")}, {"orphan-original"}),  # it saved no original to orphan
    "nosavebug-native": ({("warning", "latent-hazard")}, {"stale-guard"}),
    "latentstack": ({("warning", "latent-hazard")}, {"stale-guard"}),
    "latentstack-saved": (set(), {"latent-hazard", "stale-guard"}),
    "tritonstack": ({("error", "triton-driver")}, set()),
    "crashstack": ({("error", "crash")}, set()),
    "hangstack": ({("error", "timeout")}, set()),
    "raisestack": ({("error", "import-failed"), ("error", "failure-cause"), ("error", "stale-guard")}, set()),
    "seedreplica": ({("error", "failure-cause")}, set()),
    "seedreplica_fixed": (set(), {"failure-cause", "stale-guard"}),
    "tensornew": ({("info", "patched-and-restored")}, set()),
    "torchclasses": ({("info", "patched-and-restored")}, set()),
    "demo": (set(), {"stale-guard", "alias-missing", "failure-cause"}),
    "demo-seed-bug": ({("error", "stale-guard"), ("error", "alias-missing"), ("error", "failure-cause")}, set()),
    "torch_fl": ({("error", "no-device")}, {"stale-guard", "alias-missing"}),  # CPU: no device to find
    **{f"guardforms-{form}": ({("error", "stale-guard"), ("warning", "orphan-original")}, set())
       for form in ("skip", "into", "plain", "then-write", "undecided", "raise-later", "module-level")},
    # the function that redirected reads its own redirect: no guard
    "guardforms-same-function": ({("warning", "orphan-original")}, {"stale-guard"}),
    # the value read was written through the module's dict: no known writer to blame
    "guardforms-dict-write": ({("warning", "multiple-writers")}, {"stale-guard"}),
    "guardforms-chained": ({("error", "import-failed"), ("error", "failure-cause"), ("error", "stale-guard")}, set()),
    # the child died before anything could read the saved original: no orphan yet
    "guardforms-crash": ({("error", "crash")}, {"orphan-original"}),
}


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _name(path: str) -> str:
    return os.path.basename(path)[: -len(".json")]


def _first_difference(stored: list[dict], judged: list[dict]) -> str:
    for index, (a, b) in enumerate(zip(stored, judged)):
        if a != b:
            return f"finding {index}: stored {json.dumps(a, sort_keys=True)[:800]}\n judged {json.dumps(b, sort_keys=True)[:800]}"
    return f"stored {len(stored)} findings, judged {len(judged)}: " + ", ".join(
        f["kind"] for f in (stored[len(judged):] or judged[len(stored):]))


@pytest.mark.parametrize("path", PROBE_DOCUMENTS, ids=_name)
def test_a_probe_document_judged_again_gives_its_findings(path):
    from flagos_doctor.probe.findings import judge
    document = _load(path)
    stored = document.pop("findings")
    judged = judge(document)
    assert judged == stored, f"{_name(path)}: {_first_difference(stored, judged)} (a rule changed on purpose: scripts/regen-judged)"


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(JUDGED, "explain-*.json")))
                         + [os.path.join(H200, "explain-h200-torch_fl-ready.json")], ids=_name)
def test_an_explain_document_judged_again_gives_its_causes(path):
    from flagos_doctor.explain import analysis
    document = _load(path)
    program = document["program"].get("pid")  # an older document: one process, none named
    own = [failure for failure in document["failures"] if failure.get("process") == program]
    judged = analysis.causes({**document, "failures": own})
    for cause in judged:
        if program is not None:
            cause["process"] = program
    assert judged == [cause for cause in document["causes"] if cause.get("process") == program]


def test_every_fixture_run_is_there_and_shows_what_its_fixture_was_written_to_show():
    names = {_name(path) for path in glob.glob(os.path.join(JUDGED, "*.json"))}
    assert set(EXPECTED) <= names
    for name, (present, absent) in EXPECTED.items():
        found = {(f["severity"], f["kind"]) for f in _load(os.path.join(JUDGED, f"{name}.json"))["findings"]}
        assert present <= found, (name, present - found)
        assert not {kind for _, kind in found} & absent, (name, absent)


def test_the_explain_runs_name_the_seed_chain_root_first():
    # the alias never installed at import, the failure much later (issue 33): a chain from
    # the redirect, through the guard that read it, to what the skipped code would have written
    for name in ("explain-seed-demo", "explain-seed-tests"):
        document = _load(os.path.join(JUDGED, f"{name}.json"))
        chained = [cause for cause in document["causes"] if cause.get("chain")]
        assert chained, name
        steps = [step["step"] for step in chained[0]["chain"]]
        assert steps[:3] == ["redirect", "guard", "skipped"], (name, steps)
        assert "torch.device" in chained[0]["chain"][2]["writes"]


def _finding(name: str, kind: str) -> dict:
    (found,) = [f for f in _load(os.path.join(JUDGED, f"{name}.json"))["findings"] if f["kind"] == kind]
    return found


def test_a_stale_guard_says_what_the_guard_did_after_the_read_in_each_form():
    # by hand, from tests/fixtures/probe_stacks/guardforms: what each guard's source does
    guard = line_of("guardforms", "    if not torch.cuda.is_available():")
    assert _finding("guardforms-skip", "stale-guard")["message"].endswith(
        f"which answers True; so it skipped the branch of `if not torch.cuda.is_available():` (line {guard})."
        " The original is saved as torch.cuda._guardforms_native_is_available (#1); read that instead.")
    body = line_of("guardforms", 'USE_CUDA = "cuda"')
    guard = body - 1  # the if above it
    assert f"so it took the branch of `if torch.cuda.is_available():` (line {guard}) into line {body}: " \
           '`USE_CUDA = "cuda"`.' in _finding("guardforms-into", "stale-guard")["message"]
    assert "which answers True; _remember_answer wrote no watched probe after that." in \
        _finding("guardforms-plain", "stale-guard")["message"]
    # it wrote after the read: nothing more is said of what it did; and it redirected the probe
    # again, so what it saw is no longer what the probe answers now: no answer is claimed
    assert "it saw the redirected probe (guardforms/__init__.py:" + str(line_of("guardforms", "def _always_yes")) + \
        "). The original is saved" in _finding("guardforms-then-write", "stale-guard")["message"]
    # the module's own top-level code is no function that could have written more: nothing is said
    assert _finding("guardforms-module-level", "stale-guard")["message"].startswith(
        f"guardforms/__init__.py:<module> read torch.cuda.is_available at line {line_of('guardforms', '        USE_CUDA = torch.cuda.is_available()')}"
        " after guardforms/__init__.py:_redirect")
    assert "which answers True. The original is saved" in _finding("guardforms-module-level", "stale-guard")["message"]
    # the answer alone does not decide `if torch.cuda.is_available() and os.environ.get(...)`: no branch is claimed
    assert "which answers True; _pick_backend_if_asked wrote no watched probe after that." in \
        _finding("guardforms-undecided", "stale-guard")["message"]


def test_a_guard_read_in_one_step_is_not_blamed_for_a_raise_in_a_later_one():
    first, later = (f["message"] for f in _load(os.path.join(JUDGED, "guardforms-raise-later.json"))["findings"]
                    if f["kind"] == "stale-guard")
    guard = line_of("guardforms", "if raise_now:") - 1  # the if above it
    assert f"so it took the branch of `if torch.cuda.is_available():` (line {guard}) into line {guard + 1}: " \
           "`if raise_now:`." in first
    assert "then it raised RuntimeError: guardforms: the second call raises, which failed import guardforms.late." \
        in later


def test_a_failed_import_names_the_error_it_was_raised_from():
    message = _finding("guardforms-chained", "import-failed")["message"]
    raised = line_of("guardforms", 'raise RuntimeError("guardforms: the CUDA runtime')
    assert message.startswith("import guardforms failed: RuntimeError: guardforms: the CUDA runtime the guard chose "
                              f"is unusable (raised in guardforms/__init__.py:_check_runtime, line "
                              f"{raised}). Caused by: AssertionError: Torch not compiled "
                              "with CUDA enabled (raised in torch/cuda/__init__.py:_lazy_init, line ")
