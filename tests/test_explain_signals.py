"""``explain`` under signals: SIGTERM and SIGINT sent to explain reach the program and its
subprocesses, explain waits, leaves a document saying it was interrupted and removes its
scratch; no raw secret is ever written to a file, the scratch folder included, at any
moment of the run (read while it runs) and after a SIGKILL. Real processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, alive, checkout_first

PROGRAM = os.path.join(FIXTURES, "explain", "waits_for_signal.py")
SECRET = "planted-Secret-7f3a9c1e"


def start(tmp_path, *options):
    """explain on the waiting program, with a private TMPDIR (where its scratch goes)."""
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    work = tmp_path / "work"
    work.mkdir()
    env = dict(os.environ, TMPDIR=str(tmpdir), MY_API_TOKEN=SECRET,
               PYTHONPATH=checkout_first(os.environ.get("PYTHONPATH")))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flagos_doctor", "explain", "--json", str(tmp_path / "why.json"),
         "--markdown", str(tmp_path / "why.md"), *options, "--", "python", PROGRAM, str(work)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for _ in range(1200):  # the program's start, not a timing: it writes `ready` when waiting
        if (work / "ready").exists() or proc.poll() is not None:
            break
        time.sleep(0.1)
    assert (work / "ready").exists(), proc.communicate()
    pids = [int(p) for p in (work / "ready").read_text().split()]
    return proc, tmpdir, work, pids


def files_under(folder) -> dict[str, bytes]:
    out = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as handle:
                out[path] = handle.read()
    return out


def assert_no_secret_in_scratch(tmpdir):
    found = files_under(tmpdir)
    records = [data for path, data in found.items() if path.endswith(".jsonl")]
    assert records and all(records), found.keys()  # the program did write records: the grep means something
    assert b"<redacted>" in b"".join(records)  # the watched variable's value, scrubbed in the program
    leaks = [path for path, data in found.items() if SECRET.encode() in data]
    assert leaks == []


@pytest.mark.parametrize("signo, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_to_explain_goes_to_the_program_and_its_subprocess_and_a_document_says_so(tmp_path, signo, code):
    proc, tmpdir, work, pids = start(tmp_path)
    assert_no_secret_in_scratch(tmpdir)
    os.kill(proc.pid, signo)
    out, err = proc.communicate(timeout=300)
    name = signal.Signals(signo).name
    assert proc.returncode == code, err
    # Both the program and its own subprocess got it, once each, and ended before explain did.
    assert (work / f"program-got-{name}").exists() and (work / f"subprocess-got-{name}").exists()
    assert not any(alive(pid) for pid in pids)
    document = json.loads((tmp_path / "why.json").read_text())
    interrupted = document["program"]["interrupted"]
    assert interrupted["signal"] == name and interrupted["forwarded_to"] == 2
    assert interrupted["from"] == f"pid {os.getpid()}"
    assert document["notices"][0].startswith(f"explain was interrupted by {name}")
    assert "and 1 of its subprocesses" in document["notices"][0]
    assert f"explain was interrupted by {name}" in err and f"interrupted by {name}" in (tmp_path / "why.md").read_text()
    assert document["program"]["returncode"] == 128 + signo  # the program's own exit, from its handler
    # The scratch folder is gone, and nothing the doctor wrote holds the secret.
    assert os.listdir(tmpdir) == []
    for path in (tmp_path / "why.json", tmp_path / "why.md"):
        assert SECRET not in path.read_text()
    assert SECRET not in err


def test_sigkill_leaves_a_scratch_folder_without_a_raw_secret(tmp_path):
    proc, tmpdir, work, pids = start(tmp_path)
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)  # (the orphaned program still holds the pipes: killed below)
        assert [n for n in os.listdir(tmpdir) if n.startswith("flagos-doctor-explain-")]
        assert_no_secret_in_scratch(tmpdir)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.communicate(timeout=60)


def test_ctrl_c_at_the_terminal_reaches_the_program_once_and_explain_says_so(tmp_path):
    """A real terminal (a pty whose foreground group is explain's): Ctrl-C goes to explain and
    the program alike; explain passes nothing on (the program got it), waits, exits 130."""
    import fcntl
    import pty
    import termios

    leader, follower = pty.openpty()
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    work = tmp_path / "work"
    work.mkdir()

    def own_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    env = dict(os.environ, TMPDIR=str(tmpdir), MY_API_TOKEN=SECRET,
               PYTHONPATH=checkout_first(os.environ.get("PYTHONPATH")))
    proc = subprocess.Popen(
        [sys.executable, "-m", "flagos_doctor", "explain", "--json", str(tmp_path / "why.json"), "--",
         "python", PROGRAM, str(work)],
        env=env, stdin=follower, stdout=follower, stderr=follower, preexec_fn=own_terminal)
    os.close(follower)
    try:
        for _ in range(1200):  # the program's start: it writes `ready` when waiting
            if (work / "ready").exists() or proc.poll() is not None:
                break
            time.sleep(0.1)
        assert (work / "ready").exists()
        os.write(leader, b"\x03")  # Ctrl-C, as the terminal's line discipline sends it
        while proc.poll() is None:  # (its output is read so that it never blocks on a full pty)
            try:
                os.read(leader, 65536)
            except OSError:
                break
        proc.wait(timeout=300)
    finally:
        os.close(leader)
    assert proc.returncode == 130
    assert (work / "program-got-SIGINT").exists() and (work / "subprocess-got-SIGINT").exists()
    interrupted = json.loads((tmp_path / "why.json").read_text())["program"]["interrupted"]
    assert interrupted == {"signal": "SIGINT", "from": "the terminal", "forwarded_to": 0}
