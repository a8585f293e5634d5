"""Hardening: bad input, secrets, concurrent runs, processes left behind (issue 10).

Every test runs the real CLI (or the real module) on real files and real processes:
``/proc/self/environ``, ``/dev/zero``, ``/dev/full`` (a real ENOSPC), a FIFO, a real
second survey on the same results file, a worker whose kernel forks a child and then
segfaults, a stack that hangs on import, a detached grandchild left by a survey killed
with SIGKILL. No assertion depends on the machine's speed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from conftest import FIXTURES, REPO_ROOT, alive, run_cli
from flagos_doctor import conf, files, redact
from flagos_doctor.errors import BadInput

FAULT_CONF = os.path.join(FIXTURES, "fault.conf")
SECRET = "hardening-supersecret-4711"


def one_line_error(done, code=2):
    """The process exited ``code`` with exactly one line on stderr and no traceback; the line."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return lines[0]


def survey(tmp, *args, env=None, timeout=300):
    return run_cli("survey", *args, env=env, cwd=str(tmp), timeout=timeout)


# -- secrets ---------------------------------------------------------------------------------


def test_conf_including_proc_self_environ_never_echoes_the_environment(tmp_path):
    top = tmp_path / "top.conf"
    top.write_text("abs = flagos_python\ninclude /proc/self/environ\n")
    done = survey(tmp_path, "--conf", str(top), "--no-store", env={"HF_TOKEN": SECRET, "GEMS_PASS": SECRET + "x"})
    line = one_line_error(done)
    assert SECRET not in done.stderr and SECRET not in done.stdout
    assert f"{top}:2:" in line and "/proc/self/environ" in line and "under /proc" in line


def test_conf_error_quotes_a_short_scrubbed_excerpt(tmp_path, monkeypatch):
    path = tmp_path / "bad.conf"
    # A .env file given as a conf by mistake: a secret-named assignment and a long line.
    path.write_text(f"GITHUB_PAT={SECRET} " + "x" * 500 + "\n")
    with pytest.raises(BadInput) as caught:
        conf.parse_conf(path)
    message = str(caught.value)
    assert SECRET not in message and "GITHUB_PAT=<redacted>" in message
    assert len(message) < len(str(path)) + 200
    # A secret value of the environment is hidden wherever it appears.
    monkeypatch.setenv("MY_DB_PWD", SECRET)
    path.write_text(f"abs = flagos_python\nconnect {SECRET}\n")
    with pytest.raises(BadInput) as caught:
        conf.parse_conf(path)
    assert SECRET not in str(caught.value) and str(caught.value).startswith(f"{path}:2:")


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "fifo", "dir"])
def test_special_files_are_refused_by_name(tmp_path, special):
    if special == "fifo":
        special = str(tmp_path / "pipe")
        os.mkfifo(special)  # nobody writes: reading it would block for ever
    elif special == "dir":
        special = str(tmp_path)
    done = survey(tmp_path, "--conf", special, "--no-store", timeout=120)
    line = one_line_error(done)
    assert special in line


def test_conf_size_limit(tmp_path):
    path = tmp_path / "huge.conf"
    with open(path, "wb") as handle:
        handle.truncate(conf.MAX_CONF_BYTES + 1)  # sparse: no disk used
    with pytest.raises(BadInput, match="more than the"):
        conf.parse_conf(path)


def test_unknown_backend_is_named_with_its_line(tmp_path):
    path = tmp_path / "typo.conf"
    path.write_text("abs = flagos_python\nneg = flagos_pyhton\n")
    done = survey(tmp_path, "--conf", str(path), "--no-store", timeout=120)
    line = one_line_error(done)
    assert f"{path}:2:" in line and "flagos_pyhton" in line and "neg" in line
    # every backend of every real Torch-FL conf is known
    path.write_text("".join(f"op{i} = {name}\n" for i, name in enumerate(conf.KNOWN_BACKENDS)) + "abs = FLAGOS_PYTHON\n")
    assert conf.select(conf.parse_conf(path)) == ["abs", "op8", "op9"]


def test_secret_names_and_urls_after_path_normalisation():
    for name in ("DB_PASS", "SMTP_PWD", "GITHUB_PAT", "NPM_AUTH", "GH_AUTH_HEADER", "HTTP_AUTHORIZATION", "SSH_PRIVATE"):
        assert redact.is_secret(name), name
    for name in ("PATH", "GIT_AUTHOR_NAME", "PASSTHROUGH", "FLAGOS_LOG_DISPATCH"):
        assert not redact.is_secret(name), name
    url = os.path.normpath("https://user:hunter2x@example.com/repo")  # -> https:/user:...
    assert url.startswith("https:/user") and "hunter2x" not in redact.scrub(url, [])
    dsn = "host=db user=gems password=s3cretpw dbname=gems"
    assert "s3cretpw" not in redact.scrub(dsn, [])
    assert redact.secret_values({"FLAGGEMS_DB_URL": dsn}) == ["s3cretpw"]
    doc = {"env": {"SMTP_PWD": "abcdefg"}, "text": "log: abcdefg"}
    assert "abcdefg" not in json.dumps(redact.scrub(doc, redact.secret_values({"SMTP_PWD": "abcdefg"})))


def test_survey_documents_are_scrubbed(tmp_path):
    """A stack's exception text and stderr carry a token: not in the results file, the
    journal, the store, --json or the census."""
    (tmp_path / "leakystack.py").write_text(
        "import os, flagos_doctor.demo, torch\n"
        "from flagos_doctor.demo import kernels as k\n"
        "lib = torch.library.Library('aten', 'IMPL')\n"
        "def neg(x):\n"
        "    os.write(2, ('token in stderr: ' + os.environ['HF_TOKEN'] + '\\n').encode())\n"
        "    raise RuntimeError('auth failed for https://bot:' + os.environ['HF_TOKEN'] + '@hub.example/x')\n"
        "lib.impl('neg', neg, 'PrivateUse1')\n"
        "def setup():\n"
        "    return 'flagos'\n"
    )
    path = tmp_path / "leaky.conf"
    path.write_text("neg = flagos_python\nabs = flagos_python\n")
    store = tmp_path / "store"
    env = {"PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT)), "HF_TOKEN": SECRET}
    done = survey(tmp_path, "--stack", "leakystack", "--conf", str(path), "--store", str(store), "-o", "r.json",
                  "--json", "copy.json", "--census", "c.txt", env=env)
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    details = [case["detail"] for case in doc["overloads"]["neg"]["cases"]]
    assert any("auth failed for https://bot:***@hub.example" in d for d in details), details
    written = [tmp_path / "r.json", tmp_path / "copy.json", tmp_path / "c.txt", *store.rglob("*.json")]
    assert len(written) == 4
    for item in written:
        assert SECRET not in item.read_text(), item
    assert SECRET not in done.stdout + done.stderr


def test_crash_log_is_created_safely_and_never_follows_a_planted_symlink(tmp_path):
    """A bug of ours (a command that raises) in a real process: one line naming a fresh
    file in a private folder; a symlink planted at the old predictable name
    ``$TMPDIR/flagos-doctor-crash-<pid>.txt`` is not followed; with TMPDIR unusable the
    traceback still finds a home, and never reaches the terminal."""
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    code = (
        "import os, sys\n"
        "sys.argv = ['flagos-doctor', 'suite', '--compare', 'a.xml', 'b.xml']\n"
        "import flagos_doctor.suite.command as command\n"
        "def run(options):\n"
        "    raise ZeroDivisionError('a bug of ours')\n"
        "command.run = run\n"
        f"os.symlink({str(victim)!r}, os.path.join({str(tmp_path)!r}, f'flagos-doctor-crash-{{os.getpid()}}.txt'))\n"
        "from flagos_doctor import cli\n"
        "cli.main()\n"
    )
    for tmpdir in (str(tmp_path), str(tmp_path / "missing")):
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "TMPDIR": tmpdir, "PYTHONPATH": REPO_ROOT}, timeout=120)
        line = one_line_error(done, 3)
        assert "ZeroDivisionError: a bug of ours" in line and "(traceback in " in line, line
        log = line.rsplit("(traceback in ", 1)[1].rstrip(")")
        assert os.path.isfile(log) and not os.path.islink(log)
        assert "ZeroDivisionError" in open(log).read()
        assert (os.stat(os.path.dirname(log)).st_mode & 0o077) == 0  # a private folder
        assert victim.read_text() == "keep me\n"
        shutil.rmtree(os.path.dirname(log))


# -- bad input: exit 2, one line, before any work ----------------------------------------------------


@pytest.mark.parametrize("value", ["inf", "nan", "-1", "0"])
@pytest.mark.parametrize("command", ["survey", "probe", "report"])
def test_timeout_must_be_a_finite_positive_number(tmp_path, command, value):
    done = run_cli(command, "--timeout", value, *(["--no-store"] if command == "survey" else []), cwd=str(tmp_path), timeout=120)
    line = one_line_error(done)
    assert "--timeout" in line
    assert not os.listdir(tmp_path)


@pytest.mark.parametrize("python", ["missing", "dir"])
def test_survey_python_missing_or_a_directory(tmp_path, python):
    path = str(tmp_path / "no-such-python") if python == "missing" else str(tmp_path)
    done = survey(tmp_path, "--python", path, "--no-store", timeout=120)
    line = one_line_error(done)
    assert "--python" in line and path in line


@pytest.mark.parametrize("option", ["-o", "--census", "--json", "--store"])
@pytest.mark.parametrize("where", ["directory", "readonly"])
def test_unwritable_outputs_are_refused_before_the_survey_runs(tmp_path, option, where):
    if where == "directory":
        target = tmp_path / "a-dir"
        target.mkdir()
        if option == "--store":
            target = tmp_path / "a-file"
            target.write_text("not a folder\n")
    else:
        if os.geteuid() == 0 and option != "--store":
            # root writes through any permission bit: a read-only place root cannot write
            # is a read-only file system; /proc/sys is one everywhere.
            target = "/proc/sys/flagos-doctor/out"
        else:
            folder = tmp_path / "ro"
            folder.mkdir()
            folder.chmod(0o500)
            target = folder / "sub" / "out"
            if os.geteuid() == 0:
                target = "/proc/sys/flagos-doctor-store"
    args = {"-o": str(tmp_path / "r.json"), "--store": str(tmp_path / "store")}
    args[option] = str(target)
    args = ["--stack", "demo", "--ops", "abs", *[item for pair in args.items() for item in pair]]
    done = survey(tmp_path, *args, timeout=120)
    line = one_line_error(done)
    assert str(target) in line and {"-o": "--output"}.get(option, option) in line
    assert not (tmp_path / "r.json").exists()  # nothing ran
    assert not (tmp_path / "r.json.journal").exists()


def test_compare_markdown_into_a_directory_is_refused(tmp_path):
    done = run_cli("survey", "--compare", "a.json", "b.json", "--markdown", str(tmp_path), cwd=str(tmp_path), timeout=120)
    line = one_line_error(done)
    assert "--markdown" in line and str(tmp_path) in line


@pytest.mark.parametrize("args, needle", [
    (["--ops", ""], "--ops"),
    (["--ops", " , "], "--ops"),
    (["--devices", "garbage"], "--devices"),
    (["--devices", "0,,x"], "--devices"),
])
def test_empty_ops_and_garbage_devices(tmp_path, args, needle):
    done = survey(tmp_path, "--stack", "demo", "--no-store", *args, timeout=120)
    line = one_line_error(done)
    assert needle in line
    assert not os.listdir(tmp_path)


def test_deeply_nested_json_is_bad_input(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    done = run_cli("survey", "--compare", str(path), str(path), cwd=str(tmp_path), timeout=120)
    line = one_line_error(done)
    assert str(path) in line and "nested" in line


def test_enospc_while_writing_is_a_clean_error_and_keeps_the_results(tmp_path):
    """--json - into /dev/full: a real ENOSPC. One line, and the results file and the store
    still hold the whole survey."""
    (tmp_path / "two.conf").write_text("abs = flagos_python\nneg = flagos_python\n")
    with open("/dev/full", "w") as full:
        done = subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--conf", "two.conf",
                               "-o", "r.json", "--store", str(tmp_path / "store"), "--json", "-", "-q"],
                              stdout=full, stderr=subprocess.PIPE, text=True, cwd=str(tmp_path), timeout=300)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "No space left on device" in lines[0] and "stdout" in lines[0]
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["complete"] is True
    assert doc["overloads"]["abs"]["verdict"] == "STRICT" and doc["overloads"]["neg"]["verdict"] == "STRICT"
    assert list((tmp_path / "store").rglob("*.json"))


def test_atomic_write_failure_names_the_file_and_keeps_the_old_version(tmp_path):
    path = tmp_path / "doc.json"
    files.write_json(path, {"schema": "x/1", "n": 1})
    if os.geteuid() != 0:
        tmp_path.chmod(0o500)
        try:
            with pytest.raises(BadInput, match="cannot write") as caught:
                files.write_json(path, {"schema": "x/1", "n": 2})
            assert str(path) in str(caught.value)
        finally:
            tmp_path.chmod(0o700)
    with pytest.raises(BadInput, match="cannot write"):
        files.write_json("/proc/sys/flagos-doctor.json", {"n": 2})
    assert json.loads(path.read_text())["n"] == 1


# -- results files read back -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A complete survey of two demo overloads: (folder, results path)."""
    tmp = tmp_path_factory.mktemp("small")
    (tmp / "two.conf").write_text("abs = flagos_python\nneg = flagos_python\n")
    done = survey(tmp, "--stack", "demo", "--conf", "two.conf", "--no-store", "-o", "r.json")
    assert done.returncode == 0, done.stderr
    return tmp, tmp / "r.json"


@pytest.mark.parametrize("damage, field", [
    (lambda d: d.update(schema="flagos-doctor/survey/2"), "schema"),
    (lambda d: d["overloads"]["abs"].update(verdict=3), "overloads.abs.verdict"),
    (lambda d: d["overloads"]["abs"].update(verdict="GREAT"), "overloads.abs.verdict"),
    (lambda d: d["overloads"]["abs"].update(cases="PASS"), "overloads.abs.cases"),
    (lambda d: d["overloads"]["abs"].update(cases={"2d-f32": "PASS"}), "overloads.abs.cases"),
    (lambda d: d["overloads"]["abs"]["cases"][0].pop("status"), "overloads.abs.cases[0].status"),
    (lambda d: d["overloads"].update(neg=["STRICT"]), "overloads.neg"),
])
def test_damaged_results_files_are_refused_naming_the_field(small_run, tmp_path, damage, field):
    _, path = small_run
    doc = json.loads(path.read_text())
    damage(doc)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(doc))
    for args in (["--compare", str(path), str(bad)], ["--stack", "demo", "--conf", str(path.parent / "two.conf"), "--no-store", "-o", str(bad)]):
        done = survey(tmp_path, *args, timeout=120)
        line = one_line_error(done)
        assert str(bad) in line and f"'{field}'" in line, line
    if "status" not in field:
        return  # one report is enough: it reads through the same check
    # The report never stops for a piece it cannot use: it says why, naming the field.
    done = run_cli("report", "--survey", str(bad), "--markdown", str(tmp_path / "r.md"), cwd=str(tmp_path), timeout=300)
    assert f"'{field}'" in done.stderr and "Traceback" not in done.stderr


def test_a_census_digest_in_a_file_is_never_trusted(small_run, tmp_path):
    """B lost a case's PASS but kept A's census_sha256: the comparison recomputes both
    digests, says "no" and names the regression."""
    _, path = small_run
    a = json.loads(path.read_text())
    b = json.loads(path.read_text())
    b["overloads"]["abs"]["cases"][0]["status"] = "WRONG"
    from flagos_doctor.results import verdicts  # the verdicts and summary of B's cases: a reader refuses others

    for entry in b["overloads"].values():
        entry["verdict"] = verdicts.verdict(entry["cases"]) if entry["verdict"] != "PENDING" else "PENDING"
    b["summary"] = {**b["summary"], **verdicts.summarize(b["routes"], {
        name: {"cases": entry["cases"]} for name, entry in b["overloads"].items() if entry["verdict"] != "PENDING"})}
    (tmp_path / "b.json").write_text(json.dumps(b))
    done = survey(tmp_path, "--compare", str(path), "b.json", "--json", "cmp.json", "-q", timeout=120)
    assert done.returncode == 1, done.stderr
    comparison = json.loads((tmp_path / "cmp.json").read_text())
    assert comparison["census_identical"] is False and comparison["regressions"] == 1
    assert comparison["census_sha256"]["a"] == a["census_sha256"] != comparison["census_sha256"]["b"]


# -- concurrency and processes ---------------------------------------------------------------------


HANG_ON_IMPORT = "import time\ntime.sleep(3600)\ndef setup():\n    return 'cpu'\n"


def _wait_for(predicate, what, limit=300):
    # A bound for a broken run only: a slow machine waits longer, never fails sooner.
    deadline = time.monotonic() + limit
    while not predicate():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.1)


def test_a_second_writer_of_one_results_file_is_refused_naming_the_holder(tmp_path):
    (tmp_path / "hangstack.py").write_text(HANG_ON_IMPORT)
    (tmp_path / "two.conf").write_text("abs = flagos_python\nneg = flagos_python\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT))}
    first = subprocess.Popen([sys.executable, "-m", "flagos_doctor", "survey", "--stack", "hangstack", "--conf", "two.conf",
                              "--no-store", "-o", "r.json", "-q"], cwd=str(tmp_path), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        lock_file = tmp_path / "r.json.lock"
        _wait_for(lambda: lock_file.exists() and f"pid {first.pid} " in lock_file.read_text(), "the first survey's lock")
        done = survey(tmp_path, "--stack", "demo", "--conf", "two.conf", "--ops", "abs", "--no-store", "-o", "r.json",
                      env={"PYTHONPATH": env["PYTHONPATH"]}, timeout=120)
        line = one_line_error(done)
        assert "r.json" in line and f"pid {first.pid} " in line and "--output" in line
    finally:
        first.kill()  # SIGKILL: the kernel drops its lock
        first.wait()
    done = survey(tmp_path, "--stack", "demo", "--conf", "two.conf", "--no-store", "-o", "r.json", timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "r.json").read_text())["complete"] is True
    assert not (tmp_path / "r.json.lock").exists()


def test_a_stack_that_hangs_on_import_honours_the_start_timeout(tmp_path):
    (tmp_path / "hangstack.py").write_text(HANG_ON_IMPORT)
    (tmp_path / "two.conf").write_text("abs = flagos_python\nneg = flagos_python\n")
    done = survey(tmp_path, "--stack", "hangstack", "--conf", "two.conf", "--no-store", "--start-timeout", "3", "-q",
                  env={"PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT))}, timeout=300)
    line = one_line_error(done, 1)
    assert "did not start within 3s" in line


FORK_THEN_SEGFAULT = """
import ctypes, os, time
import flagos_doctor.demo, torch
lib = torch.library.Library("aten", "IMPL")
def neg(x):
    pid = os.fork()
    if pid == 0:  # the grandchild: holds the worker's record pipe open for an hour
        time.sleep(3600)
        os._exit(0)
    with open(os.environ["GRANDCHILDREN"], "a") as handle:
        handle.write(f"{pid}\\n")
    ctypes.string_at(0)
lib.impl("neg", neg, "PrivateUse1")
def setup():
    return "flagos"
"""


def test_a_kernel_that_forks_then_segfaults_is_a_crash_not_a_timeout(tmp_path):
    (tmp_path / "forkstack.py").write_text(FORK_THEN_SEGFAULT)
    (tmp_path / "neg.conf").write_text("neg = flagos_python\n")
    grandchildren = tmp_path / "grandchildren.txt"
    env = {"PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT)), "GRANDCHILDREN": str(grandchildren)}
    # Waiting for the pipe's end would record TIMEOUT after 120 s a case, and this test
    # would run out of its own time; the worker's death is seen when it happens.
    done = survey(tmp_path, "--stack", "forkstack", "--conf", "neg.conf", "--no-store", "-o", "r.json",
                  "--timeout", "120", "--tasks", "overloads", "--repeats", "0", "--baseline", "none", env=env, timeout=500)
    assert done.returncode == 1, done.stderr  # a CRASH is a finding: exit 1
    cases = json.loads((tmp_path / "r.json").read_text())["overloads"]["neg"]["cases"]
    crashed = [c for c in cases if c["status"] == "CRASH"]
    assert crashed and all(c.get("signal") == "SIGSEGV" for c in crashed), cases
    assert not [c for c in cases if c["status"] == "TIMEOUT"], cases
    pids = [int(line) for line in grandchildren.read_text().split()]
    assert len(pids) == len(crashed)
    _wait_for(lambda: not any(alive(pid) for pid in pids), "the grandchildren to be killed with their group", 60)


DETACH_THEN_HANG = """
import os, subprocess, time
import flagos_doctor.demo, torch
lib = torch.library.Library("aten", "IMPL")
def neg(x):
    # A secret printed (the capture holds it raw), a detached process (its own session: the
    # group kill cannot reach it), then a hang.
    print("token", os.environ["MY_API_TOKEN"], flush=True)
    os.write(2, f"token {os.environ['MY_API_TOKEN']}\\n".encode())
    child = subprocess.Popen(["sleep", "3600"], start_new_session=True)
    with open(os.environ["DETACHED"], "w") as handle:
        handle.write(f"{child.pid}\\n")
    time.sleep(3600)
lib.impl("neg", neg, "PrivateUse1")
def setup():
    return "flagos"
"""


def _files_holding(root, text: bytes) -> list[str]:
    """The files under ``root`` whose bytes hold ``text``."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as handle:
                    if text in handle.read():
                        found.append(path)
            except OSError:
                continue
    return found


def test_what_a_killed_survey_left_behind_is_cleaned_at_the_next_start(tmp_path):
    (tmp_path / "detachstack.py").write_text(DETACH_THEN_HANG)
    (tmp_path / "neg.conf").write_text("neg = flagos_python\n")
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    detached = tmp_path / "detached.txt"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT)), "TMPDIR": str(scratch_root),
           "DETACHED": str(detached), "MY_API_TOKEN": "tok-of-the-capture-9x7"}
    first = subprocess.Popen([sys.executable, "-m", "flagos_doctor", "survey", "--stack", "detachstack", "--conf", "neg.conf",
                              "--no-store", "-o", "r.json", "-q"], cwd=str(tmp_path), env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_for(lambda: detached.exists() and detached.read_text().endswith("\n"), "the detached process")
    assert not _files_holding(scratch_root, b"tok-of-the-capture-9x7")  # while the survey runs
    first.kill()
    first.wait()
    assert not _files_holding(scratch_root, b"tok-of-the-capture-9x7")  # and after its SIGKILL
    pid = int(detached.read_text())
    try:
        left = [name for name in os.listdir(scratch_root) if name.startswith("flagos-survey-")]
        # what kill -9 leaves: the pool's folder, and those of the workers it had started ahead,
        # each owned by the killed survey
        assert alive(pid) and len(left) >= 1
        assert {(scratch_root / name / "owner").read_text().split()[0] for name in left} == {str(first.pid)}
        done = subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--conf", "neg.conf",
                               "--no-store", "-o", "again.json", "-q"], cwd=str(tmp_path), env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        _wait_for(lambda: not alive(pid), "the detached process to be killed", 60)
    finally:
        if alive(pid):  # a failed run must not leave the test's own sleeper behind
            os.kill(pid, 9)
    assert not [name for name in os.listdir(scratch_root) if name.startswith("flagos-survey-")]
    run = json.loads((tmp_path / "again.json").read_text())["provenance"]["runs"][-1]
    # The detached sleeper at least (checked dead above); any other orphan of the killed
    # survey that still carried the mark (a helper child it had started) goes too.
    assert run["leftovers_cleaned"]["folders"] == len(left) and run["leftovers_cleaned"]["processes"] >= 1


def test_a_large_route_set_rewrites_the_results_file_a_bounded_number_of_times(tmp_path):
    """400 routes (399 not in torch: NO_SCHEMA, cheap): the journal takes every event and
    the results file is compacted about journal.COMPACTIONS times, not once per overload."""
    from flagos_doctor.results import resultsfile as journal

    count = 400
    (tmp_path / "many.conf").write_text("abs = flagos_python\n" + "".join(f"no_such_op_{i} = flagos_python\n" for i in range(count - 1)))
    done = survey(tmp_path, "--stack", "demo", "--conf", "many.conf", "--no-store", "-o", "r.json", "-q", "--census", "c.txt")
    assert done.returncode == 0, done.stderr
    doc = json.loads((tmp_path / "r.json").read_text())
    assert doc["complete"] and doc["summary"]["verdicts"] == {"STRICT": 1, "NO_SCHEMA": count - 1}
    assert 1 <= doc["provenance"]["runs"][-1]["compactions"] <= journal.COMPACTIONS + 1
    assert len((tmp_path / "c.txt").read_text().splitlines()) == count - 1 + len(doc["overloads"]["abs"]["cases"])
    assert not (tmp_path / "r.json.journal").exists()


@pytest.mark.parametrize("command, option", [("survey", "--spec"), ("probe", "--watch-file")])
def test_yaml_inputs_nested_or_special(tmp_path, command, option):
    deep = tmp_path / "deep.yaml"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    for path, needle in ((str(deep), "nested too deeply"), ("/dev/zero", "character device")):
        done = run_cli(command, option, path, *(["--no-store"] if command == "survey" else ["--no-exercise"]),
                       cwd=str(tmp_path), timeout=120)
        line = one_line_error(done)
        assert path in line and needle in line, line


@pytest.mark.parametrize("command", ["probe", "report"])
@pytest.mark.parametrize("option", ["--json", "--markdown"])
def test_probe_and_report_outputs_into_a_directory_are_refused_before_the_child_runs(tmp_path, command, option):
    done = run_cli(command, option, str(tmp_path), *(["--stack", "demo"] if command == "probe" else []), cwd=str(tmp_path), timeout=120)
    line = one_line_error(done)
    assert option in line and str(tmp_path) in line and "directory" in line
