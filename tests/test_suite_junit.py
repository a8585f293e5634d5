"""Reading pytest's JUnit XML: every outcome as a real pytest run writes it."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from flagos_doctor.errors import BadInput
from flagos_doctor.suite.flaky import load_flaky
from flagos_doctor.suite.junit import parse_junit

from conftest import run_cli

TESTS = '''
import pytest

def test_pass(): pass
def test_fail(): assert 1 == 2
@pytest.mark.skip(reason="not here")
def test_skip(): pass
def test_skip_inside(): pytest.skip("at run time")
@pytest.mark.xfail(reason="known bug")
def test_xfail(): assert 0
def test_xfail_inside(): pytest.xfail("known at run time")
@pytest.mark.xfail(reason="loose")
def test_xpass(): pass
@pytest.mark.xfail(reason="tight", strict=True)
def test_xpass_strict(): pass

@pytest.fixture
def broken():
    raise RuntimeError("setup")
def test_setup_error(broken): pass

@pytest.fixture
def messy():
    yield
    raise RuntimeError("teardown")
def test_fail_and_teardown_error(messy): assert 0
def test_pass_and_teardown_error(messy): pass

@pytest.mark.parametrize("x", [1, 2, "a b", "[x]", "p.q"])
def test_param(x): assert x != 2

class TestGroup:
    def test_m(self): pass
    @pytest.mark.parametrize("y", [0.5])
    def test_n(self, y): pass
    class TestInner:
        def test_deep(self): pass
'''


@pytest.fixture(scope="module")
def junit_files(tmp_path_factory):
    """One real pytest run, written in both JUnit families, with a file that fails to collect."""
    root = tmp_path_factory.mktemp("junit")
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "tests" / "unit").mkdir(parents=True)
    (root / "tests" / "unit" / "test_many.py").write_text(TESTS)
    (root / "tests" / "unit" / "test_broken.py").write_text("import no_such_module\ndef test_never(): pass\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    files = {}
    for family in ("xunit2", "xunit1"):
        path = root / f"{family}.xml"
        subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
             "-o", f"junit_family={family}", f"--junitxml={path}", "tests"],
            cwd=root, env=env, capture_output=True, text=True, timeout=120,
        )
        files[family] = str(path)
    return files


EXPECTED = {
    "tests/unit/test_broken.py": "error",
    "tests/unit/test_many.py::test_pass": "passed",
    "tests/unit/test_many.py::test_fail": "failed",
    "tests/unit/test_many.py::test_skip": "skipped",
    "tests/unit/test_many.py::test_skip_inside": "skipped",
    "tests/unit/test_many.py::test_xfail": "xfailed",
    "tests/unit/test_many.py::test_xfail_inside": "xfailed",
    "tests/unit/test_many.py::test_xpass": "passed",  # JUnit writes a non-strict XPASS as a pass
    "tests/unit/test_many.py::test_xpass_strict": "xpassed",
    "tests/unit/test_many.py::test_setup_error": "error",
    "tests/unit/test_many.py::test_fail_and_teardown_error": "failed",
    "tests/unit/test_many.py::test_pass_and_teardown_error": "error",
    "tests/unit/test_many.py::test_param[1]": "passed",
    "tests/unit/test_many.py::test_param[2]": "failed",
    "tests/unit/test_many.py::test_param[a b]": "passed",
    "tests/unit/test_many.py::test_param[[x]]": "passed",
    "tests/unit/test_many.py::test_param[p.q]": "passed",
    "tests/unit/test_many.py::TestGroup::test_m": "passed",
    "tests/unit/test_many.py::TestGroup::test_n[0.5]": "passed",
    "tests/unit/test_many.py::TestGroup::TestInner::test_deep": "passed",
}


@pytest.mark.parametrize("family", ["xunit2", "xunit1"])
def test_every_outcome_read_as_pytest_reports_it(junit_files, family):
    run = parse_junit(junit_files[family])
    assert {i: t.outcome for i, t in run.tests.items()} == EXPECTED
    xpass = run.tests["tests/unit/test_many.py::test_xpass_strict"]
    assert xpass.message.startswith("[XPASS(strict)] tight")
    assert run.tests["tests/unit/test_many.py::test_xfail"].message == "known bug"
    deep = run.tests["tests/unit/test_many.py::TestGroup::TestInner::test_deep"]
    assert (deep.file, deep.cls, deep.name) == ("tests/unit/test_many.py", "TestGroup::TestInner", "test_deep")
    param = run.tests["tests/unit/test_many.py::test_param[p.q]"]
    assert (param.base, param.params) == ("test_param", "[p.q]")


def test_bare_testsuite_root(tmp_path):
    path = tmp_path / "bare.xml"
    path.write_text('<testsuite tests="1"><testcase classname="t.test_a" name="test_x"/></testsuite>')
    assert list(parse_junit(str(path)).tests) == ["t/test_a.py::test_x"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("", "empty file"),
        ('<?xml version="1.0"?><testsuites><testsuite><testcase classname="a" name="b"/>', "truncated JUnit XML"),
        ('<testsuites><testsuite><testcase classname="a" na', "truncated JUnit XML"),
        ("<testsuites><testsuite></testsuites>", "malformed JUnit XML"),
        ("<html><body/></html>", "not JUnit XML: the root element is <html>"),
        ('<testsuite><testcase classname="a"/></testsuite>', "has no 'name' attribute"),
    ],
)
def test_bad_xml_is_one_line_naming_the_file(tmp_path, text, expected):
    path = tmp_path / "bad.xml"
    path.write_text(text)
    with pytest.raises(BadInput) as caught:
        parse_junit(str(path))
    assert expected in str(caught.value)
    assert str(caught.value).startswith(f"{path}: ")


def test_flaky_list_entries(tmp_path):
    path = tmp_path / "flaky.txt"
    path.write_text(textwrap.dedent("""\
        # known flaky
        tests/a.py::test_net        # every parametrisation
        tests/b.py::TestK::test_p[1]
        tests/io/*
        tests/c.py::test_x[#1]
    """))
    flaky = load_flaky(str(path))
    assert flaky.matches("tests/a.py::test_net") and flaky.matches("tests/a.py::test_net[ipv6]")
    assert not flaky.matches("tests/a.py::test_network")
    assert flaky.matches("tests/b.py::TestK::test_p[1]") and not flaky.matches("tests/b.py::TestK::test_p[2]")
    assert flaky.matches("tests/io/test_disk.py::test_read")
    assert flaky.matches("tests/c.py::test_x[#1]")
    assert flaky.unmatched(["tests/a.py::test_net"]) == ["tests/b.py::TestK::test_p[1]", "tests/io/*", "tests/c.py::test_x[#1]"]


def test_cli_missing_arm_file_exit_2(tmp_path):
    result = run_cli("suite", "--compare", str(tmp_path / "nope.xml"), str(tmp_path / "nope2.xml"),
                     "--store", str(tmp_path / "store"))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1
    assert "nope.xml" in result.stderr and "no suite run filed" in result.stderr
