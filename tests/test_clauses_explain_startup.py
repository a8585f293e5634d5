"""Each promise of flagos_doctor/explain/startup.py's docstrings, on real programs under
``explain`` (a module attribute is the watched probe, ``--watch knobs.flag``, so no stack is
imported; the stack's own runs are tests/test_explain*.py): the watch installed before the
program's first line, an uncaught exception a failure whose traceback the program prints as
it does unwatched (a chained one, one that cannot be printed), the final state at exit, the
shadowed ``sitecustomize`` run as ``site`` runs it, the frames kept of a deep stack, the
records' file never the program's streams, nothing installed without the variable.
scripts/mutation runs these first."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO_ROOT, explain_knobs, run_cli
from flagos_doctor.explain import CONFIG_VAR
from flagos_doctor.explain.runner import SITECUSTOMIZE


def unwatched(folder, env=None) -> subprocess.CompletedProcess:
    full = {**os.environ, **(env or {})}
    full.pop(CONFIG_VAR, None)
    return subprocess.run([sys.executable, "prog.py"], cwd=folder, env=full, capture_output=True, text=True,
                          timeout=120)


def test_the_watch_sees_the_programs_first_line_and_sends_each_probes_final_state_at_exit(tmp_path):
    document, result = explain_knobs(tmp_path, "import knobs\nknobs.flag = 1\nknobs.flag = 'last'\n")
    assert result.returncode == 0, result.stderr
    writes = [(e["kind"], e["step"], e["value"]["repr"]) for e in document["events"] if e["probe"] == "knobs.flag"]
    assert writes == [("write", "program", "1"), ("write", "program", "'last'")]
    assert document["program"]["finished"] is True  # the final state (and ``done``) arrived
    (knob,) = [p for p in document["probes"] if p["name"] == "knobs.flag"]
    assert knob["final"]["repr"] == "'last'" and knob["original_value"]["repr"] == "0"


def test_an_uncaught_exception_is_a_failure_and_the_program_prints_its_traceback_as_unwatched(tmp_path):
    program = ("import knobs\n"
               "def inner():\n    raise KeyError('inner')\n"
               "def outer():\n    try:\n        inner()\n    except KeyError as exc:\n"
               "        raise RuntimeError('outer') from exc\n"
               "outer()\n")
    document, result = explain_knobs(tmp_path, program)
    plain = unwatched(tmp_path)
    assert result.returncode == plain.returncode == 1
    assert result.stderr == plain.stderr and result.stdout == plain.stdout  # none of our frames in it
    (failure,) = document["failures"]
    assert failure["kind"] == "exception" and failure["error"] == "RuntimeError: outer"
    assert failure["type"] == "builtins.RuntimeError"
    assert [f["function"] for f in failure["traceback"]] == ["<module>", "outer"]  # innermost last
    assert [(c["error"], c["explicit"], c["at"]["function"]) for c in failure["raised_from"]] == [
        ("KeyError: 'inner'", True, "inner")]


def test_an_exception_that_cannot_be_printed_is_still_the_failure(tmp_path):
    program = ("class Unprintable(Exception):\n    def __str__(self):\n        raise RuntimeError('no str')\n"
               "raise Unprintable()\n")
    document, result = explain_knobs(tmp_path, program)
    plain = unwatched(tmp_path)
    assert result.returncode == plain.returncode == 1 and result.stderr == plain.stderr
    (failure,) = document["failures"]
    assert failure["error"] == "Unprintable: <exception str() failed>"


def test_a_deep_stack_keeps_its_outermost_ten_and_innermost_110_frames(tmp_path):
    program = ("import sys\nsys.setrecursionlimit(5000)\ndef down(n):\n    if n == 0:\n        raise ValueError('bottom')\n"
               "    down(n - 1)\ndown(300)\n")
    document, _ = explain_knobs(tmp_path, program)
    (failure,) = document["failures"]
    frames = failure["traceback"]
    assert len(frames) == 120  # docs/explain.md
    assert (frames[0]["function"], frames[0]["line"], frames[0]["code"]) == ("<module>", 7, "down(300)")
    assert (frames[-1]["function"], frames[-1]["line"], frames[-1]["code"]) == ("down", 5, "raise ValueError('bottom')")
    assert all(f["function"] == "down" and f["line"] == 6 for f in frames[1:-1])


def test_a_frames_code_is_its_line_to_200_characters_and_importlibs_frames_are_left_out(tmp_path):
    (tmp_path / "broken_module.py").write_text("x = 1\nraise ImportError('broken at import: ' + 'y' * 300)\n")
    document, _ = explain_knobs(tmp_path, "import broken_module\n")
    (failure,) = document["failures"]
    assert [(f["file"], f["line"]) for f in failure["traceback"]] == [("prog.py", 1), ("broken_module.py", 2)]
    assert failure["traceback"][-1]["code"] == "raise ImportError('broken at import: ' + 'y' * 300)"
    long_line = "raise ValueError(" + " + ".join(["'abcdefgh'"] * 30) + ")"  # over 300 characters
    document, _ = explain_knobs(tmp_path, long_line + "\n")
    (failure,) = document["failures"]
    assert failure["traceback"][-1]["code"] == long_line[:200]


def test_each_process_keeps_5000_events_of_a_kind_and_counts_the_rest(tmp_path):
    document, result = explain_knobs(tmp_path, "import knobs\nfor i in range(5003):\n    knobs.flag = i\n")
    assert result.returncode == 0, result.stderr
    assert len([e for e in document["events"] if e["kind"] == "write"]) == 5000  # docs/explain.md
    assert document["processes"][0]["dropped"] == {"write": 3}


def test_the_shadowed_sitecustomize_runs_and_a_broken_one_is_said_as_site_says_it(tmp_path):
    user_site = tmp_path / "user-site"
    user_site.mkdir()
    env = {"PYTHONPATH": str(user_site)}
    (user_site / "sitecustomize.py").write_text("import os\nos.environ['USER_SITE_RAN'] = 'yes'\nMARK = 'user'\n")
    program = "import os, sitecustomize\nprint(os.environ.get('USER_SITE_RAN'), getattr(sitecustomize, 'MARK', None))\n"
    document, result = explain_knobs(tmp_path, program, env=env)
    # the program's `import sitecustomize` is the user's module, as it is unwatched
    assert result.returncode == 0 and result.stdout == "yes user\n" == unwatched(tmp_path, env=env).stdout, result.stderr
    (user_site / "sitecustomize.py").write_text("raise RuntimeError('user site broke')\n")
    document, result = explain_knobs(tmp_path, "print('still runs')\n", env=env)
    plain = unwatched(tmp_path, env=env)
    assert plain.stderr == "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nRuntimeError: user site broke\n"
    # flagos-doctor's own Python starts under the same PYTHONPATH and says it first; then the program
    assert result.returncode == 0 and result.stdout == "still runs\n" and result.stderr == plain.stderr * 2


def test_the_records_never_reach_the_programs_streams(tmp_path):
    program = "import knobs, sys\nknobs.flag = 1\nprint('out')\nprint('err', file=sys.stderr)\n"
    document, result = explain_knobs(tmp_path, program)
    assert (result.stdout, result.stderr) == ("out\n", "err\n")
    assert [e["kind"] for e in document["events"]] == ["write"]


def test_without_the_variable_the_hook_only_chains(tmp_path):
    """Our ``sitecustomize.py`` in a Python started without :data:`CONFIG_VAR`: no watch
    (``sys.excepthook`` is Python's own, nothing is recorded), the user's own one still runs."""
    hook, user_site = tmp_path / "hook", tmp_path / "user-site"
    hook.mkdir(), user_site.mkdir()
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    (user_site / "sitecustomize.py").write_text("import builtins\nbuiltins.USER_SITE_RAN = True\n")
    env = {k: v for k, v in os.environ.items() if k != CONFIG_VAR}
    # the package through a folder holding only its link, as explain's own launch does (the
    # checkout's root may hold a sitecustomize of its own: scripts/mutation's tracer)
    package = tmp_path / "package"
    package.mkdir()
    os.symlink(os.path.join(REPO_ROOT, "flagos_doctor"), package / "flagos_doctor")
    env["PYTHONPATH"] = os.pathsep.join([str(package), str(hook), str(user_site)])
    check = ("import sys, builtins\nfrom flagos_doctor.explain import startup\n"
             "print(startup.WATCH is None, sys.excepthook is sys.__excepthook__, builtins.USER_SITE_RAN)\n")
    result = subprocess.run([sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=120)
    assert result.stdout == "True True True\n", result.stderr
    assert set(os.listdir(tmp_path)) == {"hook", "user-site", "package"}  # no side-channel file was made


def test_a_scripts_frames_are_named_from_its_own_folder_and_a_c_program_is_watched_too(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "knobs.py").write_text("flag = 0\n")
    (project / "lib").mkdir()  # a namespace package: no __init__.py to find a root by
    (project / "lib" / "helper.py").write_text("def fail():\n    raise ValueError('from the helper')\n")
    (project / "prog.py").write_text("from lib import helper\nhelper.fail()\n")
    out = tmp_path / "why.json"
    result = run_cli("explain", "--quiet", "--json", str(out), "--", sys.executable, "project/prog.py", cwd=tmp_path)
    (failure,) = json.loads(out.read_text())["failures"]
    assert result.returncode == 1 and [f["file"] for f in failure["traceback"]] == ["prog.py", "lib/helper.py"]
    # -c: the working folder is the program's; its writes are seen as for a script
    result = run_cli("explain", "--quiet", "--watch", "knobs.flag", "--json", str(out), "--",
                     sys.executable, "-c", "import knobs\nknobs.flag = 2\nraise KeyError(2)", cwd=tmp_path)
    document = json.loads(out.read_text())
    assert result.returncode == 1 and "could not be installed" not in result.stderr
    assert [(e["kind"], e["value"]["repr"], e["where"]["file"]) for e in document["events"]] == [("write", "2", "<string>")]
    assert document["failures"][0]["error"] == "KeyError: 2"
