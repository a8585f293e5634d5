"""``flagos-doctor suite --compare``: real pytest runs of a small package at several commits.

The repository the tests create holds a package ``calc`` and its tests (plain,
parametrised, a class, a skip, an xfail) at five commits:

* ``base``: ``mul`` is wrong, so ``test_mul`` fails;
* ``added``: adds ``tests/test_extra.py`` (three tests): the collected sets differ;
* ``fixed``: fixes ``mul``, and renames ``test_old_name`` to ``test_new_name``;
* ``broken``: breaks ``div``: ``TestDiv::test_div`` and ``TestDiv::test_div_exact[4-2]`` fail;
* ``uncollectable``: ``tests/test_extra.py`` imports a missing module.

``tests/test_core.py::test_network`` fails when FLAKY_FAIL=1: the flaky test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import run_cli

CALC = '''
def add(a, b):
    return a + b

def mul(a, b):
    return {mul}

def div(a, b):
    return {div}

def scale(x, k=2):
    return x * k
'''

CORE = '''
import os
import pytest
import calc

def test_add():
    assert calc.add(2, 3) == 5

def test_mul():
    assert calc.mul(2, 3) == 6

@pytest.mark.parametrize("x", [1, 2, 3])
def test_scale(x):
    assert calc.scale(x) == 2 * x

class TestDiv:
    def test_div(self):
        assert calc.div(6, 3) == 2

    @pytest.mark.parametrize("a,b", [(4, 2), (9, 3)])
    def test_div_exact(self, a, b):
        assert calc.div(a, b) * b == a

@pytest.mark.skip(reason="needs a GPU")
def test_gpu():
    pass

@pytest.mark.xfail(reason="rounding, issue 12")
def test_rounding():
    assert calc.div(1, 3) * 3 == 1.5

def test_network():
    assert os.environ.get("FLAKY_FAIL") != "1", "connection reset"

def {old_name}():
    assert calc.add(0, 0) == 0
'''

EXTRA = '''
{imports}import calc

def test_add_negative():
    assert calc.add(-1, -2) == -3

def test_add_zero():
    assert calc.add(5, 0) == 5

def test_scale_three():
    assert calc.scale(2, 3) == 6
'''

GOOD = {"mul": "a * b", "div": "a / b"}
BUGGY_MUL = "a + b"
BUGGY_DIV = "a // b + (1 if a == 6 or a == 4 else 0)"

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
    "GIT_CONFIG_NOSYSTEM": "1",
}


def _env(**extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env.update(GIT_ENV, PYTHONDONTWRITEBYTECODE="1", **extra)
    return env


def _git(repo, *args):
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=_env())
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _write(repo, mul, div, old_name="test_old_name", extra=None):
    (repo / "calc").mkdir(exist_ok=True)
    (repo / "calc" / "__init__.py").write_text(CALC.format(mul=mul, div=div))
    (repo / "tests").mkdir(exist_ok=True)
    (repo / "tests" / "test_core.py").write_text(CORE.format(old_name=old_name))
    if extra is not None:
        (repo / "tests" / "test_extra.py").write_text(EXTRA.format(imports=extra))


def _commit(repo, message):
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", message)
    return _git(repo, "rev-parse", "HEAD")


def pytest_junit(repo, path, *args, **env):
    """Run the repository's tests with a real pytest; the JUnit XML goes to ``path``."""
    subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--continue-on-collection-errors",
         f"--junitxml={path}", *args, "tests"],
        cwd=repo, env=_env(**env), capture_output=True, text=True, timeout=120,
    )
    return str(path)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """The repository, its commits, and the JUnit XML of each commit (plus a flaky rerun)."""
    root = tmp_path_factory.mktemp("suite")
    repo = root / "calc-repo"
    repo.mkdir()
    _git(repo, "init", "-q", "-b", "main")
    (repo / "pytest.ini").write_text("[pytest]\n")
    (repo / ".gitignore").write_text("__pycache__/\n.pytest_cache/\n")
    commits, xml = {}, {}

    def step(name, **files):
        _write(repo, **files)
        commits[name] = _commit(repo, name)
        xml[name] = pytest_junit(repo, root / f"{name}.xml")

    step("base", mul=BUGGY_MUL, div=GOOD["div"])
    step("added", mul=BUGGY_MUL, div=GOOD["div"], extra="")
    step("fixed", mul=GOOD["mul"], div=GOOD["div"], old_name="test_new_name")
    step("broken", mul=GOOD["mul"], div=BUGGY_DIV, old_name="test_new_name")
    xml["broken-flaky"] = pytest_junit(repo, root / "broken-flaky.xml", FLAKY_FAIL="1")
    step("uncollectable", mul=GOOD["mul"], div=BUGGY_DIV, old_name="test_new_name", extra="import no_such_module\n")
    return {"root": root, "repo": repo, "commits": commits, "xml": xml}


def compare(*args, store):
    return run_cli("suite", "--compare", *args, "--store", str(store))


def document(*args, store):
    result = compare(*args, "--json", "-", store=store)
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout), result.returncode


def test_different_collected_sets_reported_before_totals(project, tmp_path):
    xml = project["xml"]
    # One run, every view: the terminal's on stdout (no file took it), the JSON and the Markdown in files.
    result = compare(xml["base"], xml["added"], "--json", str(tmp_path / "c.json"), "--markdown", str(tmp_path / "c.md"),
                     store=tmp_path)
    assert result.returncode == 0, result.stderr  # a new file of passing tests regresses nothing
    out = result.stdout
    assert "Collected sets DIFFER: 0 only in A, 3 only in B" in out
    assert out.index("Collected sets DIFFER") < out.index("Totals") < out.index("Transitions")
    assert "tests/test_extra.py" in out and "new in B" in out

    doc = json.loads((tmp_path / "c.json").read_text())
    assert doc["schema"] == "flagos-doctor/suite-compare/1"
    coll = doc["collection"]
    assert not coll["same"] and coll["only_a"]["count"] == 0 and coll["common"] == 12
    [group] = coll["only_b"]["files"]
    assert group["file"] == "tests/test_extra.py" and group["note"] == "new in B"
    assert group["totals"]["passed"] == 3 and len(group["tests"]) == 3
    assert doc["arms"]["a"]["totals"] == {"collected": 12, "passed": 9, "failed": 1, "errors": 0,
                                          "skipped": 1, "xfailed": 1, "xpassed": 0}
    assert doc["arms"]["b"]["totals"]["collected"] == 15 and doc["arms"]["b"]["totals"]["passed"] == 12
    assert doc["common_totals"]["b"]["passed"] == 9
    assert doc["verdict"].startswith(
        "collected sets differ (A 12, B 15): 3 only in B, all in tests/test_extra.py (new in B); "
        "A: 1 failed / 9 passed / 1 skipped / 1 xfailed; B: 1 / 12 / 1 / 1; on the 12 tests both ran:")

    markdown = (tmp_path / "c.md").read_text()
    assert markdown.index("#### Collected sets") < markdown.index("#### Totals")
    assert "`tests/test_extra.py` | 3 | 3 passed | new in B" in markdown


def test_same_collection_refuses_naming_the_tests(project, tmp_path):
    xml = project["xml"]
    result = compare(xml["base"], xml["added"], "--same-collection", store=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert "collected sets differ (--same-collection), 3 tests in one arm only" in line
    assert "tests/test_extra.py::test_add_negative (only in B)" in line
    same = compare(xml["fixed"], xml["broken"], "--same-collection", "--fail-on", "never", store=tmp_path)
    assert same.returncode == 0, same.stderr


def test_fix_and_rename_exit_0(project, tmp_path):
    xml = project["xml"]
    doc, code = document(xml["added"], xml["fixed"], store=tmp_path)
    assert code == 0
    assert doc["collection"]["same"]
    assert doc["collection"]["renamed"] == [{"a": "tests/test_core.py::test_old_name",
                                            "b": "tests/test_core.py::test_new_name", "rule": "function renamed"}]
    assert [(t["test"], t["from"], t["to"], t["kind"]) for t in doc["transitions"]] == [
        ("tests/test_core.py::test_mul", "failed", "passed", "fix")]
    assert doc["verdict"] == ("same 15 collected (1 renamed); A: 1 failed / 12 passed / 1 skipped / 1 xfailed; "
                              "B: 0 / 13 / 1 / 1; 0 regressions, 1 fix")
    # Any difference at all fails --fail-on any.
    assert compare(xml["added"], xml["fixed"], "--fail-on", "any", store=tmp_path).returncode == 1


def test_regression_exit_1_listed_first(project, tmp_path):
    xml = project["xml"]
    # One run, every view: the terminal's on stdout (no file took it), the JSON and the Markdown in files.
    terminal = compare(xml["base"], xml["broken"], "--json", str(tmp_path / "c.json"), "--markdown",
                       str(tmp_path / "c.md"), store=tmp_path)
    doc, code = json.loads((tmp_path / "c.json").read_text()), terminal.returncode
    assert code == 1
    kinds = [t["kind"] for t in doc["transitions"]]
    assert kinds == ["regression", "regression", "fix"]
    assert [t["test"] for t in doc["transitions"][:2]] == [
        "tests/test_core.py::TestDiv::test_div", "tests/test_core.py::TestDiv::test_div_exact[4-2]"]
    assert doc["regressions"] == 2
    assert terminal.returncode == 1
    assert terminal.stdout.index("regression") < terminal.stdout.index("fix ")
    assert compare(xml["base"], xml["broken"], "--fail-on", "never", store=tmp_path).returncode == 0
    markdown = (tmp_path / "c.md").read_text()
    assert "| regression | `tests/test_core.py::TestDiv::test_div` | passed | failed |" in markdown


def test_flaky_reported_apart(project, tmp_path):
    xml = project["xml"]
    doc, code = document(xml["broken"], xml["broken-flaky"], store=tmp_path)
    assert code == 1 and doc["transitions"][0]["test"] == "tests/test_core.py::test_network"
    flaky = tmp_path / "flaky.txt"
    flaky.write_text("tests/test_core.py::test_network  # the network\ntests/test_gone.py::test_x\n")
    # One run for the JSON (in a file) and the terminal's view (on stdout).
    out = compare(xml["broken"], xml["broken-flaky"], "--flaky", str(flaky), "--json", str(tmp_path / "c.json"),
                  store=tmp_path)
    doc, code = json.loads((tmp_path / "c.json").read_text()), out.returncode
    assert code == 0
    assert doc["transitions"] == [] and doc["regressions"] == 0
    [entry] = doc["flaky"]["transitions"]
    assert (entry["test"], entry["from"], entry["to"]) == ("tests/test_core.py::test_network", "passed", "failed")
    assert "connection reset" in entry["message"]
    assert doc["flaky"]["unmatched"] == ["tests/test_gone.py::test_x"]
    assert doc["verdict"].endswith("0 regressions, 0 fixes, 1 flaky apart")
    assert "Flaky, reported apart" in out.stdout


def test_file_that_did_not_collect(project, tmp_path):
    xml = project["xml"]
    doc, code = document(xml["broken"], xml["uncollectable"], store=tmp_path)
    assert code == 0  # a file that does not collect is a collected-set difference, shown first
    only_a, only_b = doc["collection"]["only_a"], doc["collection"]["only_b"]
    assert [(g["file"], g["note"], len(g["tests"])) for g in only_a["files"]] == [
        ("tests/test_extra.py", "did not collect in B", 3)]
    assert [(g["file"], g["note"], g["totals"]["errors"]) for g in only_b["files"]] == [
        ("tests/test_extra.py", "did not collect in B", 1)]


@pytest.mark.parametrize("damage", ["truncated", "malformed"])
def test_bad_xml_exit_2_naming_the_file(project, tmp_path, damage):
    text = open(project["xml"]["base"], encoding="utf-8").read()
    bad = tmp_path / f"{damage}.xml"
    bad.write_text(text[: len(text) // 2] if damage == "truncated" else text.replace("</testcase>", "</testcas>", 1))
    result = compare(project["xml"]["base"], str(bad), store=tmp_path)
    assert result.returncode == 2
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"flagos-doctor: error: {bad}: {damage} JUnit XML (line ")
    assert result.stdout == ""


def test_repo_worktrees_end_to_end(project, tmp_path):
    repo, commits = project["repo"], project["commits"]
    # The user's checkout: at the last commit, with an uncommitted edit.
    (repo / "calc" / "__init__.py").write_text("# work in progress\n")
    status = _git(repo, "status", "--porcelain")
    head = _git(repo, "rev-parse", "HEAD")
    store = tmp_path / "store"
    test_cmd = f"{sys.executable} -m pytest -q -p no:cacheprovider tests"
    build_cmd = "touch BUILT && test -f calc/__init__.py"
    args = ["--repo", str(repo), "--test-cmd", test_cmd, "--build-cmd", build_cmd]
    try:
        result = compare(commits["fixed"][:8], commits["broken"][:8], *args, "--json", "-", store=store)
        assert result.returncode == 1, result.stderr
        doc = json.loads(result.stdout)
        assert [t["test"] for t in doc["transitions"]] == [
            "tests/test_core.py::TestDiv::test_div", "tests/test_core.py::TestDiv::test_div_exact[4-2]"]
        assert doc["arms"]["a"]["origin"] == "built" and doc["arms"]["a"]["commit"] == commits["fixed"]
        assert "build: touch BUILT" in result.stderr
        # Filed in the store under each full commit; nothing left of the worktrees.
        for name in ("fixed", "broken"):
            [filed] = os.listdir(store / "suite" / commits[name])
            assert json.loads((store / "suite" / commits[name] / filed).read_text())["commit"] == commits[name]
        assert len(_git(repo, "worktree", "list").splitlines()) == 1
        assert not (repo / "BUILT").exists()

        # Again: both arms come from the store, nothing is run.
        again = compare(commits["fixed"][:8], commits["broken"][:8], *args, "--json", "-", store=store)
        assert "filed in the store" in again.stderr and "tests:" not in again.stderr
        assert json.loads(again.stdout)["transitions"] == doc["transitions"]

        # By commit prefix alone, without --repo: looked up in the store.
        lookup = compare(commits["fixed"][:7], commits["broken"][:7], "--markdown", "-", store=store)
        assert lookup.returncode == 1
        assert f"### Unit suite: `{commits['fixed'][:10]}` → `{commits['broken'][:10]}`" in lookup.stdout

        # The placeholder form of --test-cmd, on an arm not in the store yet.
        placeholder = f"{sys.executable} -m pytest -q -p no:cacheprovider --junitxml={{junitxml}} tests"
        doc2, code = document(commits["base"][:8], "HEAD~1", "--repo", str(repo), "--test-cmd", placeholder,
                           store=store)
        assert doc2["arms"]["b"]["commit"] == commits["broken"]
        assert {t["kind"] for t in doc2["transitions"]} == {"regression", "fix"} and code == 1

        # A build that fails: one line, exit 2, worktree removed all the same.
        failed = compare(commits["base"][:8], commits["added"][:8], "--repo", str(repo), "--test-cmd", test_cmd,
                         "--build-cmd", "echo compiler exploded; exit 3", store=store)
        assert failed.returncode == 2
        assert "build command exited with status 3" in failed.stderr and "compiler exploded" in failed.stderr
        assert len(_git(repo, "worktree", "list").splitlines()) == 1
    finally:
        assert _git(repo, "status", "--porcelain") == status
        assert _git(repo, "rev-parse", "HEAD") == head
        assert (repo / "calc" / "__init__.py").read_text() == "# work in progress\n"
        _git(repo, "checkout", "-q", "--", "calc/__init__.py")


def test_unknown_commit_and_option_errors(project, tmp_path):
    repo = project["repo"]
    result = compare("deadbeef", project["xml"]["base"], "--repo", str(repo), "--test-cmd", "true", store=tmp_path)
    assert result.returncode == 2 and "deadbeef: neither a file nor a commit" in result.stderr
    result = compare(project["xml"]["base"], project["xml"]["base"], "--test-cmd", "true", store=tmp_path)
    assert result.returncode == 2 and "need --repo" in result.stderr
    result = compare(project["xml"]["base"], project["xml"]["base"], "--fail-on", "sometimes", store=tmp_path)
    assert result.returncode == 2 and "--fail-on" in result.stderr


RENAME_ARMS = {
    "a": {
        "test_moved_src.py": "class TestM:\n    def test_a(self): pass\n"
                             "    @__import__('pytest').mark.parametrize('n', [1, 2])\n    def test_b(self, n): pass\n",
        "test_cls.py": "class TestOld:\n    def test_p(self): pass\n    def test_q(self): assert 0\n"
                       "def test_keep(): pass\n",
        "test_amb.py": "def test_one(): pass\ndef test_two(): pass\n",
        "test_params.py": "import pytest\n@pytest.mark.parametrize('n', [1, 2], ids=['1', '2'])\ndef test_p(n): pass\n",
        "test_out.py": "def test_f(): pass\n",
    },
    "b": {
        "test_moved_dst.py": "class TestM:\n    def test_a(self): pass\n"
                             "    @__import__('pytest').mark.parametrize('n', [1, 2])\n    def test_b(self, n): pass\n",
        "test_cls.py": "class TestNew:\n    def test_p(self): pass\n    def test_q(self): assert 0\n"
                       "def test_keep(): pass\n",
        "test_amb.py": "def test_uno(): pass\ndef test_dos(): pass\n",
        "test_params.py": "import pytest\n@pytest.mark.parametrize('n', [1, 2], ids=['one', 'two'])\ndef test_p(n): pass\n",
        "test_out.py": "def test_g(): assert 0\n",
    },
}


def test_renames_matched_conservatively(tmp_path):
    xml = {}
    for arm, files in RENAME_ARMS.items():
        (tmp_path / arm / "tests").mkdir(parents=True)
        (tmp_path / arm / "pytest.ini").write_text("[pytest]\n")
        for name, text in files.items():
            (tmp_path / arm / "tests" / name).write_text(text)
        xml[arm] = pytest_junit(tmp_path / arm, tmp_path / f"{arm}.xml")
    doc, code = document(xml["a"], xml["b"], "--fail-on", "regression", store=tmp_path)
    renamed = {(r["a"], r["b"], r["rule"]) for r in doc["collection"]["renamed"]}
    assert renamed == {
        ("tests/test_moved_src.py::TestM::test_a", "tests/test_moved_dst.py::TestM::test_a", "file moved"),
        ("tests/test_moved_src.py::TestM::test_b[1]", "tests/test_moved_dst.py::TestM::test_b[1]", "file moved"),
        ("tests/test_moved_src.py::TestM::test_b[2]", "tests/test_moved_dst.py::TestM::test_b[2]", "file moved"),
        ("tests/test_cls.py::TestOld::test_p", "tests/test_cls.py::TestNew::test_p", "class renamed"),
        ("tests/test_cls.py::TestOld::test_q", "tests/test_cls.py::TestNew::test_q", "class renamed"),
    }
    # Two look-alike candidates, changed parametrisation ids, or a different outcome: not renames.
    only = {side: sorted(t for g in doc["collection"][side]["files"] for t in g["tests"]) for side in ("only_a", "only_b")}
    assert only["only_a"] == ["tests/test_amb.py::test_one", "tests/test_amb.py::test_two",
                              "tests/test_out.py::test_f", "tests/test_params.py::test_p[1]",
                              "tests/test_params.py::test_p[2]"]
    assert only["only_b"] == ["tests/test_amb.py::test_dos", "tests/test_amb.py::test_uno",
                              "tests/test_out.py::test_g", "tests/test_params.py::test_p[one]",
                              "tests/test_params.py::test_p[two]"]
    assert code == 0 and doc["transitions"] == []
