"""Issue 36's edges, each on real files and processes: a secret-named conf line never quotes
its value; a hanging --python is refused within --start-timeout, the running one not asked
again; a module stack without a usable setup() is one line naming it; probe --stack torch_fl
without torch_fl says how to build it."""

from __future__ import annotations

import os
import sys

import pytest

from conftest import REPO_ROOT, run_cli
from flagos_doctor.errors import BadInput

DEMO_CONF = os.path.join(REPO_ROOT, "flagos_doctor", "demo", "backends_demo.conf")
SECRET = "sekrit_conf_value_42"  # a word: it passes as a backend name


def test_a_secret_named_conf_line_never_prints_its_value(tmp_path):
    conf = tmp_path / "backends.conf"
    conf.write_text(f"abs = flagos_python\nMY_API_TOKEN = {SECRET}\n")
    done = run_cli("survey", "--stack", "demo", "--conf", str(conf), "--no-store", "-o", str(tmp_path / "s.json"))
    assert done.returncode == 2
    assert SECRET not in done.stderr + done.stdout
    assert f"{conf}:2: unknown backend (its value not shown: the name says secret) for MY_API_TOKEN" in done.stderr
    conf.write_text("abs = flagos_pithon\n")  # an ordinary typo is still quoted, to be fixed
    done = run_cli("survey", "--stack", "demo", "--conf", str(conf), "--no-store", "-o", str(tmp_path / "s.json"))
    assert done.returncode == 2 and "unknown backend 'flagos_pithon' for abs" in done.stderr


def test_a_hanging_python_is_refused_within_the_start_timeout(tmp_path):
    hangs = tmp_path / "python3"
    hangs.write_text("#!/bin/sh\nexec sleep 1000\n")
    hangs.chmod(0o755)
    done = run_cli("survey", "--stack", "demo", "--python", str(hangs), "--start-timeout", "2", "--no-store",
                   "-o", str(tmp_path / "s.json"))
    assert done.returncode == 2
    assert done.stderr == (f"flagos-doctor: error: --python: {hangs} is not a Python interpreter: "
                           "it did not answer `-c` within 2 s\n")


def test_the_running_interpreter_is_not_asked_again_but_another_path_to_it_is(tmp_path):
    # The default --python is the interpreter running flagos-doctor: it answers, so no `-c`
    # child asks it again on every command (with no time to answer, none was started). Another
    # path to the same file is another environment (a venv's `python` links to its base
    # binary): asked, and here given no time, refused.
    from flagos_doctor import checks

    assert checks.interpreter(sys.executable, timeout=0) == sys.executable
    link = tmp_path / "python3"
    os.symlink(sys.executable, link)
    with pytest.raises(BadInput, match=r"is not a Python interpreter: it did not answer `-c` within 0 s"):
        checks.interpreter(str(link), timeout=0)


def test_a_module_stack_without_a_usable_setup_is_one_line_naming_it(tmp_path):
    (tmp_path / "nosetup_stack.py").write_text("x = 1\n")
    (tmp_path / "nonesetup_stack.py").write_text("def setup():\n    return None\n")
    for module, says in (("nosetup_stack", "module nosetup_stack has no setup() -> device string"),
                         ("nonesetup_stack", "nonesetup_stack.setup() returned None, not a device string")):
        done = run_cli("survey", "--stack", module, "--conf", DEMO_CONF, "--ops", "abs", "--no-store",
                       "-o", str(tmp_path / f"{module}.json"), env={"PYTHONPATH": str(tmp_path)}, cwd=str(tmp_path))
        assert done.returncode == 2, done.stderr
        assert done.stderr.splitlines()[-1].startswith(f"flagos-doctor: error: --stack: {says}"), done.stderr
        assert len(done.stderr.splitlines()) == 1
        assert "Traceback" not in done.stderr


def test_probe_of_torch_fl_without_torch_fl_says_how_to_build_it(tmp_path):
    done = run_cli("probe", "--stack", "torch_fl", "--json", str(tmp_path / "p.json"),
                   env={"PYTHONPATH": REPO_ROOT}, cwd=str(tmp_path))
    assert "import torch_fl failed: ModuleNotFoundError" in done.stdout + done.stderr
    notes = [line for line in (done.stdout + done.stderr).splitlines() if "torch_fl is not importable by" in line]
    assert notes and "python -m flagos_doctor.torch_fl_build" in notes[0] and "PYTHONPATH=" in notes[0]
