"""Each promise of flagos_doctor/explain/runner.py's docstrings: which argv a CMD becomes, when
a program is pytest, what the child is told, how the side-channel files are read (a torn
line, a record of another shape, a planted entry), who each watched process was, how each
test's outcome and each failure are numbered and attributed, the notices an interrupted,
unwatched or unfinished run gets, which stack the program imported, the process tree a
signal is passed on to and which signals are. The pure parts are called directly; the rest
runs real programs (no stack imported: ``--watch knobs.flag``), the signals in a session of
their own. Through the CLI: the signals' forwarding is tests/test_explain_signals.py, planted
entries tests/test_explain_records.py. scripts/mutation runs these first."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from conftest import checkout_first, explain_knobs, run_cli
from flagos_doctor.errors import BadInput
from flagos_doctor.explain import CONFIG_VAR, runner, startup
from flagos_doctor.explain.runner import (interrupted_notice, is_pytest, read_processes, read_records,
                                          resolve_command, role)
from flagos_doctor.options import ExplainOptions


def executable(path, text="#!/bin/sh\nexit 0\n"):
    path.write_text(text)
    os.chmod(path, 0o755)
    return str(path)


@pytest.mark.parametrize("name", ["python", "python3", "python3.11", "python3.13"])
def test_any_python_name_is_the_chosen_interpreter(name):
    assert resolve_command([name, "-c", "pass"], "/opt/py/bin/python") == ["/opt/py/bin/python", "-c", "pass"]


def test_a_bare_name_is_a_console_script_beside_the_interpreter_before_path(tmp_path, monkeypatch):
    beside, on_path = tmp_path / "venv" / "bin", tmp_path / "elsewhere"
    beside.mkdir(parents=True), on_path.mkdir()
    python = executable(beside / "python")
    mine = executable(beside / "tool")
    other = executable(on_path / "tool")
    only_on_path = executable(on_path / "lonely")
    (beside / "notexec").write_text("")
    executable(on_path / "notexec")
    (beside / "adir").mkdir()  # searchable (x), but no program
    on_path_adir = executable(on_path / "adir")
    monkeypatch.setenv("PATH", str(on_path))
    assert resolve_command(["tool", "a"], python) == [mine, "a"]
    assert resolve_command(["lonely"], python) == [only_on_path]
    assert resolve_command(["notexec"], python) == [str(on_path / "notexec")]  # beside but not executable
    assert resolve_command(["adir"], python) == [on_path_adir]
    assert other != mine
    with pytest.raises(BadInput) as info:
        resolve_command(["nowhere"], python)
    assert info.value.where == "CMD" and "neither beside" in str(info.value)


def test_a_path_runs_itself_a_plain_py_file_runs_under_the_interpreter(tmp_path):
    script = tmp_path / "repro.py"
    script.write_text("print(1)\n")
    assert resolve_command([str(script), "x"], "/p/python") == ["/p/python", str(script), "x"]
    os.chmod(script, 0o755)
    assert resolve_command([str(script), "x"], "/p/python") == [str(script), "x"]
    tool = executable(tmp_path / "tool.sh")
    assert resolve_command([tool], "/p/python") == [tool]
    (tmp_path / "data.txt").write_text("")
    for argv, says in (([str(tmp_path / "data.txt")], "is not executable"), ([str(tmp_path / "gone.py")], "no such file"),
                       ([], "give the program to run")):
        with pytest.raises(BadInput) as info:
            resolve_command(argv, "/p/python")
        assert info.value.where == "CMD" and says in str(info.value)


def test_the_script_python_runs_is_its_first_argument_when_a_file_or_a_py_that_runs_itself(tmp_path):
    script_of = runner.script_of
    data = tmp_path / "data.txt"
    data.write_text("")
    tool = executable(tmp_path / "tool.sh")
    itself = executable(tmp_path / "self.py", f"#!{sys.executable}\n")
    assert script_of(["/p/python", str(data), "x"], "/p/python") == str(data)  # any name
    assert script_of([itself, str(data)], "/p/python") == itself
    for argv in (["/p/python"], ["/p/python", "-c", "pass", str(data)], ["/p/python", "-m", "tool", str(data)],
                 ["/p/python", str(tmp_path / "gone.py")], [tool, str(data)], ["/q/python", str(data)],
                 [str(tmp_path / "gone.py"), str(data)]):
        assert script_of(argv, "/p/python") is None, argv


@pytest.mark.parametrize("argv, expected", [
    (["python", "-m", "pytest", "-x"], True), (["/v/bin/python", "-X", "dev", "-m", "py.test"], True),
    (["/v/bin/pytest", "-k", "x"], True), (["py.test"], True),
    (["python", "pytest.py"], False), (["python", "-m"], False), (["python", "-m", "pytest_cov"], False),
    (["python", "script.py", "pytest"], False),
    (["/v/bin/pytest-watch"], False)])
def test_pytest_is_python_m_pytest_or_its_console_script(argv, expected):
    assert is_pytest(argv) is expected


def options(**given) -> ExplainOptions:
    base = dict(command=["python", "-c", "pass"], python=sys.executable)
    return ExplainOptions(**{**base, **given})


def test_the_child_is_told_its_channel_stack_probes_once_each_and_the_event_cap(tmp_path, monkeypatch):
    monkeypatch.delenv("FLAGOS_DOCTOR_EXPLAIN_MAX_EVENTS", raising=False)
    config = runner.child_config(options(stack="demo", watch=["knobs.flag", "knobs.flag", "os.sep"]), "/c")
    assert config == {"channel": "/c", "stack": "demo", "probes": ["knobs.flag", "os.sep"], "env": [],
                      "max_events": startup.MAX_EVENTS}
    monkeypatch.setenv("FLAGOS_DOCTOR_EXPLAIN_MAX_EVENTS", "7")
    assert runner.child_config(options(), "/c")["max_events"] == 7
    # each refusal names the option, or the file at fault
    for bad, option in ((dict(stack="no-such-stack"), "--stack"), (dict(watch=["not a name"]), "--watch"),
                        (dict(watch_file=str(tmp_path / "missing.txt")), str(tmp_path / "missing.txt"))):
        with pytest.raises(BadInput) as info:
            runner.child_config(options(**bad), "/c")
        assert option in (info.value.where or "") + str(info.value)


def test_the_program_env_carries_the_config_and_joins_pytests_plugins_once(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTEST_PLUGINS", "mine,other")
    env = runner.program_env({"channel": "/c"}, str(tmp_path), pytest=True)
    assert json.loads(env[CONFIG_VAR]) == {"channel": "/c"}
    assert env["PYTEST_PLUGINS"] == f"mine,other,{runner.PLUGIN}"
    monkeypatch.setenv("PYTEST_PLUGINS", f"{runner.PLUGIN},mine")
    assert runner.program_env({}, str(tmp_path), pytest=True)["PYTEST_PLUGINS"] == f"{runner.PLUGIN},mine"
    monkeypatch.setenv("PYTEST_PLUGINS", "mine")
    assert runner.program_env({}, str(tmp_path), pytest=False)["PYTEST_PLUGINS"] == "mine"
    assert str(tmp_path) in env["PYTHONPATH"].split(os.pathsep)


def test_a_torn_line_is_skipped_and_a_record_of_another_shape_names_its_file_and_line():
    hello = json.dumps({"record": "test", "nodeid": "t::a", "when": "call", "outcome": "passed"})
    assert read_records(f"{hello}\n{{\"record\": \"te".encode(), "12.jsonl") == [json.loads(hello)]
    assert read_records(b"", "12.jsonl") == []
    with pytest.raises(BadInput) as info:
        read_records(f"{hello}\n{json.dumps({'record': 'test', 'nodeid': 3})}\n".encode(), "12.jsonl")
    assert "12.jsonl, line 2" in str(info.value.where) + str(info.value)


def test_each_process_file_is_read_in_name_order_and_an_oversized_one_only_in_part(tmp_path, monkeypatch):
    record = {"record": "test", "nodeid": "t::a", "when": "call", "outcome": "passed"}
    for name, outcome in (("20.jsonl", "failed"), ("100.jsonl", "passed"), ("3.txt", "skipped")):
        (tmp_path / name).write_text(json.dumps({**record, "outcome": outcome}) + "\n")
    processes, notices = read_processes(str(tmp_path))
    assert [p[0]["outcome"] for p in processes] == ["passed", "failed"] and notices == []
    monkeypatch.setattr(runner, "MAX_RECORDS_BYTES", 20)
    processes, notices = read_processes(str(tmp_path))
    assert processes == [[], []] and len(notices) == 2 and "what came after is not read" in notices[0]
    monkeypatch.setattr(runner, "MAX_PROCESS_FILES", 1)
    processes, notices = read_processes(str(tmp_path))
    assert len(processes) == 1 and "held 2 files: the first 1 were read" in notices[-1]
    processes, notices = read_processes(str(tmp_path / "gone"))
    assert processes == [] and len(notices) == 1 and "side-channel folder could not be read" in notices[0]


def test_who_each_watched_process_was_to_the_program():
    hello = {"record": "hello", "pid": 10, "argv": ["python", "x.py"], "forked": False}
    assert role([hello], 10) == "program"
    assert role([{**hello, "forked": True}], 10) == "fork"  # a fork keeps no pid of the program's, but says so
    assert role([{**hello, "pid": 11}, {"record": "test", "worker": "gw1"}], 10) == "pytest-xdist worker gw1"
    assert role([{**hello, "pid": 11, "argv": ["python", "-c", "from multiprocessing.spawn import spawn_main",
                                                "--multiprocessing-fork"]}], 10) == "multiprocessing child"
    assert role([{**hello, "pid": 11, "forked": True}, {"record": "failure", "process_name": "P-1"}], 10) \
        == "multiprocessing child"
    assert role([{**hello, "pid": 11, "forked": True}], 10) == "fork"
    assert role([{**hello, "pid": 11}], 10) == "subprocess"
    assert role([], 10) == "subprocess"


def test_a_tests_worst_phase_is_its_outcome():
    def rec(nodeid, when, outcome):
        return {"record": "test", "nodeid": nodeid, "when": when, "outcome": outcome}
    summary = runner.tests_summary([rec("a", "call", "passed"), rec("a", "teardown", "failed"),
                             rec("b", "setup", "skipped"), rec("c", "call", "failed"), rec("c", "teardown", "passed"),
                             rec("d", "call", "xfailed"), rec("e", "call", "xpassed"), {"record": "hello"}])
    assert summary == {"counts": {"failed": 2, "skipped": 1, "xfailed": 1, "xpassed": 1},
                       "outcomes": {"a": "failed", "b": "skipped", "c": "failed", "d": "xfailed", "e": "xpassed"}}
    # equal ranks: the later phase; a passed or xpassed phase never hides a skip; an outcome
    # of another name (a plugin's) counts as a failure, whether it comes first or last
    ordered = [rec("f", "setup", "skipped"), rec("f", "call", "passed"), rec("g", "setup", "skipped"),
               rec("g", "call", "xpassed"), rec("h", "call", "skipped"), rec("h", "call", "xfailed"),
               rec("i", "call", "xfailed"), rec("i", "call", "skipped"), rec("j", "call", "failed"),
               rec("j", "call", "error"), rec("k", "call", "error"), rec("k", "teardown", "passed"),
               rec("l", "call", "error"), rec("l", "call", "failed")]
    assert runner.tests_summary(ordered)["outcomes"] == {"f": "skipped", "g": "skipped", "h": "xfailed",
                                                         "i": "skipped", "j": "error", "k": "error", "l": "failed"}
    assert runner.tests_summary([]) == {"counts": {}, "outcomes": {}}


def test_the_interruption_notice_says_who_sent_it_and_who_got_it():
    assert interrupted_notice({"signal": "SIGTERM", "from": "pid 412", "forwarded_to": 3}) == (
        "explain was interrupted by SIGTERM (from pid 412): passed on to the program and 2 of its subprocesses; "
        "below is what the program did until it ended")
    assert "passed on to the program;" in interrupted_notice({"signal": "SIGTERM", "from": "pid 1", "forwarded_to": 1})
    assert "passed on to the program and 1 of its subprocesses;" in interrupted_notice(
        {"signal": "SIGTERM", "from": "pid 1", "forwarded_to": 2})
    assert "the program got it from the terminal too" in interrupted_notice(
        {"signal": "SIGINT", "from": "the terminal", "forwarded_to": 0})


def test_a_watch_files_probes_join_the_watched_ones_once_each_and_its_env_is_told(tmp_path, monkeypatch):
    monkeypatch.delenv("FLAGOS_DOCTOR_EXPLAIN_MAX_EVENTS", raising=False)
    listed = tmp_path / "watch.yaml"
    listed.write_text("probes: [knobs.flag, os.sep]\nenv: [MY_FLAG, GEMS_*]\n")
    config = runner.child_config(options(watch=["knobs.flag"], watch_file=str(listed)), "/c")
    assert (config["probes"], config["env"]) == (["knobs.flag", "os.sep"], ["MY_FLAG", "GEMS_*"])


def test_the_process_tree_is_the_pid_then_its_descendants_and_a_signal_reaches_each(monkeypatch):
    shell = subprocess.Popen(["/bin/sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True)
    try:
        sleeper = int(shell.stdout.readline())  # said once the shell has started it
        assert runner.process_tree(shell.pid) == [shell.pid, sleeper]
        mine = runner.process_tree(os.getpid())
        assert mine[0] == os.getpid() and mine.index(shell.pid) < mine.index(sleeper)
        assert runner.forward(shell.pid, 0) == 2  # signal 0: both there, none harmed
        with monkeypatch.context() as patched:  # a process gone between the listing and its stat is no one's child
            real = os.listdir
            patched.setattr(os, "listdir", lambda p: [str(shell.pid), str(sleeper), "999999999"] if p == "/proc" else real(p))
            assert runner.process_tree(shell.pid) == [shell.pid, sleeper]

        def no_proc(path):
            raise PermissionError(13, "Permission denied", path)
        with monkeypatch.context() as patched:  # without /proc: the pid alone
            patched.setattr(os, "listdir", no_proc)
            assert runner.process_tree(shell.pid) == [shell.pid]
        assert runner.forward(shell.pid, signal.SIGTERM) == 2
        assert shell.wait(timeout=60) == -signal.SIGTERM
    finally:
        shell.kill()
        shell.wait()
        shell.stdout.close()


#: Run by test_a_signal_from_a_process_is_passed_on_and_ctrl_c_at_the_terminal_is_not, as a
#: session of its own (a signal to pytest itself could reach one of its other threads): a
#: program that has explain sent SIGTERM then SIGINT (each passed on: it waits for both), then
#: one that types Ctrl-C on the terminal explain and it share (it gets it once, from there).
SIGNALLED = r'''
import fcntl, json, os, pty, sys, termios
from flagos_doctor.explain import runner
TWICE = """
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM, signal.SIGINT])
os.kill(os.getppid(), signal.SIGTERM)
got = [signal.sigtimedwait([signal.SIGTERM], 30)]
os.kill(os.getppid(), signal.SIGINT)
got.append(signal.sigtimedwait([signal.SIGINT], 30))
raise SystemExit(3 if all(got) else 4)
"""
ran = runner.run_program([sys.executable, "-c", TWICE], dict(os.environ))
out = {"kill": [ran.returncode, ran.pid, ran.interrupted]}
leader, follower = pty.openpty()
fcntl.ioctl(follower, termios.TIOCSCTTY, 0)
os.dup2(leader, 0)
CTRL_C = """
import os, signal
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT])
os.write(0, b"\\x03")
raise SystemExit(5 if signal.sigtimedwait([signal.SIGINT], 30) else 6)
"""
ran = runner.run_program([sys.executable, "-c", CTRL_C], dict(os.environ))
out["terminal"] = [ran.returncode, ran.interrupted]
print(json.dumps(out))
'''


def test_a_signal_from_a_process_is_passed_on_and_ctrl_c_at_the_terminal_is_not():
    done = subprocess.run([sys.executable, "-c", SIGNALLED], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, start_new_session=True,
                          env=dict(os.environ, PYTHONPATH=checkout_first(os.environ.get("PYTHONPATH"))))
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    returncode, pid, interrupted = out["kill"]
    # both reached the program (it exits 3 only then); the first is the interruption said
    assert returncode == 3 and interrupted == {"signal": "SIGTERM", "from": f"pid {pid}", "forwarded_to": 1}
    assert out["terminal"] == [5, {"signal": "SIGINT", "from": "the terminal", "forwarded_to": 0}]


#: Run by the test below, as a session of its own: a SIGTERM to explain that arrives as the
#: program ends (sent here between the program's end and poll() seeing it) is drained with
#: the program's other signals, never delivered to explain once the mask is put back.
AS_IT_ENDS = r'''
import json, os, signal, subprocess, sys
from flagos_doctor.explain import runner
real_poll = subprocess.Popen.poll
def poll(self):
    code = real_poll(self)
    if code is not None:
        os.kill(os.getpid(), signal.SIGTERM)  # blocked while the program runs: pending
    return code
subprocess.Popen.poll = poll
ran = runner.run_program([sys.executable, "-c", "raise SystemExit(7)"], dict(os.environ))
print(json.dumps([ran.returncode, ran.interrupted]))
'''


def test_a_signal_arriving_as_the_program_ends_is_drained_not_delivered_to_explain():
    done = subprocess.run([sys.executable, "-c", AS_IT_ENDS], capture_output=True, text=True, timeout=120,
                          stdin=subprocess.DEVNULL, start_new_session=True,
                          env=dict(os.environ, PYTHONPATH=checkout_first(os.environ.get("PYTHONPATH"))))
    assert done.returncode == 0, (done.returncode, done.stderr)  # -15: the SIGTERM reached explain
    assert json.loads(done.stdout) == [7, None]


@pytest.fixture
def known_mask():
    """A mask set here (one signal blocked that explain never waits for), the test's own mask
    put back after: one an earlier test's run left behind would be taken as the mask found."""
    mine = {signal.SIGUSR1}
    found = signal.pthread_sigmask(signal.SIG_SETMASK, mine)
    yield mine
    signal.pthread_sigmask(signal.SIG_SETMASK, found)


def test_a_program_that_cannot_start_is_bad_input_and_the_signal_mask_is_restored(tmp_path, known_mask):
    with pytest.raises(BadInput) as info:
        runner.run_program([str(tmp_path / "gone"), "x"], dict(os.environ))
    assert (info.value.message, info.value.where) == (f"cannot start {tmp_path / 'gone'}: No such file or directory", "CMD")
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == known_mask


def test_a_planted_link_folder_or_socket_is_said_by_its_kind_and_never_read(tmp_path, monkeypatch):
    record = {"record": "test", "nodeid": "t::a", "when": "call", "outcome": "passed"}
    (tmp_path / "1.jsonl").write_text(json.dumps(record) + "\n")
    os.symlink("1.jsonl", tmp_path / "2.jsonl")
    (tmp_path / "3.jsonl").mkdir()
    monkeypatch.chdir(tmp_path)  # bound by a relative name: a socket's path is short whatever tmp_path is
    with socket.socket(socket.AF_UNIX) as planted:
        planted.bind("4.jsonl")
        before = len(os.listdir("/proc/self/fd"))
        processes, notices = read_processes(str(tmp_path))
        assert len(os.listdir("/proc/self/fd")) == before
    assert processes == [[record]]
    assert notices == [f"explain's side-channel folder held '{n}', {why}: not written by the watch, and not read"
                       for n, why in (("2.jsonl", "a symbolic link"), ("3.jsonl", "a directory"),
                                      ("4.jsonl", "unreadable (No such device or address)"))]


def test_a_temp_folder_is_full_without_room_for_a_record_and_one_that_cannot_be_asked_is_not(tmp_path, monkeypatch):
    assert runner.temp_full(str(tmp_path / "gone")) is False
    for blocks, full in ((0, True), (1, True), (1 << 18, False)):  # of 4 KiB: none, one, a GiB
        with monkeypatch.context() as patched:
            patched.setattr(os, "statvfs", lambda folder: os.statvfs_result((4096, 4096, 1 << 20, blocks, blocks,
                                                                             1000, 10, 10, 0, 255)))
            assert runner.temp_full(str(tmp_path)) is full


def test_a_scratch_folder_that_cannot_be_written_is_bad_input_naming_it(monkeypatch):
    real = os.mkdir

    def no_room(path, *mode):
        if os.path.basename(path) == "hook":
            raise OSError(28, "No space left on device")
        real(path, *mode)
    monkeypatch.setattr(os, "mkdir", no_room)
    with pytest.raises(BadInput) as info:
        runner.run_explain(options())
    assert info.value.message == "cannot write explain's scratch folder: No space left on device"
    assert os.path.basename(info.value.where).startswith("flagos-doctor-explain-")


def test_an_interruption_then_a_full_temp_folder_are_the_first_notices_and_neither_is_said_without_it(
        tmp_path, monkeypatch):
    # explain's interruption and a full temp folder given here: run_program's and temp_full's
    # own clauses are the tests above
    interrupted = {"signal": "SIGTERM", "from": "pid 412", "forwarded_to": 1}
    real, full = runner.run_program, []
    monkeypatch.setattr(runner, "run_program",
                        lambda argv, env: real(argv, env)._replace(interrupted=interrupted if full else None))
    monkeypatch.setattr(runner, "temp_full", lambda folder: bool(full))
    monkeypatch.chdir(tmp_path)
    plant = "import json, os; os.mkfifo(json.loads(os.environ['FLAGOS_DOCTOR_EXPLAIN'])['channel'] + '/0.jsonl')"
    planted = "explain's side-channel folder held '0.jsonl', a FIFO: not written by the watch, and not read"
    document = runner.run_explain(options(command=["python", "-c", plant]))
    assert "interrupted" not in document["program"] and document["notices"] == [planted]
    full.append(True)
    document = runner.run_explain(options(command=["python", "-c", plant]))
    assert document["program"]["interrupted"] == interrupted
    assert document["notices"] == [
        interrupted_notice(interrupted),
        f"the temp folder {tempfile.gettempdir()} is full: the watch's records stopped when it filled, and what came "
        "after is not in this document", planted]


def test_failures_are_numbered_across_processes_each_naming_its_process_and_role(tmp_path):
    child = "import knobs\\nknobs.flag = 6\\ndef f():\\n    knobs.flag = 7\\nf()\\nraise KeyError(1)"
    program = ("import json, knobs, os, subprocess, sys\n"
               "print(oct(os.stat(json.loads(os.environ['FLAGOS_DOCTOR_EXPLAIN'])['channel']).st_mode & 0o777))\n"
               f"subprocess.run([sys.executable, '-c', '{child}'])\n"
               "subprocess.run([sys.executable, '-c', 'raise IndexError(2)'])\n"
               "knobs.flag = 3\n"
               "try:\n    {}['key']\nexcept KeyError as exc:\n    raise ValueError(3) from exc\n")
    document, result = explain_knobs(tmp_path, program)
    assert result.returncode == 1
    assert result.stdout == "0o700\n"  # the records' folder: the user's alone
    program_pid = document["program"]["pid"]
    got = [(f["id"], f["error"], f["process"] == program_pid, f.get("role")) for f in document["failures"]]
    assert got == [(1, "ValueError: 3", True, None), (2, "KeyError: 1", False, "subprocess"),
                   (3, "IndexError: 2", False, "subprocess")]
    assert [c["error"] for c in document["failures"][0]["raised_from"]] == ["KeyError: 'key'"]
    assert [p["role"] for p in document["processes"]] == ["program", "subprocess", "subprocess"]
    assert all(p["finished"] for p in document["processes"])
    # the program's events are the document's own; each other process keeps its own with it
    program_entry, child_entry, _ = document["processes"]
    assert "events" not in program_entry and "findings" not in program_entry
    assert [e["value"]["repr"] for e in document["events"] if e["kind"] == "write"] == ["3"]
    assert [e["value"]["repr"] for e in child_entry["events"] if e["kind"] == "write"] == ["6", "7"]
    # each process judged on its own events: the subprocess's two writers are its finding alone
    assert [f["kind"] for f in child_entry["findings"]] == ["multiple-writers"]
    assert "multiple-writers" not in [f["kind"] for f in document["findings"]]
    assert program_entry["pid"] == program_pid and child_entry["ppid"] == program_pid


def test_a_secret_inside_a_longer_one_leaves_nothing_of_the_longer(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_SERVICE_TOKEN", "hunter2")
    monkeypatch.chdir(tmp_path)
    document = runner.run_explain(options(command=["python", "-c", "pass", "--api-key", "hunter2-and-more"]))
    text = json.dumps(document)
    assert "hunter2" not in text and "-and-more" not in text


def test_a_program_ending_non_zero_without_an_exception_is_one_exit_failure(tmp_path):
    document, result = explain_knobs(tmp_path, "import os\nos.kill(os.getpid(), 9)\n")
    assert result.returncode == 137
    assert [(f["id"], f["kind"], f["error"]) for f in document["failures"]] == [
        (1, "exit", "the program was killed by SIGKILL")]
    assert any("without running its exit hooks" in n for n in document["notices"])
    document, result = explain_knobs(tmp_path, "import sys\nsys.exit(4)\n")
    assert result.returncode == 4 and [f["kind"] for f in document["failures"]] == ["exit"]
    assert not any("exit hooks" in n for n in document["notices"])
    document, result = explain_knobs(tmp_path, "pass\n")
    assert result.returncode == 0 and document["failures"] == [] and document["tests"] is None


def test_a_program_the_watch_never_entered_is_said_so(tmp_path):
    (tmp_path / "prog.py").write_text("raise SystemExit(0)\n")
    result = run_cli("explain", "--quiet", "--json", str(tmp_path / "why.json"), "--",
                     sys.executable, "-I", "prog.py", cwd=tmp_path)
    document = json.loads((tmp_path / "why.json").read_text())
    assert result.returncode == 0 and document["program"]["watched"] is False
    assert any("the watch never started in the program" in n for n in document["notices"])
    assert document["python"]["executable"] == sys.executable


def test_events_past_a_processes_cap_are_said_with_who_made_them(tmp_path):
    program = ("import knobs, subprocess, sys\n"
               "for i in range(5):\n    knobs.flag = i\n"
               "subprocess.run([sys.executable, '-c', 'import knobs\\nfor i in range(4): knobs.flag = i'])\n")
    document, result = explain_knobs(tmp_path, program, env={"FLAGOS_DOCTOR_EXPLAIN_MAX_EVENTS": "2",
                                                             "PYTHONPATH": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    said = [n for n in document["notices"] if "more events than the watch keeps" in n]
    assert said[0].startswith("the program made more events than the watch keeps (2 of each kind): 3 writes")
    assert said[1].startswith("subprocess (pid ") and "2 writes were counted" in said[1]
    assert [p["dropped"] for p in document["processes"]] == [{"write": 3}, {"write": 2}]


def test_without_stack_the_stack_is_the_one_whose_code_wrote_a_probe_the_programs_own_first():
    def writes(file):
        return [{"record": "event", "kind": "write", "where": {"file": file}}]
    assert runner.imported_stack([writes("prog.py"), writes("flagos_doctor/demo/__init__.py")]) == "demo"
    assert runner.imported_stack([writes("torch_fl/__init__.py"), writes("flagos_doctor/demo/x.py")]) == "torch_fl"
    assert runner.imported_stack([writes("flag_gems/runtime/backend.py")]) == "flag_gems"
    assert runner.imported_stack([writes("torch_fl.py")]) == "torch_fl"
    assert runner.imported_stack([writes("torch_flx/__init__.py")]) is None
    assert runner.imported_stack([writes("prog.py"), [{"record": "event", "kind": "read",
                                                       "where": {"file": "torch_fl/x.py"}}]]) is None
    assert runner.imported_stack([]) is None


def test_a_module_stack_is_found_beside_the_script_python_runs_and_refused_before_the_program_starts(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "stack_beside_the_script.py").write_text("")
    marker = tmp_path / "ran"
    (project / "tool.sh").write_text(f"#!/bin/sh\ntouch {marker}\n")
    os.chmod(project / "tool.sh", 0o755)
    not_python = run_cli("explain", "--quiet", "--stack", "stack_beside_the_script", "--", str(project / "tool.sh"),
                         cwd=tmp_path)
    assert not_python.returncode == 2 and not marker.exists()  # a shell script's folder is no Python's path
    (project / "self.py").write_text(f"#!{sys.executable}\nopen({str(marker)!r}, 'w').close()\n")
    os.chmod(project / "self.py", 0o755)
    itself = run_cli("explain", "--quiet", "--stack", "stack_beside_the_script", "--", str(project / "self.py"),
                     cwd=tmp_path)
    assert itself.returncode == 0 and marker.exists(), itself.stderr  # a .py that runs itself: its folder
    marker.unlink()
    for name in ("prog.py", "prog"):  # Python runs a script of any name; its folder comes first
        (project / name).write_text(f"open({str(marker)!r}, 'w').close()\n")
        found = run_cli("explain", "--quiet", "--stack", "stack_beside_the_script", "--",
                        sys.executable, str(project / name), cwd=tmp_path)
        assert found.returncode == 0 and marker.exists(), found.stderr
        marker.unlink()
    # a script reached through a link: Python puts its real folder first, not the link's
    (tmp_path / "bin").mkdir()
    os.symlink(project / "prog.py", tmp_path / "bin" / "linked.py")
    linked = run_cli("explain", "--quiet", "--stack", "stack_beside_the_script", "--",
                     sys.executable, str(tmp_path / "bin" / "linked.py"), cwd=tmp_path)
    assert linked.returncode == 0 and marker.exists(), linked.stderr
    marker.unlink()
    (tmp_path / "bin" / "stack_beside_the_link.py").write_text("")
    beside_the_link = run_cli("explain", "--quiet", "--stack", "stack_beside_the_link", "--",
                              sys.executable, str(tmp_path / "bin" / "linked.py"), cwd=tmp_path)
    assert beside_the_link.returncode == 2 and "--stack" in beside_the_link.stderr and not marker.exists()
    # the folder of an argument after the script is not Python's
    (project / "data.txt").write_text("")
    refused = run_cli("explain", "--quiet", "--stack", "stack_beside_the_script", "--",
                      sys.executable, "-c", "open('ran', 'w').close()", str(project / "data.txt"), cwd=tmp_path)
    assert refused.returncode == 2 and "--stack" in refused.stderr and not marker.exists()
    elsewhere = run_cli("explain", "--quiet", "--stack", "no_stack_here_at_all", "--",
                        sys.executable, str(project / "prog.py"), cwd=tmp_path)
    assert elsewhere.returncode == 2 and "--stack" in elsewhere.stderr and not marker.exists()


def test_exactly_the_cap_of_process_files_is_read(tmp_path):
    record = json.dumps({"record": "test", "nodeid": "t::a", "when": "call", "outcome": "passed"}) + "\n"
    for number in range(runner.MAX_PROCESS_FILES + 1):
        (tmp_path / f"{number:05d}.jsonl").write_text(record)
    processes, notices = read_processes(str(tmp_path))
    assert len(processes) == 2000 and notices == ["explain's side-channel folder held 2,001 files: the first 2,000 were read"]
    (tmp_path / "02000.jsonl").unlink()
    assert read_processes(str(tmp_path)) == ([[json.loads(record)]] * 2000, [])


def test_a_process_file_over_64_mib_is_read_to_64_mib(tmp_path):
    record = (json.dumps({"record": "test", "nodeid": "t::a", "when": "call", "outcome": "passed"}) + "\n").encode()
    with open(tmp_path / "1.jsonl", "wb") as handle:  # a record, then zeros (sparse) to 64 MiB + 1 byte
        handle.write(record)
        handle.truncate((64 << 20) + 1)
    processes, notices = read_processes(str(tmp_path))
    assert processes == [[json.loads(record)]]
    assert notices == ["explain's side-channel folder held '1.jsonl', more than the watch writes (64 MiB): "
                       "what came after is not read"]
    with open(tmp_path / "1.jsonl", "r+b") as handle:
        handle.truncate(64 << 20)
    assert read_processes(str(tmp_path))[1] == []


def test_a_record_error_names_a_planted_files_name_in_short(tmp_path):
    bad = json.dumps({"record": "test", "nodeid": 3}).encode()
    for name, shown in (("1.jsonl", "1.jsonl"), ("x" * 99, "x" * 99), ("x" * 100, "'" + "x" * 37 + "..." + "x" * 38 + "'"),
                        ("a\nb.jsonl", "'a\\nb.jsonl'")):
        with pytest.raises(BadInput) as info:
            read_records(bad, name)
        assert f"side-channel file {shown}" in info.value.where
    surrogate = b'{"record": "test", "nodeid": "\\udc80", "when": "call", "outcome": "passed"}'
    with pytest.raises(BadInput):
        read_records(surrogate, "2.jsonl")


def test_reading_the_folder_leaves_no_descriptor_open_and_a_missing_one_says_why(tmp_path):
    (tmp_path / "1.jsonl").write_text("")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        read_processes(str(tmp_path))
    assert len(os.listdir("/proc/self/fd")) == before
    assert read_processes(str(tmp_path / "gone"))[1] == [
        "explain's side-channel folder could not be read (No such file or directory): something removed or "
        "replaced it, and the watch's records are lost"]


def built(processes, returncode=0, pytest=False, stack=None, full=False) -> dict:
    config = {"channel": "/c", "stack": stack, "probes": [], "env": [], "max_events": 5}
    return runner.build_document(processes, runner.Ran(returncode, 0.123456, 10, None), options(stack=stack), config,
                                 [sys.executable, "prog.py"], pytest, full)


def test_a_process_without_its_hello_and_one_that_lost_or_dropped_records_are_said(tmp_path):
    hello = {"record": "hello", "pid": 10, "ppid": 1, "argv": ["python", "prog.py"], "forked": False,
             "python": "3.11", "executable": sys.executable, "platform": "linux", "dict_watchers": False}
    lost = {"record": "lost", "error": "No space left on device", "records": 7}
    dropped = {"record": "dropped", "events": {"write": 3}}
    document = built([[hello, lost, dropped], [{"record": "test", "nodeid": "t", "when": "call", "outcome": "passed"}]])
    program, other = document["processes"]
    assert (program["lost"], program["dropped"]) == ({"error": "No space left on device", "records": 7}, {"write": 3})
    assert (other["pid"], other["role"], other["lost"], other["dropped"]) == (None, "subprocess", None, {})
    assert (program["finished"], other["finished"]) == (False, False)  # neither sent its `done`
    assert built([[hello, {"record": "done"}]])["processes"][0]["finished"] is True
    assert "the program: the watch could not write its records (No space left on device): 7 were lost" in document["notices"]
    assert any(n.startswith("the program made more events than the watch keeps (5 of each kind): 3 writes")
               for n in document["notices"])
    # a lost record explains the missing final state: no "exit hooks" notice then; without it, one
    assert not any("exit hooks" in n for n in document["notices"])
    assert any("exit hooks" in n for n in built([[hello]])["notices"])
    assert not any("exit hooks" in n for n in built([[hello]], full=True)["notices"])
    assert document["program"]["seconds"] == 0.12 and document["stack"] is None
    assert built([[hello]], stack="demo")["stack"] == "demo"
    assert document["tests"] is None and built([[hello]], pytest=True)["tests"] == {"counts": {}, "outcomes": {}}


def test_each_processs_causes_are_numbered_after_those_before_it_and_name_their_process():
    def on_no_device(pid, error):  # torch_fl registered its device, this machine has none, a call on it failed
        return [{"record": "hello", "pid": pid, "ppid": 1, "argv": ["python", "prog.py"], "forked": False},
                {"record": "event", "seq": 1, "kind": "write", "probe": "PrivateUse1 backend name", "phase": "program",
                 "step": "program", "value": {"repr": "'flagos'"},
                 "where": {"file": "torch_fl/__init__.py", "line": 40, "function": "_register"}},
                {"record": "final", "facts": {"privateuse1": "flagos", "device_count": {"ok": True, "repr": "0"}}},
                {"record": "failure", "kind": "exception", "error": error, "type": "builtins.RuntimeError",
                 "traceback": [{"file": "prog.py", "line": 1, "function": "<module>"},
                               {"file": "torch_fl/ops.py", "line": 7, "function": "f"}]}]
    document = built([on_no_device(10, "RuntimeError: invalid device index"),
                      on_no_device(11, "RuntimeError: no flagos devices")], returncode=1)
    assert [(c["id"], c["failure"], c["process"], c["how"]) for c in document["causes"]] == [
        (1, 1, 10, "no-device"), (2, 2, 11, "no-device")]
    assert [(f["id"], f["process"], f["causes"]) for f in document["failures"]] == [(1, 10, [1]), (2, 11, [2])]


def test_without_stack_a_stack_only_a_subprocess_imported_is_the_documents():
    hello = {"record": "hello", "pid": 10, "ppid": 1, "argv": ["python", "prog.py"], "forked": False}
    write = {"record": "event", "seq": 1, "kind": "write", "probe": "PrivateUse1 backend name", "phase": "program",
             "step": "program", "value": {"repr": "'flagos'"},
             "where": {"file": "flagos_doctor/demo/__init__.py", "line": 40, "function": "_register"}}
    assert built([[hello], [{**hello, "pid": 11}, write]])["stack"] == "demo"
    assert built([[hello], [{**hello, "pid": 11}]])["stack"] is None


def test_a_without_stack_write_of_unknown_place_names_no_stack():
    assert runner.imported_stack([[{"record": "event", "kind": "write", "where": None},
                                   {"record": "event", "kind": "delete", "where": {"file": None}}]]) is None


def test_running_the_program_leaves_explains_signal_mask_as_it_found_it(known_mask):
    ran = runner.run_program([sys.executable, "-c", "import time; time.sleep(1.2)"], dict(os.environ))
    assert ran.returncode == 0 and ran.interrupted is None and ran.seconds >= 1.2
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == known_mask


def test_without_stack_the_document_names_the_built_in_stack_the_program_imported(tmp_path):
    document, result = explain_knobs(tmp_path, "import flagos_doctor.demo\n")
    assert result.returncode == 0, result.stderr
    assert document["stack"] == "demo"
