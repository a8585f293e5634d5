"""Under CI (``CI`` set to any non-empty value), a skip CI can satisfy is a failure
(tests/conftest.py): run on a small test file through this suite's conftest as a plugin."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import CI_MAY_SKIP, REPO_ROOT

TESTS = '''
import pytest
pytest.importorskip("json")

def test_skipped_at_run_time():
    pytest.skip("flag_gems 4.2.0 is not installed")

@pytest.mark.skipif(True, reason="needs taskset (util-linux)")
def test_skipped_by_a_mark():
    pass

def test_a_skip_ci_cannot_satisfy():
    pytest.skip("this machine has a CUDA runtime: no alias is owed")

@pytest.mark.xfail(reason="known")
def test_expected_to_fail():
    assert False
'''
MODULE_SKIP = 'import pytest\npytest.importorskip("no_such_module_for_the_ci_test")\n\ndef test_never():\n    pass\n'


def run(tmp_path, ci: str | None, text: str = TESTS):
    (tmp_path / "test_some.py").write_text(text)
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    env["PYTHONPATH"] = os.pathsep.join([os.path.join(REPO_ROOT, "tests"), REPO_ROOT])
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "conftest", "-p", "no:cacheprovider", "-q", "-rA",
                           "test_some.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    return done.stdout.splitlines()[-1], done


@pytest.mark.parametrize("ci", ["1", "true", "yes"])
def test_under_ci_a_skip_ci_can_satisfy_fails(tmp_path, ci):
    summary, done = run(tmp_path, ci)
    assert done.returncode == 1
    # the run-time skip fails, the mark's skip errors; the allowed skip and the xfail stay
    assert summary.startswith("1 failed, 1 skipped, 1 xfailed, 1 error"), done.stdout[-2000:]
    assert f"skipped under CI={ci!r}, which can run it: flag_gems 4.2.0 is not installed" in done.stdout
    assert "which can run it: needs taskset" in done.stdout
    summary, done = run(tmp_path, ci, MODULE_SKIP)
    assert done.returncode != 0 and "which can run it: could not import 'no_such_module_for_the_ci_test'" in done.stdout


@pytest.mark.parametrize("ci", [None, ""])
def test_outside_ci_skips_are_skips(tmp_path, ci):
    summary, done = run(tmp_path, ci)
    assert done.returncode == 0 and summary.startswith("3 skipped, 1 xfailed"), done.stdout[-2000:]


def test_every_allowed_skip_says_why():
    assert CI_MAY_SKIP and all(len(why) > 20 for why in CI_MAY_SKIP.values())
