"""The stacks registry (``flagos_doctor/stacks``): one table of stacks, read by probe, survey and report.

A stack added as one module plus its registry entry must reach every command: the last
test adds one to a copy of the package and runs the three commands on it, in real children.
"""

from __future__ import annotations

import ast
import json
import os
import shutil

import pytest

from conftest import FAULT_ENV, REPO_ROOT, run_cli
from flagos_doctor import stacks
from flagos_doctor.errors import BadInput

PACKAGE = os.path.join(REPO_ROOT, "flagos_doctor")
STACKS_DIR = os.path.join(PACKAGE, "stacks")


def test_built_ins_and_module_stacks():
    assert stacks.names() == ["demo", "torch_fl", "flag_gems", "torch"]
    for name in stacks.names():
        assert stacks.get(name).name == name and stacks.get(name).probe_imports
    module = stacks.get("tests_fixture.stack")
    assert (module.name, module.probe_imports) == ("tests_fixture.stack", ("tests_fixture.stack",))
    for bad in ("no such", "", "a..b", "1abc"):
        with pytest.raises(BadInput, match="no stack or importable module .*; stacks: demo, torch_fl, flag_gems, torch$"):
            stacks.get(bad)
    assert stacks.SURVEY_DEFAULT in stacks.names() and set(stacks.DETECTED) <= set(stacks.names())


def _python_files(folder):
    for root, dirs, files in os.walk(folder):
        dirs[:] = [d for d in dirs if d != "__pycache__"]
        yield from (os.path.join(root, f) for f in files if f.endswith(".py"))


def test_no_second_table_of_stacks_outside_the_registry():
    """No collection literal naming the demo with another stack, no help or error string
    listing them, anywhere in flagos_doctor but its stacks package."""
    names = set(stacks.names())
    found = []
    for path in _python_files(PACKAGE):
        if path.startswith(STACKS_DIR + os.sep):
            continue
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Tuple, ast.List, ast.Set, ast.Dict)):
                items = node.keys if isinstance(node, ast.Dict) else node.elts
                strings = {item.value for item in items if isinstance(item, ast.Constant) and isinstance(item.value, str)}
                if "demo" in strings and strings & (names - {"demo"}):
                    found.append(f"{os.path.relpath(path, REPO_ROOT)}:{node.lineno}")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if any(f"demo{sep}torch_fl" in node.value for sep in (" | ", "|", ", ")):
                    found.append(f"{os.path.relpath(path, REPO_ROOT)}:{node.lineno}")
    assert not found, f"stack names listed outside flagos_doctor/stacks: {found}"


@pytest.mark.parametrize("command", ["probe", "survey", "report"])
def test_every_command_refuses_a_bad_stack_naming_the_same_stacks(tmp_path, command):
    done = run_cli(command, "--stack", "no such", *(["--no-store"] if command == "survey" else []), cwd=str(tmp_path), timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (f"flagos-doctor: error: --stack: no stack or importable module 'no such'; "
                                   f"stacks: {', '.join(stacks.names())}")
    helped = run_cli(command, "--help", env={"COLUMNS": "400"})
    text = " ".join(helped.stdout.replace("\u2502", " ").split())  # rich's table, unwrapped
    assert stacks.choices() in text and stacks.DEFAULT_RULE in text


def test_probe_of_the_fault_fixture_as_a_module_stack(tmp_path):
    done = run_cli("probe", "--stack", "faultstack", "--no-exercise", "--json", str(tmp_path / "p.json"), "-q",
                   env=FAULT_ENV, timeout=300)
    document = json.loads((tmp_path / "p.json").read_text())
    # exit 0: the demo's redirects are read by no guard of faultstack's, so no error-level finding
    assert [f["kind"] for f in document["findings"] if f["severity"] == "error"] == []
    assert done.returncode == 0, done.stderr
    assert document["stack"] == "faultstack" and document["imports"] == ["faultstack"]
    assert document["outcome"] == "ok", document["outcomes"]
    # faultstack imports the demo: its device is there, registered while importing faultstack.
    assert document["facts"]["privateuse1"] == "flagos"


EXTRA = '''"""A stack added for the test: the demo under another name."""

from flagos_doctor.stacks.demo import DemoStack


class ExtraStack(DemoStack):
    name = "extra"
    description = "the demo, added as one file"
'''


@pytest.fixture(scope="module")
def extended(tmp_path_factory):
    """A copy of flagos_doctor with one stack added: its module and one registry entry."""
    root = tmp_path_factory.mktemp("extended")
    shutil.copytree(PACKAGE, root / "flagos_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "flagos_doctor" / "stacks" / "extra.py").write_text(EXTRA)
    registry = root / "flagos_doctor" / "stacks" / "__init__.py"
    text = registry.read_text()
    entries = "(DemoStack, TorchFLStack, FlagGemsStack, TorchStack)"
    assert entries in text
    registry.write_text(text.replace(entries, "(DemoStack, TorchFLStack, FlagGemsStack, TorchStack, ExtraStack)")
                        .replace("from flagos_doctor.stacks.demo import DemoStack\n",
                                 "from flagos_doctor.stacks.demo import DemoStack\nfrom flagos_doctor.stacks.extra import ExtraStack\n"))
    return root


def run_extended(root, *args):
    # The copy first on the path, and as the current folder (python -m puts it first).
    return run_cli(*args, env={"PYTHONPATH": str(root)}, cwd=str(root), timeout=300)


def test_a_stack_added_once_reaches_probe_survey_and_report(extended):
    refused = run_extended(extended, "probe", "--stack", "no such")
    assert "no stack or importable module 'no such'; stacks: demo, torch_fl, flag_gems, torch, extra" in refused.stderr
    helped = run_extended(extended, "survey", "--help").stdout.replace("\u2502", " ")
    assert "extra (the demo, added as one file)" in " ".join(helped.split())

    probed = run_extended(extended, "probe", "--stack", "extra", "--no-exercise", "--json", "p.json", "-q")
    assert probed.returncode == 0, probed.stderr
    probe = json.loads((extended / "p.json").read_text())
    assert probe["stack"] == "extra" and probe["imports"] == ["flagos_doctor.demo"] and probe["outcome"] == "ok"

    surveyed = run_extended(extended, "survey", "--stack", "extra", "--ops", "abs", "--no-store", "-q", "-o", "s.json")
    assert surveyed.returncode == 0, surveyed.stderr
    survey = json.loads((extended / "s.json").read_text())
    assert survey["provenance"]["stack"] == "extra"
    assert survey["overloads"]["abs"]["verdict"] == "STRICT"  # the demo's conf, the demo's kernel
    assert "kernel" in {case["route"] for case in survey["overloads"]["abs"]["cases"]}  # the demo's evidence

    reported = run_extended(extended, "report", "--stack", "extra", "--json", "b.json", "--markdown", "r.md")
    assert reported.returncode == 0, reported.stderr
    bundle = json.loads((extended / "b.json").read_text())
    assert bundle["stack"]["modules"] == ["flagos_doctor.demo"] and bundle["stack"]["device_type"] == "flagos"
    assert bundle["environment"]["stack"]["accelerator"]["type"] == "flagos"
    assert bundle["probe"]["stack"] == "extra" and bundle["probe"]["outcome"] == "ok"
