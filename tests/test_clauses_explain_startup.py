"""Each promise of flagos_doctor/explain/startup.py's docstrings, on real programs under
``explain`` (a module attribute is the watched probe, ``--watch knobs.flag``, so no stack is
imported; the stack's own runs are tests/test_explain*.py): the watch installed before the
program's first line, an uncaught exception a failure whose traceback the program prints as
it does unwatched (a chained one, one that cannot be printed), the final state at exit, the
shadowed ``sitecustomize`` run as ``site`` runs it, the frames kept of a deep stack, the
records' file never the program's streams, nothing installed without the variable.
scripts/mutation runs these first."""

from __future__ import annotations

import importlib
import json
import os
import platform
import stat
import subprocess
import sys
import traceback
from types import SimpleNamespace

import pytest

from conftest import REPO_ROOT, explain_knobs, run_cli
from flagos_doctor.explain import CONFIG_VAR, startup
from flagos_doctor.explain.runner import SITECUSTOMIZE


def watch_here(folder, program: str, *args: str, config=None, env=None,
               path=()) -> tuple[dict, subprocess.CompletedProcess]:
    """``program`` (``prog.py`` in ``folder``, beside a ``knobs.py``) run by plain Python under
    explain's own ``sitecustomize.py``, with :data:`CONFIG_VAR` as explain sets it (``--watch
    knobs.flag``) but no CLI between: a few tens of ms. ``path``: folders after the hook on
    PYTHONPATH (a user's site). Returns (each side-channel file's records, by file name; the
    CompletedProcess)."""
    hook, package, records = folder / "hook", folder / "package", folder / "records"
    for made in (hook, package, records):
        made.mkdir(exist_ok=True)
    (hook / "sitecustomize.py").write_text(SITECUSTOMIZE)
    if not (package / "flagos_doctor").exists():
        os.symlink(os.path.join(REPO_ROOT, "flagos_doctor"), package / "flagos_doctor")
    (folder / "knobs.py").write_text("flag = 0\n")
    (folder / "prog.py").write_text(program)
    full = {k: v for k, v in os.environ.items() if k != CONFIG_VAR}
    full.update(env or {})
    full["PYTHONPATH"] = os.pathsep.join([str(package), str(hook), *map(str, path)])
    full[CONFIG_VAR] = json.dumps({"channel": str(records), "stack": None, "probes": ["knobs.flag"], "env": [],
                                   "max_events": startup.MAX_EVENTS, **(config or {})})
    result = subprocess.run([sys.executable, "prog.py", *args], cwd=folder, env=full, capture_output=True, text=True,
                            timeout=120)
    files = {name: [json.loads(line) for line in (records / name).read_text().splitlines()]
             for name in sorted(os.listdir(records))}
    return files, result


def by_pid(files: dict) -> dict:
    """The records of each process, by the pid its ``hello`` names."""
    return {records[0]["pid"]: records for records in files.values() if records and records[0]["record"] == "hello"}


def written(records: list) -> list:
    return [e["value"]["repr"] for e in records if e["record"] == "event" and e["kind"] == "write"]


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
    assert (result.stdout, result.stderr) == ("True True True\n", "")
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


FORKS = """\
import sys
if __name__ == '__main__':
    print('loaded', 'multiprocessing' in sys.modules)
import multiprocessing, os, knobs

def fails():
    raise LookupError('in the target')

def exits():
    sys.exit(3)

def starts_one():
    child = multiprocessing.get_context('fork').Process(target=fails, name='grandchild')
    child.start()
    child.join()

def channel_fds():
    folder = os.path.realpath(os.environ['RECORDS'])
    return sum(os.path.realpath(os.path.join('/proc/self/fd', fd)).startswith(folder + os.sep)
               for fd in os.listdir('/proc/self/fd'))

if __name__ == '__main__':
    print('files', channel_fds())
    knobs.flag = 1
    knobs.flag = 2
    pid = os.fork()
    if pid == 0:
        knobs.flag = 3
        knobs.flag = 4
        print('fork', channel_fds())
        sys.exit(0)
    os.waitpid(pid, 0)
    knobs.flag = 5
    for method, target, name in [('fork', fails, 'forked'), ('spawn', fails, 'spawned'), ('fork', exits, 'exits'),
                                 ('fork', starts_one, 'starts_one')]:
        process = multiprocessing.get_context(method).Process(target=target, name=name)
        process.start()
        process.join()
        print(name, process.exitcode)
"""


def test_a_fork_and_multiprocessings_children_each_write_their_own_file_and_a_targets_failure(tmp_path):
    """A fork opens a file of its own (its ``hello`` says ``forked``; its own counts against
    the cap), a spawned child is watched from its start, and a ``multiprocessing.Process``
    whose target raised sends that failure, once, even two forks down; a SystemExit is no
    failure. What the program sees is unchanged: multiprocessing not loaded for it, one open
    side-channel file in each process, each target's exit code, the traceback printed."""
    files, result = watch_here(tmp_path, FORKS, config={"max_events": 1}, env={"RECORDS": str(tmp_path / "records")})
    assert result.stdout.splitlines() == ["loaded False", "files 1", "fork 1", "forked 1", "spawned 1", "exits 3",
                                          "starts_one 0"], result.stderr
    assert result.stderr.count("LookupError: in the target") == 3
    processes = by_pid(files)
    # the program, its fork, 4 Processes, the grandchild (and spawn's resource tracker): each its own file
    assert len(processes) == len(files) >= 7
    (program,) = [r for r in processes.values() if r[0]["ppid"] == os.getpid()]
    parent = program[0]["pid"]
    assert program[0]["forked"] is False and program[0]["argv"][-1] == "prog.py"
    assert written(program) == ["1"] and {"record": "dropped", "events": {"write": 2}} in program
    assert program[-1] == {"record": "done"}
    failures = {r["process_name"]: (pid, r) for pid, records in processes.items() for r in records
                if r["record"] == "failure"}
    assert sorted(failures) == ["forked", "grandchild", "spawned"]
    assert sum(r["record"] == "failure" for records in processes.values() for r in records) == 3
    for name, (pid, failure) in failures.items():
        assert (failure["kind"], failure["error"], failure["type"]) == ("exception", "LookupError: in the target",
                                                                        "builtins.LookupError")
        assert failure["traceback"][-1]["function"] == "fails"
        hello = processes[pid][0]
        assert hello["forked"] is (name != "spawned")
        assert ("--multiprocessing-fork" in hello["argv"]) is (name == "spawned")
    (fork,) = [r for pid, r in processes.items() if r[0]["ppid"] == parent and written(r)]
    assert fork[0]["forked"] is True and written(fork) == ["3"]
    assert {"record": "dropped", "events": {"write": 1}} in fork
    assert fork[-1] == {"record": "done"}


FULL = """\
import os, sys, knobs
folder = os.path.realpath(os.environ['RECORDS'])
(fd,) = [int(fd) for fd in os.listdir('/proc/self/fd')
         if os.path.realpath(os.path.join('/proc/self/fd', fd)).startswith(folder + os.sep)]
kept = os.dup(fd)
os.dup2(os.open('/dev/full', os.O_WRONLY), fd)  # the temp folder is full
knobs.flag = 1
knobs.flag = 2
pid = os.fork()
if pid == 0:
    knobs.flag = 3
    sys.exit(0)
os.waitpid(pid, 0)
os.dup2(kept, fd)  # space freed before the exit
"""


def test_a_write_the_file_refuses_stops_the_processs_records_counted_lost(tmp_path):
    """From the first refused write on, records are counted, not sent; at exit the count is
    sent where the file takes it again, and nothing after it. A fork's file is its own: it
    starts with nothing lost."""
    files, result = watch_here(tmp_path, FULL, env={"RECORDS": str(tmp_path / "records")})
    assert result.returncode == 0 and result.stderr == "", result.stderr
    processes = by_pid(files)
    (program,) = [r for r in processes.values() if not r[0]["forked"]]
    (fork,) = [r for r in processes.values() if r[0]["forked"]]
    # hello and the program's phase were written; the two writes, the final state's phase
    # and the final state were refused; ``done`` came after the count
    assert [r["record"] for r in program] == ["hello", "phase", "lost"]
    assert program[-1] == {"record": "lost", "error": "No space left on device", "records": 4}
    assert written(fork) == ["3"] and fork[-1] == {"record": "done"}


def test_a_secret_on_the_command_line_or_in_the_environment_never_reaches_the_file(tmp_path):
    """``--api-key VALUE`` is scrubbed from every record (``hello``'s argv, an event's value,
    the failure), as the environment's secrets are, and the file never announces a value
    (a SIGKILL leaves it behind). The program's own streams are not ours to scrub."""
    program = ("import os, sys, knobs\nknobs.flag = sys.argv[2]\nknobs.flag = os.environ['MY_API_TOKEN']\n"
               "raise ValueError(sys.argv[2])\n")
    files, result = watch_here(tmp_path, program, "--api-key", "from-the-command-line",
                               env={"MY_API_TOKEN": "from-the-environment"})
    assert result.returncode == 1 and result.stderr.endswith("ValueError: from-the-command-line\n")
    ((name, records),) = files.items()
    text = (tmp_path / "records" / name).read_text()
    assert "from-the-command-line" not in text and "from-the-environment" not in text
    assert not [r for r in records if r["record"] == "secrets"]
    hello = records[0]
    assert hello["argv"] == [sys.executable, "prog.py", "--api-key", "<redacted>"]
    assert written(records) == ["'<redacted>'", "'<redacted>'"]
    (failure,) = [r for r in records if r["record"] == "failure"]
    assert failure["error"] == "ValueError: <redacted>"
    # the rest of hello: this interpreter, this machine, this process and its parent (the test)
    assert (hello["python"], hello["executable"], hello["platform"]) == (
        platform.python_version(), sys.executable, platform.platform())
    assert (hello["pid"], hello["ppid"], hello["forked"]) == (int(name.split(".")[0]), os.getpid(), False)
    assert hello["dict_watchers"] is (sys.version_info >= (3, 12))  # 3.12's dict watchers, where there are


CHAIN = """\
try:
    import broken_zero
except OSError:
    try:
        import broken_one
    except KeyError as first:
        saved = first
try:
    import broken_two
except ValueError:
    raise RuntimeError('outer') from saved
"""


def test_the_traceback_printed_through_the_import_hook_and_a_chain_is_the_unwatched_one(tmp_path):
    """The watch's ``__import__`` is a frame in every import's traceback: the program prints
    each traceback of the chain (a cause, the context of that cause) without it, as it does
    unwatched; the failure's frames are named from the script's folder, though a folder
    above it is on ``sys.path`` too."""
    project = tmp_path / "project"
    project.mkdir()
    for name, raised in [("broken_zero", "OSError('zero')"), ("broken_one", "KeyError('one')"),
                         ("broken_two", "ValueError('two')")]:
        (project / f"{name}.py").write_text(f"raise {raised}\n")
    (project / "chain.py").write_text(CHAIN)
    files, result = watch_here(project, "import chain\n", path=[tmp_path])
    plain = unwatched(project)
    assert result.returncode == plain.returncode == 1
    assert result.stderr == plain.stderr and "flagos_doctor" not in result.stderr
    assert plain.stderr.count("Traceback") == 3 and "RuntimeError: outer" in plain.stderr
    ((failure,),) = [[r for r in records if r["record"] == "failure"] for records in files.values()]
    assert [(f["file"], f["line"]) for f in failure["traceback"]] == [("prog.py", 1), ("chain.py", 11)]


def test_the_watch_is_installed_once_and_one_that_cannot_be_is_said_and_the_program_runs(tmp_path):
    """:func:`startup.main` again in the same run installs nothing more; a watch that cannot
    be installed (its folder gone) is one line on stderr, and the program and the shadowed
    ``sitecustomize`` run as they would."""
    once = ("import sys\nfrom flagos_doctor.explain import startup\nwatch = startup.WATCH\n"
            "startup.main(sys.argv[1])\nprint(startup.WATCH is watch)\n")
    files, result = watch_here(tmp_path, once, str(tmp_path / "hook"))
    assert result.stdout == "True\n" and len(files) == 1, result.stderr
    user_site, again = tmp_path / "user-site", tmp_path / "again"
    user_site.mkdir(), again.mkdir()
    (user_site / "sitecustomize.py").write_text("print('the user site ran')\n")
    files, result = watch_here(again, "print('the program ran')\n", config={"channel": str(again / "missing")},
                               path=[user_site])
    assert result.returncode == 0 and result.stdout == "the user site ran\nthe program ran\n" and files == {}
    assert result.stderr.startswith("flagos-doctor explain: the watch could not be installed: FileNotFoundError: ")
    assert result.stderr.count("\n") == 1


def test_the_shadowed_sitecustomize_runs_as_site_runs_it_a_namespace_a_broken_one_verbose(tmp_path):
    """A ``sitecustomize`` folder is imported as a namespace package, no error, and is the
    program's ``import sitecustomize``; a broken one leaves no half-run module behind, and
    under PYTHONVERBOSE its traceback is printed, as ``site`` does."""
    namespace, broken = tmp_path / "namespace-site", tmp_path / "broken-site"
    (namespace / "sitecustomize").mkdir(parents=True)
    broken.mkdir()
    (broken / "sitecustomize.py").write_text("raise RuntimeError('user site broke')\n")
    program = "import sitecustomize\nprint(sitecustomize.__file__, list(getattr(sitecustomize, '__path__', [])))\n"
    _, result = watch_here(tmp_path, program, path=[namespace])
    expected = f"None {[str(namespace / 'sitecustomize')]}\n"
    assert (result.returncode, result.stdout, result.stderr) == (0, expected, "")
    assert unwatched(tmp_path, env={"PYTHONPATH": str(namespace)}).stdout == expected
    program = "import sitecustomize\nprint(sitecustomize.__file__)\n"
    _, result = watch_here(tmp_path, program, path=[broken])
    assert result.stdout == f"{tmp_path / 'hook' / 'sitecustomize.py'}\n", result.stderr
    assert result.stderr == "Error in sitecustomize; set PYTHONVERBOSE for traceback:\nRuntimeError: user site broke\n"
    _, result = watch_here(tmp_path, "print('runs')\n", path=[broken], env={"PYTHONVERBOSE": "1"})
    assert result.returncode == 0 and result.stdout == "runs\n"
    assert "Traceback (most recent call last)" in result.stderr and "\nRuntimeError: user site broke\n" in result.stderr
    assert "Error in sitecustomize" not in result.stderr


#: Code that runs as a file of flagos_doctor's own would (the probe's hooks): ``hook`` calls
#: the program back, ``catch`` returns what the call raised.
OWN_SOURCE = ("def hook(call):\n    return call()\n"
              "def catch(call):\n    try:\n        call()\n    except BaseException as exc:\n        return exc\n")


def own_code() -> dict:
    namespace: dict = {}
    folder = os.path.dirname(os.path.dirname(os.path.abspath(startup.__file__)))
    exec(compile(OWN_SOURCE, os.path.join(folder, "probe", "a_hook.py"), "exec"), namespace)
    return namespace


def names(tb) -> list[str]:
    return [frame.name for frame in traceback.extract_tb(tb)]


def test_the_probes_own_frames_are_left_out_of_the_traceback_and_of_each_in_its_chain():
    own = own_code()
    hook, catch = own["hook"], own["catch"]

    def program(error):
        def raises():
            raise error
        return raises

    outer = catch(lambda: hook(program(KeyError("outer"))))
    middle = catch(lambda: hook(None))  # raised in the hook's own frame: the innermost goes
    inner = catch(lambda: hook(program(ValueError("inner"))))
    outer.__cause__, middle.__context__, inner.__context__ = middle, inner, OSError("never raised")
    assert names(outer.__traceback__) == ["catch", "<lambda>", "hook", "raises"]
    assert [f["function"] for f in startup.frames(SimpleNamespace(short=os.path.basename), outer.__traceback__)] == [
        "<lambda>", "raises"]
    tb = startup.without_own_frames(outer, outer.__traceback__)
    assert tb is outer.__traceback__ and names(tb) == ["<lambda>", "raises"]
    assert names(middle.__traceback__) == ["<lambda>"] and middle.__traceback__.tb_next is None
    assert names(inner.__traceback__) == ["<lambda>", "raises"]
    assert inner.__context__.__traceback__ is None
    # a chain that comes back to itself is walked once
    first, second = catch(lambda: hook(program(KeyError(1)))), catch(lambda: hook(program(KeyError(2))))
    first.__cause__, second.__cause__ = second, first
    assert names(startup.without_own_frames(first, first.__traceback__)) == ["<lambda>", "raises"]
    assert names(second.__traceback__) == ["<lambda>", "raises"]


def test_what_python_puts_first_on_sys_path_is_the_scripts_real_folder_or_the_working_folder(tmp_path, monkeypatch):
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "prog.py").write_text("")
    (tmp_path / "work").mkdir()
    os.symlink(tmp_path / "real" / "prog.py", tmp_path / "work" / "-m")  # a file of that name changes nothing
    os.symlink(tmp_path / "real" / "prog.py", tmp_path / "work" / "tool")
    monkeypatch.chdir(tmp_path / "work")
    work = os.getcwd()
    # "gone/prog.py": a script that is no longer there (removed or renamed by the time the
    # watch asks) names no folder to look in
    for argv in (["tool"], ["-m"], ["-c"], [""], [], ["gone/prog.py"]):
        monkeypatch.setattr(sys, "argv", argv)
        assert startup.program_folder() == (str(tmp_path / "real") if argv == ["tool"] else work), argv
    monkeypatch.delattr(sys, "argv")  # an embedding's interpreter may have none
    assert startup.program_folder() == work


def test_the_stacks_folders_are_found_without_importing_it(tmp_path, monkeypatch):
    package = tmp_path / "startup_clause_stack"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "sub.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert startup.stack_dirs("startup_clause_stack") == [str(package) + os.sep]
    # a submodule's folder would import its package now: left out
    assert startup.stack_dirs("startup_clause_stack.sub") == [] and "startup_clause_stack" not in sys.modules
    assert startup.stack_dirs("not a stack!") == []  # never raised: the watch is not lost over it


def test_each_process_opens_its_own_file_and_another_name_where_its_pid_came_back(tmp_path):
    fake = SimpleNamespace(config={"channel": str(tmp_path)})
    pid = os.getpid()
    (tmp_path / f"{pid}.jsonl").write_text("an earlier process of this pid\n")
    umask = os.umask(0o022)
    try:
        channel = startup.Watch.open_channel(fake)
    finally:
        os.umask(umask)
    try:
        channel.emit({"record": "done"})
    finally:
        os.close(channel._write_fd)
    assert (tmp_path / f"{pid}.jsonl").read_text() == "an earlier process of this pid\n"
    assert (tmp_path / f"{pid}-1.jsonl").read_text() == '{"record":"done"}\n'
    assert stat.S_IMODE(os.stat(tmp_path / f"{pid}-1.jsonl").st_mode) == 0o600  # records: the owner's alone
    for attempt in range(2, 100):
        (tmp_path / f"{pid}-{attempt}.jsonl").write_text("")
    with pytest.raises(OSError, match="no free side-channel file name"):
        startup.Watch.open_channel(fake)


def test_a_failure_that_raised_nothing_is_its_words_and_the_tracer_is_busy_only_while_we_look():
    from flagos_doctor.probe import tracer as tracing

    records: list = []
    tracer = tracing.Tracer(records.append, [], [])
    watch = SimpleNamespace(tracer=tracer)
    startup.Watch.failure(watch, "test", None, None, error="[XPASS(strict)] no reason", test="t.py::x", when="call")
    assert records == [{"record": "failure", "kind": "test", "error": "[XPASS(strict)] no reason", "type": None,
                        "traceback": [], "test": "t.py::x", "when": "call"}]
    busy_when_looked = []
    tracer.short = lambda path, short=tracer.short: busy_when_looked.append(tracer.busy) or short(path)
    try:
        raise KeyError("k")
    except KeyError as exc:
        startup.Watch.failure(watch, "exception", exc, exc.__traceback__)
    assert records[-1]["error"] == "KeyError: 'k'" and records[-1]["type"] == "builtins.KeyError"
    assert busy_when_looked and all(busy_when_looked) and tracer.busy is False


def test_importlibs_frozen_frames_are_left_out_of_a_failures_frames(tmp_path, monkeypatch):
    (tmp_path / "startup_clause_broken.py").write_text("raise KeyError('at import')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module("startup_clause_broken")  # unlike ``import``, keeps importlib's frames
    except KeyError as exc:
        tb = exc.__traceback__
    assert any(frame.filename.startswith("<frozen importlib") for frame in traceback.extract_tb(tb))
    tracer = SimpleNamespace(short=os.path.basename)
    assert [(f["file"], f["function"]) for f in startup.frames(tracer, tb)] == [
        ("test_clauses_explain_startup.py", "test_importlibs_frozen_frames_are_left_out_of_a_failures_frames"),
        ("__init__.py", "import_module"), ("startup_clause_broken.py", "<module>")]


def test_multiprocessing_is_watched_only_once_it_is_loaded_and_only_once(monkeypatch):
    """``watch_multiprocessing`` wraps ``_bootstrap`` when ``multiprocessing`` is loaded: a
    process that has not loaded it is left as it is (nothing imported, nothing raised), and a
    second call does not wrap the wrapper."""
    import multiprocessing.process as process

    monkeypatch.delitem(sys.modules, "multiprocessing.process")
    assert startup.watch_multiprocessing() is None
    assert "multiprocessing.process" not in sys.modules
    monkeypatch.setitem(sys.modules, "multiprocessing.process", process)
    original = process.BaseProcess._bootstrap
    monkeypatch.setattr(process.BaseProcess, "_bootstrap", original)  # restored after the test
    startup.watch_multiprocessing()
    wrapped = process.BaseProcess._bootstrap
    assert wrapped is not original and wrapped._flagos_doctor
    startup.watch_multiprocessing()
    assert process.BaseProcess._bootstrap is wrapped
