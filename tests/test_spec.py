"""The survey spec: the default spec, its packaged copy, and one-line errors for bad specs."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO_ROOT
from flagos_doctor.errors import BadInput
from flagos_doctor.survey.spec import DEFAULT_SPEC, load_spec

UPSTREAM_PROFILES = ["2d-f32", "4d-f32", "1d-f32", "2d-f16", "2d-i64", "2d-bool", "2d-f32-strided"]


def test_default_spec_has_upstream_profiles_tolerances_and_random_ops():
    spec = load_spec(None)
    assert [p.name for p in spec.profiles] == UPSTREAM_PROFILES
    assert spec.profile("4d-f32").shape == (2, 3, 16, 16)
    assert spec.profile("2d-f32-strided").layout == "strided"
    assert spec.tolerance("float16").atol > spec.tolerance("float32").atol
    assert spec.tolerance("int64") is None  # integers compare exactly
    for overload in ("uniform_", "bernoulli_.float", "native_dropout", "randperm", "rand_like", "multinomial"):
        assert spec.is_random(overload), overload
    assert not spec.is_random("abs") and not spec.is_random("native_dropout_backward")


def test_packaged_default_is_the_repository_copy():
    with open(os.path.join(REPO_ROOT, "surveys", "default.yaml"), "rb") as a, open(DEFAULT_SPEC, "rb") as b:
        assert a.read() == b.read()
    assert load_spec(os.path.join(REPO_ROOT, "surveys", "default.yaml")).sha256 == load_spec(None).sha256


def test_to_dict_is_provenance(tmp_path):
    info = load_spec(None).to_dict()
    assert set(info) >= {"name", "profiles", "tolerances", "random_ops", "sha256"}
    # the digest covers content, not comments or layout
    copy = tmp_path / "same.yaml"
    copy.write_text("# another comment\n" + open(DEFAULT_SPEC).read())
    assert load_spec(copy).sha256 == info["sha256"]


@pytest.mark.parametrize("body, where", [
    ("profiles: 3\n", "bad.yaml: profiles"),
    ("profiles:\n  - {name: a, shape: [2], dtype: float99}\n", "bad.yaml: profiles[0].dtype"),
    ("profiles:\n  - {name: a, shape: [0], dtype: float32}\n", "bad.yaml: profiles[0].shape"),
    ("profiles:\n  - {name: a, shape: [2], dtype: float32, layout: weird}\n", "bad.yaml: profiles[0].layout"),
    ("profiles:\n  - {name: a, shape: [2], dtype: float32}\n  - {name: a, shape: [2], dtype: int64}\n",
     "bad.yaml: profiles[1].name"),
    ("profiles:\n  - {name: a, shape: [2], dtype: float32}\ntolerances: {float32: {atol: -1, rtol: 0}}\n",
     "bad.yaml: tolerances.float32.atol"),
    ("profiles:\n  - {name: a, shape: [2], dtype: float32}\nrandom_ops: [1]\n", "bad.yaml: random_ops[0]"),
    ("profiles:\n  - {name: a, shape: [2], dtype: float32}\nsurprise: 1\n", "bad.yaml: surprise"),
])
def test_bad_spec_names_file_and_field(tmp_path, body, where):
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    with pytest.raises(BadInput) as info:
        load_spec(path)
    assert info.value.where == where


def test_unreadable_specs(tmp_path):
    with pytest.raises(BadInput, match="not found"):
        load_spec(tmp_path / "missing.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("profiles: [\n")
    with pytest.raises(BadInput) as info:
        load_spec(broken)
    assert info.value.where.startswith(str(broken))


def test_spec_module_does_not_import_torch():
    code = "import sys, flagos_doctor.survey.spec as s; s.load_spec(None); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
