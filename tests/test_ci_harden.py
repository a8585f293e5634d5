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
import stat

import pytest
from conftest import REPO_ROOT, run_cli

H6_A = "surveys/results/torch_fl-5c9d6f4-flag_gems-5.0.2-h200-harness6.json"
H6_B = "surveys/results/torch_fl-ceb4821-flag_gems-5.0.2-h200-harness6.json"
GITHUB_LIMIT = 65_536
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
