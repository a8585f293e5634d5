"""``survey --compare`` on runs the real survey made: identical runs, and ``--repo/--build-cmd``
building two commits of a small stack repository in throw-away worktrees."""

from __future__ import annotations

import json
import os
import subprocess

import dataclasses
import typing


from flagos_doctor.compare.build import ARM_OWN, PATHS, arm_options
from flagos_doctor.options import options_from_json, options_json
from flagos_doctor.options import SurveyOptions
from flagos_doctor.stacks.demo import DEMO_CONF
from flagos_doctor.results.document import load

OPS = "abs,neg,exp"

GOOD = '''"""A survey stack: the built-in demo, as it is."""
import flagos_doctor.demo  # noqa: F401  (registers the flagos device and its kernels)


def setup() -> str:
    return "flagos"
'''

BROKEN = '''"""A survey stack: the built-in demo with a broken ``neg`` kernel (off by one)."""
import flagos_doctor.demo  # noqa: F401
from flagos_doctor.demo import kernels

_run_on_cpu = kernels._run_on_cpu


def _off_by_one(op, args, kwargs):
    out = _run_on_cpu(op, args, kwargs)
    if kernels.overload_name(op) == "neg":
        kernels.unwrap(out).add_(1)
    return out


kernels._run_on_cpu = _off_by_one


def setup() -> str:
    return "flagos"
'''


def git(repo, *args) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo, text: str, message: str) -> str:
    (repo / "variant_stack.py").write_text(text)
    git(repo, "add", "variant_stack.py")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example", "commit", "-q", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def _given(name: str, kind, default):
    """A value for option ``name`` of type ``kind`` that is not its default."""
    if typing.get_origin(kind) in (typing.Union, getattr(__import__("types"), "UnionType", ())):
        kind = next(k for k in typing.get_args(kind) if k is not type(None))
    if kind is bool:
        return not default
    if kind in (int, float):
        return kind(7) if default != 7 else kind(8)
    if kind is str:
        return f"given-{name}"
    if typing.get_origin(kind) is list:
        return [f"given-{name}"]
    raise AssertionError(f"SurveyOptions.{name}: no test value for {kind}; add one here")


def test_a_built_arm_surveys_with_every_option_the_user_gave():
    """The arm's survey child gets SurveyOptions whole (JSON): an option added to
    SurveyOptions is carried without a word elsewhere, and this fails if one is dropped."""
    hints = typing.get_type_hints(SurveyOptions)
    given = {}
    for field in dataclasses.fields(SurveyOptions):
        default = field.default if field.default is not dataclasses.MISSING else field.default_factory()
        given[field.name] = _given(field.name, hints[field.name], default)
        assert given[field.name] != default
    child = options_from_json(options_json(arm_options(SurveyOptions(**given), "/scratch/results.json")))
    assert set(ARM_OWN) < set(given) and set(PATHS) < set(given)
    for name, value in given.items():
        if name == "output":
            expected = "/scratch/results.json"
        elif name in ARM_OWN:
            expected = ARM_OWN[name]
        elif name in PATHS:
            expected = os.path.abspath(value)
        else:
            expected = value
        assert getattr(child, name) == expected, name


def test_identical_real_surveys_compare_equal(tmp_path, cli):
    paths = []
    for name in ("one", "two"):
        path = str(tmp_path / f"{name}.json")
        done = cli("survey", "--stack", "demo", "--ops", OPS, "-o", path, "--no-store", "-q")
        assert done.returncode == 0, done.stderr
        paths.append(path)
    done = cli("survey", "--compare", *paths, "--json", "-", "-q")
    assert done.returncode == 0, done.stderr
    comparison = json.loads(done.stdout)
    assert comparison["comparable"] and comparison["census_identical"]
    assert comparison["census_sha256"]["a"] == comparison["census_sha256"]["b"]
    assert comparison["transitions"] == [] and comparison["cases_changed"] == []


def test_repo_build_cmd_builds_both_commits_and_shows_the_regression(tmp_path, cli):
    repo = tmp_path / "stack-repo"
    repo.mkdir()
    git(repo, "init", "-q")
    good = commit(repo, GOOD, "demo variant")
    broken = commit(repo, BROKEN, "neg: faster (and wrong)")
    head_before = git(repo, "rev-parse", "HEAD")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    store = tmp_path / "store"
    # each build says when it started, by commit
    build = ("python -c \"import subprocess, time; c = subprocess.check_output(['git', 'rev-parse', 'HEAD'], text=True)"
             f".strip(); open(r'{tmp_path}' + '/built-' + c, 'w').write(repr(time.time())); "
             "open('built.txt', 'w').write('built')\"")
    args = ["survey", "--compare", good[:7], broken[:8], "--repo", str(repo), "--build-cmd", build,
            "--stack", "variant_stack", "--conf", DEMO_CONF, "--ops", OPS, "--store", str(store),
            "--repeats", "0", "--baseline", "none"]
    # Run from inside the user's checkout (at the broken commit): it must not shadow the
    # worktree of the good commit.
    done = cli(*args, "--json", str(tmp_path / "cmp.json"), env={"TMPDIR": str(scratch)}, cwd=str(repo))
    assert done.returncode == 1, done.stderr
    comparison = json.loads((tmp_path / "cmp.json").read_text())
    assert comparison["comparable"], comparison["differences"]
    assert [(t["overload"], t["from"], t["to"], t["kind"]) for t in comparison["transitions"]] == [
        ("neg", "STRICT", "FAILED", "regression")
    ]
    neg_cases = [c for c in comparison["cases_changed"] if c["overload"] == "neg"]
    assert neg_cases and all(c["from"]["status"] == "PASS" and c["to"]["status"] == "WRONG" for c in neg_cases)
    assert {c["overload"] for c in comparison["cases_changed"]} == {"neg"}
    assert comparison["arms"]["a"]["source"] == "built" and comparison["arms"]["a"]["commit"] == good
    assert comparison["arms"]["b"]["commit"] == broken
    assert "neg" in done.stdout and "regression" in done.stdout
    # the second arm's build started before the first arm's survey was filed (side by side)
    assert float((tmp_path / f"built-{broken}").read_text()) < os.path.getmtime(comparison["arms"]["a"]["path"])
    assert float((tmp_path / f"built-{good}").read_text()) < float((tmp_path / f"built-{broken}").read_text())
    # filed in the store by full commit, surveyed with the options given
    assert os.path.isdir(store / "survey" / good) and os.path.isdir(store / "survey" / broken)
    run = load(comparison["arms"]["b"]["path"])["provenance"]["runs"][-1]
    assert (run["repeats"], run["baseline"]) == (0, "none")
    # worktrees gone, the checkout untouched
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    assert not (repo / ".git" / "worktrees").exists() or not os.listdir(repo / ".git" / "worktrees")
    assert os.listdir(scratch) == []
    assert git(repo, "rev-parse", "HEAD") == head_before
    assert git(repo, "status", "--porcelain", "--untracked-files=all") == ""
    assert not (repo / "built.txt").exists()
    assert (repo / "variant_stack.py").read_text() == BROKEN
    # the second time both arms come from the store: no build
    again = cli("survey", "--compare", good[:7], broken[:8], "--repo", str(repo), "--build-cmd", "exit 9",
                "--store", str(store), "--json", "-", "-q")
    assert again.returncode == 1, again.stderr
    assert json.loads(again.stdout)["arms"]["b"]["source"] == "store"


def test_repo_build_failure_names_the_commit(tmp_path, cli):
    repo = tmp_path / "stack-repo"
    repo.mkdir()
    git(repo, "init", "-q")
    first = commit(repo, GOOD, "one")
    second = commit(repo, GOOD + "\n# two\n", "two")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = cli("survey", "--compare", first[:7], second[:7], "--repo", str(repo),
               "--build-cmd", "echo compiling; echo 'error: no compiler' >&2; exit 3",
               "--stack", "variant_stack", "--store", str(tmp_path / "store"), env={"TMPDIR": str(scratch)})
    assert done.returncode == 2
    assert first[:12] in done.stderr and "exited with status 3" in done.stderr and "no compiler" in done.stderr
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("flagos-doctor: error:")]
    assert len(errors) == 1 and "no compiler" in errors[0]  # the error is one line, after the progress
    # The build's whole output is kept in the store, where the message says.
    log = tmp_path / "store" / "logs" / "survey" / (first + ".log")
    assert f"(log: {log})" in done.stderr
    assert log.read_text().splitlines()[1:] == ["compiling", "error: no compiler"]
    assert os.listdir(scratch) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    unknown = cli("survey", "--compare", "nosuchref", second[:7], "--repo", str(repo),
                  "--store", str(tmp_path / "store"))
    assert unknown.returncode == 2 and "nosuchref" in unknown.stderr
