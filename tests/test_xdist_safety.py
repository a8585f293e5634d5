"""What makes the suite safe to run on many workers at once and in any order
(tests/conftest.py): a run a test starts without ``--store`` files into its own process's
store, never the user's nor another worker's."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

from conftest import TEST_STORE_PREFIX


def test_a_run_without_store_files_into_this_processs_store_not_the_users(tmp_path):
    store = os.environ["FLAGOS_DOCTOR_STORE"]
    assert os.path.basename(store).startswith(TEST_STORE_PREFIX)
    assert os.path.dirname(store) == tempfile.gettempdir() and os.path.isdir(store)  # tempfile.mkdtemp's: this process's
    done = subprocess.run([sys.executable, "-c", "from flagos_doctor.store import default_root; print(default_root())"],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "HOME": str(tmp_path)})
    assert done.stdout.strip() == store, done.stderr  # what a child's Store() takes without --store


def test_each_file_is_said_as_it_ends_with_its_outcomes_under_xdist(tmp_path):
    # tests/conftest.py as a plugin of a pytest run of two files of its own, on two workers.
    (tmp_path / "test_one.py").write_text("def test_a():\n    pass\n\n\ndef test_b():\n    assert False\n")
    (tmp_path / "test_two.py").write_text("import pytest\n\n\n@pytest.mark.skip('no')\ndef test_c():\n    pass\n")
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGOS_DOCTOR_STORE", "CI")}  # not a nested run
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")])
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-n", "2",
                           "--dist", "loadfile", "test_one.py", "test_two.py"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert done.returncode == 1, done.stdout[-2000:]
    said = [line.split("] ", 1)[1] for line in done.stdout.splitlines() if line.startswith("[tests ")]
    assert sorted(said) == ["test_one.py: 1 failed, 1 passed", "test_two.py: 1 skipped"], done.stdout[-2000:]
    assert any(line.startswith("[tests ") and " of 3 done] " in line for line in done.stdout.splitlines())


def test_each_worker_files_into_a_store_of_its_own_and_takes_the_slowest_files_first(tmp_path):
    # A run of tests/conftest.py's own, on two workers then one: what each test saw is logged.
    log = tmp_path / "seen.log"
    body = ("import os\n\n\ndef test_here():\n    with open({log!r}, 'a') as handle:\n"
            "        handle.write(f\"{{__name__}} {{os.environ['PYTEST_XDIST_WORKER']}} "
            "{{os.environ['FLAGOS_DOCTOR_STORE']}}\\n\")\n").format(log=str(log))
    for name in ("test_quick.py", "test_slow.py"):
        (tmp_path / name).write_text(body)
    # Last time test_slow.py was the slower: it starts first (pytest's cache, as a run writes it).
    cached = tmp_path / ".pytest_cache" / "v" / "flagos-doctor" / "file-seconds"
    cached.parent.mkdir(parents=True)
    env = {k: v for k, v in os.environ.items() if k not in ("FLAGOS_DOCTOR_STORE", "CI")}  # a run of its own
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.abspath(__file__)), env.get("PYTHONPATH", "")])

    def run(workers):
        log.write_text("")
        cached.write_text('{"test_quick.py": 1.0, "test_slow.py": 50.0}')  # each run writes its own
        done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-n", str(workers), "--dist", "loadfile",
                               "--no-loadscope-reorder", "test_quick.py", "test_slow.py"],
                              capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
        assert done.returncode == 0, done.stdout[-2000:]
        return [line.split() for line in log.read_text().splitlines()]

    seen = run(2)
    stores = {worker: store for _, worker, store in seen}
    assert sorted(stores) == ["gw0", "gw1"] and stores["gw0"] != stores["gw1"]
    assert all(os.path.basename(s).startswith(TEST_STORE_PREFIX) for s in stores.values())
    assert not any(os.path.exists(s) for s in stores.values())  # each removed as its worker ended
    assert [module for module, _, _ in run(1)] == ["test_slow", "test_quick"]
