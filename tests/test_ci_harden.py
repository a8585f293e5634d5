"""The PR check's outputs on a hostile runner (issue 45): an output path or step summary that
is a device, a FIFO or a folder is refused or written through, never replaced; ci-merge
trusts no box's comparison; nothing the doctor prints in GitHub mode is a workflow command it
did not mean; every comment and page stays under its budget whatever the input's size.

Run as root where it can (``mknod``): a device made in a temporary folder stands for
``/dev/null`` and ``/dev/full``, so a failure replaces only that copy.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shlex
import shutil
import stat
import subprocess
import sys

import pytest
import yaml
from conftest import H6_SURVEYS, REPO_ROOT, run_cli

H6_A, H6_B = (os.path.relpath(path, REPO_ROOT) for path in H6_SURVEYS)  # as given on a command line in the checkout
GITHUB_LIMIT = 65_536
WORKFLOWS = [os.path.join(REPO_ROOT, "docs", "ci", name) for name in ("torch-fl-pr-check.yml", "flaggems-pr-check.yml")]
#: Linux's numbers of /dev/null and /dev/full.
NULL, FULL = os.makedev(1, 3), os.makedev(1, 7)


def _device(path: pathlib.Path, number: int) -> str:
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, number)
    except PermissionError:
        pytest.skip("making a character device needs root")
    return str(path)


def _special(tmp_path: pathlib.Path, kind: str) -> str:
    """A path that is no regular file: a copy of /dev/null or /dev/full, a FIFO nobody reads, a folder."""
    path = tmp_path / f"special-{kind}"
    if kind == "null":
        return _device(path, NULL)
    if kind == "full":
        return _device(path, FULL)
    if kind == "fifo":
        os.mkfifo(path)
    else:
        path.mkdir()
    return str(path)


def _kind(path: str) -> tuple:
    info = os.lstat(path)
    return stat.S_IFMT(info.st_mode), info.st_rdev, info.st_ino


def _one_line(done) -> str:
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, (done.returncode, done.stderr)
    return lines[0]


@pytest.fixture(scope="module")
def comparison(tmp_path_factory) -> dict:
    """A comparison as a vendor box's ``survey --compare`` writes it: the committed whole-conf
    compare (one regression, four fixes)."""
    path = tmp_path_factory.mktemp("box") / "comparison.json"
    done = run_cli("survey", "--compare", H6_A, H6_B, "--json", str(path), "-q", cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 1, done.stderr
    return json.loads(path.read_text())


# -- 1. the step summary and every output path: never replaced -----------------------------
@pytest.mark.parametrize("kind", ["null", "full", "fifo", "dir"])
def test_the_step_summary_is_written_through_or_refused_never_replaced(tmp_path, kind):
    summary = _special(tmp_path, kind)
    before = _kind(summary)
    comment = tmp_path / "comment.md"
    done = run_cli("survey", "--compare", H6_A, H6_B, "--comment-file", str(comment), "-q",
                   "--json", str(tmp_path / "c.json"),
                   env={"GITHUB_ACTIONS": "true", "GITHUB_STEP_SUMMARY": summary}, cwd=REPO_ROOT, timeout=120)
    assert _kind(summary) == before  # the same device, FIFO or folder: not a regular file in its place
    if kind == "null":  # written through, as any program writing to /dev/null
        assert done.returncode == 1, done.stderr
    else:  # /dev/full says its disk is full; nobody reads the FIFO; a folder holds no text
        line = _one_line(done)
        assert line.startswith("flagos-doctor: error: $GITHUB_STEP_SUMMARY: cannot write") and summary in line
    # the other outputs are written all the same
    assert comment.read_text().startswith("❌ **Not safe to merge**")
    assert json.loads((tmp_path / "c.json").read_text())["regressions"] == 1
    assert "::error " in done.stdout


def test_the_real_dev_null_as_the_step_summary_is_left_as_it_is(tmp_path):
    # First on a copy: a regressed doctor fails here, never reaching the machine's own.
    for summary in (_special(tmp_path, "null"), "/dev/null"):
        before = _kind(summary)
        try:
            done = run_cli("survey", "--compare", H6_B, H6_B, "--github", "-q",
                           env={"GITHUB_STEP_SUMMARY": summary}, cwd=REPO_ROOT, timeout=120)
            assert done.returncode == 0, done.stderr
            assert _kind(summary) == before and stat.S_ISCHR(os.stat(summary).st_mode)
        finally:
            if summary == "/dev/null" and not stat.S_ISCHR(os.lstat(summary).st_mode):  # put it back
                os.unlink(summary)
                os.mknod(summary, stat.S_IFCHR | 0o666, NULL)
                os.chmod(summary, 0o666)


@pytest.mark.parametrize("kind", ["null", "fifo", "dir"])
@pytest.mark.parametrize("command", ["compare --json", "compare --markdown", "compare --comment-file",
                                     "ci-merge --json", "ci-merge --comment-file", "matrix --csv"])
def test_an_output_path_that_is_no_regular_file_is_refused(tmp_path, kind, command, comparison):
    target = _special(tmp_path, kind)
    before = _kind(target)
    link = tmp_path / "link-to-it"  # through a symlink: the same
    link.symlink_to(target)
    name, option = command.split()
    box = tmp_path / "pr-check-cuda"
    box.mkdir()
    (box / "comparison.json").write_text(json.dumps(comparison))
    args = {"compare": ("survey", "--compare", H6_B, H6_B, "--github"),
            "ci-merge": ("ci-merge", str(box)), "matrix": ("matrix", H6_A)}[name]
    for path in (target, str(link)):
        line = _one_line(run_cli(*args, option, path, "-q", cwd=REPO_ROOT, timeout=120))
        assert option in line and "not a regular file" in line, line
        assert _kind(target) == before and os.path.islink(link)


def test_an_atomic_write_through_a_symlink_replaces_its_target_and_keeps_the_link(tmp_path):
    from flagos_doctor import files
    from flagos_doctor.errors import BadInput

    (tmp_path / "real.md").write_text("old")
    (tmp_path / "link.md").symlink_to(tmp_path / "real.md")
    files.atomic_write_text(tmp_path / "link.md", "new")
    assert (tmp_path / "link.md").is_symlink() and (tmp_path / "real.md").read_text() == "new"
    device = _special(tmp_path, "null")
    (tmp_path / "to-device").symlink_to(device)
    with pytest.raises(BadInput, match="a character device, not a regular file"):
        files.atomic_write_text(tmp_path / "to-device", "text")
    assert stat.S_ISCHR(os.stat(device).st_mode)


# -- 2. ci-merge trusts no box ---------------------------------------------------------------
@pytest.fixture(scope="module")
def safe_comparison(tmp_path_factory) -> dict:
    path = tmp_path_factory.mktemp("box") / "comparison.json"
    done = run_cli("survey", "--compare", H6_B, H6_B, "--json", str(path), "-q", cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(path.read_text())


def _hostile_boxes(regressed: dict) -> dict:
    """What a box's comparison.json may hold instead of what survey --compare wrote: name -> text."""
    def changed(**fields):
        return json.dumps({**regressed, **fields})

    first = regressed["transitions"][0]
    return {
        "only-its-schema": json.dumps({"schema": "flagos-doctor/compare/1"}),
        "zero-beside-regressed": changed(regressions=0),
        "regressed-list-emptied": changed(regressed_overloads=[], regressions=0),
        "count-a-string": changed(regressions="1"),
        "count-a-bool": changed(fixes=True),
        "count-negative": changed(unchanged=-5),
        "names-not-a-list": changed(regressed_overloads="sum.IntList_out"),
        "names-repeated": changed(regressed_overloads=["sum.IntList_out"] * 2, regressions=2),
        "transition-a-string": changed(transitions=["x"]),
        "transition-kind-unknown": changed(transitions=[{**first, "kind": "improvement"}]),
        "case-regression-a-string": changed(cases_changed=[{**regressed["cases_changed"][0], "regression": "yes"}]),
        "arms-a-list": changed(arms=[]),
        "routed-at-garbage": changed(routed_at={"sum.IntList_out": "line 4"}),
        "a-later-schema": changed(schema="flagos-doctor/compare/2"),
        "refused-without-differences": json.dumps({"schema": "flagos-doctor/compare/1", "refused": True, "arms": {}}),
        "a-list": "[]",
        "truncated": json.dumps(regressed)[:500],
        "not-json": "<html>502 Bad Gateway</html>",
        "empty": "",
        "lone-surrogate": changed(regressed_overloads=["sum.IntList_out\ud800"]),  # JSON writes it "\ud800"
        "lone-surrogate-key": changed(routed_at={"\udfff": {"file": "x.conf", "line": 1}}),
    }


def test_ci_merge_says_which_box_it_cannot_trust_and_merges_the_others(tmp_path, comparison, safe_comparison):
    good = tmp_path / "pr-check-metax"
    good.mkdir()
    (good / "comparison.json").write_text(json.dumps(safe_comparison))
    for name, text in _hostile_boxes(comparison).items():
        box = tmp_path / f"pr-check-{name}"
        box.mkdir()
        (box / "comparison.json").write_text(text)
        comment, merged = tmp_path / f"{name}.md", tmp_path / f"{name}.json"
        done = run_cli("ci-merge", str(good), str(box), "--comment-file", str(comment), "--json", str(merged),
                       timeout=120)
        line = _one_line(done)  # exit 2, one line naming the box's file; never 3
        assert str(box / "comparison.json") in line and "unreadable: " in line, (name, line)
        body = comment.read_text()
        assert body.startswith(f"❌ **Not safe to merge** (flagos-doctor, 2 vendor boxes): {name} (unreadable)."), name
        assert body.replace("Not safe to merge", "").count("Safe to merge") == 1, name  # metax's own line only
        rows = {row.split(" | ")[0][2:]: row.split(" | ")[1] for row in body.splitlines() if row.startswith("| ")}
        assert rows["metax"] == "✅ safe" and rows[name].startswith("⚠️ unreadable: "), (name, rows)
        document = json.loads(merged.read_text())
        assert document["safe"] is False and [v["state"] for v in document["vendors"]] == ["compared", "unreadable"]
        assert f"{name}: unreadable: " in done.stdout


@pytest.mark.parametrize("kind", ["fifo", "dir", "null"])
def test_a_comparison_json_that_is_no_regular_file_is_an_unreadable_box(tmp_path, kind, safe_comparison):
    box = tmp_path / "pr-check-cuda"
    box.mkdir()
    special = _special(box, kind)
    os.rename(special, box / "comparison.json")
    done = run_cli("ci-merge", str(box), "--comment-file", str(tmp_path / "c.md"), timeout=60)
    assert "not a regular file" in _one_line(done) or "directory" in _one_line(done)
    assert (tmp_path / "c.md").read_text().startswith("❌ **Not safe to merge** (flagos-doctor, 1 vendor box): cuda (unreadable).")


def test_ci_merge_rows_are_named_after_the_vendor_not_the_artifact(tmp_path, comparison, safe_comparison):
    for folder, document in (("pr-check-cuda", comparison), ("pr-check-metax", safe_comparison), ("ascend", None)):
        (tmp_path / folder).mkdir()
        if document:
            (tmp_path / folder / "comparison.json").write_text(json.dumps(document))
    done = run_cli("ci-merge", *(str(tmp_path / f) for f in ("pr-check-cuda", "pr-check-metax", "ascend")),
                   str(tmp_path / "pr-check-metax" / "comparison.json").replace("metax", "metax/../pr-check-metax"),
                   "--comment-file", str(tmp_path / "c.md"), timeout=60)
    assert done.returncode == 2 and "share a name (metax)" in done.stderr
    done = run_cli("ci-merge", *(str(tmp_path / f) for f in ("pr-check-cuda", "pr-check-metax", "ascend")),
                   "--comment-file", str(tmp_path / "c.md"), timeout=60)
    assert done.returncode == 1, done.stderr
    body = (tmp_path / "c.md").read_text()
    assert body.startswith("❌ **Not safe to merge** (flagos-doctor, 3 vendor boxes): cuda (regressed), ascend (no comparison).")
    assert [row.split(" | ")[0] for row in body.splitlines() if row.startswith("| ") and "---" not in row][1:] == [
        "| cuda", "| metax", "| ascend"]


# -- 3. no workflow command but the doctor's own: the shipped workflow's steps, in a fake runner --
#: What a pull request can put in what the doctor prints: an overload's name, a kernel's
#: error message, a box's folder name (each with a newline, a lone CR, the older form).
HOSTILE_NAME = "sum.IntList_out\n::warning::injected-name ##[error]v1-name\r::error::cr-name"
HOSTILE_DETAIL = "RuntimeError: kernel says\n::error file=x,line=1::injected-detail\n  ##[warning]v1-detail\r::add-mask::hidden"
HOSTILE_BOXES = ["pr-check-x\n::error::injected-box", "pr-check-##[error]v1-box", "pr-check-\r  ::notice::cr-box"]
#: The only commands the doctor means: annotations (compare/github.py).
OURS = re.compile(r"^::(error|warning|notice) (file=[^,:]*,line=\d+,)?title=flagos-doctor%3A [^:]*::\S")
#: Where GitHub's runner breaks lines, and what it trims before a command's ``::``.
RUNNER_LINES = re.compile(r"\r\n|\r|\n")


def _hostile_results(tmp_path: pathlib.Path) -> dict:
    """The committed whole-conf pair, its regressed overload renamed and its error messages hostile."""
    made = {}
    for side, path in (("a", H6_A), ("b", H6_B)):
        document = json.loads((pathlib.Path(REPO_ROOT) / path).read_text())
        entry = document["overloads"].pop("sum.IntList_out")
        for case in entry["cases"]:
            case["detail"] = HOSTILE_DETAIL
        document["overloads"][HOSTILE_NAME] = entry
        document["routes"] = [HOSTILE_NAME if name == "sum.IntList_out" else name for name in document["routes"]]
        made[side] = document
    return made


def _workflow_step(path: str, job: str, name: str) -> dict:
    workflow = yaml.safe_load(pathlib.Path(path).read_text(encoding="utf-8"))
    return next(step for step in workflow["jobs"][job]["steps"] if step.get("name") == name)


def _fake_runner(tmp_path: pathlib.Path, cwd: pathlib.Path, script: str, env: dict) -> str:
    """Run ``script`` as a runner runs a step (bash -e, GITHUB_* files in tmp, flagos-doctor on
    PATH as this checkout); return what the runner reads: stdout and stderr."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "flagos-doctor"
    shim.write_text(f"#!/bin/sh\nPYTHONPATH={shlex.quote(REPO_ROOT)} exec {shlex.quote(sys.executable)} -m flagos_doctor \"$@\"\n")
    shim.chmod(0o755)
    runner = {name: str(tmp_path / name.lower()) for name in ("GITHUB_STEP_SUMMARY", "GITHUB_OUTPUT", "GITHUB_ENV", "GITHUB_PATH")}
    for path in runner.values():
        pathlib.Path(path).touch()
    done = subprocess.run(["bash", "-e", "-c", script], cwd=cwd, capture_output=True, text=True, timeout=600,
                          env={**os.environ, **runner, **env, "GITHUB_ACTIONS": "true",
                               "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"})
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def _commands(printed: str) -> list[str]:
    """Every line the runner would read as a workflow command (either form)."""
    return [line for line in RUNNER_LINES.split(printed)
            if line.lstrip().startswith("::") or "##[" in line]


def test_the_shipped_pr_check_prints_no_command_but_its_own(tmp_path):
    # The vendor job's "Survey and compare" step as shipped: the base and head commits of a
    # checkout are found in the box's results store (surveyed before), their results hostile.
    checkout = tmp_path / "Torch-FL"
    (checkout / "torch_fl" / "configs").mkdir(parents=True)
    conf = "torch_fl/configs/backends_flaggems.conf"
    (checkout / conf).write_text("sum.out = flagos_python\n")
    subprocess.run(["git", "init", "-q", str(checkout)], check=True)
    commits = []
    for message in ("base", "head"):
        subprocess.run(["git", "-C", str(checkout), "add", "-A"], check=True)
        subprocess.run(["git", "-C", str(checkout), "-c", "user.name=t", "-c", "user.email=t@example", "commit",
                        "-q", "--allow-empty", "-m", message], check=True)
        commits.append(subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True,
                                      text=True, check=True).stdout.strip())
    subprocess.run(["git", "-C", str(checkout), "update-ref", "refs/remotes/origin/main", commits[0]], check=True)
    store = tmp_path / "store"
    for commit, document in zip(commits, _hostile_results(tmp_path).values()):
        (store / "survey" / commit).mkdir(parents=True)
        (store / "survey" / commit / "filed.json").write_text(json.dumps(document))
    step = _workflow_step(WORKFLOWS[0], "survey", "Survey and compare")
    printed = _fake_runner(tmp_path, checkout, step["run"], {"BASE": "origin/main", "HEAD_SHA": commits[1],
                                                            "CONF": conf, "FLAGOS_DOCTOR_STORE": str(store)})
    assert "exit=1" in (tmp_path / "github_output").read_text()  # it compared: one regression
    assert "injected-name" in printed and "injected-detail" in printed  # the views did print them...
    ours = _commands(printed)
    assert ours and all(OURS.match(line) and "##[" not in line for line in ours), ours  # ...as no command
    assert sum(line.startswith("::error ") for line in ours) == 1
    # The final job's merge step as shipped, over that box and boxes of hostile names.
    artifacts = tmp_path / "job" / "artifacts"
    shutil.copytree(checkout / "pr-check", artifacts / "pr-check-cuda")
    for name in HOSTILE_BOXES:
        shutil.copytree(checkout / "pr-check", artifacts / name)
    script = _workflow_step(WORKFLOWS[0], "comment", "Merge the vendors' comparisons")["run"]
    script = "\n".join(line for line in script.splitlines() if not line.strip().startswith("pip install"))
    printed = _fake_runner(tmp_path, tmp_path / "job", script, {})
    assert "injected-box" in printed and "v1-box" in printed and _commands(printed) == []
    body = (tmp_path / "job" / "comment.md").read_text()
    assert body.startswith("❌ **Not safe to merge** (flagos-doctor, 6 vendor boxes): ")


def test_a_command_split_across_writes_and_flushes_is_still_made_inert():
    import io

    from flagos_doctor.workflow import CommandGuard

    out = io.StringIO()
    guard = CommandGuard(out)
    for piece in ("  :", ":warning::split\n", "text ##", "[error]x\rnext\r\n", "\u2003::notice::em-space", "#", "#",
                  "[a]", "\n"):
        guard.write(piece)
        guard.flush()  # a flush between any two writes (print(..., flush=True), rich)
    guard.write_commands("::error title=flagos-doctor%3A x::meant ##[but not this]\n")
    guard.write("tail ::x ##")
    guard.finish()
    assert _commands(out.getvalue()) == ["::error title=flagos-doctor%3A x::meant ##\u00b7[but not this]"]
    assert out.getvalue().replace("\u00b7", "") == (
        "  ::warning::split\ntext ##[error]x\rnext\r\n\u2003::notice::em-space##[a]\n"
        "::error title=flagos-doctor%3A x::meant ##[but not this]\ntail ::x ##")  # nothing lost


def test_json_on_stdout_on_a_runner_is_the_same_document_and_no_command(tmp_path):
    documents = _hostile_results(tmp_path)
    for side, document in documents.items():
        (tmp_path / f"{side}.json").write_text(json.dumps(document))
    done = run_cli("survey", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--json", "-",
                   env={"GITHUB_ACTIONS": "true"}, timeout=120)
    assert done.returncode == 1, done.stderr
    assert "##[" not in done.stdout and all(OURS.match(line) for line in _commands(done.stdout))
    comparison = json.loads(done.stdout[: done.stdout.rindex("}") + 1])
    assert HOSTILE_NAME in comparison["regressed_overloads"]
    assert any(HOSTILE_DETAIL in json.dumps(g, ensure_ascii=False) or "v1-detail" in json.dumps(g)
               for g in comparison["failure_groups"])


# -- 4. within budgets and GitHub's limits, whatever the input's size --------------------------
def _small_comparison(regressed: list[str]) -> dict:
    """A comparison as small as one gets: ``regressed`` overloads, each from PASS to WRONG."""
    return {"schema": "flagos-doctor/compare/1", "arms": {"a": {"label": "base"}, "b": {"label": "head"}},
            "census_identical": False, "regressions": len(regressed), "regressed_overloads": regressed,
            "transitions": [{"overload": name, "from": "STRICT", "to": "FAILED", "kind": "regression",
                             "mark": "newly failing"} for name in regressed],
            "cases_changed": [], "fixes": 0, "changes": 0, "changed_overloads": [], "unchanged": 12}


def test_ci_merge_of_a_thousand_boxes_stays_under_githubs_limit(tmp_path):
    artifacts = tmp_path / "artifacts"
    for index in range(1000):
        box = artifacts / f"pr-check-vendor-{index:04d}"
        box.mkdir(parents=True)
        (box / "comparison.json").write_text(json.dumps(_small_comparison([f"op{index}.out", f"op{index}.Tensor"])))
    comment = tmp_path / "comment.md"
    done = run_cli("ci-merge", *sorted(str(p) for p in artifacts.iterdir()), "--comment-file", str(comment), "-q",
                   timeout=300)
    assert done.returncode == 1, done.stderr
    body = comment.read_text()
    assert len(body) <= GITHUB_LIMIT and body.endswith("<!-- flagos-doctor-pr-check -->\n")
    assert body.startswith("❌ **Not safe to merge** (flagos-doctor, 1000 vendor boxes): vendor-0000 (regressed), ")
    assert ", and 990 more." in body.splitlines()[0]
    assert len([line for line in body.splitlines() if line.startswith("| vendor-")]) == 1000  # a row each
    assert "Left out to stay under 64,000 characters: vendor-0005's details; " in body  # the rest named


@pytest.mark.parametrize("size", [100_000, 2_000_000])
def test_a_huge_overload_name_keeps_every_page_in_its_budget(tmp_path, size):
    name = "sum." + "x" * size
    for side, path in (("a", H6_A), ("b", H6_B)):
        document = json.loads((pathlib.Path(REPO_ROOT) / path).read_text())
        document["overloads"][name] = document["overloads"].pop("sum.IntList_out")
        document["routes"] = [name if route == "sum.IntList_out" else route for route in document["routes"]]
        (tmp_path / f"{side}.json").write_text(json.dumps(document))
    summary = tmp_path / "summary.md"
    done = run_cli("survey", "--compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--github", "-q",
                   "--comment-file", str(tmp_path / "comment.md"), "--markdown", str(tmp_path / "page.md"),
                   "--max-chars", "20000", env={"GITHUB_STEP_SUMMARY": str(summary)}, timeout=300)
    assert done.returncode == 1, done.stderr
    comment = (tmp_path / "comment.md").read_text()
    assert len(comment) <= GITHUB_LIMIT and comment.startswith("❌ **Not safe to merge** (flagos-doctor): 1 regressed (`sum.xxx")
    assert len((tmp_path / "page.md").read_text()) <= 20_000 and len(summary.read_text()) <= 20_000
    # ci-merge of a box whose regression has that name
    box = tmp_path / "pr-check-cuda"
    box.mkdir()
    (box / "comparison.json").write_text(json.dumps(_small_comparison([name, "abs.out"])))
    merged = run_cli("ci-merge", str(box), "--comment-file", str(tmp_path / "merged.md"), timeout=120)
    assert merged.returncode == 1, merged.stderr
    assert len((tmp_path / "merged.md").read_text()) <= GITHUB_LIMIT


@pytest.mark.parametrize("max_chars", [None, "5000"])
def test_explain_of_a_100_kb_command_line_keeps_its_markdown_in_budget(tmp_path, max_chars):
    page = tmp_path / "explain.md"
    budget = ["--max-chars", max_chars] if max_chars else []
    done = run_cli("explain", "--markdown", str(page), *budget, "-q", "--", sys.executable, "-c", "import sys",
                   "A" * 100_000, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    assert len(text) <= int(max_chars or 60_000)
    assert text.startswith("## flagos-doctor explain") and "characters, cut)" in text


@pytest.mark.parametrize("max_chars", [2_000, 9_999, 60_000, 65_536])
def test_a_page_never_passes_its_budget_whatever_its_parts(max_chars):
    from flagos_doctor.markdown import Page

    long = "y" * 300_000
    shapes = {
        "one huge line always kept": [([long], 0)],
        "many lines always kept": [([f"- line {i} " + "z" * 80 for i in range(5_000)], 0)],
        "huge lines in several kept parts": [([long, "", long], 0), (["<details>", long, "</details>"], 0), ([long], 1)],
        "a huge table": [("table", [f"| {i} | {long[:i % 500]} |" for i in range(3_000)], 0)],
        "a huge part name": [([long], 1, long)],
    }
    for what, parts in shapes.items():
        page = Page(max_chars, full_record="`" + "r" * 10_000 + "`")
        for part in parts:
            if part[0] == "table":
                page.add_table("T", ["| a | b |", "|---|---|"], part[1], part[2], "rows")
            else:
                page.add(part[0], part[1], *(part[2:] or [None]))
        text = page.text()
        assert len(text) <= max_chars, (what, len(text))
        assert text.count("<details>") == text.count("</details>"), what


# -- 5. a <summary> is plain text ------------------------------------------------------------
def test_summaries_are_plain_text_in_the_step_summary_and_the_comments(tmp_path, comparison):
    summary = tmp_path / "summary.md"
    done = run_cli("survey", "--compare", H6_A, H6_B, "--github", "-q", "--comment-file", str(tmp_path / "c.md"),
                   env={"GITHUB_STEP_SUMMARY": str(summary)}, cwd=REPO_ROOT, timeout=120)
    assert done.returncode == 1, done.stderr
    box = tmp_path / "pr-check-<details><summary><b>#bold&x"  # a folder name holds no "/"
    box.mkdir()
    (box / "comparison.json").write_text(json.dumps(comparison))
    merged = run_cli("ci-merge", str(box), "--comment-file", str(tmp_path / "m.md"), timeout=120)
    assert merged.returncode == 1, merged.stderr
    pages = [summary.read_text(), (tmp_path / "c.md").read_text(), (tmp_path / "m.md").read_text()]
    assert "<b>" not in pages[2]  # the box's name is text wherever the comment shows it
    summaries = [line for text in pages for line in text.splitlines() if "<summary>" in line]
    assert len(summaries) >= 9
    for line in summaries:
        inside = line[line.index("<summary>") + len("<summary>"): line.rindex("</summary>")]
        assert not inside.lstrip().startswith("#") and "<" not in inside, line
    assert "<summary>&lt;details&gt;&lt;summary&gt;&lt;b&gt;#bold&amp;x: ❌ regressed</summary>" in pages[2]
