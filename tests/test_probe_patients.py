"""The probe on stacks nobody here wrote: each class of mistake seen on real PyPI packages.

Missed writes (a plugin torch autoloads inside ``import torch``; class attributes written
through ``setattr()``, helpers and context managers), wrong answers (the line of the store
that ran, a delete that never happened, bound methods, an import failure's cause), findings
that cry wolf (a patch undone, one stub on several probes, torch's own import, the cuda
alias of a device that never promised one) and a watch that must not make the stack sick.
The stacks are real packages in ``tests/fixtures`` run in real children; the autoloaded
plugins are real wheels with a real entry point, installed with pip.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import zipfile

import pytest

from conftest import REPO_ROOT, find_python
from test_probe import STACKS, events, findings, line_of, probe

PLUGINS = os.path.join(REPO_ROOT, "tests", "fixtures", "plugins")
PYTHONS = {version: find_python(version) for version in ("3.10", "3.12", "3.13")}
CLASS_PROBES = [
    "classstack.target.Thing.cuda", "classstack.target.Other.cuda",
    "classstack.target.Counted.size", "classstack.target.Thing.name", "classstack.target.Plain.mode",
]


def _interpreters():
    found = [pytest.param(sys.executable, id=f"{sys.version_info[0]}.{sys.version_info[1]}")]
    for version, path in PYTHONS.items():
        found.append(pytest.param(path, id=version, marks=pytest.mark.skipif(
            path is None, reason=f"needs a Python {version} interpreter")))
    return found


def build_wheel(name: str, folder: str) -> str:
    """A real wheel of ``tests/fixtures/plugins/<name>`` with a ``torch.backends`` entry point."""
    dist = f"{name}-0.1.dist-info"
    files = {}
    source = os.path.join(PLUGINS, name, name)
    for entry in sorted(os.listdir(source)):
        if entry.endswith(".py"):
            with open(os.path.join(source, entry), "rb") as handle:
                files[f"{name}/{entry}"] = handle.read()
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: flagos-doctor-tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    files[f"{dist}/entry_points.txt"] = f"[torch.backends]\n{name} = {name}:_autoload\n".encode()
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{dist}/RECORD,,")
    files[f"{dist}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = os.path.join(folder, f"{name}-0.1-py3-none-any.whl")
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def install_plugin(name: str, tmp_path_factory) -> str:
    """``pip install --target`` of the plugin's wheel; returns the folder to put on PYTHONPATH."""
    folder = tmp_path_factory.mktemp(name)
    wheel = build_wheel(name, str(folder))
    target = str(folder / "site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index", "--target", target, wheel],
        check=True, capture_output=True, text=True,
    )
    return target


def on_path(folder: str) -> dict:
    return {"PYTHONPATH": os.pathsep.join([folder, STACKS])}


# -- missed writes: a plugin torch autoloads ------------------------------------------------
@pytest.fixture(scope="module")
def autoloaded(tmp_path_factory):
    target = install_plugin("autoplug", tmp_path_factory)
    env = dict(on_path(target), TORCH_DEVICE_BACKEND_AUTOLOAD="1")
    return probe(env, imports=["torch"], exercise=False)


def test_autoloaded_plugin_writes_to_torch_are_recorded_with_their_phase(autoloaded):
    assert autoloaded["outcome"] == "ok", autoloaded["child"]
    (write,) = events(autoloaded, "torch.empty", "write")
    assert write["where"]["file"] == "autoplug/__init__.py"
    assert write["where"]["function"] == "_wrap_empty"
    with open(os.path.join(PLUGINS, "autoplug", "autoplug", "__init__.py")) as handle:
        assert write["where"]["line"] == next(i for i, text in enumerate(handle, 1) if "torch.empty = empty" in text)
    assert write["step"] == "import torch"
    assert write["phase"] == "autoload of autoplug (autoplug:_autoload) during import torch"
    assert write["previous"]["repr"] == "<function torch._VariableFunctionsClass.empty>"
    probe_state = next(p for p in autoloaded["probes"] if p["name"] == "torch.empty")
    assert probe_state["original"] is False


def test_autoloaded_plugin_rename_is_attributed_to_the_plugin(autoloaded):
    (rename,) = events(autoloaded, "PrivateUse1 backend name", "write")
    assert rename["value"]["repr"] == "'autodev'"
    assert rename["where"]["file"] == "autoplug/__init__.py" and rename["where"]["function"] == "_autoload"
    assert rename["phase"] == "autoload of autoplug (autoplug:_autoload) during import torch"
    assert autoloaded["facts"]["privateuse1"] == "autodev"
    (module,) = events(autoloaded, "torch.autodev", "write")
    assert module["where"]["function"] == "_autoload" and module["via"] == ["torch/__init__.py:_register_device_module"]
    assert rename["seq"] < module["seq"]  # renamed first, as the plugin does


def test_autoload_failure_keeps_the_cause_chain(tmp_path_factory):
    target = install_plugin("brokenplug", tmp_path_factory)
    document = probe(dict(on_path(target), TORCH_DEVICE_BACKEND_AUTOLOAD="1"), imports=["torch"], exercise=False)
    assert document["outcome"] == "import-failed"
    (outcome,) = document["outcomes"]
    assert outcome["error"].startswith("RuntimeError: Failed to load the backend extension: brokenplug")
    (cause,) = outcome["causes"]
    assert cause["error"].startswith("OSError: libvendor_runtime.so: cannot open shared object file")
    assert cause["explicit"] is True
    assert cause["at"] == {"file": "brokenplug/__init__.py", "line": 5, "function": "_load_vendor_runtime",
                           "code": 'raise OSError("libvendor_runtime.so: cannot open shared object file: No such file '
                                   'or directory")'}  # the line's text: what a cause chain reads
    (failed,) = findings(document, "import-failed")
    assert "Caused by: OSError: libvendor_runtime.so: cannot open shared object file" in failed["message"]
    assert "(raised in brokenplug/__init__.py:_load_vendor_runtime, line 5)" in failed["message"]


def test_torch_own_import_writes_are_not_the_stacks():
    # _initExtension sets torch.cuda.FloatTensor and its kin during import torch.
    document = probe(imports=["torch"], exercise=False, watch=["torch.cuda.FloatTensor", "torch.cuda.HalfTensor"])
    assert document["outcome"] == "ok"
    assert not events(document, "torch.cuda.FloatTensor") and not events(document, "torch.cuda.HalfTensor")
    state = next(p for p in document["probes"] if p["name"] == "torch.cuda.FloatTensor")
    assert state["original"] is True and state["final"]["repr"] == "<class torch.cuda.FloatTensor>"
    assert not findings(document, "multiple-writers")


# -- missed writes and wrong lines: class attributes --------------------------------------
@pytest.mark.parametrize("python", _interpreters())
def test_class_attribute_writes_through_a_metaclass_and_a_context_manager(python):
    document = probe(imports=["classstack"], exercise=False, watch=CLASS_PROBES, python=python)
    assert document["outcome"] == "ok", document["child"]
    # Counted's metaclass has a __setattr__ of its own: the patch and the undo inside the
    # context manager are both seen, at the lines that made them, on every version.
    patch, undo = events(document, "classstack.target.Counted.size", "write")
    for event, text, value in ((patch, "target.Counted.size = size", "64"), (undo, "target.Counted.size = saved", "1")):
        assert event["writer_known"] is True and not event.get("inferred")
        assert event["where"]["function"] == "bigger" and event["where"]["line"] == line_of("classstack", text)
        assert event["value"]["repr"] == value
        assert event["phase"] == "classstack/__init__.py:measure"
    (restored,) = [f for f in findings(document, "patched-and-restored") if f["probe"] == "classstack.target.Counted.size"]
    assert restored["severity"] == "info"
    assert "patched and restored by classstack/__init__.py:bigger" in restored["message"]
    # unittest.mock's setattr() on a class of metaclass type: seen on every version too.
    enter, leave = events(document, "classstack.target.Thing.name", "write")
    assert (enter["value"]["repr"], leave["value"]["repr"]) == ("'mocked'", "'thing'")
    assert enter["where"]["function"] == leave["where"]["function"] == "mocked_name"
    assert any(v.startswith("unittest/mock.py:") for v in enter["via"])
    # A @contextmanager patching a metaclass-type class by attribute syntax and restoring it
    # (accelerate's init_empty_weights does this to nn.Module): both stores, at their lines.
    patch, undo = events(document, "classstack.target.Plain.mode", "write")
    assert (patch["value"]["repr"], undo["value"]["repr"]) == ("'meta'", "'eager'")
    assert patch["where"]["function"] == undo["where"]["function"] == "meta_mode"
    assert patch["where"]["line"] == line_of("classstack", 'target.Plain.mode = "meta"')
    assert undo["where"]["line"] == line_of("classstack", "target.Plain.mode = saved")
    assert "classstack.target.Plain.mode" in {f["probe"] for f in findings(document, "patched-and-restored")}
    # A helper's setattr() names the caller, the helper in `via`.
    helper = events(document, "classstack.target.Other.cuda", "write")[-1]
    assert helper["where"]["function"] == "patch_with_helper" and helper["via"] == ["classstack/__init__.py:_replace"]
    assert not [f for f in findings(document, "multiple-writers") if f["probe"] in (
        "classstack.target.Counted.size", "classstack.target.Thing.name")]
    if document["python"]["version"] >= "3.12":
        # Dict watchers see attribute syntax on metaclass-type classes: each line exactly.
        (thing,) = events(document, "classstack.target.Thing.cuda", "write")
        first, _ = events(document, "classstack.target.Other.cuda", "write")
        assert thing["where"]["line"] == line_of("classstack", "target.Thing.cuda = _fake_cuda")
        assert first["where"]["line"] == line_of("classstack", "target.Other.cuda = _fake_cuda")


@pytest.mark.parametrize("python", _interpreters())
def test_class_based_context_manager_patch_and_undo_of_a_plain_class(python):
    # Engine's metaclass is type; FastMode's __enter__ patches it by attribute syntax and its
    # __exit__ undoes that, with no recorded event in between: each store is seen, at its line.
    document = probe(imports=["cmstack"], exercise=False, python=python,
                     watch=["cmstack.target.Engine.mode", "cmstack.target.Engine.run",
                            "cmstack.target.Engine.patched_by"])
    assert document["outcome"] == "ok", document["child"]
    # Python 3.10's code objects have no qualified name: a method is named alone.
    qualified = document["python"]["version"] >= "3.11"
    enter, leave = (f"FastMode.{name}" if qualified else name for name in ("__enter__", "__exit__"))
    patch, undo = events(document, "cmstack.target.Engine.mode", "write")
    assert patch["value"]["repr"] == "<function cmstack._fast_mode>"
    assert undo["value"]["repr"] == "<function cmstack.target.Engine.mode>"
    assert (patch["where"]["function"], undo["where"]["function"]) == (enter, leave)
    assert patch["where"]["line"] == line_of("cmstack", "target.Engine.mode = _fast_mode")
    assert undo["where"]["line"] == line_of("cmstack", "target.Engine.mode = self.saved")
    for event in (patch, undo):
        assert event["writer_known"] is True and not event.get("inferred")
        assert event["phase"] == "cmstack/__init__.py:in_fast_mode"
    (restored,) = [f for f in findings(document, "patched-and-restored") if f["probe"] == "cmstack.target.Engine.mode"]
    assert restored["message"].startswith(
        f"cmstack.target.Engine.mode was patched and restored by cmstack/__init__.py:{enter} "
        f"(line {patch['where']['line']}), cmstack/__init__.py:{leave} (line {undo['where']['line']})")
    # An attribute the patch added and the undo deleted (a delete is a NULL value in the slot).
    (added,) = events(document, "cmstack.target.Engine.patched_by", "write")
    (deleted,) = events(document, "cmstack.target.Engine.patched_by", "delete")
    assert added["value"]["repr"] == "'FastMode'" and added["where"]["function"] == enter
    assert deleted["where"]["line"] == line_of("cmstack", "del target.Engine.patched_by")
    assert deleted["where"]["function"] == leave and deleted["writer_known"] is True
    # Through a setattr() helper: the helper in `via`, each write once.
    patch, undo = events(document, "cmstack.target.Engine.run", "write")
    assert (patch["where"]["function"], undo["where"]["function"]) == (
        enter.replace("FastMode", "FastRun"), leave.replace("FastMode", "FastRun"))
    assert patch["where"]["line"] == line_of("cmstack", '_put(target.Engine, "run", _fast_run)')
    assert undo["where"]["line"] == line_of("cmstack", '_put(target.Engine, "run", self.saved)')
    assert patch["via"] == undo["via"] == ["cmstack/__init__.py:_put"]
    assert "cmstack.target.Engine.run" in {f["probe"] for f in findings(document, "patched-and-restored")}
    assert not any("cannot be hooked" in n or "compared at each event" in n for n in document.get("notices", []))


@pytest.mark.parametrize("python", [p for p in _interpreters() if p.id in ("3.10", "3.11")])
def test_without_the_trampoline_plain_classes_fall_back_and_say_so(python):
    # Where type's slot cannot take the trampoline (another CPU, or turned off as here):
    # setattr() helpers and @contextmanager patches are still seen, and a notice says why
    # attribute syntax is compared instead.
    document = probe({"FLAGOS_DOCTOR_PROBE_TRAMPOLINE": "0"}, imports=["classstack"], exercise=False,
                     watch=CLASS_PROBES, python=python)
    assert document["outcome"] == "ok", document["child"]
    patch, undo = events(document, "classstack.target.Plain.mode", "write")
    assert patch["where"]["line"] == line_of("classstack", 'target.Plain.mode = "meta"') and patch["inferred"]
    assert undo["where"]["line"] == line_of("classstack", "target.Plain.mode = saved") and undo["inferred"]
    helper = events(document, "classstack.target.Other.cuda", "write")[-1]
    assert helper["where"]["function"] == "patch_with_helper" and helper["via"] == ["classstack/__init__.py:_replace"]
    (notice,) = [n for n in document["notices"] if n.startswith("classes of metaclass type")]
    assert "cannot be hooked here (FLAGOS_DOCTOR_PROBE_TRAMPOLINE=0)" in notice


def test_torch_classes_each_store_at_its_own_line_and_init_on_meta_undone():
    document = probe(imports=["torchclasses"], exercise=False,
                     watch=["torch.nn.Module.cuda", "torch.nn.Module.register_parameter"])
    assert document["outcome"] == "ok", document["child"]
    (module_cuda,) = events(document, "torch.nn.Module.cuda", "write")
    (tensor_cuda,) = events(document, "torch.Tensor.cuda", "write")
    # Both stores are to an attribute named `cuda`, on consecutive lines.
    assert module_cuda["where"]["line"] == line_of("torchclasses", "torch.nn.Module.cuda = _module_cuda")
    assert tensor_cuda["where"]["line"] == line_of("torchclasses", "torch.Tensor.cuda = _tensor_cuda")
    assert tensor_cuda["writer_known"] is True and not tensor_cuda.get("inferred")  # torch._C._TensorMeta, hooked
    assert module_cuda["where"]["function"] == tensor_cuda["where"]["function"] == "alias_cuda_methods"
    patch, undo = events(document, "torch.nn.Module.register_parameter", "write")
    assert patch["where"]["line"] == line_of("torchclasses", "torch.nn.Module.register_parameter = register_on_meta")
    assert undo["where"]["line"] == line_of("torchclasses", "torch.nn.Module.register_parameter = old_register_parameter")
    assert undo["value"]["repr"] == "<function torch.nn.modules.module.Module.register_parameter>"
    restored = {f["probe"] for f in findings(document, "patched-and-restored")}
    assert {"torch.nn.Module.register_parameter", "torch.empty"} <= restored
    assert not findings(document, "multiple-writers")


# -- wrong answers ------------------------------------------------------------------------
def test_property_backed_module_attribute_write_is_not_a_delete():
    document = probe(imports=["propstack"], exercise=False, watch=["propstack.settings.level"])
    assert document["outcome"] == "ok", document["child"]
    assert not events(document, "propstack.settings.level", "delete")
    (write,) = events(document, "propstack.settings.level", "write")
    assert write["value"]["repr"] == "3" and write["previous"]["repr"] == "1"
    assert write["where"]["function"] == "raise_level"
    assert write["where"]["line"] == line_of("propstack", "settings.level = 3")


def test_looking_for_a_probe_never_wakes_a_lazy_module():
    document = probe(imports=["lazymod"], exercise=False, watch=["lazymod.heavy.value"])
    assert document["outcome"] == "ok", document["child"]
    assert not events(document, "$FLAGOS_LAZYMOD_LOADED")
    state = next(p for p in document["probes"] if p["name"] == "lazymod.heavy.value")
    assert state["resolved"] is False


def test_bound_method_probe_is_compared_by_what_it_is():
    # os.environ.get makes a new bound method at every look.
    document = probe(imports=["seedfix"], exercise=False, watch=["os.environ.get", "os.environ.setdefault"])
    assert document["outcome"] == "ok"
    assert not events(document, "os.environ.get") and not events(document, "os.environ.setdefault")
    state = next(p for p in document["probes"] if p["name"] == "os.environ.get")
    assert state["original"] is True


# -- findings that cry wolf ---------------------------------------------------------------
def test_one_stub_on_several_probes_is_not_a_saved_original():
    document = probe(imports=["stubstack"], exercise=False)
    assert document["outcome"] == "ok"
    assert len(events(document, "torch.cuda.synchronize", "write")) == 1
    assert len(events(document, "torch.cuda.set_device", "write")) == 1
    assert document["saved_originals"] == []
    assert not findings(document, "orphan-original")


def test_alias_missing_only_for_flagos_or_a_declared_alias():
    # lazystack registers its own device, 'lazydev', and never promised a cuda alias.
    plain = probe(imports=["lazystack"], exercise=False)
    assert plain["facts"]["privateuse1"] == "lazydev"
    assert not findings(plain, "alias-missing")
    assert plain["facts"]["alias_declared"] is False
    declared = probe({"FLAGOS_ALIAS_CUDA": "1"}, imports=["lazystack"], exercise=False)
    if declared["facts"]["native_cuda_available"]["repr"] == "True":
        pytest.skip("this machine has a CUDA runtime: no alias is owed")  # the H200
    (alias,) = findings(declared, "alias-missing")
    assert "'lazydev'" in alias["message"]


# -- never make the patient sick ----------------------------------------------------------
def test_watch_on_a_config_module_names_the_writer_and_keeps_the_stack_working():
    # torch's config modules reject unknown attributes (even __class__) in their own
    # __setattr__: the hook is swapped in past it, and the stack's write still works.
    document = probe(imports=["configstack"], exercise=False, watch=["torch._functorch.config.functionalize_rng_ops"])
    assert document["outcome"] == "ok", document["outcomes"]
    assert not [n for n in document["notices"] if n.startswith("torch._functorch.config")]
    (write,) = events(document, "torch._functorch.config.functionalize_rng_ops", "write")
    assert write["value"]["repr"] == "True" and write["previous"]["repr"] == "False"
    assert write["writer_known"] is True and write["where"]["file"] == "configstack/__init__.py"
    assert write["where"]["function"] == "enable_rng_functionalization"
    assert write["where"]["line"] == line_of("configstack", "functorch_config.functionalize_rng_ops = True")
