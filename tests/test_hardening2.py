"""Hardening, second round (issue 27): what a new user and a hostile tester found.

Secrets are planted where they arrive for real (the environment, a path, a conf line, a
stack's error and its stderr, a variable the stack sets in ``setup()``, a JUnit message, a
crash traceback); then every file each command wrote and both of its streams are searched
for them. Bad input runs the real CLI on real files: FIFOs (``os.mkfifo``), ``/dev/zero``,
``/proc/self/environ``, real symlinks (a dangling one too), a real full tmpfs (else
``ulimit -f``), YAML anchors. A stack that forges PASS records writes them to the real
channel. No assertion depends on the machine's speed.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys

import pytest

from conftest import FAULT_ENV_WITHOUT_GEMS, FIXTURES, REPO_ROOT, run_cli, small_tmpfs, unmount
from flagos_doctor import crashlog, lock, redact

FAULT_CONF = os.path.join(FIXTURES, "fault.conf")
ENV_TOKEN = "envtoken-7f3a9c1e55"  # an environment secret (HF_TOKEN)
SETUP_KEY = "setupkey-2b8d4e6f19"  # a secret only the stack's setup() knows (MY_API_KEY)
URL_PASSWORD = "url/pw-9c4e1a7b"  # a URL's password holding a "/"
BEARER = "bearer0token0d41c9e2ab"
DSN_PASSWORD = "dsnpw-5e7c2a8d"
PATH_PASSWORD = "pathpw-3d9a1f0c"  # a URL's password inside a folder's name
ALL = (ENV_TOKEN, SETUP_KEY, URL_PASSWORD, BEARER, DSN_PASSWORD, PATH_PASSWORD)


def one_line_error(done, code=2) -> str:
    """The process exited ``code`` with exactly one line on stderr and no traceback; the line."""
    lines = done.stderr.strip().splitlines()
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    return lines[0]


def no_secret_anywhere(folder, *streams: str) -> int:
    """Assert no planted secret is in any file under ``folder`` nor in ``streams``; the
    number of files searched."""
    searched = 0
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as handle:
                data = handle.read().decode("utf-8", "replace")
            searched += 1
            for secret in ALL:
                assert secret not in data, (secret, path)
    for stream in streams:
        for secret in ALL:
            assert secret not in stream, (secret, stream[-3000:])
    return searched


# -- the scrubber -----------------------------------------------------------------------------


def test_the_scrubber_masks_every_shape_it_promises():
    text = (f"clone https://bot:{URL_PASSWORD}@git.example/x.git; curl -H 'Authorization: Bearer {BEARER}' "
            f"host=db password={DSN_PASSWORD} dbname=x MY_API_TOKEN={ENV_TOKEN} Authorization: Basic {BEARER}")
    clean = redact.mask_url_passwords(text)
    for secret in (URL_PASSWORD, BEARER, DSN_PASSWORD, ENV_TOKEN):
        assert secret not in clean, (secret, clean)
    assert "https://bot:***@git.example/x.git" in clean and "Bearer <redacted>" in clean
    # Ordinary words stay: "basic" and "token" alone are no credentials, a path no URL.
    plain = "3 basic profiles; token counts; see /usr/lib:/opt/lib a@b"
    assert redact.mask_url_passwords(plain) == plain
    # A value learnt from a child is hidden from then on, in keys too (a profile named by it).
    redact.remember([SETUP_KEY])
    assert redact.scrub_environ({SETUP_KEY: f"x {SETUP_KEY} y"}) == {"<redacted>": "x <redacted> y"}


def test_a_crash_logs_traceback_is_scrubbed(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("HF_TOKEN", ENV_TOKEN)
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # TMPDIR read again
    try:
        token = os.environ["HF_TOKEN"]  # a frame's source line and the message quote it
        raise RuntimeError(f"upload to https://bot:{URL_PASSWORD}@hub.example failed with {token}")
    except RuntimeError:
        path, why = crashlog.save_traceback()
    assert path and path.startswith(str(tmp_path)), why
    with open(path, encoding="utf-8") as handle:
        text = handle.read()
    assert "RuntimeError: upload to https://bot:***@hub.example failed with <redacted>" in text
    no_secret_anywhere(tmp_path)


# -- every sink of a survey -------------------------------------------------------------------

KEY_STACK = f'''
import ctypes, os
import flagos_doctor.demo, torch
from flagos_doctor.demo import kernels as k
lib = torch.library.Library("aten", "IMPL")

def neg(x):
    os.write(2, ("stderr: " + os.environ["MY_API_KEY"] + "\\n").encode())
    raise RuntimeError("auth failed: key " + os.environ["MY_API_KEY"] + " for https://bot:{URL_PASSWORD}@hub.example "
                       "Authorization: Bearer {BEARER} host=db password={DSN_PASSWORD}")

def trunc(x):
    import faulthandler
    faulthandler.disable()  # the stderr tail then ends with the line below
    os.write(2, ("about to crash with " + os.environ["MY_API_KEY"] + "\\n").encode())
    ctypes.string_at(0)

lib.impl("neg", neg, "PrivateUse1")
lib.impl("trunc", trunc, "PrivateUse1")

def setup():
    os.environ["MY_API_KEY"] = "{SETUP_KEY}"  # the parent never had it
    return "flagos"
'''


def test_secrets_reach_no_file_store_stream_or_journal(tmp_path):
    (tmp_path / "keystack.py").write_text(KEY_STACK)
    # The conf's path holds a URL's credentials, a password= and the environment token.
    folder = tmp_path / "https:" / f"bot:{PATH_PASSWORD}@host" / f"password={DSN_PASSWORD}" / ENV_TOKEN
    folder.mkdir(parents=True)
    conf = folder / "keys.conf"
    conf.write_text("neg = flagos_python\ntrunc = flagos_python\nabs = flagos_python\n")
    # So do the results file's and the store's: the "results:" and "filed in the store:" lines quote them.
    out = tmp_path / "out" / "s3:" / f"bot:{PATH_PASSWORD}@bucket" / ENV_TOKEN
    out.mkdir(parents=True)
    env = {"PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT)), "HF_TOKEN": ENV_TOKEN}
    done = run_cli("survey", "--stack", "keystack", "--conf", str(conf), "--store", str(out / "store"), "-o", "r.json",
                   "--json", "copy.json", "--census", "c.txt", "--repeats", "0", "--baseline", "none",
                   env=env, cwd=str(out), timeout=300)
    assert done.returncode == 1, done.stderr  # trunc crashed: a finding
    doc = json.loads((out / "r.json").read_text())
    neg = doc["overloads"]["neg"]["cases"]
    assert any("auth failed: key <redacted>" in case["detail"] for case in neg), neg
    crashed = [case for case in doc["overloads"]["trunc"]["cases"] if case["status"] == "CRASH"]
    assert crashed and any("about to crash with <redacted>" in case.get("stderr_tail", "") for case in crashed)
    assert list((out / "store").rglob("*.json")), "the run was filed in the store"
    assert "results: " in done.stdout and "filed in the store: " in done.stdout
    assert no_secret_anywhere(out, done.stdout, done.stderr) >= 4
    # A resumed run (everything finished: nothing run) prints it all again, still clean.
    again = run_cli("survey", "--stack", "keystack", "--conf", str(conf), "--no-store", "-o", "r.json",
                    "--repeats", "0", "--baseline", "none", env=env, cwd=str(out), timeout=300)
    assert again.returncode == 1 and "nothing run" in again.stderr
    no_secret_anywhere(out, again.stdout, again.stderr)


def test_a_resumed_partial_case_named_by_a_secret_is_rewritten_scrubbed(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"profiles:\n  - {{name: p-{ENV_TOKEN}, shape: [4], dtype: float32}}\n"
                    "  - {name: plain, shape: [3], dtype: float32}\n")
    env = {"HF_TOKEN": ENV_TOKEN}
    first = run_cli("survey", "--spec", str(spec), "--ops", "abs", "--no-store", "-o", "r.json", env=env,
                    cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr
    # An earlier version's results file held the profile's name as it was: resumed, it is rewritten.
    doc = json.loads((tmp_path / "r.json").read_text())
    doc["overloads"]["abs"] = {"verdict": "PENDING", "cases": [], "profiles": [f"p-{ENV_TOKEN}", "plain"],
                               "partial_cases": [{"profile": f"p-{ENV_TOKEN}", "status": "PASS", "route": "kernel"}]}
    from flagos_doctor.results import verdicts  # its summary says so too: a reader refuses one its cases do not give

    doc["summary"] = {**doc["summary"], **verdicts.summarize(doc["routes"], {})}
    (tmp_path / "r.json").write_text(json.dumps(doc))
    again = run_cli("survey", "--spec", str(spec), "--ops", "abs", "--no-store", "-o", "r.json", env=env,
                    cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr
    for name in os.listdir(tmp_path):
        if name.startswith("r.json"):
            assert ENV_TOKEN not in (tmp_path / name).read_text(), name
    assert ENV_TOKEN not in again.stdout + again.stderr


def test_error_lines_quote_no_secret(tmp_path):
    env = {"HF_TOKEN": ENV_TOKEN}
    (tmp_path / "bad.conf").write_text(f"abs = flagos_python\nMY_API_TOKEN={ENV_TOKEN}\n")
    url = f"https://bot:{URL_PASSWORD}@h.example/x"
    results = tmp_path / "r.json"
    results.write_text(json.dumps({"schema": url, "overloads": {}}))
    watch = tmp_path / "watch.yaml"
    watch.write_text(f"probes: ['{url}']\n")
    for args in (
        ("survey", "--conf", str(tmp_path / "bad.conf"), "--no-store"),
        ("survey", "--conf", str(tmp_path / ENV_TOKEN / "missing.conf"), "--no-store"),
        ("survey", "--compare", str(results), str(results)),
        ("survey", "--hints", str(results), "--no-store"),
        ("survey", "--python", f"/nowhere/{url}", "--no-store"),
        ("probe", "--watch-file", str(watch), "--no-exercise"),
        ("report", "--survey", str(results)),
        ("survey", "--stack", "demo", "--timeout", f"Authorization: Bearer {BEARER}"),
    ):
        done = run_cli(*args, env=env, cwd=str(tmp_path), timeout=120)
        line = one_line_error(done)
        for secret in ALL:
            assert secret not in line, (args, line)


def test_suite_flaky_and_junit_messages_keep_secrets_out(tmp_path):
    env = {"HF_TOKEN": ENV_TOKEN}
    given, tmp_path = tmp_path, tmp_path / "out"  # the planted inputs apart from what the command writes
    tmp_path.mkdir()
    for name, outcome in (("a.xml", ""), ("b.xml", f"<failure message='push to https://bot:{URL_PASSWORD}@h.example "
                                                    f"with {ENV_TOKEN}'>Authorization: Bearer {BEARER}</failure>")):
        (given / name).write_text(
            "<testsuites><testsuite name='pytest'>"
            f"<testcase classname='tests.test_x' name='test_x[red]' file='tests/test_x.py'>{outcome}</testcase>"
            "<testcase classname='tests.test_x' name='test_x[blue]' file='tests/test_x.py'/>"
            "</testsuite></testsuites>")
    done = run_cli("suite", "--compare", str(given / "a.xml"), str(given / "b.xml"), "--json", "s.json", "--markdown", "s.md",
                   "--store", str(tmp_path / "store"), env=env, cwd=str(tmp_path))
    assert done.returncode == 1, done.stderr  # test_x[red] regressed
    # The terminal keeps the [param] ids (rich read them as markup and dropped them).
    assert "test_x[red]" in done.stdout and "tests/test_x.py::test_x[red]" in done.stdout
    no_secret_anywhere(tmp_path, done.stdout, done.stderr)
    flaky = run_cli("suite", "--compare", str(given / "a.xml"), str(given / "b.xml"), "--flaky", "/proc/self/environ",
                    env=env, cwd=str(tmp_path))
    line = one_line_error(flaky)
    assert "/proc" in line and ENV_TOKEN not in flaky.stdout + flaky.stderr


# -- the channel: only the harness speaks on it ----------------------------------------------

FORGE_STACK = '''
import json, os
import flagos_doctor.demo, torch
from flagos_doctor.survey.spec import load_spec
lib = torch.library.Library("aten", "IMPL")

def neg(x):
    # What a hostile stack can do: find the record pipe and write the harness's records.
    write_fd = int(os.environ["FLAGOS_DOCTOR_CHANNEL"].split(",")[1])
    for profile in load_spec(None).profiles:
        record = {"record": "case", "overload": "neg", "profile": profile.name, "status": "PASS",
                  "route": "kernel", "detail": "", "seconds": 0.0}
        os.write(write_fd, (json.dumps(record) + "\\n").encode())
    os.write(write_fd, b'{"record": "done", "overload": "neg"}\\n')
    raise RuntimeError("forgestack: neg is broken")

lib.impl("neg", neg, "PrivateUse1")

def setup():
    return "flagos"
'''


def test_a_stack_that_forges_pass_records_does_not_get_pass(tmp_path):
    (tmp_path / "forgestack.py").write_text(FORGE_STACK)
    (tmp_path / "neg.conf").write_text("neg = flagos_python\n")
    env = {"PYTHONPATH": os.pathsep.join((str(tmp_path), REPO_ROOT))}
    done = run_cli("survey", "--stack", "forgestack", "--conf", "neg.conf", "--no-store", "-q", "-o", "r.json",
                   "--repeats", "0", "--baseline", "none", env=env, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    cases = json.loads((tmp_path / "r.json").read_text())["overloads"]["neg"]["cases"]
    ran = [case for case in cases if case["status"] != "INVALID_CASE"]
    assert ran and all(case["status"] == "ERROR" and "forgestack: neg is broken" in case["detail"] for case in ran), ran


# -- bad input: one line, exit 2, before any work ---------------------------------------------


@pytest.mark.parametrize("args, needle", [
    (("survey", "--timeout", "1e308"), "more than a week"),
    (("survey", "--start-timeout", "1e308"), "more than a week"),
    (("probe", "--timeout", "1e308"), "more than a week"),
    (("survey", "--timeout", "1e-9"), "too short"),
    (("survey", "--repeats", "99999999999"), "more than 100"),
    (("survey", "--repeats", "-1"), "0 or more"),
    (("survey", "--workers", "abc"), "--workers"),
    (("matrix", "x.json", "--max-chars", "100"), "too small"),
    (("matrix", "x.json", "--max-chars", "100000"), "65,536"),
    (("survey", "-o", ""), "--output: is empty"),
    (("survey", "--json", ""), "--json: is empty"),
    (("report", "--json", ""), "--json: is empty"),
    (("survey", "--python", "/bin/ls"), "not a Python interpreter"),
    (("survey", "--python", "/bin/false"), "not a Python interpreter"),
    (("survey", "--no-such-option"), "No such option"),
])
def test_usage_errors_are_one_line(tmp_path, args, needle):
    line = one_line_error(run_cli(*args, cwd=str(tmp_path), timeout=120))
    assert needle in line, line
    assert not list(tmp_path.iterdir()), "nothing written"


@pytest.mark.parametrize("command", ["probe", "survey", "report"])
def test_a_mistyped_stack_gets_one_answer(tmp_path, command):
    line = one_line_error(run_cli(command, "--stack", "demoo", cwd=str(tmp_path), timeout=120))
    assert line == "flagos-doctor: error: --stack: no stack or importable module 'demoo'; stacks: demo, torch_fl, flag_gems, torch"


def test_a_device_typo_is_a_short_line(tmp_path):
    line = one_line_error(run_cli("survey", "--device", "cdua", "--ops", "abs", "--no-store", "-o", "r.json",
                                  cwd=str(tmp_path), timeout=300))
    assert "unknown device 'cdua'" in line and len(line) < 200 and "mkldnn" not in line


SPECS = {
    "mixed keys": "name: x\n1: y\nprofiles: [{name: a, shape: [2], dtype: float32}]\n",
    "list in implementation_defined": ("profiles: [{name: a, shape: [2], dtype: float32}]\n"
                                       "implementation_defined: [{op: abs, reason: r, profiles: [[1]]}]\n"),
    "anchors in implementation_defined": ("profiles: [&p {name: a, shape: [2], dtype: float32}]\n"
                                          "implementation_defined: [{op: abs, reason: r, profiles: [*p]}]\n"),
    "nan tolerance": "profiles: [{name: a, shape: [2], dtype: float32}]\ntolerances: {float32: {atol: .nan, rtol: 0}}\n",
}


@pytest.mark.parametrize("case", sorted(SPECS))
def test_bad_spec_files_are_one_line(tmp_path, case):
    (tmp_path / "spec.yaml").write_text(SPECS[case])
    line = one_line_error(run_cli("survey", "--spec", "spec.yaml", "--no-store", cwd=str(tmp_path), timeout=120))
    assert "spec.yaml" in line


def _billion_laughs(field: str) -> str:
    text = f"{field}:\n  - &a [xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx, xxxxxxxxxx]\n"
    previous = "a"
    for level in range(8):  # 5 * 10**8 strings once expanded
        text += f"  - &b{level} [{', '.join([f'*{previous}'] * 10)}]\n"
        previous = f"b{level}"
    return text


@pytest.mark.parametrize("field", ["probes", "env"])
def test_yaml_anchors_in_a_watch_file_give_a_short_line(tmp_path, field):
    (tmp_path / "watch.yaml").write_text(("probes: [torch.cuda.Stream]\n" if field == "env" else "") + _billion_laughs(field))
    line = one_line_error(run_cli("probe", "--watch-file", "watch.yaml", "--no-exercise", cwd=str(tmp_path), timeout=120))
    assert "watch.yaml" in line and len(line) < 400


@pytest.fixture(scope="module")
def small_results(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("small")
    done = run_cli("survey", "--ops", "abs,neg", "--no-store", "-q", "-o", "r.json", cwd=str(tmp), timeout=300)
    assert done.returncode == 0, done.stderr
    return json.loads((tmp / "r.json").read_text())


@pytest.mark.parametrize("field, value, command", [
    ("summary.verdicts", [], "compare"),
    ("provenance", "a string", "matrix"),
    ("summary.statuses", {"PASS": "many"}, "report"),
    ("provenance.runs", {}, "compare"),
])
def test_results_files_of_the_wrong_shape_are_refused_by_every_reader(small_results, tmp_path, field, value, command):
    doc = json.loads(json.dumps(small_results))
    holder = doc
    *parents, last = field.split(".")
    for part in parents:
        holder = holder[part]
    holder[last] = value
    (tmp_path / "bad.json").write_text(json.dumps(doc))
    args = {"compare": ("survey", "--compare", "bad.json", "bad.json"), "matrix": ("matrix", "bad.json"),
            "report": ("report", "--survey", "bad.json")}[command]
    done = run_cli(*args, cwd=str(tmp_path), timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert f"field '{field}" in lines[0] and "bad.json" in lines[0]
    assert "probing" not in done.stderr  # report refused it before the probe


@pytest.mark.parametrize("kind", ["fifo", "dir", "/dev/zero"])
@pytest.mark.parametrize("command", ["compare", "suite", "matrix", "report"])
def test_special_files_are_not_a_regular_file_everywhere(tmp_path, kind, command):
    if kind == "fifo":
        path = str(tmp_path / "pipe")
        os.mkfifo(path)  # nobody writes: a read would block for ever
    elif kind == "dir":
        path = str(tmp_path / "folder")
        os.mkdir(path)
    else:
        path = kind
    args = {"compare": ("survey", "--compare", path, path), "suite": ("suite", "--compare", path, path),
            "matrix": ("matrix", path), "report": ("report", "--compare", path, path)}[command]
    done = run_cli(*args, "--store", str(tmp_path / "store"), cwd=str(tmp_path), timeout=120)
    line = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(line) == 1, done.stderr
    # matrix reads a folder's results files (matrix surveys/results): an empty one has none.
    said = "a folder without results files" if (kind, command) == ("dir", "matrix") else "not a regular file"
    assert said in line[0] and path in line[0] and "no file and no" not in line[0]


@pytest.mark.parametrize("special", ["fifo", "/dev/zero"])
def test_suite_flaky_refuses_what_is_not_a_regular_file(tmp_path, special):
    (tmp_path / "a.xml").write_text("<testsuite name='p'><testcase classname='t' name='test_a'/></testsuite>")
    if special == "fifo":
        special = str(tmp_path / "pipe")
        os.mkfifo(special)
    line = one_line_error(run_cli("suite", "--compare", "a.xml", "a.xml", "--flaky", special, cwd=str(tmp_path),
                                  timeout=120))
    assert "--flaky" in line and "not a regular file" in line


def test_a_report_refuses_census_and_junit_files_before_probing(tmp_path, small_results):
    (tmp_path / "c.census").write_text("abs\tf32\tPASS\tkernel\n")
    (tmp_path / "j.xml").write_text("<testsuite name='p'><testcase classname='t' name='test_a'/></testsuite>")
    for args in (("--survey", "c.census"), ("--survey", "j.xml"), ("--compare", "c.census", "j.xml")):
        done = run_cli("report", *args, cwd=str(tmp_path), timeout=120)
        assert done.returncode == 2 and "probing" not in done.stderr and "Traceback" not in done.stderr, done.stderr


# -- files: symlinks, locks, a full disk ------------------------------------------------------


def test_output_through_a_dangling_symlink_writes_its_target(tmp_path):
    os.symlink(tmp_path / "elsewhere" / "r.json", tmp_path / "link.json")
    done = run_cli("survey", "--ops", "abs", "--no-store", "-q", "-o", "link.json", cwd=str(tmp_path), timeout=300)
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "elsewhere" / "r.json").read_text())["overloads"]["abs"]["verdict"] == "STRICT"
    assert os.path.islink(tmp_path / "link.json")


def test_a_survey_reaching_a_locked_results_file_through_a_symlink_is_refused(tmp_path):
    real = tmp_path / "real.json"
    os.symlink(real, tmp_path / "other-name.json")
    with lock.hold(str(real)):  # this process writes real.json
        done = run_cli("survey", "--ops", "abs", "--no-store", "-q", "-o", "other-name.json", cwd=str(tmp_path),
                       timeout=300)
    line = one_line_error(done)
    assert "is being written by" in line and f"pid {os.getpid()}" in line
    assert not real.exists()


def test_a_store_on_a_full_disk_is_one_line_and_keeps_the_results(tmp_path):
    (tmp_path / "abs.conf").write_text("abs = flagos_python\n")  # a complete survey: it is filed
    folder = small_tmpfs(tmp_path, "64k", fill=True, name="full")
    try:
        if folder is not None:
            done = run_cli("survey", "--conf", "abs.conf", "-q", "-o", "r.json", "--store", str(folder / "store"),
                           cwd=str(tmp_path), timeout=300)
        else:  # no mount here: every file over 4 KiB is refused to the survey (ulimit -f), the store's too
            def limited():
                signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
                resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))

            done = subprocess.run([sys.executable, "-m", "flagos_doctor", "survey", "--conf", "abs.conf", "-q", "-o",
                                   "r.json", "--store", str(tmp_path / "store")], cwd=str(tmp_path),
                                  capture_output=True, text=True, timeout=300, preexec_fn=limited)
        line = one_line_error(done)
        assert "cannot write" in line
        if folder is not None:
            assert "--store" in line and "No space left" in line
            assert json.loads((tmp_path / "r.json").read_text())["complete"]
    finally:
        unmount(folder)


# -- friction ---------------------------------------------------------------------------------


def test_help_in_a_file_is_whole(tmp_path):
    done = run_cli("survey", "--help")
    assert done.returncode == 0
    text = done.stdout
    # 100 columns in a file (a pager shows them unwrapped): a long line wraps whole words.
    assert max(len(line) for line in text.splitlines()) <= 100
    flat = " ".join(text.replace("\u2502", " ").split())
    assert "flagos-doctor survey --compare 1adbc97 5e0f2aa --repo ~/Torch-FL --build-cmd 'python setup.py build_ext --inplace'" in flat
    for placeholder in ("<str>", "<int>", "<float>", "<list[str]>", "<int range>", "…"):
        assert placeholder not in text, placeholder
    assert all(line == line.rstrip() for line in text.splitlines())
    assert "one per core, as many as memory and the device hold" in flat  # not cut
    assert "<list[str]>" not in run_cli("matrix", "--help").stdout


def test_a_finished_survey_runs_nothing_and_crashes_exit_1(tmp_path):
    args = ("survey", "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,trunc", "--no-store", "-o", "r.json")
    done = run_cli(*args, env=FAULT_ENV_WITHOUT_GEMS, cwd=str(tmp_path), timeout=300)
    assert done.returncode == 1, done.stderr
    assert "crashed or timed out (trunc/1d-f32" in done.stderr
    before = (tmp_path / "r.json").read_bytes()
    again = run_cli(*args, env=FAULT_ENV_WITHOUT_GEMS, cwd=str(tmp_path), timeout=300)
    assert again.returncode == 1 and "nothing run" in again.stderr
    assert "workers:" not in again.stderr  # no worker was started to be sized
    assert (tmp_path / "r.json").read_bytes() == before


def test_matrix_columns_are_named_by_their_files_and_one_run_is_one(small_results, tmp_path):
    for name in ("first.json", "second.json"):
        (tmp_path / name).write_text(json.dumps(small_results))
    done = run_cli("matrix", "first.json", "second.json", "--csv", "-", "-q", "--store", str(tmp_path / "s"),
                   cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    header = done.stdout.splitlines()[0]
    assert "(first.json)" in header and "(second.json)" in header and "#2" not in header
    one = run_cli("matrix", "first.json", "--markdown", "-", "-q", cwd=str(tmp_path))
    assert "1 run" in one.stdout and "1 runs" not in one.stdout


# A report says what it does and what it wrote: tests/test_report.py's
# test_report_says_what_it_does_and_what_it_wrote, on the run its other tests read (the demo
# stack, a survey, --json and --markdown).
