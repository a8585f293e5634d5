"""``survey --compare`` in GitHub mode (``compare/github.py``), in a fake GitHub environment:
``GITHUB_ACTIONS=true`` and ``GITHUB_STEP_SUMMARY`` pointing at a temporary file.

Two sources of comparisons: two commits of a small stack repository built and surveyed for
real (the demo's kernels, one commit breaking two of them), with its conf in the repository
under ``torch_fl/configs/`` and an include; and the committed H200 results files.
"""

from __future__ import annotations

import json
import pathlib
import re

import pytest
from test_compare_survey import GOOD, commit, git

H6_A = "surveys/results/torch_fl-5c9d6f4-flag_gems-5.0.2-h200-harness6.json"
H6_B = "surveys/results/torch_fl-ceb4821-flag_gems-5.0.2-h200-harness6.json"
GEMS_4 = "surveys/results/flag_gems-4.2.0-h200-harness1.json"
GEMS_5 = "surveys/results/flag_gems-5.0.2-h200-harness1.json"
GITHUB_LIMIT = 65_536
ANNOTATION = re.compile(r"^::(error|warning|notice) (?:file=([^,]*),line=(\d+),)?title=[^:]*::(.*)$")

BROKEN_TWO = GOOD.replace('def setup()', '''from flagos_doctor.demo import kernels

_run_on_cpu = kernels._run_on_cpu


def _off_by_one(op, args, kwargs):
    out = _run_on_cpu(op, args, kwargs)
    if kernels.overload_name(op) in ("neg", "exp"):
        kernels.unwrap(out).add_(1)
    return out


kernels._run_on_cpu = _off_by_one


def setup()''')

# neg: routed by the base conf's line 1, then again by the PR conf's line 4 (a later line wins);
# exp: only by the included base conf, line 2.
BASE_CONF = "neg = cuda\nexp = flagos_python\n"
PR_CONF = "# the routes this PR changes\ninclude base.conf\nabs = flagos_python\nneg = flagos_python\n"
CONF = "torch_fl/configs/backends_pr.conf"


def annotations(stdout: str) -> list[tuple[str, str | None, int | None, str]]:
    found = []
    for line in stdout.splitlines():
        match = ANNOTATION.match(line)
        if match:
            level, file, number, message = match.groups()
            found.append((level, file, int(number) if number else None, message))
    return found


def github_env(tmp_path) -> dict:
    summary = tmp_path / "step-summary.md"
    summary.write_text("")
    return {"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}


@pytest.fixture(scope="module")
def stack_repo(tmp_path_factory):
    """A stack repository at two commits, the second breaking ``neg`` and ``exp``, with a
    conf under ``torch_fl/configs/`` that includes another."""
    repo = tmp_path_factory.mktemp("pr") / "stack-repo"
    (repo / "torch_fl" / "configs").mkdir(parents=True)
    (repo / "torch_fl" / "configs" / "base.conf").write_text(BASE_CONF)
    (repo / CONF).write_text(PR_CONF)
    git(repo, "init", "-q")
    git(repo, "add", "torch_fl")
    base = commit(repo, GOOD, "demo variant, its conf")
    head = commit(repo, BROKEN_TWO, "neg, exp: faster (and wrong)")
    return repo, base, head


def test_github_mode_on_two_built_commits(tmp_path, cli, stack_repo):
    repo, base, head = stack_repo
    env = github_env(tmp_path)
    comment = tmp_path / "comment.md"
    done = cli("survey", "--compare", base[:8], head[:8], "--repo", ".", "--build-cmd", "true",
               "--stack", "variant_stack", "--conf", CONF, "--store", str(tmp_path / "store"),
               "--repeats", "0", "--baseline", "none", "--comment-file", str(comment), "-q",
               env={**env, "TMPDIR": str(tmp_path)}, cwd=str(repo))
    assert done.returncode == 1, done.stderr
    found = annotations(done.stdout)
    errors = {a[3].split(":")[0]: a[1:3] for a in found if a[0] == "error"}
    assert errors == {"neg": ("torch_fl/configs/backends_pr.conf", 4), "exp": ("torch_fl/configs/base.conf", 2)}
    assert [a for a in found if a[0] != "error"] == []  # abs unchanged: nothing else to say
    summary = pathlib.Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert summary.startswith("## Survey comparison: ") and "- regressions: **2** (`exp`: " in summary
    body = comment.read_text()
    assert len(body) <= GITHUB_LIMIT
    assert body.splitlines()[0].startswith("❌ **Not safe to merge** (flagos-doctor): 2 regressed (`exp`: ")
    assert body.rstrip().endswith("<!-- flagos-doctor-pr-check -->")


def test_github_mode_on_the_committed_whole_conf_compare(tmp_path, cli):
    # ceb4821 -> the committed comparison's one regression, on the conf line that routes it:
    # a conf in a checkout, whose include routes sum.IntList_out first and whose own later line wins.
    checkout = tmp_path / "Torch-FL"
    (checkout / "torch_fl" / "configs").mkdir(parents=True)
    (checkout / "torch_fl" / "configs" / "base.conf").write_text("sum.IntList_out = cuda\nmm.out = flagos_python\n")
    (checkout / CONF).write_text("include base.conf\n\nsum.out = flagos_python\nsum.IntList_out = flagos_python\n")
    git(checkout, "init", "-q")
    env = github_env(tmp_path)
    comment = tmp_path / "comment.md"
    root = __import__("conftest").REPO_ROOT
    done = cli("survey", "--compare", f"{root}/{H6_A}", f"{root}/{H6_B}", "--conf", str(checkout / CONF),
               "--comment-file", str(comment), "--json", str(tmp_path / "c.json"), "-q", env=env, cwd=str(checkout))
    assert done.returncode == 1, done.stderr
    found = annotations(done.stdout)
    assert [(a[0], a[1], a[2]) for a in found if a[0] == "error"] == [("error", CONF, 4)]
    assert found[0][3] == "sum.IntList_out: 7 cases ERROR -> WRONG: now returns wrong values"
    fixes = {a[3].split(":")[0]: (a[1], a[2]) for a in found if a[0] == "notice"}
    assert fixes == {"cumsum.out": (None, None), "softshrink.out": (None, None),  # not in this conf
                     "sum.out": (CONF, 3), "mm.out": ("torch_fl/configs/base.conf", 2)}
    comparison = json.loads((tmp_path / "c.json").read_text())
    assert comparison["routed_by"] == CONF and comparison["routed_at"]["sum.IntList_out"] == {"file": CONF, "line": 4}
    body = comment.read_text()
    assert len(body) <= GITHUB_LIMIT
    assert body.splitlines()[0] == ("❌ **Not safe to merge** (flagos-doctor): 1 regressed (`sum.IntList_out`: "
                                    "7 cases ERROR -> WRONG: now returns wrong values); 4 fixed, 0 other changes, "
                                    "386 overloads unchanged.")
    summary = pathlib.Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    assert "- regressions: **1** (`sum.IntList_out`: 7 cases ERROR -> WRONG: now returns wrong values)" in summary


def test_the_comment_of_a_large_comparison_stays_under_githubs_limit(tmp_path, cli):
    env = github_env(tmp_path)
    comment = tmp_path / "comment.md"
    done = cli("survey", "--compare", GEMS_4, GEMS_5, "--force", "--comment-file", str(comment), "-q",
               "--store", str(tmp_path / "store"), env=env, cwd=__import__("conftest").REPO_ROOT)
    assert done.returncode == 1, done.stderr
    body = comment.read_text()
    assert 60_000 < len(body) <= GITHUB_LIMIT  # full: 1,450 changed cases would take far more
    assert body.startswith("❌ **Not safe to merge** (flagos-doctor): 24 regressed")
    levels = [a[0] for a in annotations(done.stdout)]
    assert levels.count("error") == 24 and levels.count("warning") == 50  # the rest in one line
    assert "::warning::104 more changed overloads (the step summary lists them)" in done.stdout


def test_a_safe_pr_says_so_on_its_first_line(tmp_path, cli):
    env = github_env(tmp_path)
    comment = tmp_path / "comment.md"
    root = __import__("conftest").REPO_ROOT
    done = cli("survey", "--compare", H6_B, H6_B, "--comment-file", str(comment), "-q", env=env, cwd=root)
    assert done.returncode == 0, done.stderr
    assert comment.read_text().splitlines()[0] == (
        "✅ **Safe to merge** (flagos-doctor): nothing regressed; 0 fixed, 0 other changes, 391 overloads unchanged.")
    assert annotations(done.stdout) == []


def test_nothing_of_it_outside_github_mode(tmp_path, cli):
    root = __import__("conftest").REPO_ROOT
    summary = tmp_path / "step-summary.md"
    summary.write_text("before\n")
    plain = cli("survey", "--compare", H6_A, H6_B, env={"GITHUB_STEP_SUMMARY": str(summary)}, cwd=root)
    off = cli("survey", "--compare", H6_A, H6_B, "--no-github",
              env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": str(summary)}, cwd=root)
    for done in (plain, off):
        assert done.returncode == 1, done.stderr
        assert "::" not in done.stdout and "Safe to merge" not in done.stdout
    assert plain.stdout == off.stdout
    assert summary.read_text() == "before\n"
    refused = cli("survey", "--compare", H6_A, H6_B, "--comment-file", str(tmp_path / "c.md"), cwd=root)
    assert refused.returncode == 2 and not (tmp_path / "c.md").exists()
    assert refused.stderr.strip().endswith("--comment-file needs GitHub mode (GITHUB_ACTIONS=true or --github)")
    forced = cli("survey", "--compare", H6_A, H6_B, "--github", "--comment-file", str(tmp_path / "c.md"), cwd=root)
    assert forced.returncode == 1 and (tmp_path / "c.md").read_text().startswith("❌ **Not safe to merge**")


# -- the final job: many vendor boxes, one comment ----------------------------------------
def test_ci_merge_writes_one_comment_with_a_row_per_vendor(tmp_path, cli):
    # Two vendor jobs, as the workflow runs them: each compares in GitHub mode and uploads
    # its comparison.json in an artifact folder named after the vendor; a third job died first.
    root = __import__("conftest").REPO_ROOT
    artifacts = tmp_path / "artifacts"
    for vendor, (a, b), code in (("pr-check-nvidia", (H6_A, H6_B), 1), ("pr-check-metax", (H6_B, H6_B), 0)):
        (artifacts / vendor).mkdir(parents=True)
        done = cli("survey", "--compare", a, b, "--json", str(artifacts / vendor / "comparison.json"),
                   "--comment-file", str(artifacts / vendor / "comment.md"), "-q", env=github_env(tmp_path), cwd=root)
        assert done.returncode == code, done.stderr
    (artifacts / "pr-check-ascend").mkdir()
    comment = tmp_path / "comment.md"
    folders = [str(artifacts / name) for name in ("pr-check-nvidia", "pr-check-metax")]
    done = cli("ci-merge", *folders, "--comment-file", str(comment), "--json", str(tmp_path / "merged.json"))
    assert done.returncode == 1, done.stderr
    body = comment.read_text()
    assert len(body) <= GITHUB_LIMIT and body.rstrip().endswith("<!-- flagos-doctor-pr-check -->")
    lines = body.splitlines()
    assert lines[0] == "❌ **Not safe to merge** (flagos-doctor, 2 vendor boxes): nvidia (regressed)."
    rows = [line for line in lines if line.startswith(("| nvidia", "| metax"))]
    assert [row.split(" | ")[:6] for row in rows] == [
        ["| nvidia", "❌ regressed", "1", "4", "0", "386"],
        ["| metax", "✅ safe", "0", "0", "0", "391"],
    ]
    assert "- `sum.IntList_out`: 7 cases ERROR -> WRONG: now returns wrong values" in body
    merged = json.loads((tmp_path / "merged.json").read_text())
    assert merged["schema"] == "flagos-doctor/ci-merge/1" and merged["safe"] is False
    # the vendor whose job ended first: a row that says so, and never "safe"
    done = cli("ci-merge", folders[1], str(artifacts / "pr-check-ascend"), "--comment-file", str(comment))
    assert done.returncode == 1, done.stderr
    assert comment.read_text().splitlines()[0] == (
        "❌ **Not safe to merge** (flagos-doctor, 2 vendor boxes): ascend (no comparison).")
    done = cli("ci-merge", folders[1], "--comment-file", str(comment))
    assert done.returncode == 0 and comment.read_text().startswith(
        "✅ **Safe to merge** (flagos-doctor, 1 vendor box): nothing regressed on any.")
    bad = cli("ci-merge", str(artifacts / "pr-check-nvidia" / "comment.md"))
    assert bad.returncode == 2 and "comment.md" in bad.stderr


def test_a_base_branch_stands_for_its_merge_base_with_the_head(tmp_path):
    from flagos_doctor import arms

    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    forked = commit(repo, GOOD, "where the PR branched off")
    git(repo, "checkout", "-q", "-b", "pr")
    head = commit(repo, BROKEN_TWO, "the PR")
    git(repo, "checkout", "-q", "main")
    moved = commit(repo, GOOD + "\n# main moved on\n", "main moved on")
    said = []
    assert arms.merge_base(str(repo), "main", "pr", said.append) == forked
    assert arms.merge_base(str(repo), "main", head[:8]) == forked
    assert said == [f"main: its merge base with pr is {forked[:10]}"]
    # a commit or a tag is itself; so is anything without --repo
    git(repo, "tag", "v1", moved)
    for ref in (moved, moved[:8], "v1"):
        assert arms.merge_base(str(repo), ref, "pr") == ref
    assert arms.merge_base(None, "main", "pr") == "main"


def test_the_committed_examples_of_docs_ci_are_what_the_command_makes(tmp_path, cli):
    # docs/ci.md shows these: the step summary and the comment of the committed whole-conf compare.
    root = __import__("conftest").REPO_ROOT
    env = github_env(tmp_path)
    done = cli("survey", "--compare", H6_A, H6_B, "--comment-file", str(tmp_path / "comment.md"), "-q",
               env=env, cwd=root)
    assert done.returncode == 1, done.stderr
    docs = f"{root}/docs/ci"
    assert (tmp_path / "comment.md").read_text() == pathlib.Path(f"{docs}/example-comment.md").read_text(encoding="utf-8")
    assert pathlib.Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8") == pathlib.Path(f"{docs}/example-step-summary.md").read_text(encoding="utf-8")
    assert len((tmp_path / "comment.md").read_text()) == 30_461  # as docs/ci.md says


def test_runs_that_are_not_comparable_say_so_on_the_comments_first_line(tmp_path, cli):
    env = github_env(tmp_path)
    comment = tmp_path / "comment.md"
    root = __import__("conftest").REPO_ROOT
    done = cli("survey", "--compare", GEMS_4, GEMS_5, "--comment-file", str(comment), "--json", str(tmp_path / "c.json"),
               "--store", str(tmp_path / "store"), env=env, cwd=root)
    assert done.returncode == 2 and "runs are not comparable: route_set_sha256" in done.stderr
    assert comment.read_text().splitlines()[0] == (
        "⚠️ **flagos-doctor could not compare the PR**: the runs are not comparable (route_set_sha256 differ).")
    assert annotations(done.stdout) == []
    assert "**Not comparable** (refused)" in pathlib.Path(env["GITHUB_STEP_SUMMARY"]).read_text(encoding="utf-8")
    # the final job's row for that vendor
    (tmp_path / "pr-check-cuda").mkdir()
    (tmp_path / "c.json").rename(tmp_path / "pr-check-cuda" / "comparison.json")
    merged = cli("ci-merge", str(tmp_path / "pr-check-cuda"), "--comment-file", str(tmp_path / "merged.md"))
    assert merged.returncode == 1, merged.stderr
    assert (tmp_path / "merged.md").read_text().splitlines()[0] == (
        "❌ **Not safe to merge** (flagos-doctor, 1 vendor box): cuda (not comparable).")
