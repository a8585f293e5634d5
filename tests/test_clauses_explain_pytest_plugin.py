"""Each promise of flagos_doctor/explain/pytest_plugin.py's docstrings, on real pytest runs
under ``explain`` (and one without it): each test a phase, each failed phase a failure (setup,
call, teardown; one raising nothing, a strict xfail's pass; one whose exception cannot be
printed), each test's outcome as pytest counts it, the run's own steps between tests, the
worker named under pytest-xdist, nothing done without the watch. A module attribute is the
watched probe (``--watch knobs.flag``), so no stack is imported. scripts/mutation runs these first."""

from __future__ import annotations

import json
import os
import sys

import pytest

from conftest import REPO_ROOT, run_cli

KNOBS = "flag = 0\n"

CONFTEST = """\
import knobs


def pytest_sessionfinish(session):
    knobs.flag = "finished"  # after every test: the run's own step again
"""

TESTS = """\
import unittest

import pytest

import knobs

knobs.flag = "collected"


@pytest.fixture
def broken():
    raise RuntimeError("fixture broke")


@pytest.fixture
def bad_teardown():
    yield
    raise RuntimeError("teardown broke")


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("no str")


def test_writes():
    knobs.flag = 1


def test_fails():
    knobs.flag = 2
    if knobs.flag != 3:
        pytest.fail("flag is not 3")  # pytest's own frame, innermost


def test_setup_error(broken):
    pass


def test_teardown_error(bad_teardown):
    pass


def test_skipped():
    pytest.skip("not here")


def test_unprintable():
    raise Unprintable()


@pytest.mark.xfail(strict=True, reason="was broken")
def test_strict_xpass():
    pass


@pytest.mark.xfail(reason="known")
def test_xfail():
    assert False


@pytest.mark.xfail(reason="flaky")
def test_xpass():
    pass


def test_putenv():
    import os
    os.putenv("FLAGOS_PLUGIN_PROBE", "1")  # libc's environment only: seen at the test's end


def test_missing_fixture(no_such_fixture):  # fails in pytest's own code: none of the test's ran
    pass


class TestInUnittestsStyle(unittest.TestCase):  # run by unittest's own code, inside pytest's
    def test_compares(self):
        self.assertEqual(len("ab"), 3)
"""

FILE = "test_plugin_demo.py"
UNITTEST = "TestInUnittestsStyle::test_compares"


def write_project(folder) -> None:
    for name, text in (("knobs.py", KNOBS), ("conftest.py", CONFTEST), (FILE, TESTS)):
        (folder / name).write_text(text)


def explained(folder, *pytest_args) -> tuple[dict, object]:
    out = folder / "why.json"
    result = run_cli("explain", "--quiet", "--watch", "knobs.flag", "--json", str(out), "--",
                     sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args, FILE, cwd=folder)
    return json.loads(out.read_text()), result


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plugin")
    write_project(folder)
    return explained(folder)


def node(name: str) -> str:
    return f"{FILE}::{name}"


def test_the_program_keeps_pytests_own_result_and_output(run):
    document, result = run
    assert result.returncode == 1
    assert "4 failed, 3 passed, 1 skipped, 1 xfailed, 1 xpassed, 3 errors in " in result.stdout, result.stdout
    assert "test_unprintable.Unprintable" not in result.stderr  # nothing of ours on the program's stderr


def test_each_failed_phase_is_a_failure_naming_its_test_and_phase(run):
    document, _ = run
    failed = [(f["kind"], f["test"], f["when"]) for f in document["failures"]]
    assert failed == [("test", node("test_fails"), "call"), ("test", node("test_setup_error"), "setup"),
                      ("test", node("test_teardown_error"), "teardown"), ("test", node("test_unprintable"), "call"),
                      ("test", node("test_strict_xpass"), "call"), ("test", node("test_missing_fixture"), "setup"),
                      ("test", node(UNITTEST), "call")]
    by_test = {f["test"]: f for f in document["failures"]}
    assert by_test[node("test_fails")]["error"] == "Failed: flag is not 3"
    assert by_test[node("test_setup_error")]["error"] == "RuntimeError: fixture broke"
    # Each starts at the test's own code (the test, the fixture that raised): the frames of
    # pytest, pluggy and unittest that ran it are left out, theirs inside the test kept.
    functions = {name: [(frame["file"], frame["function"]) for frame in by_test[node(name)]["traceback"]]
                 for name in ("test_fails", "test_setup_error", "test_teardown_error", "test_unprintable",
                              "test_missing_fixture", UNITTEST)}
    assert functions["test_fails"] == [(FILE, "test_fails"), ("_pytest/outcomes.py", "__call__")]
    assert functions["test_setup_error"] == [(FILE, "broken")]
    assert functions["test_teardown_error"] == [(FILE, "bad_teardown")]
    assert functions["test_unprintable"] == [(FILE, "test_unprintable")]
    assert functions[UNITTEST][0] == (FILE, "test_compares")
    assert [function for _, function in functions[UNITTEST][1:]] == ["assertEqual", "_baseAssertEqual"]
    # no frame of the test's ran: the whole traceback, pytest's and pluggy's, kept
    missing = functions["test_missing_fixture"]
    assert any(file == "_pytest/fixtures.py" for file, _ in missing)  # where the lookup raised
    assert missing[0] == ("_pytest/runner.py", "from_call") and all(f.startswith(("_pytest/", "pluggy/")) for f, _ in missing)
    assert by_test[node("test_missing_fixture")]["error"].startswith("FixtureLookupError")
    # an exception whose str() raises is still a failure, said as Python's traceback says it
    assert by_test[node("test_unprintable")]["error"] == "Unprintable: <exception str() failed>"
    # a phase that failed without an exception: pytest's own words
    assert by_test[node("test_strict_xpass")]["error"] == "[XPASS(strict)] was broken"
    assert by_test[node("test_strict_xpass")]["traceback"] == []


def test_each_tests_outcome_is_as_pytest_counts_it_its_worst_phase_winning(run):
    document, _ = run
    assert document["tests"]["outcomes"] == {
        node("test_writes"): "passed", node("test_fails"): "failed", node("test_setup_error"): "failed",
        node("test_teardown_error"): "failed", node("test_skipped"): "skipped", node("test_unprintable"): "failed",
        node("test_strict_xpass"): "failed", node("test_xfail"): "xfailed", node("test_xpass"): "xpassed",
        node("test_putenv"): "passed", node("test_missing_fixture"): "failed", node(UNITTEST): "failed"}
    assert document["tests"]["counts"] == {"passed": 2, "failed": 7, "skipped": 1, "xfailed": 1, "xpassed": 1}


def test_a_tests_reads_and_writes_carry_its_node_id_and_between_tests_the_runs_own_step(run):
    document, _ = run
    steps = [(e["kind"], e["step"], e["value"]["repr"]) for e in document["events"] if e["probe"] == "knobs.flag"]
    assert steps == [("write", "program", "'collected'"),
                     ("write", f"test {node('test_writes')}", "1"),
                     ("write", f"test {node('test_fails')}", "2"), ("read", f"test {node('test_fails')}", "2"),
                     ("write", "program", "'finished'")]
    # each test a phase of its own; the run's own step is one phase, not one again after each test
    phases = document["phases"]
    assert phases.count("program") == 1 and phases[0] == "program"
    assert [p for p in phases if p.startswith("test ")] == [
        f"test {node(name)}" for name in ("test_writes", "test_fails", "test_setup_error", "test_teardown_error",
                                          "test_skipped", "test_unprintable", "test_strict_xpass", "test_xfail",
                                          "test_xpass", "test_putenv", "test_missing_fixture", UNITTEST)]
    # a write no hook sees (libc's environment) is looked for as the test ends: it is the test's
    (putenv,) = [e for e in document["events"] if e["probe"] == "$FLAGOS_PLUGIN_PROBE"]
    assert putenv["kind"] == "write" and putenv["step"] == f"test {node('test_putenv')}"


def test_under_pytest_xdist_each_record_names_its_worker(tmp_path):
    write_project(tmp_path)
    document, result = explained(tmp_path, "-n", "2", "-p", "xdist")
    assert result.returncode == 1, result.stderr
    assert len(document["failures"]) == 7
    workers = {f["test"]: f.get("worker") for f in document["failures"]}
    assert set(workers.values()) <= {"gw0", "gw1"} and None not in workers.values()
    assert document["tests"]["counts"] == {"passed": 2, "failed": 7, "skipped": 1, "xfailed": 1, "xpassed": 1}
    roles = {f.get("role") for f in document["failures"]}
    assert roles and all(role and "xdist" in role for role in roles)


def test_without_the_watch_the_plugin_changes_nothing(tmp_path):
    """Loaded in a pytest that explain did not start (no watch installed): the same result,
    the same output, as without it."""
    write_project(tmp_path)

    def pytest_run(plugins):
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_PLUGINS"}
        env["PYTHONPATH"] = REPO_ROOT
        if plugins:
            env["PYTEST_PLUGINS"] = "flagos_doctor.explain.pytest_plugin"
        import subprocess
        return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", FILE],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)

    plain, with_plugin = pytest_run(False), pytest_run(True)
    assert with_plugin.returncode == plain.returncode == 1
    summary = [line for line in plain.stdout.splitlines() if " in " in line and "failed" in line]
    assert summary and summary[0].rsplit(" in ", 1)[0] in with_plugin.stdout
    assert with_plugin.stderr == plain.stderr


def test_a_hook_of_the_programs_that_raises_is_still_pytests_to_report(tmp_path):
    """A conftest whose report hook raises: pytest's INTERNALERROR names that error, watched as
    unwatched; nothing of the plugin's raises in its place."""
    (tmp_path / "knobs.py").write_text(KNOBS)
    # a plain implementation, called inside the plugin's wrapper: the wrapper's result is its error
    (tmp_path / "conftest.py").write_text(
        "def pytest_runtest_makereport(item, call):\n    raise RuntimeError('hook broke')\n")
    (tmp_path / FILE).write_text("def test_one():\n    pass\n")
    document, result = explained(tmp_path)
    assert result.returncode == 3, result.stdout  # pytest's internal error
    assert "INTERNALERROR> RuntimeError: hook broke" in result.stdout + result.stderr
    assert "NameError" not in result.stdout + result.stderr
