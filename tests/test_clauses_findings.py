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

from conftest import FIXTURES, run_cli

STACKS = os.path.join(FIXTURES, "probe_stacks")


def probe(tmp_path, *imports, env=None):
    out = tmp_path / "probe.json"
    done = run_cli("probe", *(a for name in imports for a in ("--import", name)), "--no-exercise", "-q",
                   "--json", str(out), env={"PYTHONPATH": STACKS, "FLAGOS_DOCTOR_PROBE_COMPILE": "0", **(env or {})})
    assert out.exists(), done.stderr[-3000:]
    return done, json.loads(out.read_text())


def line_of(text: str) -> int:
    with open(os.path.join(STACKS, "nosavebug", "__init__.py"), encoding="utf-8") as handle:
        return next(n for n, line in enumerate(handle, start=1) if text in line)


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
