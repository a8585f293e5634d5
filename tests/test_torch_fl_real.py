"""The doctor's first patient: a real torch_fl, built from its public source (1adbc97) for this
torch by ``python -m flagos_doctor.torch_fl_build`` (``.ci/run`` builds it; see conftest's
``real_torch_fl``). On this CPU machine it imports, registers ``flagos`` and has no device.

Expected files and lines come from the imported torch_fl's own source, read here, never
from a copy of an earlier run's output.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os

import pytest

from flagos_doctor.errors import EXIT_CAUSE
from conftest import real_torch_fl, wrapped_python
from flagos_doctor.probe import decisions

COMMIT = "1adbc97478fb3f40dffdbd19232346727a6c0953"


@pytest.fixture(scope="module")
def site():
    return real_torch_fl()


@pytest.fixture(scope="module")
def source(site):
    """torch_fl/__init__.py of the build the probe imports: its path and its lines."""
    path = os.path.join(site, "torch_fl", "__init__.py")
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    return path, text


def env_for(site, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("FLAGOS_", "GEMS_", "FLAGGEMS_"))}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, os.environ.get("PYTHONPATH")) if p)
    env.update(extra)
    return env


def run_with(site, *args, cwd=None, **extra):
    """The CLI in a real subprocess, torch_fl importable only through the build's folder."""
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "flagos_doctor", *args], capture_output=True, text=True,
                          env=env_for(site, **extra), timeout=600, cwd=cwd)


@pytest.fixture(scope="module")
def probed(site, tmp_path_factory):
    out = tmp_path_factory.mktemp("probe") / "probe.json"
    done = run_with(site, "probe", "--stack", "torch_fl", "--json", str(out), "--quiet")
    document = json.loads(out.read_text())
    return done, document


def enclosing_function(text: str, line: int) -> str:
    """The innermost function of the module source ``text`` holding ``line``, or ``<module>``."""
    best, best_line = "<module>", 0
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno <= line <= node.end_lineno:
            if node.lineno >= best_line:
                best, best_line = node.name, node.lineno
    return best


def source_line(text: str, line: int) -> str:
    return text.splitlines()[line - 1]


def line_in(text: str, function: str, snippet: str) -> int:
    """The line of ``snippet`` inside ``function`` (``<module>``: at top level) of ``text``."""
    for number, line in enumerate(text.splitlines(), start=1):
        if snippet in line and enclosing_function(text, number) == function:
            return number
    raise AssertionError(f"{snippet!r} is not in {function} of torch_fl/__init__.py")


# What torch_fl's import writes on a machine without CUDA, in order: (probe, the function of
# torch_fl/__init__.py that writes it, what that source line says).
WRITERS = [
    ("$FLAGOS_BACKEND_CONFIG", "_select_backend_config", 'os.environ["FLAGOS_BACKEND_CONFIG"]'),
    ("PrivateUse1 backend name", "<module>", 'rename_privateuse1_backend("flagos")'),
    ("torch.flagos", "<module>", '_register_device_module("flagos"'),
    ("$GEMS_VENDOR", "_patch_flaggems_codegen_config", 'os.environ["GEMS_VENDOR"] = "ascend"'),
    ("torch.device", "_alias_cuda_to_flagos", "torch.device = "),
    ("torch.Tensor.cuda", "_alias_cuda_to_flagos", "torch.Tensor.cuda = "),
    ("torch.cuda.is_available", "_alias_cuda_to_flagos", "torch.cuda.is_available = "),
    ("torch.cuda.device_count", "_alias_cuda_to_flagos", "torch.cuda.device_count = "),
    ("torch.cuda.current_device", "_alias_cuda_to_flagos", "torch.cuda.current_device = "),
    ("torch.cuda.set_device", "_alias_cuda_to_flagos", "torch.cuda.set_device = "),
    ("torch.cuda.synchronize", "_alias_cuda_to_flagos", "torch.cuda.synchronize = "),
    ("torch.cuda.get_device_properties", "_alias_cuda_to_flagos", "torch.cuda.get_device_properties = "),
]


def test_probe_names_torch_fl_writers_in_order_with_their_phases(probed, source):
    _, document = probed
    _, text = source
    writes = [e for e in document["events"] if e["kind"] == "write" and e["step"] == "import torch_fl"
              and e["where"].get("file") == "torch_fl/__init__.py"]
    assert [e["probe"] for e in writes] == [probe for probe, _, _ in WRITERS]
    for event, (probe, function, snippet) in zip(writes, WRITERS):
        line = event["where"]["line"]
        assert enclosing_function(text, line) == function, (probe, line)
        assert snippet in source_line(text, line), (probe, line, source_line(text, line))
        assert event["phase"] == ("import torch_fl" if function == "<module>" else f"torch_fl/__init__.py:{function}")
    # the final state: the backend renamed, the cuda alias in place
    facts = document["facts"]
    assert facts["privateuse1"] == "flagos"
    assert facts["cuda_maps_to"] == {"ok": True, "repr": "'flagos'"}
    assert facts["env"]["GEMS_VENDOR"]["final"] == "ascend"
    conf = facts["env"]["FLAGOS_BACKEND_CONFIG"]["final"]
    assert conf.endswith(os.path.join("torch_fl", "configs", "backends_cuda.conf")) and os.path.isfile(conf)


def test_no_flagos_device_is_one_finding_not_a_chain_of_failures(probed):
    done, document = probed
    assert done.returncode == 1, done.stderr
    kinds = [f["kind"] for f in document["findings"]]
    assert kinds.count("no-device") == 1
    assert "exercise-failed" not in kinds and "triton-driver" not in kinds
    (finding,) = [f for f in document["findings"] if f["kind"] == "no-device"]
    assert finding["severity"] == "error" and finding["probe"] == "torch.flagos"
    assert "torch.flagos.device_count() answers 0" in finding["message"]
    assert "no CUDA driver (libcuda) can be loaded" in finding["message"]
    # what failed because of it, from the exercise outcomes of this very run
    failed = [o for o in document["outcomes"] if o["step"].startswith("exercise") and not o["ok"]]
    assert failed
    for outcome in failed:
        assert outcome["error"].splitlines()[0][:60] in finding["message"]


def test_triton_reading_the_replaced_is_available_is_a_latent_hazard(probed, source):
    _, document = probed
    _, text = source
    hazards = [f for f in document["findings"] if f["kind"] == "latent-hazard"]
    assert len(hazards) == 1
    (hazard,) = hazards
    assert hazard["severity"] == "warning" and hazard["probe"] == "torch.cuda.is_available"
    line = line_in(text, "_alias_cuda_to_flagos", "torch.cuda.is_available = ")
    assert f"torch_fl/__init__.py:_alias_cuda_to_flagos (line {line}) had replaced it" in hazard["message"]
    assert "triton/backends/nvidia/driver.py:CudaDriver.is_active" in hazard["message"]
    assert "the replacement and the original both answer False" in hazard["message"]
    # evaluated in the child with the probe answering True: NVIDIA's driver would be chosen
    assert "had it answered True" in hazard["message"] and "nvidia: True" in hazard["message"]
    assert "Triton would create the nvidia backend's driver" in hazard["message"]
    (write,) = [e for e in document["events"] if e["probe"] == "torch.cuda.is_available" and e["kind"] == "write"]
    assert hazard["events"][0] == write["seq"]


def test_vendor_branch_says_which_branch_and_why(probed, source):
    _, document = probed
    _, text = source
    (finding,) = [f for f in document["findings"] if f["kind"] == "vendor-branch"]
    line = line_in(text, "_patch_flaggems_codegen_config", 'os.environ["GEMS_VENDOR"] = "ascend"')
    assert f"_patch_flaggems_codegen_config (line {line}): its Ascend fallback branch" in finding["message"]
    assert "is_nvidia_cuda_available() answers False" in finding["message"]


def test_a_preset_gems_vendor_is_said_to_win(site, tmp_path):
    out = tmp_path / "probe.json"
    run_with(site, "probe", "--stack", "torch_fl", "--no-exercise", "--json", str(out), "--quiet",
             GEMS_VENDOR="ascend", FLAGGEMS_DB_URL=f"sqlite:///{tmp_path}/gems.db")
    document = json.loads(out.read_text())
    (finding,) = [f for f in document["findings"] if f["kind"] == "vendor-branch"]
    assert "GEMS_VENDOR was 'ascend' before torch_fl was imported" in finding["message"]
    assert not [e for e in document["events"] if e["probe"] == "$GEMS_VENDOR" and e["kind"] == "write"]


def test_a_gems_vendor_rewritten_from_c_after_torch_fl_keeps_torch_fls_branch(site, tmp_path):
    # A write with no writer (libc setenv, seen at the step's end) has no file: the vendor
    # rule once stopped the whole probe on it (an internal error instead of a document).
    out = tmp_path / "probe.json"
    stacks = os.path.join(os.path.dirname(__file__), "fixtures", "probe_stacks")
    done = run_with(site, "probe", "--stack", "torch_fl", "--import", "csetenv", "--no-exercise", "--json", str(out),
                    "--quiet", PYTHONPATH=os.pathsep.join([site, stacks]))
    assert "internal error" not in done.stderr
    document = json.loads(out.read_text())
    writes = [e for e in document["events"] if e["probe"] == "$GEMS_VENDOR" and e["kind"] == "write"]
    assert [(w["writer_known"], w["value"]["repr"]) for w in writes] == [(True, "'ascend'"), (False, "'metax'")]
    assert writes[1]["where"]["file"] is None
    (finding,) = [f for f in document["findings"] if f["kind"] == "vendor-branch"]
    assert finding["message"].startswith("torch_fl set GEMS_VENDOR='ascend' in torch_fl/__init__.py:")


def test_decisions_read_from_torch_fls_own_guards(source):
    path, text = source
    # the cuda-alias guard: `if torch.cuda.is_available(): return`
    guard = line_in(text, "_alias_cuda_to_flagos", "if torch.cuda.is_available():")
    on_cuda = decisions.source_decision(path, guard, "is_available", True)
    assert on_cuda["evaluated"] and on_cuda["statement"] == "if torch.cuda.is_available():"
    assert on_cuda["now"] == f"line {guard + 1}: `return`"
    assert on_cuda["other"] == "no branch: it goes on past the if"
    # the CUDA init: `if (... and ... and torch.cuda.is_available()): torch.cuda.init()`
    init = line_in(text, "<module>", "and torch.cuda.is_available()")
    # (the read is the last operand of an `and`: the operands before it were true, or it
    # would not have been read)
    call = min(n for n, line in enumerate(text.splitlines(), start=1) if line.strip() == "torch.cuda.init()" and n > init)
    answered_true = decisions.source_decision(path, init, "is_available", True)
    assert answered_true["evaluated"] and answered_true["other"] == "no branch: it goes on past the if"
    assert answered_true["now"] == f"line {call}: `torch.cuda.init()`"
    answered_false = decisions.source_decision(path, init, "is_available", False)
    assert answered_false["evaluated"] and answered_false["other"] == f"line {call}: `torch.cuda.init()`"
    # a read that no if tests: said, not guessed
    elsewhere = line_in(text, "_alias_cuda_to_flagos", "torch.cuda.is_available = ")
    unknown = decisions.source_decision(path, elsewhere, "is_available", False)
    assert not unknown["evaluated"] and "does not test the answer in an if" in unknown["why"]


def test_report_fills_torch_fl_version_branch_from_the_real_build(site, tmp_path):
    out = tmp_path / "report.json"
    # The environment is the point, not the probe's compile step (FLAGOS_DOCTOR_PROBE_COMPILE).
    done = run_with(site, "report", "--stack", "torch_fl", "--json", str(out), "--markdown", str(tmp_path / "r.md"),
                    FLAGOS_DOCTOR_PROBE_COMPILE="0")
    assert done.returncode == 0, done.stderr  # a report was written (docs/report.md)
    bundle = json.loads(out.read_text())
    field = next(f["value"] for f in bundle["template"] if f["field"] == "torch_fl Version/Branch")
    extension = [n for n in os.listdir(os.path.join(site, "torch_fl")) if n.startswith("_C") and n.endswith(".so")]
    with open(os.path.join(site, "torch_fl", extension[0]), "rb") as handle:
        md5 = hashlib.md5(handle.read()).hexdigest()
    assert field.startswith("0.1.0, ")
    assert f"commit {COMMIT[:12]}" in field and "clean" in field
    assert "commit from flagos-doctor build record (tarball " in field
    assert f"extension md5 {md5}" in field
    assert "conf in force " in field and "backends_cuda.conf (chosen by torch_fl at import)" in field
    assert field in (tmp_path / "r.md").read_text()
    platform = next(f["value"] for f in bundle["template"] if f["field"] == "Platform")
    assert platform.endswith("accelerator: none found (device type flagos)")


def test_report_torch_fl_commit_override_is_said_as_given(site, tmp_path):
    out = tmp_path / "report.json"
    run_with(site, "report", "--stack", "torch_fl", "--json", str(out), "--markdown", str(tmp_path / "r.md"),
             "--torch-fl-commit", "5e0f2aa", FLAGOS_DOCTOR_PROBE_COMPILE="0")
    entry = json.loads(out.read_text())["environment"]["packages"]["torch_fl"]
    assert entry["commit"] == "5e0f2aa" and entry["commit_source"] == "given by the user (--torch-fl-commit)"
    assert entry["commit_found"] == COMMIT and entry["dirty"] is None


def test_survey_provenance_of_the_real_build_and_the_users_commit(site, tmp_path):
    """On CPU only the harness self-check (--device cpu) can run; its provenance is real."""
    # The README's bare conf name, from a folder without it: torch_fl's own configs/ file, said.
    conf = os.path.join(site, "torch_fl", "configs", "backends_flaggems.conf")
    out = tmp_path / "survey.json"
    done = run_with(site, "survey", "--stack", "torch_fl", "--device", "cpu", "--conf", "backends_flaggems.conf",
                    "--ops", "abs", "--no-store", "-o", str(out), "--torch-fl-commit", "5e0f2aa", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert f"--conf backends_flaggems.conf: {conf} (the torch_fl stack's; none in the current folder)" in done.stderr
    provenance = json.loads(out.read_text())["provenance"]
    assert json.dumps(conf) in out.read_text()
    torch_fl = provenance["torch_fl"]
    assert torch_fl["commit"] == "5e0f2aa" and torch_fl["commit_source"] == "given by the user (--torch-fl-commit)"
    assert torch_fl["commit_found"] == COMMIT and torch_fl["version"] == "0.1.0"
    assert torch_fl["commit_found_source"].startswith("flagos-doctor build record (tarball ")
    assert provenance["store_key"] == "5e0f2aa"


def test_the_alias_guards_early_return_names_what_it_would_skip(source):
    # What a stale guard would say on torch_fl: read from its own source, as the probe's child does.
    path, text = source
    lines = text.splitlines()
    start = next(n for n, line in enumerate(lines, start=1) if line.startswith("def _alias_cuda_to_flagos"))
    guard = next(n for n, line in enumerate(lines, start=1) if n > start and line.strip() == "if torch.cuda.is_available():")
    decision = decisions.source_decision(path, guard, "is_available", True)
    assert decision["now"] == f"line {guard + 1}: `return`"
    skipped = decision["skipped"]
    assert skipped["ended_by"] == "return" and skipped["lines"][0] == guard + 2
    written = {w["name"]: w["line"] for w in skipped["writes"]}
    for name, assigned in (("torch.device", "torch.device = device"), ("torch.Tensor.cuda", "torch.Tensor.cuda = _tensor_cuda"),
                           ("torch.cuda.current_device", "torch.cuda.current_device = flagos.current_device")):
        assert written[name] == next(n for n, line in enumerate(lines, start=1) if n > start and line.strip() == assigned)


def test_a_survey_without_the_flagos_device_stops_before_any_case_in_one_line(site, tmp_path):
    # It ran every case into the same error for minutes, then exit 0 with all UNTESTED.
    # One overload: the survey starts a worker for each (a second was one more import of torch_fl).
    conf = os.path.join(site, "torch_fl", "configs", "backends_flaggems.conf")
    out = tmp_path / "survey.json"
    done = run_with(site, "survey", "--stack", "torch_fl", "--conf", conf, "--ops", "abs", "--no-store",
                    "-o", str(out))
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("flagos-doctor: error: --stack: the torch_fl stack's device 'flagos' reports none here")
    assert "--no-device-ok" in line and not out.exists()
    done = run_with(site, "survey", "--stack", "torch_fl", "--conf", "nope.conf", "--no-store", "-o", str(out),
                    cwd=str(tmp_path))
    assert done.returncode == 2 and done.stderr.strip().splitlines() == [
        f"flagos-doctor: error: --conf: no nope.conf in the current folder nor in the torch_fl stack's "
        f"{os.path.dirname(conf)}"], done.stderr


def test_no_device_ok_surveys_anyway(site, tmp_path):
    """It surveys, and the bindings check starts beside the workers, not after the first is
    up (it imports flag_gems: seconds the cases would wait on a machine starting 16 workers).
    The ``--python`` given holds each worker until the check's child has started (two
    minutes at most, then says so): a check that waits for a worker shows as that note."""
    conf = os.path.join(site, "torch_fl", "configs", "backends_flaggems.conf")
    out, check_started, notes = tmp_path / "survey.json", tmp_path / "check-started", tmp_path / "notes"
    python = wrapped_python(tmp_path, f"""  *static_check*) touch {check_started} ;;
  *child.worker*) n=0
    while [ ! -e {check_started} ]; do
      n=$((n + 1)); [ $n -gt 1200 ] && {{ echo "a worker waited 120 s for the check" >> {notes}; break; }}
      sleep 0.1
    done ;;""")
    done = run_with(site, "survey", "--stack", "torch_fl", "--conf", conf, "--ops", "abs", "--no-store", "-q",
                    "--no-device-ok", "--repeats", "0", "--baseline", "none", "-o", str(out), "--workers", "2",
                    "--python", str(python))
    assert done.returncode in (0, 1), done.stderr
    assert not notes.exists(), notes.read_text()
    document = json.loads(out.read_text())
    assert document["overloads"]["abs"]["cases"]
    check = document["provenance"]["flag_gems_bindings"]
    assert check["calls"] == 402 and check["library"].startswith(site), check  # flag_gems needs a device: "error"


DEVICE_MADE_EARLY = '''import torch
import torch_fl  # noqa: F401

DEVICE = torch.device("cuda")


def run(x, device=DEVICE):
    return (x * 2).to(device)


print(run(torch.ones(4)).device)
'''


NO_DEVICE_CASES = """import torch
import torch_fl  # noqa: F401


def test_shape():
    torch.ones(2, 3) @ torch.ones(2, 3)


def test_meta():
    torch.ones(2) + torch.ones(2, device="meta")


def test_assert():
    assert 1 + 1 == 3, "arithmetic"


def test_own():
    raise RuntimeError("invalid device index in my config file")


def test_flagos():
    torch.zeros(3, device="flagos")


def test_cuda():
    torch.zeros(3).cuda()
"""


def test_on_a_machine_without_the_device_only_failures_on_it_get_the_no_device_cause(site, tmp_path):
    """Through torch_fl's alias mode every torch call has a torch_fl frame: a shape error,
    cpu against meta tensors, the program's own assertion and its own error naming a device
    get no cause; a tensor made on ``flagos`` or moved by ``.cuda()`` gets no-device. One
    pytest run under explain, a failure each."""
    (tmp_path / "test_no_device_cases.py").write_text(NO_DEVICE_CASES)
    out = tmp_path / "why.json"
    done = run_with(site, "explain", "--json", str(out), "--", "python", "-m", "pytest", "-q", "-p", "no:cacheprovider",
                    "test_no_device_cases.py", cwd=str(tmp_path))
    document = json.loads(out.read_text())
    how = {c["id"]: c["how"] for c in document["causes"]}
    found = {f["test"].rsplit("::", 1)[1]: [how[i] for i in f["causes"]] for f in document["failures"]}
    assert found == {"test_shape": [], "test_meta": [], "test_assert": [], "test_own": [],
                     "test_flagos": ["no-device"], "test_cuda": ["no-device"]}, done.stderr[-3000:]
    assert done.returncode == EXIT_CAUSE


def test_explain_of_a_program_using_its_device_names_the_stack_and_no_device_and_no_false_chain(site, tmp_path):
    """On this CPU machine torch_fl installs its alias (its guard's probe answers False either
    way) and has no device: the program's "cuda" device, made in a module constant, reaches
    torch_fl's allocator and fails. explain names the stack it imported, says no-device, and
    gives the failure that cause, never a chain: no guard skipped the alias (exit 10)."""
    program = tmp_path / "device_made_early.py"
    program.write_text(DEVICE_MADE_EARLY)
    out = tmp_path / "why.json"
    done = run_with(site, "explain", "--json", str(out), "--", "python", str(program))
    document = json.loads(out.read_text())
    assert done.returncode == EXIT_CAUSE and document["program"]["returncode"] == 1, done.stderr
    assert document["stack"] == "torch_fl" and "(stack torch_fl)" in done.stderr
    (failure,) = document["failures"]
    assert failure["error"] == "RuntimeError: CachingDeviceAllocator: invalid device index"
    (cause,) = document["causes"]
    assert failure["causes"] == [cause["id"]] and cause["how"] == "no-device" and cause["probe"] == "torch.flagos"
    assert cause["frame"]["file"] == "torch_fl/__init__.py"
    assert "and this machine has none (torch.flagos.device_count() answers 0" in cause["message"]
    assert "no-device" in [f["kind"] for f in document["findings"] if f["severity"] == "error"]
    writes = {e["probe"] for e in document["events"] if e["kind"] == "write"}
    assert {"torch.device", "torch.Tensor.cuda"} <= writes  # the alias was installed
