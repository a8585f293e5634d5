"""torch_fl bindings vs the installed flag_gems: the binding map read from Torch-FL's real
source (1adbc97), the functions read from the real H200 build's library, the lookup against
real flag_gems 5.0.2 and 4.2.0, and MISSING_FUNCTION in a real survey of the fault stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile

import pytest

from conftest import CONFS, REPO_ROOT, SHARED, TORCH_FL_TARBALL
from flagos_doctor import conf
from flagos_doctor.results import model
from flagos_doctor.stacks import torch_fl_bindings as bindings

TORCH_FL = os.path.join(SHARED, "torch-fl")
SOURCE_TARBALL = TORCH_FL_TARBALL
BUILD_TARBALL = os.path.join(TORCH_FL, "torch_fl-1adbc97-py312-torch2.11.0cu130-h200.tar.gz")
FLAGGEMS_CONF = os.path.join(CONFS, "backends_flaggems.conf")
#: flag_gems 4.2.0, installed apart by .ci/run (pip install --target /tmp/fg4 --no-deps flag-gems==4.2.0).
FG4 = os.environ.get("FLAGOS_DOCTOR_FG4", "/tmp/fg4")
needs_fg4 = pytest.mark.skipif(not os.path.isdir(os.path.join(FG4, "flag_gems")),
                               reason=f"flag_gems 4.2.0 is not installed in {FG4} (scripts/run-tests installs it)")


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The generated files of Torch-FL 1adbc97's source tree, unpacked as they sit in it."""
    root = tmp_path_factory.mktemp("torch-fl-src")
    with tarfile.open(SOURCE_TARBALL) as tar:
        wanted = [m for m in tar.getmembers() if m.name.lstrip("./") in (bindings.KERNELS_FILE, bindings.OPS_FILE)]
        assert len(wanted) == 2
        tar.extractall(root, members=wanted, filter="data")
    return str(root)


@pytest.fixture(scope="module")
def build(tmp_path_factory):
    """The ready H200 build's package folder with its library (the rest is not needed here)."""
    root = tmp_path_factory.mktemp("torch-fl-build")
    with tarfile.open(BUILD_TARBALL) as tar:
        wanted = [m for m in tar.getmembers() if m.name.endswith(("torch_fl/lib/libtorch_fl.so", "torch_fl/__init__.py"))]
        tar.extractall(root, members=wanted, filter="data")
    (package,) = [os.path.dirname(os.path.join(root, m.name)) for m in wanted if m.name.endswith("__init__.py")]
    return package


@pytest.fixture(scope="module")
def installed_check(build, tmp_path_factory):
    """The static check of the ready build installed as a plain folder, run as the survey runs
    it (:func:`bindings.check_in_child`: ``static_check()`` in a fresh interpreter that imports
    the real flag_gems 5.0.2). One child for every test of that one setup: the lookup against
    5.0.2, the installed build's check, the survey's child and the summary."""
    db = tmp_path_factory.mktemp("installed-check") / "flaggems.db"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.path.dirname(build), REPO_ROOT]), "GEMS_VENDOR": "nvidia",
           "FLAGGEMS_DB_URL": f"sqlite:///{db}"}
    return bindings.check_in_child(sys.executable, env)


def child(code: str, tmp_path, fg4: bool = False, path: str | None = None) -> dict:
    """Run ``code`` (which prints one JSON value) in a fresh interpreter with flag_gems importable."""
    pythonpath = [p for p in (FG4 if fg4 else None, path, REPO_ROOT) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(pythonpath), "GEMS_VENDOR": "nvidia",
           "FLAGGEMS_DB_URL": f"sqlite:///{tmp_path}/flaggems.db"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_binding_map_of_the_real_source(source):
    mapping = bindings.binding_map(source)
    assert mapping["_adaptive_avg_pool2d"] == "flag_gems.ops.adaptive_avg_pool2d.adaptive_avg_pool2d"
    assert mapping["log1p"] == "flag_gems.ops.log1p.log1p"
    assert mapping["_log_softmax.out"] == "flag_gems.ops.log_softmax.log_softmax_out"
    # every flagos_python route of torch_fl's own FlagGems conf has a binding
    routed = conf.select(conf.parse_conf(FLAGGEMS_CONF), "flagos_python")
    assert len(routed) == 389 and not set(routed) - set(mapping)


def test_library_names_the_same_functions_as_the_source(source, build):
    calls = bindings.qualnames_in_library(bindings.library_of(build))
    assert set(calls) == set(bindings.binding_map(source).values())
    assert len(calls) == 402


LOOKUP = """
import json, sys
from flagos_doctor import conf
from flagos_doctor.stacks import torch_fl_bindings as bindings
calls = bindings.qualnames_in_library(sys.argv[1] if len(sys.argv) > 1 else {library!r})
missing = bindings.missing_functions(calls)
mapping = bindings.binding_map({source!r})
routed = conf.select(conf.parse_conf({conf!r}), "flagos_python")
print(json.dumps({{"missing": missing, "routes": sorted(o for o in routed if mapping[o] in missing)}}))
"""


def test_lookup_against_flag_gems_5_0_2(source, installed_check):
    # The installed build's static check is this lookup, made in its child against 5.0.2:
    # missing_functions of every call the build's library names (LOOKUP's, made for 4.2.0 below).
    missing = installed_check["missing"]
    mapping = bindings.binding_map(source)
    routes = sorted(o for o in conf.select(conf.parse_conf(FLAGGEMS_CONF), "flagos_python") if mapping[o] in missing)
    assert len(missing) == 96 and len(routes) == 72
    assert missing["flag_gems.ops.log1p.log1p"] == "AttributeError: module 'flag_gems.ops' has no attribute 'log1p'"
    assert "flag_gems.ops.abs.abs" not in missing and "flag_gems.ops.expm1.expm1" not in missing
    assert "log1p" in routes and "abs" not in routes


@needs_fg4
def test_lookup_against_flag_gems_4_2_0(source, build, tmp_path):
    found = child(LOOKUP.format(library=bindings.library_of(build), source=source, conf=FLAGGEMS_CONF), tmp_path, fg4=True)
    assert len(found["missing"]) == 173 and len(found["routes"]) == 147
    assert "flag_gems.ops.expm1.expm1" in found["missing"] and "flag_gems.ops.abs.abs" not in found["missing"]


STATIC = """
import json
from flagos_doctor.stacks import torch_fl_bindings as bindings
print(json.dumps(bindings.static_check()))
"""


def test_static_check_of_an_installed_build(build, installed_check):
    found = installed_check  # static_check() in a child whose path holds the build's folder
    assert found["library"] == bindings.library_of(build)
    assert found["calls"] == 402 and len(found["missing"]) == 96
    assert "overloads" not in found  # a plain folder: no source beside it to map overloads


def test_static_check_of_a_source_checkout(source, build, tmp_path):
    """An editable install: the package sits in the source tree, so overloads are named too."""
    os.symlink(build, os.path.join(source, "torch_fl"))
    try:
        found = child(STATIC, tmp_path, path=source)
    finally:
        os.unlink(os.path.join(source, "torch_fl"))
    assert found["source"] == source
    assert found["overloads"]["log1p"] == "flag_gems.ops.log1p.log1p"
    assert set(found["overloads"].values()) == set(found["missing"])


def test_no_torch_fl_no_static_check(tmp_path):
    assert child(STATIC, tmp_path) is None


def test_missing_from_detail():
    assert model.missing_from_detail("AttributeError: module 'flag_gems.ops' has no attribute 'log1p'") == "flag_gems.ops.log1p"
    assert model.missing_from_detail("AttributeError: 'Tensor' object has no attribute 'log1p'") is None
    assert model.missing_from_detail("RuntimeError: module 'flag_gems.ops' broke") is None


@needs_fg4
def test_fault_stack_survey_under_flag_gems_4_2_0(tmp_path):
    """The same bound kernels: 4.2.0 lacks expm1 too, and the detail says which flag_gems."""
    fixtures = os.path.join(REPO_ROOT, "tests", "fixtures")
    env = {"PYTHONPATH": os.pathsep.join([FG4, fixtures, REPO_ROOT]), "GEMS_VENDOR": "nvidia",
           "FLAGGEMS_DB_URL": f"sqlite:///{tmp_path}/flaggems.db"}
    done = subprocess.run(
        [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "faultstack", "--conf",
         os.path.join(fixtures, "fault.conf"), "--ops", "log1p,expm1", "--no-store", "-o", "s.json"],
        capture_output=True, text=True, env={**os.environ, **env}, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "s.json", encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["provenance"]["flag_gems"] == "4.2.0"
    assert doc["summary"]["missing_functions"] == {"expm1": "flag_gems.ops.expm1", "log1p": "flag_gems.ops.log1p"}
    for name in ("log1p", "expm1"):
        assert doc["overloads"][name]["verdict"] == model.FAILED
        ran = [c for c in doc["overloads"][name]["cases"] if c["status"] != model.INVALID_CASE]
        assert ran and all(c["status"] == model.MISSING_FUNCTION and c["detail"].startswith("flag_gems 4.2.0 has no ")
                           for c in ran)
    assert "2 overloads call functions flag_gems 4.2.0 lacks" in " ".join(done.stdout.split())


def test_the_survey_runs_the_check_in_a_child_of_its_own(installed_check, tmp_path):
    """What ``survey`` records as ``provenance.flag_gems_bindings`` when torch_fl is there."""
    found = installed_check  # check_in_child with the build's folder on the path
    assert found["calls"] == 402 and len(found["missing"]) == 96
    env = {**os.environ, "PYTHONPATH": REPO_ROOT, "GEMS_VENDOR": "nvidia", "FLAGGEMS_DB_URL": f"sqlite:///{tmp_path}/flaggems.db"}
    assert bindings.check_in_child(sys.executable, env) is None
    broken = bindings.check_in_child(str(tmp_path / "no-python"), env)
    assert broken["error"].startswith("FileNotFoundError")


def test_the_summary_shows_the_static_check(installed_check):
    """A results document carrying the real check of the 1adbc97 build, rendered as the survey ends."""
    from rich.console import Console

    from flagos_doctor.results import document as results
    from flagos_doctor.survey import progress

    check = json.loads(json.dumps(installed_check))  # a copy: the fixture's run is shared
    doc = results.build({"stack": "torch_fl", "flag_gems": "5.0.2", "flag_gems_bindings": check}, {}, [], {})
    console = Console(record=True, width=400)
    progress.show_summary(doc, console, "r.json")
    text = console.export_text()
    assert f"static check of {check['library']}: it calls 402 FlagGems functions, 96 not in flag_gems 5.0.2" in text
