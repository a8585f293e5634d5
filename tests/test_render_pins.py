"""The committed H200 documents render byte-identical: every view of every command, pinned
by sha256.

The digests were computed on main at 21f972e, before the output sink (issue 11) moved the
renderers; a change of a single byte in any view fails here. The compare and matrix views of
the harness-1 pair were computed again when the 4.2.0 file took its harness's name (its path
is in the views) and the matrix's † took the survey's rule, each on main before the sink's
merge, and checked equal to the merged code's. When a view is changed on
purpose, recompute its digest (``PIN_PRINT=1 pytest tests/test_render_pins.py -s`` prints
them all; ``PIN_DUMP=DIR`` writes the views there, to diff) and say why in the commit.

The CLI runs the survey compare, the attribution, the matrix and the suite compare as a user
would (stdout and stderr both pinned); the probe and report documents, which no command
reads back, render through their views in-process.
"""

from __future__ import annotations

import hashlib
import io
import json
import os

import pytest
from rich.console import Console

from conftest import REPO_ROOT, run_cli

RESULTS = "surveys/results"
H200_DOCS = os.path.join(REPO_ROOT, "surveys", "h200")
FLAG_GEMS_4 = f"{RESULTS}/flag_gems-4.2.0-h200-harness1.json"  # the harness-1 pair
FLAG_GEMS_5 = f"{RESULTS}/flag_gems-5.0.2-h200-harness1.json"
TORCH_FL_OLD = f"{RESULTS}/torch_fl-5c9d6f4-sample-flag_gems-5.0.2-h200.json"
TORCH_FL_NEW = f"{RESULTS}/torch_fl-ceb4821-sample-flag_gems-5.0.2-h200.json"
TORCH_FL = f"{RESULTS}/torch_fl-1adbc97-flag_gems-5.0.2-h200.json"
GEMS_ON_TORCH_FL_ROUTES = f"{RESULTS}/flag_gems-5.0.2-torch_fl-routes-h200.json"

PINS = {
    "attribute.json": "af7e426be162085b5b3a6cde521b49cab65a150abc101eca3a1439e157434e68",
    "attribute.md": "bb966191f7ec8c46018408c3b6ab3835ffb28c0995ae4b3ff0c56afc4b181efc",
    "attribute.stderr": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "attribute.stdout": "de447cbc887c7ee997e794569cb9d2093bd063e47a25419fa6e966235a04612f",
    "compare-4.2.0-5.0.2-all.stderr": "29792d2955261b44fc2a720ffffffa72586ad59a1bdd22c8e31e8e2d70ba5067",
    "compare-4.2.0-5.0.2-all.stdout": "993e26c36ee437bb936ab47d038085a57ed747a28cbfa46eb42f5060d9bcc99e",
    "compare-4.2.0-5.0.2-md-on-stdout.stderr": "0bc4f9ff9e96af330cc64064d81b11a4fee177b83f11b42077ffbab496a0f583",
    "compare-4.2.0-5.0.2-md-on-stdout.stdout": "aa5cf1fbda9ca01f94d09eb54ec5ab1d7b54bd65f1c042ffa32e9ce1dbe54c3d",
    "compare-4.2.0-5.0.2.json": "19f5c2aec227a29d76a8b12d1e806de60b3a4cd7c9d247bcd47f7b3736c30c2b",
    "compare-4.2.0-5.0.2.md": "0589988a0569a705e36f7ca52c8fdd6adac84739687f453c9aa599ba14ccbc3f",
    "compare-4.2.0-5.0.2.stderr": "29792d2955261b44fc2a720ffffffa72586ad59a1bdd22c8e31e8e2d70ba5067",
    "compare-4.2.0-5.0.2.stdout": "706c14326c49a8bcb4d1d854382cd8ebfb03127b8d885879bcaff0bb042f9b47",
    "compare-5c9d6f4-ceb4821.json": "2300ba22b13fb04203f63213a594efaef6930f1459fc3fdb89d53b3498f20ec0",
    "compare-5c9d6f4-ceb4821.md": "f8fb527a8ec2e645f7df255ba847dd66655d6aa990eb9cbc025ada2459b8b10c",
    "compare-5c9d6f4-ceb4821.stderr": "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "compare-5c9d6f4-ceb4821.stdout": "ad27df30390dbb5d736d74f3d0e01e043ea6350d1570a3ec1a06e8839309df34",
    "matrix.csv": "86e915a634c24671200ee120e0c4470a444a52b253ae10c79d90e7a879daa19d",
    "matrix.html": "9fd8a7aca9659c64dff70e14fdd0a6d8f737fcec4969a6b18e918dace21fad3b",
    "matrix.json": "86fae3855eb5a9ae4f6313a7a1f31d48b3f51a1e6352daf561f6e2095e6edbdb",
    "matrix.md": "4a921183342cd4b230cfb902e70ad443471020fe9a37315c96446a54c6319f94",
    "matrix.stdout": "eb0f575f3aca49725b2333f6197d9ccfe77dd39f8f36e9f5ff23b36a9318e0e9",
    "probe-torch_fl-ready.json": "d7943b3e99f153cfd2e519b7872e4f8f1220b90bccbd66ffa5edc16fd9d4718c",
    "probe-torch_fl-ready.md": "3f57e848548386efe2080ac8a284c06c2edfff41f43e4eb76404d3fa2d34a132",
    "probe-torch_fl-ready.md-small": "9e191a2918d13d10b50d1c9bd493ffff248d67f196efdfd6134afcf54ef62a69",
    "probe-torch_fl-ready.terminal": "011df920a91c8209f3cf6bb532da49d8be379cf5cfa798ebdf552e72f83c1d75",
    "report-torch_fl-ready.md": "d6ce35e5c5447d63a9432a9049a7c1a9b32cb16c6f0df7ccf118f99fec651d7d",
    "report-torch_fl-ready.md-small": "4a54d52b483bb7345b3d7a8f27fa92cb46240c830fa11855df273eca2bbd331d",
    "suite.json": "b3c8a226f46f05b3106216aad16513f4c3fd45cc08a13c7063c3fd616885ce05",
    "suite.md": "c21dc65a6e22101eea5b095f0977a754ae08eca31cafaa7c02087ee8590398a3",
    "suite.stdout": "66cdd5ab69ebe81a49236b888c5211d40fd7947b413b53f2b2d6d5f5d24fbe0f",
    "survey-summary-4.2.0.terminal": "44a1f8cfdb3970e84e1d714115c3944438fcdc10dcaf794110b00a7de208ecbe",  # not-counted causes in one line
}

JUNIT_A = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3" failures="0" errors="0" skipped="0">
<testcase classname="tests.test_ops" name="test_add" time="0.010"/>
<testcase classname="tests.test_ops" name="test_mul" time="0.020"/>
<testcase classname="tests.test_ops" name="test_div" time="0.030"/>
</testsuite></testsuites>
"""
JUNIT_B = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="3" failures="1" errors="0" skipped="1">
<testcase classname="tests.test_ops" name="test_add" time="0.010"/>
<testcase classname="tests.test_ops" name="test_mul" time="0.020"><failure message="assert 2 == 3">E assert 2 == 3</failure></testcase>
<testcase classname="tests.test_ops" name="test_sub" time="0.030"><skipped message="no device"/></testcase>
</testsuite></testsuites>
"""


def _sha(data: str) -> str:
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


def _cli(renderings: dict, name: str, tmp_path, *args, code: int, files: dict | None = None, cwd=REPO_ROOT) -> None:
    """Run the CLI from the repository root (paths in the documents stay relative) and keep
    its stdout, stderr and each file it wrote."""
    done = run_cli(*args, "--store", str(tmp_path / "store"), cwd=cwd)
    assert done.returncode == code, (name, done.returncode, done.stderr[-2000:])
    renderings[f"{name}.stdout"] = done.stdout
    if done.stderr or f"{name}.stderr" in PINS:
        renderings[f"{name}.stderr"] = done.stderr
    for suffix, path in (files or {}).items():
        renderings[f"{name}.{suffix}"] = open(path, encoding="utf-8").read()


def _load(path: str) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)


def _in_process(renderings: dict) -> None:
    from flagos_doctor import output
    from flagos_doctor.files import dump_json
    from flagos_doctor.probe.formats import markdown as probe_markdown, terminal  # noqa: F401  (registers the view)
    from flagos_doctor.report import markdown as report_markdown
    from flagos_doctor.survey import progress

    probe = _load(os.path.join(H200_DOCS, "probe-h200-torch_fl-ready.json"))
    renderings["probe-torch_fl-ready.md"] = probe_markdown.render(probe)
    renderings["probe-torch_fl-ready.md-small"] = probe_markdown.render(probe, 2_000, "`probe.json`")
    renderings["probe-torch_fl-ready.terminal"] = output.plain(probe)
    renderings["probe-torch_fl-ready.json"] = dump_json(probe)
    report = _load(os.path.join(H200_DOCS, "report-h200-torch_fl-ready.json"))
    renderings["report-torch_fl-ready.md"] = report_markdown.render(report)
    renderings["report-torch_fl-ready.md-small"] = report_markdown.render(report, max_chars=4_000, full_record="`r.json`")
    out = io.StringIO()
    progress.show_summary(_load(os.path.join(REPO_ROOT, FLAG_GEMS_4)), Console(file=out, width=200), "r.json")
    renderings["survey-summary-4.2.0.terminal"] = out.getvalue()


@pytest.fixture(scope="module")
def renderings(tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("pins")
    found: dict[str, str] = {}
    md, js = str(tmp / "x.md"), str(tmp / "x.json")
    _cli(found, "compare-4.2.0-5.0.2", tmp, "survey", "--compare", FLAG_GEMS_4, FLAG_GEMS_5, "--force",
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js})
    _cli(found, "compare-4.2.0-5.0.2-all", tmp, "survey", "--compare", FLAG_GEMS_4, FLAG_GEMS_5, "--force", "--all", code=1)
    _cli(found, "compare-4.2.0-5.0.2-md-on-stdout", tmp, "survey", "--compare", FLAG_GEMS_4, FLAG_GEMS_5, "--force",
         "--markdown", "-", code=1)
    _cli(found, "compare-5c9d6f4-ceb4821", tmp, "survey", "--compare", TORCH_FL_OLD, TORCH_FL_NEW,
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js})  # sum.IntList_out: ERROR -> WRONG
    _cli(found, "attribute", tmp, "survey", "--compare", TORCH_FL, GEMS_ON_TORCH_FL_ROUTES, "--attribute", "--force",
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js})
    csv, page = str(tmp / "x.csv"), str(tmp / "x.html")
    _cli(found, "matrix", tmp, "matrix", FLAG_GEMS_4, FLAG_GEMS_5, "--markdown", md, "--json", js, "--csv", csv,
         "--html", page, code=0, files={"md": md, "json": js, "csv": csv, "html": page})
    (tmp / "a.xml").write_text(JUNIT_A)
    (tmp / "b.xml").write_text(JUNIT_B)
    # Relative names: the terminal view aligns its columns to the arms' paths.
    _cli(found, "suite", tmp, "suite", "--compare", "a.xml", "b.xml",
         "--markdown", md, "--json", js, code=1, files={"md": md, "json": js}, cwd=str(tmp))
    _in_process(found)
    # Paths of this run's temporary directory are not part of any view's shape.
    return {name: text.replace(str(tmp), "TMP") for name, text in found.items()}


def test_every_pinned_view_was_rendered(renderings):
    if os.environ.get("PIN_PRINT"):
        for name in sorted(renderings):
            print(f'    "{name}": "{_sha(renderings[name])}",')
    if os.environ.get("PIN_DUMP"):  # a directory to diff the views themselves
        os.makedirs(os.environ["PIN_DUMP"], exist_ok=True)
        for name, text in renderings.items():
            with open(os.path.join(os.environ["PIN_DUMP"], name), "w", encoding="utf-8") as handle:
                handle.write(text)
    assert sorted(renderings) == sorted(PINS)


@pytest.mark.parametrize("name", sorted(PINS))
def test_view_is_byte_identical(renderings, name):
    assert _sha(renderings[name]) == PINS[name], name
