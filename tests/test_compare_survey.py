"""``survey --compare`` on runs the real survey made: identical runs, and ``--repo/--build-cmd``
building two commits of a small stack repository in throw-away worktrees."""

from __future__ import annotations

import json
import os
import subprocess

import pytest

from flagos_doctor.stacks.demo import DEMO_CONF

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
    build = "python -c \"open('built.txt', 'w').write('built')\""
    args = ["survey", "--compare", good[:7], broken[:8], "--repo", str(repo), "--build-cmd", build,
            "--stack", "variant_stack", "--conf", DEMO_CONF, "--ops", OPS, "--store", str(store)]
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
    # filed in the store by full commit
    assert os.path.isdir(store / "survey" / good) and os.path.isdir(store / "survey" / broken)
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
    assert first[:12] in done.stderr and "exited with 3" in done.stderr and "no compiler" in done.stderr
    assert "Traceback" not in done.stderr
    assert os.listdir(scratch) == []
    assert git(repo, "worktree", "list", "--porcelain").count("worktree ") == 1
    unknown = cli("survey", "--compare", "nosuchref", second[:7], "--repo", str(repo),
                  "--store", str(tmp_path / "store"))
    assert unknown.returncode == 2 and "nosuchref" in unknown.stderr
