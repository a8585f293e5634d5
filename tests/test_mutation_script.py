"""scripts/mutation's own promises that a wrong score would follow from: a mutant's run is
stopped when it grows past its memory, and what it started goes with it."""

import importlib.machinery
import importlib.util
import os
import time

from conftest import REPO_ROOT, alive

#: A test that starts a child in a session of its own which starts another, again in a
#: session of its own: that grandchild writes its pid to ``PID_FILE``, holds ``MIB`` MiB
#: (touched, so resident), then sleeps.
GROWING_TEST = '''
import os, subprocess, sys

HOLD = """
import os, sys, time
open(sys.argv[2], "w").write(str(os.getpid()))
held = bytearray(int(sys.argv[1]) << 20)
held[::4096] = b"x" * len(held[::4096])
time.sleep(600)
"""

def test_holds_memory_in_a_grandchild():
    middle = "import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True).wait()"
    subprocess.Popen([sys.executable, "-c", middle, sys.executable, "-c", HOLD, os.environ["MIB"],
                      os.environ["PID_FILE"]], start_new_session=True).wait()
'''


def mutation_script():
    loader = importlib.machinery.SourceFileLoader("mutation_script", os.path.join(REPO_ROOT, "scripts", "mutation"))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def test_a_run_past_its_memory_is_stopped_as_killed_with_the_process_holding_it(tmp_path, monkeypatch):
    mutation = mutation_script()
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_grow.py").write_text(GROWING_TEST)
    pid_file = tmp_path / "holder.pid"
    monkeypatch.setenv("MIB", "400")
    monkeypatch.setenv("PID_FILE", str(pid_file))
    # the limit at 200 MiB: the grandchild's 400 are over it; nothing else is near it (pytest
    # and the middle child hold tens of MiB)
    status, _ = mutation.run_tests(str(repo), ["tests/test_grow.py"], timeout=300, memory_limit=200 << 20)
    assert status == "memory" and "memory" in mutation.KILLED
    holder = int(pid_file.read_text())
    for _ in range(100):  # SIGKILLed: gone once the kernel has reaped it (init's child by then)
        if not alive(holder):
            break
        time.sleep(0.1)
    assert not alive(holder)


def test_a_run_within_its_memory_ends_as_its_tests_say(tmp_path, monkeypatch):
    mutation = mutation_script()
    repo = tmp_path / "repo"
    (repo / "tests").mkdir(parents=True)
    (repo / "tests" / "test_small.py").write_text("def test_small():\n    assert bytearray(8 << 20)\n")
    assert mutation.run_tests(str(repo), ["tests/test_small.py"], timeout=300, memory_limit=200 << 20)[0] == "survived"
    (repo / "tests" / "test_small.py").write_text("def test_small():\n    assert not bytearray(8 << 20)\n")
    assert mutation.run_tests(str(repo), ["tests/test_small.py"], timeout=300, memory_limit=200 << 20)[0] == "killed"
