"""The shared foundation: CLI start-up without torch, child processes, files, store, demo stack."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from flagos_doctor import childproc
from flagos_doctor.errors import BadInput
from flagos_doctor.files import load_json, write_json
from flagos_doctor.store import Store

from conftest import REPO_ROOT, run_cli


def test_cli_help_does_not_import_torch():
    code = "import sys; sys.argv=['flagos-doctor','--help']\n" \
           "from flagos_doctor import cli\n" \
           "try:\n    cli.main()\nexcept SystemExit:\n    pass\n" \
           "print('TORCH' if 'torch' in sys.modules else 'NO-TORCH')"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().endswith("NO-TORCH"), out.stdout[-500:]
    assert "probe" in out.stdout and "survey" in out.stdout


def test_cli_starts_on_a_typer_without_display_type_rich(monkeypatch):
    # Typer 0.9-0.12 (the H200 image's) has no TyperOption.display_type_rich: every command
    # there once died at import in the --help placeholder fix, which must leave such a Typer be.
    import typer.core

    from flagos_doctor import cli

    class OlderTyperOption:  # what that Typer's option class offers here: no rich display type
        is_flag = True

    monkeypatch.setattr(typer.core, "TyperOption", OlderTyperOption)
    cli._no_flag_placeholder()
    assert not hasattr(OlderTyperOption, "display_type_rich")


def test_cli_bad_usage_exits_2():
    result = run_cli("probe", "--no-such-option")
    assert result.returncode == 2


def _child_script(tmp_path, body: str) -> str:
    pkg = tmp_path / "childpkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "__main__.py").write_text(textwrap.dedent(body))
    return str(tmp_path)


def test_child_records_survive_a_real_segfault(tmp_path):
    path = _child_script(tmp_path, """
        import ctypes
        from flagos_doctor.channel import ChildChannel
        ch = ChildChannel.from_env()
        ch.emit({"n": 1})
        ch.emit({"n": 2})
        ctypes.string_at(0)  # a real null dereference
    """)
    env = dict(os.environ, PYTHONPATH=path + os.pathsep + REPO_ROOT)
    with childproc.Child(sys.executable, "childpkg", env=env) as child:
        records = list(child.records(timeout=60))
        end = child.wait(timeout=30)
        assert [r["n"] for r in records] == [1, 2]
        assert end.signal == "SIGSEGV"
        assert "Fatal Python error" in child.stderr_tail() or "Segmentation" in child.stderr_tail()


def test_child_timeout_is_reported(tmp_path):
    path = _child_script(tmp_path, """
        import time
        from flagos_doctor.channel import ChildChannel
        ChildChannel.from_env().emit({"started": True})
        time.sleep(600)
    """)
    env = dict(os.environ, PYTHONPATH=path + os.pathsep + REPO_ROOT)
    with childproc.Child(sys.executable, "childpkg", env=env) as child:
        assert child.recv(timeout=60) == {"started": True}
        with pytest.raises(childproc.ChildTimeout):
            child.recv(timeout=0.5)
        end = child.terminate_after_timeout()
        assert end.timed_out and end.describe() == "timed out"


def test_child_request_reply(tmp_path):
    path = _child_script(tmp_path, """
        from flagos_doctor.channel import ChildChannel
        ch = ChildChannel.from_env()
        while (req := ch.receive()) is not None:
            ch.emit({"echo": req["x"] * 2})
    """)
    env = dict(os.environ, PYTHONPATH=path + os.pathsep + REPO_ROOT)
    with childproc.Child(sys.executable, "childpkg", env=env) as child:
        for x in (1, 2, 3):
            child.send({"x": x})
            assert child.recv(timeout=60) == {"echo": 2 * x}
        child.close()
        assert child.wait(timeout=30).returncode == 0


def test_every_child_finds_this_flagos_doctor_first_and_nothing_beside_it(tmp_path):
    # One import-path policy for every child (probe, survey worker, report): a folder holding
    # only a link to this package, ahead of the caller's PYTHONPATH. Our install folder (a
    # site-packages) on the path would lend another interpreter torch, flag_gems, triton...
    path = _child_script(tmp_path, """
        import os, sys
        import flagos_doctor
        from flagos_doctor.channel import ChildChannel
        first = os.environ["PYTHONPATH"].split(os.pathsep)
        ChildChannel.from_env().emit({"record": "paths", "first": first, "listing": sorted(os.listdir(first[0])),
                                      "package": os.path.realpath(os.path.dirname(flagos_doctor.__file__))})
    """)
    env = dict(os.environ, PYTHONPATH=path)
    with childproc.Child(sys.executable, "childpkg", env=env) as child:
        record = child.recv(timeout=60)
    assert record["first"] == [childproc.package_folder(), path]
    assert record["listing"] == ["flagos_doctor"]
    assert record["package"] == os.path.realpath(os.path.join(REPO_ROOT, "flagos_doctor"))
    # Asked again, the policy neither repeats the folder nor drops the caller's entries.
    assert childproc.child_env(env)["PYTHONPATH"] == os.pathsep.join([childproc.package_folder(), path])
    assert childproc.child_env(childproc.child_env(env))["PYTHONPATH"] == childproc.child_env(env)["PYTHONPATH"]


def test_a_killed_parents_package_folder_is_removed_by_the_next_one(tmp_path):
    # A parent killed by SIGKILL or SIGTERM runs no exit hook: its folder stays behind until
    # the next parent's first child; a live parent's folder is left alone.
    gone = subprocess.Popen(["true"])
    gone.wait()
    left = tmp_path / f"{childproc.FOLDER_PREFIX}{gone.pid}-abc"
    left.mkdir()
    os.symlink(os.path.join(REPO_ROOT, "flagos_doctor"), left / "flagos_doctor")
    alive = tmp_path / f"{childproc.FOLDER_PREFIX}{os.getpid()}-xyz"
    alive.mkdir()
    code = "from flagos_doctor import childproc; print(childproc.package_folder())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, TMPDIR=str(tmp_path), PYTHONPATH=REPO_ROOT))
    assert done.returncode == 0, done.stderr
    made = done.stdout.strip()
    assert os.path.dirname(made) == str(tmp_path) and not os.path.exists(made)  # removed at its exit
    assert not left.exists() and alive.exists()
    assert os.path.isdir(os.path.join(REPO_ROOT, "flagos_doctor"))  # the link went, not what it named


def test_load_json_names_truncated_file(tmp_path):
    path = tmp_path / "results.json"
    write_json(path, {"schema": "flagos-doctor/survey/1", "overloads": {"abs": {"verdict": "STRICT"}}})
    text = path.read_text()
    path.write_text(text[: len(text) // 2])
    with pytest.raises(BadInput) as info:
        load_json(path, "flagos-doctor/survey/")
    assert str(path) in str(info.value) and "truncated" in str(info.value)


def test_load_json_refuses_foreign_schema(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"schema": "something-else/1"}))
    with pytest.raises(BadInput) as info:
        load_json(path, "flagos-doctor/survey/")
    assert "schema" in str(info.value) and str(path) in str(info.value)


def test_store_lookup_by_commit_prefix(tmp_path):
    store = Store(str(tmp_path / "store"))
    src = tmp_path / "r.json"
    src.write_text("{}")
    store.file("survey", "1adbc97478fb3f40", "fp1", str(src))
    store.file("survey", "1adf000000000000", "fp1", str(src))
    store.file("survey", "5e0f2aa000000000", "fp1", str(src))
    assert store.lookup("survey", "5e0f").endswith("fp1.json")
    with pytest.raises(BadInput, match="ambiguous"):
        store.lookup("survey", "1ad")
    assert "1adbc97478fb3f40" in store.lookup("survey", "1adb")
    with pytest.raises(BadInput, match="no results file"):
        store.lookup("survey", "ffff")


DEMO_CHECK = """
import os, torch, json
import flagos_doctor.demo as demo
from flagos_doctor.demo import kernels
x = torch.arange(12, dtype=torch.float32).reshape(3, 4) - 5
d = x.to("flagos")
out = {
    "device": str(d.device),
    "abs_ok": bool(torch.equal(torch.abs(d).cpu(), x.abs())),
    "erf_ok": bool(torch.allclose(torch.erf(d).cpu(), torch.erf(x))),
    "cuda_maps_to": str(torch.device("cuda")),
    "is_available": torch.cuda.is_available(),
    "remainder_scalar_ok": bool(torch.equal(torch.remainder(d, 3).cpu(), torch.remainder(x, 3))),
    "seeded_twice_equal": (torch.manual_seed(7), torch.rand(3))[1].tolist() == (torch.manual_seed(7), torch.rand(3))[1].tolist(),
    "kernel_calls": dict(kernels.kernel_calls),
    "fallback_calls": dict(kernels.fallback_calls),
}
print(json.dumps(out))
"""


def _demo(env_extra):
    env = dict(os.environ, **env_extra)
    proc = subprocess.run([sys.executable, "-c", DEMO_CHECK], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout.strip().splitlines()[-1]), proc.stderr


@pytest.fixture(scope="module")
def demo_logged():
    """One child of the demo stack with its dispatch and fallback logs on: DEMO_CHECK, then
    ALIAS_FORMS (the logs go to stderr only); their two outputs and the child's stderr."""
    env = dict(os.environ, FLAGOS_LOG_DISPATCH="1", FLAGOS_LOG_FALLBACK="1")
    proc = subprocess.run([sys.executable, "-c", DEMO_CHECK + ALIAS_FORMS], capture_output=True, text=True, env=env,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    check, forms = (json.loads(line) for line in proc.stdout.strip().splitlines()[-2:])
    return check, forms, proc.stderr


def test_demo_stack_runs_kernels_and_aliases_cuda(demo_logged):
    out, _, stderr = demo_logged
    assert out["device"] == "flagos:0"
    assert out["abs_ok"] and out["erf_ok"]
    assert out["remainder_scalar_ok"]  # a Scalar turned wrapped-number tensor survives the fallback
    assert out["seeded_twice_equal"]  # torch.manual_seed reaches the device module without recursing
    assert out["cuda_maps_to"] == "flagos"
    assert out["kernel_calls"].get("abs") == 1
    # erf is routed to flagos_python but the demo has no kernel: a real CPU fallback
    assert "erf" not in out["kernel_calls"] and any(k.startswith("erf") for k in out["fallback_calls"])
    assert "[flagos dispatch] abs -> flagos_python" in stderr
    assert "[flagos cpu_fallback] erf" in stderr


def test_demo_alias_honours_flagos_alias_cuda_0():
    out, _ = _demo({"FLAGOS_ALIAS_CUDA": "0"})
    assert out["cuda_maps_to"] == "cuda"


def test_demo_seed_bug_skips_the_alias():
    out, _ = _demo({"FLAGOS_DEMO_SEED_BUG": "1"})
    assert out["is_available"] is True  # the redirected probe answers for flagos
    assert out["cuda_maps_to"] == "cuda"  # so the guard returned early


def test_each_survey_of_one_setup_is_kept_in_the_store(tmp_path):
    # Three surveys of the same setup left one file: each overwrote the one before.
    store_root = tmp_path / "store"
    (tmp_path / "abs.conf").write_text("abs = flagos_python\n")
    for number in (1, 2, 3):
        done = run_cli("survey", "--stack", "demo", "--conf", "abs.conf", "--repeats", "0", "--baseline", "none", "-q",
                       "--store", str(store_root), "-o", f"r{number}.json", cwd=str(tmp_path))
        assert done.returncode == 0, done.stderr
    store = Store(str(store_root))
    entries = store.entries("survey")
    assert len(entries) == 3 and len({e.fingerprint for e in entries}) == 1 and len({e.key for e in entries}) == 1
    filed = {json.loads(open(e.path).read())["provenance"]["runs"][-1]["started"] for e in entries}
    assert filed == {json.loads((tmp_path / f"r{n}.json").read_text())["provenance"]["runs"][-1]["started"]
                     for n in (1, 2, 3)}
    # The same results filed again is no new run; a lookup finds the newest of the setup's runs.
    again = store.file("survey", entries[0].key, entries[0].fingerprint, str(tmp_path / "r2.json"))
    assert len(store.entries("survey")) == 3 and again in {e.path for e in entries}
    assert store.lookup("survey", entries[0].key[:6]) in {e.path for e in entries}


#: Each form torch_fl's alias (1adbc97, ``_alias_cuda_to_flagos``) rewrites, then one it leaves.
ALIAS_FORMS = """
import json, torch
import flagos_doctor.demo  # noqa: F401
from torch import nn
real_cuda = torch.ones(1).to("flagos").device  # a real torch.device, as made before the alias
forms = {
    "device= string": torch.ones(2, device="cuda").device,
    "device= cuda:0": torch.zeros(2, device="cuda:0").device,
    "device= torch.device": torch.arange(3, device=torch.device("cuda")).device,
    "Tensor.to positional": torch.ones(2).to("cuda").device,
    "Tensor.to keyword": torch.ones(2).to(device="cuda", dtype=torch.float64).device,
    "Tensor.cuda": torch.ones(2).cuda().device,
    "Module.cuda": nn.Linear(2, 2).cuda().weight.device,
    "Module.to": nn.Linear(2, 2).to("cuda").weight.device,
    "torch.device": torch.device("cuda"),
}
try:
    torch.cuda.Stream()
    stream = "made"
except Exception as error:
    stream = type(error).__name__
print(json.dumps({"forms": {k: str(v) for k, v in forms.items()}, "stream": stream,
                  "isinstance": isinstance(real_cuda, torch.device)}))
"""


def test_demo_alias_covers_what_torch_fls_covers_and_no_more(demo_logged):
    _, out, _ = demo_logged  # ALIAS_FORMS, run after DEMO_CHECK in the same demo child
    assert out["forms"] == {form: "flagos:0" if form != "torch.device" else "flagos" for form in out["forms"]}
    assert len(out["forms"]) == 9 and out["isinstance"]
    assert out["stream"] == "RuntimeError"  # torch.cuda's own calls are not the alias's
