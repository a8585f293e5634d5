"""Each promise of flagos_doctor/channel.py's docstrings, one test each, over real pipes: the
record lines, the nonce, a record delivered before a real abort, records from threads whole,
the secrets scrubbed and announced once (never over a file), and requests read back whole.
The parent's side (childproc.Child keeps only records with the nonce) is tests/test_foundation.py;
scripts/mutation runs these first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from conftest import REPO_ROOT
from flagos_doctor import channel
from flagos_doctor.channel import NONCE, ChildChannel, encode


def drain(read_fd: int) -> list[dict]:
    """Every record written so far to a pipe whose write end is closed."""
    data = b""
    while chunk := os.read(read_fd, 65536):
        data += chunk
    return [json.loads(line) for line in data.decode().splitlines()]


@pytest.fixture
def pipe():
    read_fd, write_fd = os.pipe()
    yield read_fd, write_fd
    for fd in (read_fd, write_fd):
        try:
            os.close(fd)
        except OSError:
            pass


def test_a_record_is_one_compact_json_line_and_what_json_cannot_hold_is_its_repr():
    assert encode({"record": "case", "n": 1}) == b'{"record":"case","n":1}\n'
    assert encode({"value": {1, 2}}) == b'{"value":"{1, 2}"}\n'
    assert encode({"x": "two\nlines"}).count(b"\n") == 1  # a newline inside a value stays escaped


def test_every_record_carries_the_nonce_and_none_without_one(pipe):
    read_fd, write_fd = pipe
    ChildChannel(None, write_fd, nonce="n0nce").emit({"record": "case", "overload": "abs"})
    ChildChannel(None, write_fd).emit({"record": "case", "overload": "neg"})
    os.close(write_fd)
    assert drain(read_fd) == [{"record": "case", "overload": "abs", NONCE: "n0nce"},
                              {"record": "case", "overload": "neg"}]


def test_the_child_opens_the_channel_from_the_environment_and_takes_the_hellos_nonce(monkeypatch):
    requests_read, requests_write = os.pipe()
    records_read, records_write = os.pipe()
    os.write(requests_write, encode({"op": "hello", NONCE: "abc"}) + encode({"op": "overload", "name": "abs"}))
    monkeypatch.setenv(channel.ENV_VAR, f"{requests_read},{records_write}")
    opened = ChildChannel.from_env()
    assert opened.receive() == {"op": "overload", "name": "abs"}  # the hello is consumed, the next request kept
    opened.emit({"record": "ready"})
    os.close(records_write)
    assert drain(records_read) == [{"record": "ready", NONCE: "abc"}]
    for fd in (requests_read, requests_write, records_read):
        os.close(fd)


def test_a_parent_of_another_version_sends_no_hello_and_its_first_request_is_kept(monkeypatch, pipe):
    read_fd, write_fd = pipe
    os.write(write_fd, encode({"op": "overload", "name": "neg"}))
    os.close(write_fd)
    records_read, records_write = os.pipe()
    monkeypatch.setenv(channel.ENV_VAR, f"{read_fd},{records_write}")
    opened = ChildChannel.from_env()
    assert opened.receive() == {"op": "overload", "name": "neg"} and opened.receive() is None
    opened.emit({"record": "x"})
    os.close(records_write)
    assert drain(records_read) == [{"record": "x"}]  # no nonce to carry
    os.close(records_read)


def test_without_a_read_descriptor_receive_is_none_and_without_the_variable_a_key_error(monkeypatch, pipe):
    _, write_fd = pipe
    monkeypatch.setenv(channel.ENV_VAR, f"-1,{write_fd}")
    assert ChildChannel.from_env().receive() is None
    monkeypatch.delenv(channel.ENV_VAR)
    with pytest.raises(KeyError):
        ChildChannel.from_env()


def test_a_request_written_in_pieces_is_read_whole_and_the_end_of_the_pipe_is_none(pipe):
    read_fd, write_fd = pipe
    line = encode({"op": "overload", "name": "x" * 100_000})  # more than one read of 64 KiB
    opened = ChildChannel(read_fd, os.dup(write_fd))
    writer = threading.Thread(target=lambda: [os.write(write_fd, line[i:i + 1000]) for i in range(0, len(line), 1000)]
                              + [os.write(write_fd, encode({"op": "end"})), os.close(write_fd)])
    writer.start()
    assert opened.receive() == {"op": "overload", "name": "x" * 100_000}
    assert opened.receive() == {"op": "end"}
    writer.join()
    os.close(opened._write_fd)
    assert opened.receive() is None  # the parent closed its end


def test_a_record_emitted_before_a_real_abort_is_delivered():
    read_fd, write_fd = os.pipe()
    code = ("import os; from flagos_doctor.channel import ChildChannel; "
            f"c = ChildChannel(None, {write_fd}, nonce='n'); c.emit({{'record': 'case', 'overload': 'abs'}}); os.abort()")
    done = subprocess.run([sys.executable, "-c", code], pass_fds=(write_fd,), capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": REPO_ROOT})
    os.close(write_fd)
    assert done.returncode == -6  # SIGABRT: no exit handler, no flush ran
    assert drain(read_fd) == [{"record": "case", "overload": "abs", NONCE: "n"}]
    os.close(read_fd)


def test_records_from_many_threads_never_interleave(pipe):
    read_fd, write_fd = pipe
    opened = ChildChannel(None, write_fd, nonce="n")
    big = "y" * 200_000  # larger than a pipe's buffer: os.write returns part of it
    received: list[dict] = []
    reader = threading.Thread(target=lambda: received.extend(drain(read_fd)))
    reader.start()
    threads = [threading.Thread(target=lambda i=i: [opened.emit({"record": "t", "i": i, "big": big}) for _ in range(5)])
               for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    os.close(write_fd)
    reader.join()
    assert len(received) == 20 and all(r["big"] == big for r in received)
    assert sorted(r["i"] for r in received) == sorted(list(range(4)) * 5)


def test_a_secret_the_child_set_is_announced_once_before_the_record_it_hides(monkeypatch, pipe):
    read_fd, write_fd = pipe
    monkeypatch.delenv("MY_API_KEY", raising=False)
    opened = ChildChannel(None, write_fd, nonce="n")
    opened.emit({"record": "start"})
    monkeypatch.setenv("MY_API_KEY", "key-1234567890")  # set by the stack's setup(), after the channel opened
    opened.emit({"record": "case", "detail": "called with key-1234567890"})
    opened.emit({"record": "case", "detail": "key-1234567890 again"})
    monkeypatch.delenv("MY_API_KEY")
    opened.emit({"record": "end", "detail": "still key-1234567890"})  # a value once secret stays hidden
    os.close(write_fd)
    records = drain(read_fd)
    assert records[0] == {"record": "start", NONCE: "n"}
    assert records[1] == {"record": channel.SECRETS_RECORD, "values": ["key-1234567890"], NONCE: "n"}
    assert [r["record"] for r in records[2:]] == ["case", "case", "end"]  # announced once
    assert all("key-1234567890" not in json.dumps(r) for r in records[2:])
    assert records[2]["detail"] == "called with <redacted>"


def test_a_channel_that_is_a_file_never_announces_but_still_scrubs(monkeypatch, tmp_path):
    monkeypatch.setenv("MY_API_KEY", "key-abcdefghijk")
    path = tmp_path / "side-channel"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    ChildChannel(None, fd, announce_secrets=False).emit({"record": "case", "detail": "key-abcdefghijk"})
    os.close(fd)
    text = path.read_text()
    assert "key-abcdefghijk" not in text and json.loads(text) == {"record": "case", "detail": "<redacted>"}


def test_a_secret_holding_another_is_masked_whole(monkeypatch, pipe):
    read_fd, write_fd = pipe
    monkeypatch.setenv("SHORT_TOKEN", "tok-123456789")
    opened = ChildChannel(None, write_fd, announce_secrets=False)
    opened.emit({"record": "a"})
    monkeypatch.setenv("LONG_TOKEN", "tok-123456789-and-more")  # holds the shorter one
    opened.emit({"record": "b", "detail": "tok-123456789-and-more"})
    os.close(write_fd)
    assert drain(read_fd)[1]["detail"] == "<redacted>"  # longest first: no "-and-more" left over


def test_the_environment_is_learnt_again_only_from_the_entries_that_changed(monkeypatch, pipe):
    # 8,000 variables made every record rescan them all (minutes): only what changed is read again.
    _, write_fd = pipe
    asked: list[dict] = []
    real = channel.redact.secret_values
    monkeypatch.setattr(channel.redact, "secret_values", lambda env, *a, **k: asked.append(dict(env)) or real(env, *a, **k))
    opened = ChildChannel(None, write_fd, announce_secrets=False)
    opened.emit({"record": "a"})
    opened.emit({"record": "b"})  # nothing changed: nothing read again
    monkeypatch.setenv("FRESH_TOKEN", "tok-0987654321")
    opened.emit({"record": "c"})
    assert len(asked) == 2 and len(asked[0]) == len(os.environ) - 1
    assert asked[1] == {"FRESH_TOKEN": "tok-0987654321"}


def test_descriptor_0_is_a_request_pipe_like_any_other():
    # "<read_fd>,<write_fd>": a parent may hand its requests over the child's stdin (fd 0).
    code = ("from flagos_doctor.channel import ChildChannel; c = ChildChannel.from_env(); "
            "c.emit({'record': 'got', 'request': c.receive()})")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          input=(encode({"op": "hello", NONCE: "n"}) + encode({"op": "overload", "name": "abs"})).decode(),
                          env={**os.environ, channel.ENV_VAR: "0,1", "PYTHONPATH": REPO_ROOT})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"record": "got", "request": {"op": "overload", "name": "abs"}, NONCE: "n"}
