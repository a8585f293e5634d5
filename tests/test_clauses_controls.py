"""Each promise of flagos_doctor/controls.py's docstring: a terminal view and a one-line error
show a control character as its escape, never as the character (ESC, BEL, CR, backspace, a
C1 control), tab and newline kept; the files keep the text as it was. On a real explain run
of a program whose exception message carries a terminal's commands, and a real CLI error
naming a file whose name does."""

from __future__ import annotations

import json
import re

from conftest import run_cli
from flagos_doctor.controls import inert, inert_document

#: Clears the screen, retitles the window, returns to the line's start, a C1 CSI.
HOSTILE = "\x1b[2J\x1b]0;owned\x07back\rspace\x08csi\x9b31m"
SHOWN = "\\x1b[2J\\x1b]0;owned\\x07back\\x0dspace\\x08csi\\x9b31m"
#: What a terminal would act on; rich's own colours are off outside a terminal.
CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

PROGRAM = f"""\
import os
import sys

import knobs

knobs.flag = 1
sys.stderr = open(os.devnull, "w")  # Python's own traceback is the program's, not the view's
raise RuntimeError({HOSTILE!r})
"""


def test_a_terminal_view_shows_a_programs_control_characters_as_escapes_and_the_file_keeps_them(tmp_path):
    (tmp_path / "knobs.py").write_text("flag = 0\n")
    (tmp_path / "prog.py").write_text(PROGRAM)
    out = tmp_path / "why.json"
    result = run_cli("explain", "--watch", "knobs.flag", "--json", str(out), "--", "python", "prog.py",
                     cwd=tmp_path)
    assert result.returncode != 0, result.stderr
    assert f"RuntimeError: {SHOWN}" in result.stderr, result.stderr
    assert not CONTROL.search(result.stderr + result.stdout)
    (failure,) = json.loads(out.read_text())["failures"]
    assert failure["error"] == f"RuntimeError: {HOSTILE}"  # the file: the text as it was


def test_a_one_line_error_shows_a_file_names_control_characters_as_escapes(tmp_path):
    conf = "back\x1b[8mends.conf"  # ESC [8m: what follows is invisible
    result = run_cli("survey", "--stack", "demo", "--conf", conf, cwd=tmp_path)
    assert result.returncode == 2
    (line,) = result.stderr.splitlines()
    assert "back\\x1b[8mends.conf" in line and not CONTROL.search(line), line


def test_tab_and_newline_stay_and_a_document_without_controls_is_the_same_object():
    assert inert("a\tb\nc") == "a\tb\nc"
    assert inert("\x00\x7f\x85\x1f") == "\\x00\\x7f\\x85\\x1f"
    assert inert("é ü → 😀") == "é ü → 😀"  # printable text beyond ASCII untouched
    clean = {"failures": [{"error": "x", "frames": ("a", 1, None)}], "count": 2.5}
    assert inert_document(clean) is clean
    dirty = {"k\x1b": ["ok", ("\x07", 3)], "n": {"e": "\r"}}
    assert inert_document(dirty) == {"k\\x1b": ["ok", ("\\x07", 3)], "n": {"e": "\\x0d"}}
    assert dirty == {"k\x1b": ["ok", ("\x07", 3)], "n": {"e": "\r"}}  # the original unchanged
    assert inert_document({"only the key\x1b": 1}) == {"only the key\\x1b": 1}  # keys included
