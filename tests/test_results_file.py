"""The results file and its journal read back (results/resultsfile.py, results/case.py,
results/document.py): a journal or results file that is not what the survey writes is one
line naming the file and the line or field, exit 2, and nothing recorded is lost; a journal
that is not a regular file is never read; a stored verdict or summary its cases do not
give is refused. Real surveys of the demo stack, real files, FIFOs and symlinks."""

from __future__ import annotations

import ast
import json
import os
import shutil

import pytest

from conftest import run_cli


def _survey(folder, *args, timeout=300):
    return run_cli("survey", "--stack", "demo", "--ops", "abs,neg", "--no-store", "-o", "r.json", "-q",
                   *args, cwd=str(folder), timeout=timeout)


def _one_line(done) -> str:
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    return lines[0]


@pytest.fixture(scope="module")
def surveyed(tmp_path_factory):
    """A complete survey of abs and neg: its results file (the journal removed)."""
    folder = tmp_path_factory.mktemp("surveyed")
    done = _survey(folder)
    assert done.returncode == 0, done.stderr
    assert not (folder / "r.json.journal").exists()
    return folder / "r.json"


def _copy(surveyed, tmp_path):
    shutil.copy(surveyed, tmp_path / "r.json")
    return (tmp_path / "r.json").read_bytes()


@pytest.mark.parametrize("line, field", [
    ("[1, 2]", "journal line is list, expected an object"),
    ('"a string"', "journal line is str, expected an object"),
    ('{"kind": "case", "overload": "abs", "profile": "1d-f32", "route": "kernel", "detail": ""}',
     "field 'case.status' is missing"),
    ('{"kind": "case", "profile": "1d-f32", "status": "PASS"}', "field 'overload' is None"),
    ('{"kind": "case", "overload": "abs", "profile": "1d-f32", "status": "GREAT"}', "not a case status"),
    ('{"kind": "case", "overload": "abs", "profile": "1d-f32", "status": "PASS", "seconds": "slow"}',
     "field 'case.seconds' is 'slow', expected an integer or a number"),
    ('{"kind": "shrug", "overload": "abs"}', "field 'kind' is 'shrug'"),
    ('{"kind": "header", "comparable": ["x"]}', "field 'comparable' is list, expected an object"),
    ('{"kind": "profiles", "overload": "abs", "profiles": ["1d", 2]}', "field 'profiles' is not a list of profile names"),
    ('{"kind": "profiles", "overload": "abs", "profiles": "1d"}', "field 'profiles' is not a list of profile names"),
])
def test_a_forged_journal_line_is_one_line_naming_it_and_nothing_is_lost(surveyed, tmp_path, line, field):
    before = _copy(surveyed, tmp_path)
    journal = tmp_path / "r.json.journal"
    journal.write_text('{"kind": "profiles", "overload": "abs", "profiles": ["1d-f32"]}\n' + line + "\n")
    said = _one_line(_survey(tmp_path, "--rerun"))
    assert f"{journal}:2" in said and field in said, said
    assert (tmp_path / "r.json").read_bytes() == before and journal.read_text().endswith(line + "\n")


def test_the_torn_last_line_of_a_killed_run_is_still_passed_over(surveyed, tmp_path):
    _copy(surveyed, tmp_path)
    (tmp_path / "r.json.journal").write_text('{"kind": "drop", "overload": "abs"}\n{"kind": "ca')
    done = _survey(tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["overloads"]["abs"]["verdict"] == "STRICT"


@pytest.mark.parametrize("kind", ["dev-zero", "fifo", "folder"])
def test_a_journal_that_is_not_a_regular_file_is_refused_not_read(surveyed, tmp_path, kind):
    before = _copy(surveyed, tmp_path)
    journal = tmp_path / "r.json.journal"
    if kind == "dev-zero":
        journal.symlink_to("/dev/zero")  # read whole, it fills the memory until the kernel kills us
    elif kind == "fifo":
        os.mkfifo(journal)  # read, it blocks for ever: no writer
    else:
        journal.mkdir()
    said = _one_line(_survey(tmp_path, timeout=120))
    assert "journal" in said and str(journal) in said and ("not a regular file" in said or "directory" in said), said
    assert (tmp_path / "r.json").read_bytes() == before


def _forged(surveyed, tmp_path, edit) -> str:
    document = json.loads(surveyed.read_text())
    edit(document)
    path = tmp_path / "forged.json"
    path.write_text(json.dumps(document))
    return str(path)


def _all_error(document):
    for entry in document["overloads"].values():
        for case in entry["cases"]:
            case["status"] = "ERROR"


def test_a_stored_verdict_its_cases_do_not_give_is_refused_by_every_reader(surveyed, tmp_path):
    # Every case ERROR, the verdicts and summary left STRICT: matrix and report used to show STRICT.
    forged = _forged(surveyed, tmp_path, _all_error)
    for args in (["matrix", forged], ["survey", "--compare", str(surveyed), forged],
                 ["report", "--stack", "demo", "--survey", forged]):
        said = _one_line(run_cli(*args, cwd=str(tmp_path)))
        assert forged in said and "field 'overloads.abs.verdict' is 'STRICT', but its cases give 'FAILED'" in said, said


def test_a_duplicated_verdict_key_is_refused(surveyed, tmp_path):
    # JSON keeps the last of two keys: a hand-added "verdict" after the real one wins.
    text = surveyed.read_text().replace('"verdict": "STRICT"', '"verdict": "STRICT", "verdict": "FAILED"', 1)
    forged = tmp_path / "dup.json"
    forged.write_text(text)
    said = _one_line(run_cli("survey", "--compare", str(surveyed), str(forged), cwd=str(tmp_path)))
    assert str(forged) in said and "but its cases give 'STRICT'" in said, said


def test_a_stored_summary_its_cases_do_not_give_is_refused(surveyed, tmp_path):
    forged = _forged(surveyed, tmp_path, lambda d: d["summary"].update(strict=47))
    said = _one_line(run_cli("matrix", forged, cwd=str(tmp_path)))
    assert forged in said and "field 'summary.strict' is 47, but the cases give 2" in said, said


def test_every_committed_results_file_loads():
    # Real H200 runs of several harness versions: the checks hold for all of them (a summary
    # key an older harness did not write is absent, not a mismatch).
    from conftest import REPO_ROOT
    from flagos_doctor.results import document

    folder = os.path.join(REPO_ROOT, "surveys", "results")
    names = sorted(name for name in os.listdir(folder) if name.endswith(".json"))
    assert len(names) >= 20
    for name in names:
        assert document.load(os.path.join(folder, name))["schema"] == "flagos-doctor/survey/1"


def _writes(tree) -> list[str]:
    """What a module writes: calls of files' writers and os.write, and stores into a case's
    ``first_run`` (a subscript assignment or a setdefault)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            base = getattr(node.func, "value", None)
            if name in ("write_json", "atomic_write_text") or (name == "write" and getattr(base, "id", "") == "os"):
                found.append(name)
            if name == "setdefault" and node.args and getattr(node.args[0], "value", None) == "first_run":
                found.append("first_run")
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and getattr(target.slice, "value", None) == "first_run":
                    found.append("first_run")
    return found


def test_one_writer_of_the_results_file_and_one_home_of_the_first_run_rule():
    # The survey's results file and journal are written by ResultsFile alone; a case's
    # first run is kept by results/case.py alone (confirm and replay call it).
    from conftest import REPO_ROOT

    package = os.path.join(REPO_ROOT, "flagos_doctor")
    writers, keepers = [], []
    for folder in ("survey", "results", "compare"):
        for top, _, names in os.walk(os.path.join(package, folder)):
            for name in names:
                if name.endswith(".py"):
                    path = os.path.join(top, name)
                    found = _writes(ast.parse(open(path, encoding="utf-8").read()))
                    relative = os.path.relpath(path, package)
                    writers += [relative] if {"write_json", "atomic_write_text", "write"} & set(found) else []
                    keepers += [relative] if "first_run" in found else []
    # (compare/github.py adds to GitHub's step summary through files.append_text: no results file)
    assert sorted(writers) == [os.path.join("results", "resultsfile.py")]
    assert keepers == [os.path.join("results", "case.py")]


def _escaped_results(tmp_path, overload: str, detail: str, name: str = "r.json") -> str:
    """A results file whose text holds ``overload`` and ``detail`` as JSON escapes write them."""
    from flagos_doctor.results.document import build as build_results

    cases = [{"profile": "1d-f32", "status": "ERROR", "route": "kernel", "detail": "DETAIL"}]
    document = build_results({"stack": "demo"}, {"stack": "demo"}, ["NAME", "abs"], {"NAME": cases, "abs": cases})
    text = json.dumps(document).replace("NAME", overload).replace("DETAIL", detail)
    (tmp_path / name).write_text(text)
    return name


@pytest.mark.parametrize("overload, detail, field", [
    ("abs\\ud800", "fine", "('abs\\ud800')"),
    ("abs_", "RuntimeError: \\udfff here", ".detail'"),
    ("abs_", "tail \\ud83d", ".detail'"),  # a high surrogate cut from its pair
])
@pytest.mark.parametrize("command", [("matrix", "--html", "m.html"), ("matrix", "--json", "m.json"),
                                     ("survey", "--compare", "--json", "c.json")])
def test_a_lone_surrogate_in_a_results_file_is_one_line_naming_its_field(tmp_path, overload, detail, field, command):
    # json.loads keeps "\ud800", UTF-8 cannot write it: every output failed (exit 3).
    name = _escaped_results(tmp_path, overload, detail)
    files = [name, name] if command[0] == "survey" else [name]
    argv = [command[0], *command[1:-2], *files, *command[-2:]] if command[0] == "survey" else [*command[:1], name, *command[1:]]
    done = run_cli(*argv, cwd=str(tmp_path))
    assert done.returncode == 2, done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("flagos-doctor: error: r.json: ") and "holds a lone surrogate" in line and field in line


def test_a_surrogate_pair_escaped_is_text_and_read(tmp_path):
    name = _escaped_results(tmp_path, "abs_\\ud83d\\ude00", "RuntimeError: \\ud83d\\ude00")
    done = run_cli("matrix", name, "--json", "m.json", "-q", cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "abs_\U0001F600" in (tmp_path / "m.json").read_text(encoding="utf-8")
