"""``flagos-doctor probe`` on real stacks: real children, real torch, triton and flag_gems.

Each probe runs once per module (fixtures below); the tests then read its document. The
small stacks live in ``tests/fixtures/probe_stacks`` (see its README). Only the healthy demo
run includes the ``torch.compile`` step: it costs a dynamo import, and one run shows it.
"""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import PROBE_COMPILE, REPO_ROOT, find_python, run_cli
from flagos_doctor.options import ProbeOptions
from flagos_doctor import output
from flagos_doctor.probe.formats import markdown, terminal  # noqa: F401  (terminal registers the view)
from flagos_doctor.probe.runner import run_probe

STACKS = os.path.join(REPO_ROOT, "tests", "fixtures", "probe_stacks")
PYTHON312 = find_python("3.12")


def probe(monkeypatch_env: dict | None = None, **options) -> dict:
    """Run the probe on a fixture stack and return its document (the compile step as the
    session sets it: off, unless ``monkeypatch_env`` has ``PROBE_COMPILE``)."""
    saved = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join([STACKS, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    os.environ.update(monkeypatch_env or {})
    try:
        return run_probe(ProbeOptions(**options))
    finally:
        os.environ.clear()
        os.environ.update(saved)


def events(document, probe=None, kind=None):
    return [e for e in document["events"] if (probe is None or e["probe"] == probe) and (kind is None or e["kind"] == kind)]


def findings(document, kind):
    return [f for f in document["findings"] if f["kind"] == kind]


def line_of(package: str, text: str, module: str = "__init__.py") -> int:
    """The line of ``text`` in a fixture file, so the tests say which line they mean."""
    with open(os.path.join(STACKS, package, module)) as handle:
        for number, line in enumerate(handle, start=1):
            if text in line:
                return number
    raise AssertionError(f"{text!r} not in {package}/{module}")


# -- the seed bug and its fix ------------------------------------------------------------
@pytest.fixture(scope="module")
def seedbug():
    return probe(imports=["seedbug"], exercise=False)


@pytest.fixture(scope="module")
def seedfix():
    return probe(imports=["seedfix"], exercise=False)


def test_seed_bug_is_a_stale_guard_naming_guard_and_redirecting_writer(seedbug):
    assert seedbug["schema"] == "flagos-doctor/probe/1"
    assert seedbug["outcome"] == "ok"
    redirect = [e for e in events(seedbug, "torch.cuda.is_available", "write")]
    assert len(redirect) == 1
    assert redirect[0]["where"]["file"] == "seedbug/compat.py"
    assert redirect[0]["where"]["function"] == "_patch_native_cuda_probe"
    assert redirect[0]["where"]["line"] == line_of("seedbug", "torch.cuda.is_available = device.is_available", "compat.py")
    assert redirect[0]["phase"] == "seedbug/compat.py:_patch_native_cuda_probe"
    (read,) = events(seedbug, "torch.cuda.is_available", "read")
    guard_line = line_of("seedbug", "if torch.cuda.is_available():")
    assert read["where"]["function"] == "_alias_cuda_to_flagos"
    assert read["where"]["file"] == "seedbug/__init__.py"
    assert read["where"]["line"] == guard_line
    assert read["saw"] == redirect[0]["seq"]
    (stale,) = findings(seedbug, "stale-guard")
    assert stale["severity"] == "error"
    assert stale["probe"] == "torch.cuda.is_available"
    assert stale["message"].startswith(
        f"seedbug/__init__.py:_alias_cuda_to_flagos read torch.cuda.is_available at line {guard_line} after "
        f"seedbug/compat.py:_patch_native_cuda_probe (line {redirect[0]['where']['line']}) had redirected it"
    )
    assert "answers True" in stale["message"]
    # The branch as it happened, read from the source: the guard's `if` took its `return`.
    assert (f"so it took the branch of `if torch.cuda.is_available():` (line {guard_line}) and returned "
            f"(line {guard_line + 1}: `return`)") in stale["message"]
    assert {redirect[0]["seq"], read["seq"]} <= set(stale["events"])


def test_seed_bug_alias_missing_and_orphan_original(seedbug):
    (alias,) = findings(seedbug, "alias-missing")
    assert alias["severity"] == "error"
    assert "'seeddev'" in alias["message"] and "never installed" in alias["message"]
    (orphan,) = findings(seedbug, "orphan-original")
    assert "torch.cuda._seed_native_is_available" in orphan["message"]
    assert seedbug["saved_originals"] == [
        {"probe": "torch.cuda._seed_native_is_available", "saves": "torch.cuda.is_available",
         "seq": orphan["events"][0], "read": False}
    ]
    assert seedbug["facts"]["cuda_maps_to"] == {"ok": True, "repr": "'cuda'"}


def test_seed_fix_installs_the_alias_and_reads_the_original(seedfix):
    assert seedfix["outcome"] == "ok"
    assert not findings(seedfix, "stale-guard")
    assert not findings(seedfix, "alias-missing")
    assert not findings(seedfix, "orphan-original")
    assert seedfix["facts"]["cuda_maps_to"] == {"ok": True, "repr": "'seeddev'"}
    (read,) = events(seedfix, "torch.cuda._seed_native_is_available", "read")
    assert read["where"]["function"] == "_alias_cuda_to_flagos"
    assert read["where"]["line"] == line_of("seedfix", "if torch.cuda._seed_native_is_available():")
    assert seedfix["saved_originals"][0]["read"] is True
    (device_write,) = events(seedfix, "torch.device", "write")
    assert device_write["phase"] == "seedfix/__init__.py:_alias_cuda_to_flagos"
    # env written before torch is imported is attributed too
    (env,) = events(seedfix, "$TORCH_DEVICE_BACKEND_AUTOLOAD")
    assert env["where"]["file"] == "seedfix/__init__.py" and env["where"]["line"] == line_of("seedfix", "os.environ.setdefault")
    assert env["seq"] < device_write["seq"]
    (rename,) = events(seedfix, "PrivateUse1 backend name")
    assert rename["where"]["function"] == "_register_device" and rename["inferred"] is True
    assert rename["where"]["line"] == line_of("seedfix", "rename_privateuse1_backend")


# -- writers of every kind ------------------------------------------------------------
@pytest.fixture(scope="module")
def writers():
    return probe(imports=["writers"], exercise=False)


@pytest.mark.parametrize(
    "probe_name, function, text",
    [
        ("torch.cuda.device_count", "patch_with_setattr", 'setattr(torch.cuda, "device_count"'),
        ("torch.cuda.synchronize", "patch_with_helper", "_replace(torch.cuda"),
        ("torch.cuda.get_device_name", "patch_with_mock", "patcher.start()"),
        ("torch.cuda.get_device_properties", "patch_with_attribute", "torch.cuda.get_device_properties = "),
        ("$FLAGOS_WRITERS_MODE", "set_mode", 'os.environ["FLAGOS_WRITERS_MODE"]'),
    ],
)
def test_writer_is_named_past_helpers(writers, probe_name, function, text):
    (write,) = events(writers, probe_name, "write")
    assert write["where"]["function"] == function
    assert write["where"]["file"] == "writers/__init__.py"
    assert write["where"]["line"] == line_of("writers", text)
    assert write["phase"] == f"writers/__init__.py:{function}"
    assert write["step"] == "import writers"


def test_helpers_show_in_via(writers):
    (helper,) = events(writers, "torch.cuda.synchronize", "write")
    assert helper["via"] == ["writers/__init__.py:_replace"]
    (mocked,) = events(writers, "torch.cuda.get_device_name", "write")
    assert any(v.startswith("unittest/mock.py:") for v in mocked["via"])


def test_write_through_the_module_dict_is_caught_by_the_snapshot(writers):
    (write,) = events(writers, "torch.cuda.get_device_capability", "write")
    assert write["value"]["defined_at"] == f"writers/__init__.py:{line_of('writers', 'def _fake_capability')}"
    if sys.version_info < (3, 12):
        assert write["writer_known"] is False and write["where"]["function"] is None
        assert write["phase"] == "import writers"
    probe = next(p for p in writers["probes"] if p["name"] == "torch.cuda.get_device_capability")
    assert probe["original"] is False and probe["call"] == {"ok": True, "repr": "(9, 9)"}


@pytest.mark.skipif(not PYTHON312, reason="needs a Python 3.12 interpreter")
def test_dict_watchers_name_the_writer_on_python312():
    document = probe(imports=["plainstack"], watch=["plainstack.target.probe"], exercise=False, python=PYTHON312)
    assert document["python"]["version"].startswith("3.12")
    (write,) = events(document, "plainstack.target.probe", "write")
    assert write["writer_known"] is True
    assert write["where"]["function"] == "_through_dict"
    assert write["where"]["line"] == line_of("plainstack", 'vars(target)["probe"]')


# -- a lazy writer ----------------------------------------------------------------------
def test_lazy_writer_acts_on_the_first_device_call():
    document = probe(imports=["lazystack"])
    step = "exercise: torch.lazydev.current_device()"
    assert step in document["phases"]
    (write,) = events(document, "torch.cuda.current_device", "write")
    assert write["step"] == step
    # The phase is the exercise step that woke the lazy writer, as the phase list names it.
    assert write["phase"] == step
    assert write["where"]["function"] == "_lazy_init"
    assert write["where"]["line"] == line_of("lazystack", "torch.cuda.current_device = current_device", "device.py")
    (env,) = events(document, "$FLAGOS_LAZY_READY")
    assert env["step"] == step
    tensor = next(o for o in document["outcomes"] if o["step"] == "exercise: a tensor on lazydev")
    assert tensor["ok"] is False and "NotImplementedError" in tensor["error"]


# -- Triton's driver --------------------------------------------------------------------
def test_triton_driver_creation_and_set_active_are_attributed():
    document = probe(imports=["tritonstack"], exercise=False)
    (create,) = [e for e in document["events"] if e.get("creates_driver")]
    assert create["where"]["function"] == "_touch_triton_driver"
    assert create["is_active"] == {"amd": False, "nvidia": True}
    assert create["active_backends"] == ["nvidia"]
    reads = events(document, "torch.cuda.is_available", "read")
    assert {r["where"]["function"] for r in reads} >= {"CudaDriver.is_active"}
    (active,) = events(document, "triton.runtime.driver._active", "write")
    assert active["where"]["function"] == "_pick_driver"
    assert active["via"] == ["triton/runtime/driver.py:DriverConfig.set_active"]
    (finding,) = findings(document, "triton-driver")
    assert "NVIDIA" in finding["message"] and "tritonstack/__init__.py:_patch_cuda_probe" in finding["message"]


# -- crashes and hangs ------------------------------------------------------------------
def test_segfault_on_import_still_gives_a_report():
    document = probe(imports=["crashstack"])
    assert document["outcome"] == "crashed"
    assert document["child"]["signal"] == "SIGSEGV"
    assert document["interrupted"]["phase"] == "import crashstack"
    (env,) = events(document, "$FLAGOS_CRASH_STAGE")
    assert env["where"]["file"] == "crashstack/__init__.py"
    assert "_load_vendor_library" in document["child"]["stderr_tail"]
    (crash,) = findings(document, "crash")
    assert crash["severity"] == "error" and "SIGSEGV" in crash["message"]
    text = output.plain(document)
    assert "Traceback" not in text and "SIGSEGV" in text


def test_hang_times_out_with_events_and_the_stack_it_hung_in():
    # The deadline covers the child's start and the imports before the hang: 15 s leaves a
    # busy machine room to reach the hang (phase "import hangstack"), which 4 s did not.
    document = probe(imports=["hangstack"], timeout=15)
    assert document["outcome"] == "timeout"
    assert document["interrupted"]["phase"] == "import hangstack"
    assert events(document, "$FLAGOS_HANG_STAGE")
    assert "_wait_for_device" in document["child"]["stderr_tail"]
    # The stack sleeps 600 s: the probe's deadline ended it (its reason says so), not the hang's end.
    assert document["interrupted"]["reason"] == "no answer within 15 s"


def test_import_failure_is_a_finding():
    document = probe(imports=["no_such_stack_module"], exercise=False)
    assert document["outcome"] == "import-failed"
    (failed,) = findings(document, "import-failed")
    assert "ModuleNotFoundError" in failed["message"]


# -- the demo stack through the CLI -----------------------------------------------------
@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    folder = tmp_path_factory.mktemp("demo")
    result = run_cli("probe", "--stack", "demo", "--json", str(folder / "probe.json"),
                     "--markdown", str(folder / "probe.md"), env=PROBE_COMPILE)
    with open(folder / "probe.json") as handle:
        document = json.load(handle)
    return result, document, (folder / "probe.md").read_text()


def test_demo_probe_is_healthy_and_its_compile_runs(demo):
    result, document, _ = demo
    # The import is healthy (the alias guard reads the saved original) and the alias covers what
    # dynamo asks once is_available() says yes (get_rng_state...): every step passes, no error.
    assert result.returncode == 0, result.stdout + result.stderr
    assert document["outcome"] == "ok"
    assert [f["kind"] for f in document["findings"] if f["severity"] in ("error", "warning")] == []
    assert document["facts"]["cuda_maps_to"]["repr"] == "'flagos'"
    assert document["phases"][:2] == ["import flagos_doctor.demo", "exercise: torch.flagos.current_device()"]
    writes = [(e["probe"], e["where"]["function"]) for e in events(document, kind="write")]
    assert ("torch.cuda.is_available", "_patch_vendor_compat") in writes
    assert ("torch.cuda.is_available", "_alias_cuda_to_flagos") in writes
    assert ("torch.Tensor.cuda", "_alias_cuda_to_flagos") in writes
    assert ("$FLAGOS_BACKEND_CONFIG", "_choose_backend_config") in writes
    assert writes.index(("$FLAGOS_BACKEND_CONFIG", "_choose_backend_config")) == 0
    lazy = events(document, "$FLAGOS_DEVICE_INITIALIZED")[0]
    assert lazy["phase"] == lazy["step"] == "exercise: torch.flagos.current_device()"
    assert lazy["where"]["file"] == "flagos_doctor/demo/device.py"
    compiled = next(o for o in document["outcomes"] if o["step"].startswith("exercise: torch.compile"))
    assert compiled["ok"] is True, compiled
    assert "Steps" in result.stdout and "Findings" in result.stdout and "Traceback" not in result.stderr


@pytest.fixture(scope="module")
def demo_seed_bug():
    result = run_cli("probe", "--stack", "demo", "--json", "-", env={"FLAGOS_DEMO_SEED_BUG": "1", **PROBE_COMPILE})
    return result, json.loads(result.stdout)


def test_demo_seed_bug_compile_failure_has_the_direct_cause_and_the_chain(demo_seed_bug):
    from test_probe_causes import DEMO, package_file, source_line

    result, document = demo_seed_bug
    assert result.returncode == 1
    direct, chain = findings(document, "failure-cause")
    dynamo = source_line(package_file("torch", "_dynamo/convert_frame.py"), "if torch.cuda.is_available():",
                         after="def preserve_global_state")
    redirect = source_line(DEMO, "torch.cuda.is_available = torch.flagos.is_available", after="def _patch_vendor_compat")
    assert direct["message"].startswith("torch.compile(fn, fullgraph=True) failed: AssertionError: Torch not compiled "
                                        "with CUDA enabled in torch/cuda/__init__.py:")
    assert (f"torch/_dynamo/convert_frame.py:{dynamo} (preserve_global_state.<locals>._fn) asked "
            f"torch.cuda.is_available(), which flagos_doctor/demo/__init__.py:{redirect} (_patch_vendor_compat) "
            f"redirected to answer True (the original answers False), and so took the branch of "
            f"`if torch.cuda.is_available():` (line {dynamo})") in direct["message"]
    # The chain, root first: the redirect, the guard's branch, the skipped alias, the stock function run.
    guard = source_line(DEMO, "if _native_cuda_available():")
    assert (f"a chain of causes, root first: (1) flagos_doctor/demo/__init__.py:{redirect} (_patch_vendor_compat) "
            "redirected torch.cuda.is_available to answer True (the original answers False); (2) "
            "flagos_doctor/demo/__init__.py:") in chain["message"]
    assert f"took the branch of `if _native_cuda_available():` (line {guard}) and returned" in chain["message"]
    rng = source_line(DEMO, "torch.cuda.get_rng_state = torch.flagos.get_rng_state")
    assert "(3) so lines " in chain["message"] and f"torch.device (line {source_line(DEMO, 'torch.device = device')})" \
        in chain["message"]
    assert ("(get_rng_state) ran stock torch.cuda.get_rng_state, which that code would have replaced"
            in chain["message"]), chain["message"]
    assert rng > guard
    (failed,) = findings(document, "exercise-failed")
    assert "Cause: see the failure-cause finding" in failed["message"]
    read = next(e for e in events(document, "torch.cuda.is_available", "read") if e["seq"] in direct["events"])
    assert read["by"] == "torch" and read["step"] == "exercise: torch.compile(fn, fullgraph=True)"
    assert read["callers"] and read["answer"] == {"ok": True, "repr": "True"}


def test_demo_views_render_from_the_document(demo):
    _, document, text = demo
    assert text.startswith("## flagos-doctor probe")
    assert "<details><summary>Probes and their writers</summary>" in text
    assert "flagos_doctor/demo/__init__.py:_alias_cuda_to_flagos" in text
    assert markdown.render(document) == text


def test_demo_seed_bug_exits_1_with_stale_guard(tmp_path):
    # One run gives the document (--json to a file) and the terminal view (stdout).
    result = run_cli("probe", "--stack", "demo", "--no-exercise", "--json", str(tmp_path / "probe.json"),
                     env={"FLAGOS_DEMO_SEED_BUG": "1"})
    assert result.returncode == 1, result.stderr
    document = json.loads((tmp_path / "probe.json").read_text())
    (stale,) = findings(document, "stale-guard")
    assert stale["message"].startswith(
        "flagos_doctor/demo/__init__.py:_native_cuda_available (in _alias_cuda_to_flagos) read torch.cuda.is_available"
    )
    assert "flagos_doctor/demo/__init__.py:_patch_vendor_compat" in stale["message"]
    # The reader returns the answer; its caller's `if` is the guard's branch, as it happened.
    demo = os.path.join(REPO_ROOT, "flagos_doctor", "demo", "__init__.py")
    with open(demo) as handle:
        guard = next(n for n, line in enumerate(handle, start=1) if "if _native_cuda_available():" in line)
    assert (f"so _alias_cuda_to_flagos, given that answer, took the branch of `if _native_cuda_available():` "
            f"(line {guard}) and returned (line {guard + 1}: `return`)") in stale["message"]
    # The headline says the child ran to its end, never "ok" beside the errors.
    assert document["outcome"] == "ok"
    headline = (result.stdout + result.stderr).split("flagos-doctor probe: ", 1)[1].splitlines()[0]
    assert ": ran to its end; 2 errors, " in headline, headline
    assert "ok" not in headline.split(": ", 1)[1]
    # ... and what that return skipped, read from the source: the rest of the function and its writes.
    with open(demo) as handle:
        lines = handle.read().splitlines()
    last = max(n for n, line in enumerate(lines, start=1) if line.startswith("    torch.cuda.set_rng_state = "))
    device = next(n for n, line in enumerate(lines, start=1) if line.strip() == "torch.device = device")
    assert (f"and returned (line {guard + 1}: `return`): lines {guard + 2}-{last} never ran, which would have "
            f"written torch.device (line {device}), torch.Tensor.cuda (line ") in stale["message"]
    assert findings(document, "alias-missing") and findings(document, "orphan-original")


# -- flag_gems --------------------------------------------------------------------------
def test_flag_gems_stack_imports_and_is_probed(flag_gems_env):
    document = probe(flag_gems_env, stack="flag_gems", exercise=False)
    assert document["outcome"] == "ok", document["outcomes"]
    assert document["imports"] == ["flag_gems"]
    assert "triton" in " ".join(p["name"] for p in document["probes"] if p.get("resolved"))
    assert not [f for f in document["findings"] if f["severity"] == "error"]


# -- usage ------------------------------------------------------------------------------
def test_a_module_stack_is_probed_as_its_import(seedbug):
    # --stack MODULE (not a built-in): the child imports that module, as --import does.
    document = probe(stack="seedbug", exercise=False)
    assert document["stack"] == "seedbug" and document["imports"] == ["seedbug"]
    assert [o["step"] for o in document["outcomes"]] == ["import seedbug"]
    assert document["outcome"] == "ok" and not document["notices"]
    assert [f["kind"] for f in document["findings"]] == [f["kind"] for f in seedbug["findings"]]
    assert findings(document, "stale-guard")


def test_default_without_torch_fl_probes_torch_with_a_notice():
    document = probe(exercise=False)
    assert document["imports"] == ["torch"]
    assert document["notices"] == [f"torch_fl is not installed for {sys.executable}; probing torch alone"]
    assert document["outcome"] == "ok"


def test_bad_usage_exits_2_with_one_line(tmp_path):
    result = run_cli("probe", "--stack", "no such")
    assert result.returncode == 2
    assert result.stderr.strip() == ("flagos-doctor: error: --stack: no stack or importable module 'no such'; "
                                     "stacks: demo, torch_fl, flag_gems, torch")
    bad = tmp_path / "watch.yaml"
    bad.write_text("probes:\n  - torch.cuda.Stream\n  - [oops\n")
    result = run_cli("probe", "--watch-file", str(bad))
    assert result.returncode == 2 and f"{bad}:" in result.stderr and "Traceback" not in result.stderr
    result = run_cli("probe", "--watch", "not a name")
    assert result.returncode == 2 and "--watch" in result.stderr


def test_tracing_keeps_identities_isinstance_and_compile():
    document = probe(imports=["compilestack"], exercise=False)
    assert document["outcome"] == "ok", document["findings"]
    (write,) = events(document, "torch.cuda.is_available", "write")
    assert write["where"]["function"] == "_redirect"
    reads = events(document, "torch.cuda.is_available", "read")
    assert {r["where"]["function"] for r in reads} >= {"_check_identities"}


def test_probe_outputs_never_print_secrets(tmp_path):
    # A stack that writes a secret-named variable and a URL with a password at import.
    (tmp_path / "secretstack.py").write_text(
        "import os\n"
        "os.environ['FLAGOS_API_KEY'] = 's3cr3t-api-value'\n"
        "os.environ['FLAGGEMS_DB_URL'] = 'postgresql://gems:pa55word-xyz@db.example/gems'\n"
        "import torch\n"
    )
    md = tmp_path / "probe.md"
    env = {"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    result = run_cli("probe", "--import", "secretstack", "--no-exercise", "--json", "-", "--markdown", str(md), env=env)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    written = {e["probe"] for e in document["events"] if e["kind"] == "write"}
    assert {"$FLAGOS_API_KEY", "$FLAGGEMS_DB_URL"} <= written  # recorded, with values hidden
    for text in (result.stdout, md.read_text()):
        assert "s3cr3t-api-value" not in text
        assert "pa55word-xyz" not in text


# -- Triton's driver on Python 3.12+: hook and dict watcher see one write once ----------------
_FAKE_TRITON = {
    "triton/__init__.py": "from . import runtime\n",
    "triton/backends/__init__.py": '''\
"""Like Triton's: one Backend per name, whose ``driver`` class answers ``is_active()``."""


class DriverBase:
    pass


class FakeDriver(DriverBase):
    @classmethod
    def is_active(cls):
        return True


class Backend:
    def __init__(self, driver):
        self.driver = driver


backends = {"fake": Backend(FakeDriver)}
''',
    "triton/runtime/__init__.py": "from .driver import driver\n",
    "triton/runtime/driver.py": '''\
"""Triton 3.5+'s DriverConfig: ``active`` falls back to ``default``, which creates the driver."""

from ..backends import backends


def _create_driver():
    (driver,) = [b.driver for b in backends.values() if b.driver.is_active()]
    return driver()


class DriverConfig:
    def __init__(self):
        self._default = None
        self._active = None

    @property
    def default(self):
        if self._default is None:
            self._default = _create_driver()
        return self._default

    @property
    def active(self):
        if self._active is None:
            self._active = self.default
        return self._active

    def set_active(self, driver):
        self._active = driver


driver = DriverConfig()
''',
    "drvstack/__init__.py": '''\
"""Reads Triton's active driver, which creates it (writes ``_default``, then ``_active``)."""

import triton


def _touch_driver():
    return triton.runtime.driver.active


_touch_driver()
''',
}


@pytest.mark.skipif(not PYTHON312, reason="needs a Python 3.12 interpreter")
def test_triton_driver_writes_are_recorded_once_with_dict_watchers_on_python312(tmp_path):
    # On the H200 (Python 3.12) each of _default/_active came twice: once from the
    # DriverConfig hook, once from the dict watcher (#2/#3, #4/#5 in surveys/h200/probe-flag_gems.md).
    for name, text in _FAKE_TRITON.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    path = os.pathsep.join([str(tmp_path), STACKS])
    document = probe({"PYTHONPATH": path}, imports=["drvstack"], exercise=False, python=PYTHON312)
    assert document["outcome"] == "ok", document["child"]
    assert document["python"]["version"].startswith("3.12") and document["python"]["dict_watchers"] is True
    (create,) = [e for e in document["events"] if e.get("creates_driver")]
    assert create["where"]["function"] == "_touch_driver" and create["is_active"] == {"fake": True}
    lines = _FAKE_TRITON["drvstack/__init__.py"].splitlines()
    touch_line = lines.index("    return triton.runtime.driver.active") + 1
    for attr, via in (
        ("_default", ["triton/runtime/driver.py:DriverConfig.default", "triton/runtime/driver.py:DriverConfig.active"]),
        ("_active", ["triton/runtime/driver.py:DriverConfig.active"]),
    ):
        writes = events(document, f"triton.runtime.driver.{attr}", "write")
        assert len(writes) == 1, f"{attr}: {len(writes)} write events, seq {[w['seq'] for w in writes]}"
        (write,) = writes
        assert write["writer_known"] is True and not write.get("inferred")
        assert write["where"]["function"] == "_touch_driver"
        assert write["where"]["file"] == "drvstack/__init__.py" and write["where"]["line"] == touch_line
        assert write["via"] == via
        assert write["value"]["repr"].startswith("<triton.backends.FakeDriver object")
