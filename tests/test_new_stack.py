"""Adding a stack is one file in ``flagos_doctor/stacks`` plus one registry line: a stack of
its own (not a subclass of a built-in) with a real PrivateUse1 device, ``tinydev``, in a module
of the test's folder, reaches probe, survey, report and matrix through the real command line,
in real children. Nothing outside ``stacks/`` learns its name: its version, store key and
route set come through its ``Stack`` methods."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from conftest import REPO_ROOT, run_cli

PACKAGE = os.path.join(REPO_ROOT, "flagos_doctor")

#: The device: a PrivateUse1 backend renamed ``tinydev`` whose tensors keep their data on
#: the CPU. Its ATen kernels are the demo's (they serve whichever name PrivateUse1 has),
#: loaded from their file: importing ``flagos_doctor.demo`` would claim PrivateUse1 as ``flagos``.
DEVICE = '''"""tinydev: a pure-Python PrivateUse1 device with kernels for abs and neg."""

import importlib.util
import os

import torch
from torch.utils import backend_registration

__version__ = "0.3.1"
ROUTED = ["abs", "neg", "erf"]  # erf has no kernel here: the CPU fallback runs it


class _Device:
    """torch.tinydev"""

    @staticmethod
    def is_available():
        return True

    @staticmethod
    def is_initialized():
        return True

    @staticmethod
    def device_count():
        return 1

    @staticmethod
    def current_device():
        return 0

    @staticmethod
    def get_device_name(device=None):
        return "tinydev (CPU memory)"

    @staticmethod
    def manual_seed_all(seed):
        pass

    @staticmethod
    def _is_in_bad_fork():
        return False


backend_registration._setup_privateuseone_for_python_backend("tinydev", backend_module=_Device())
_spec = importlib.util.spec_from_file_location("tinydev_kernels", os.environ["TINYDEV_KERNELS"])
kernels = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(kernels)
REGISTERED = kernels.register(ROUTED)
'''

#: The stack: one file, nothing else of flagos_doctor changed but the registry line.
STACK = '''"""The ``tiny`` stack: the tinydev device (added by tests/test_new_stack.py)."""

import importlib

from flagos_doctor.stacks.base import Stack


class TinyStack(Stack):
    name = "tiny"
    description = "a PrivateUse1 device added as one file"
    probe_imports = ("tinydev",)
    device_type = "tinydev"
    visible_devices_var = "TINYDEV_VISIBLE_DEVICES"
    default_listing = "stack"  # without --conf, the survey takes what it registers

    def setup(self):
        importlib.import_module("tinydev")
        return "tinydev"

    def registered(self):
        return sorted(importlib.import_module("tinydev").ROUTED)

    def version(self):
        return importlib.import_module("tinydev").__version__
'''


@pytest.fixture(scope="module")
def house(tmp_path_factory):
    """A copy of flagos_doctor with the stack added, and the device module beside it."""
    root = tmp_path_factory.mktemp("newstack")
    shutil.copytree(PACKAGE, root / "flagos_doctor", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "flagos_doctor" / "stacks" / "tiny.py").write_text(STACK)
    registry = root / "flagos_doctor" / "stacks" / "__init__.py"
    text = registry.read_text()
    line = "BUILT_IN: dict[str, type[Stack]] = {cls.name: cls for cls in (DemoStack, TorchFLStack, FlagGemsStack, TorchStack)}"
    assert line in text
    registry.write_text(text.replace(line, line + "\n"
                                     "from flagos_doctor.stacks.tiny import TinyStack; BUILT_IN[TinyStack.name] = TinyStack"))
    modules = root / "modules"
    modules.mkdir()
    (modules / "tinydev.py").write_text(DEVICE)
    return root


def run(root, *args):
    env = {"PYTHONPATH": os.pathsep.join([str(root), str(root / "modules")]),
           "TINYDEV_KERNELS": os.path.join(PACKAGE, "demo", "kernels.py")}
    return run_cli(*args, env=env, cwd=str(root), timeout=300)


def test_a_new_stack_reaches_probe_survey_report_and_matrix(house):
    probed = run(house, "probe", "--stack", "tiny", "--no-exercise", "--json", "p.json", "-q")
    assert probed.returncode == 0, probed.stderr
    probe = json.loads((house / "p.json").read_text())
    assert probe["stack"] == "tiny" and probe["imports"] == ["tinydev"] and probe["outcome"] == "ok"
    assert probe["facts"]["privateuse1"] == "tinydev"

    surveyed = run(house, "survey", "--stack", "tiny", "--store", "store", "-q", "-o", "s.json")
    assert surveyed.returncode == 0, surveyed.stderr
    survey = json.loads((house / "s.json").read_text())
    provenance = survey["provenance"]
    assert provenance["stack"] == "tiny" and provenance["device"]["type"] == "tinydev"
    assert provenance["store_key"] == "tiny-0.3.1"  # Stack.key from Stack.version
    assert provenance["routes"]["source"] == "stack" and sorted(survey["overloads"]) == ["abs", "erf", "neg"]
    routes = {name: {case["route"] for case in entry["cases"]} for name, entry in survey["overloads"].items()}
    assert "kernel" in routes["abs"] and "cpu_fallback" in routes["erf"]  # the stack's evidence
    assert survey["overloads"]["abs"]["verdict"] == "STRICT"
    assert os.path.isdir(house / "store" / "survey" / "tiny-0.3.1")  # filed under its key

    reported = run(house, "report", "--stack", "tiny", "--survey", "s.json", "--json", "b.json", "--markdown", "r.md")
    assert reported.returncode == 0, reported.stderr
    bundle = json.loads((house / "b.json").read_text())
    assert bundle["stack"]["modules"] == ["tinydev"] and bundle["stack"]["device_type"] == "tinydev"
    assert bundle["probe"]["stack"] == "tiny" and bundle["probe"]["outcome"] == "ok"
    assert bundle["survey"]["stack"] == "tiny"

    tabled = run(house, "matrix", "s.json", "--store", "store", "stack=tiny", "--json", "m.json", "-q")
    assert tabled.returncode == 0, tabled.stderr
    matrix = json.loads((house / "m.json").read_text())
    columns = [(c["stack"], c["version"], c["store_key"]) for c in matrix["columns"]]
    assert columns == [("tiny", "0.3.1", "tiny-0.3.1")] * 2
