"""Shared test helpers: the repository root, the shared data beside it, running the CLI."""

from __future__ import annotations

import atexit
import glob
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(REPO_ROOT), "shared")
FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
# The fault stack's environment: this checkout's flagos_doctor after the fixtures (an
# installed one elsewhere must not win); flag_gems importable on CPU for its bound kernels.
FAULT_ENV = {
    "PYTHONPATH": os.pathsep.join([FIXTURES, REPO_ROOT]),
    "GEMS_VENDOR": "nvidia",
    "FLAGGEMS_DB_URL": f"sqlite:///{tempfile.gettempdir()}/flagos-doctor-fault-{os.getpid()}.db",
}
#: For surveys of the fault stack that select neither of its flag_gems-bound ops (log1p,
#: expm1): its workers skip flag_gems' import (tests/fixtures/faultstack.py's setup).
FAULT_ENV_WITHOUT_GEMS = {**FAULT_ENV, "FAULTSTACK_GEMS": "0"}
#: For a probe or report whose compile step (a real torch.compile in the probe's child) an
#: assertion reads: the session turns the step off for the rest (below).
PROBE_COMPILE = {"FLAGOS_DOCTOR_PROBE_COMPILE": "1"}


def shell_env() -> dict:
    """This environment as a user's fresh shell has it, for the docs' and the README's
    commands run as written: without the session's ``PYTHONPATH`` and its probe setting."""
    env = dict(os.environ)
    for name in ("PYTHONPATH", *PROBE_COMPILE):
        env.pop(name, None)
    return env


CONFS = os.path.join(SHARED, "torch-fl-confs")
#: Two committed H200 surveys of one conf at torch_fl 5c9d6f4 and ceb4821: compared in that
#: order four overloads are fixed, the other way round four regress.
H6_SURVEYS = tuple(os.path.join(REPO_ROOT, "surveys", "results", f"torch_fl-{commit}-flag_gems-5.0.2-h200-harness6.json")
                   for commit in ("5c9d6f4", "ceb4821"))


def h6_surveys() -> tuple[dict, dict]:
    """The :data:`H6_SURVEYS` as documents (5c9d6f4, ceb4821)."""
    import json

    found = []
    for path in H6_SURVEYS:
        with open(path, encoding="utf-8") as handle:
            found.append(json.load(handle))
    return found[0], found[1]


def in_front(entry: str, paths: str | None) -> str:
    """``paths`` (a ``PATH``-like list) with ``entry`` in front, once."""
    rest = [p for p in paths.split(os.pathsep) if p != entry] if paths else []
    return os.pathsep.join([entry, *rest])


def checkout_first(pythonpath: str | None) -> str:
    """``pythonpath`` with this checkout in front (once): the flagos_doctor a child imports
    is this checkout's, whatever is installed."""
    return in_front(REPO_ROOT, pythonpath)


def alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, exited but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


# Every child a test starts with this environment: tests that start ``python -m
# flagos_doctor`` themselves (a pipe to /dev/full, taskset, a Popen to kill) found an
# editable install of another clone, or none. run_cli does the same for the env it is given.
os.environ["PYTHONPATH"] = checkout_first(os.environ.get("PYTHONPATH"))
# A test's ``python`` and ``flagos-doctor`` are the interpreter running the tests and its
# entry point, wherever the clone lives: through a version manager's shim (pyenv's) the
# interpreter follows the folder's ``.python-version``, and each call costs 35 shell processes.
os.environ["PATH"] = in_front(os.path.dirname(sys.executable), os.environ.get("PATH"))
# The tests' outputs are the same wherever they run: on a GitHub runner the compare's GitHub
# mode would otherwise add annotations to every pinned stdout (test_compare_github.py turns it on).
for _github in ("GITHUB_ACTIONS", "GITHUB_STEP_SUMMARY"):
    os.environ.pop(_github, None)
# Nor on the launcher: pytest-xdist sets COLUMNS=80 in its workers, which a child's --help
# (rendered to that width) then inherits, and a plain pytest does not.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
# A run a test starts without --store files its results in this process's own store: never
# the user's (~/.local/share/flagos-doctor/results), nor another xdist worker's, so no test
# reads what another test, in another order or process, left there.
TEST_STORE_PREFIX = "flagos-doctor-test-store-"
#: The pid of the pytest that made the run's first store: its xdist workers are its children.
TEST_RUN_VAR = "FLAGOS_DOCTOR_TEST_RUN"


#: The store came from the run: this is one of its xdist workers, or a pytest a test started.
_INHERITED = os.path.basename(os.environ.get("FLAGOS_DOCTOR_STORE", "")).startswith(TEST_STORE_PREFIX)
#: This is a pytest a test started (explain's fixtures under tests/fixtures load this file
#: too): it keeps the store it inherited (a write of a FLAGOS_ variable is an event explain
#: records), says no progress of its own and keeps its files' order. An xdist worker of the
#: run inherits the run's store too, but is not nested: the run started it.
NESTED = _INHERITED and not (os.environ.get("PYTEST_XDIST_WORKER")
                             and os.environ.get(TEST_RUN_VAR) == str(os.getppid()))
if not NESTED:
    if not _INHERITED:  # the run itself, not one of its workers
        os.environ[TEST_RUN_VAR] = str(os.getpid())
    os.environ["FLAGOS_DOCTOR_STORE"] = tempfile.mkdtemp(prefix=TEST_STORE_PREFIX)

    def _remove_store(store=os.environ["FLAGOS_DOCTOR_STORE"], pid=os.getpid()):
        if os.getpid() == pid:  # not in a fork of this process that exits through atexit
            shutil.rmtree(store, ignore_errors=True)

    atexit.register(_remove_store)
    # The fixture stacks (module stacks, which say nothing of their imports) import torch
    # first, as the demo does: their survey workers are forked after it, as a user's may be
    # (survey/forkserver.py). torch_fl keeps spawning (its own choice); the spawned path is
    # held by its tests and by each FLAGOS_DOCTOR_FORK=0 arm in tests/test_forkserver.py.
    os.environ.setdefault("FLAGOS_DOCTOR_FORK", "torch")
    # The probe's compile step (a dynamo import and a compile: 2 CPU-s in each probe, report
    # and explain's report) runs where a test reads it (PROBE_COMPILE), and in the docs' and
    # the README's commands, run as written (tests/test_doc_blocks.py, tests/test_readme.py).
    os.environ.setdefault("FLAGOS_DOCTOR_PROBE_COMPILE", "0")


def wrapped_python(folder, cases: str) -> str:
    """A ``--python`` that runs the shell ``cases`` (arms of ``case "$*" in``, matched against
    the arguments it is started with: ``*child.worker*`` a survey worker's start) before it
    becomes this interpreter; its path. How a test holds or slows a child's start for real."""
    path = os.path.join(str(folder), "python")
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(f'#!/bin/sh\ncase "$*" in\n{cases}\nesac\nexec {sys.executable} "$@"\n')
    os.chmod(path, 0o755)
    return path


def run_cli(*args, env=None, cwd=None, timeout=600, input=None):
    """Run ``python -m flagos_doctor ARGS`` in a real subprocess; return CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    # The CLI under test is this checkout's, whatever is installed: without this, a child
    # started in a temporary folder imported an editable install of another clone.
    full_env["PYTHONPATH"] = checkout_first(full_env.get("PYTHONPATH"))
    # Without input, stdin is empty, not the runner's: a terminal there set --help's width
    # (80 columns under one CI launcher, 100 under another).
    feed = {"input": input} if input is not None else {"stdin": subprocess.DEVNULL}
    return subprocess.run(
        [sys.executable, "-m", "flagos_doctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        **feed,
    )


def explain_knobs(folder, program: str, *options, env=None):
    """``explain --watch knobs.flag --json`` of ``program``, written as ``prog.py`` in ``folder``
    beside a ``knobs.py`` (``flag = 0``): a module attribute as the watched probe, so no stack
    is imported; (its document, the CompletedProcess)."""
    import json

    (folder / "knobs.py").write_text("flag = 0\n")
    (folder / "prog.py").write_text(program)
    out = folder / "why.json"
    result = run_cli("explain", "--quiet", "--watch", "knobs.flag", "--json", str(out), *options, "--",
                     sys.executable, "prog.py", cwd=folder, env=env)
    return json.loads(out.read_text()), result


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def flag_gems_env(tmp_path):
    """Environment in which flag_gems imports on a CPU-only machine."""
    return {"GEMS_VENDOR": "nvidia", "FLAGGEMS_DB_URL": f"sqlite:///{tmp_path}/flaggems.db"}


@pytest.fixture
def finished_results(tmp_path):
    """``finished_results(setup, {overload: [case, ...]}, checkpoint=False)``: a results file
    in tmp_path with those overloads recorded and ended, checkpointed when asked (as the main
    phase leaves it for the confirmation); each one closed at teardown."""
    from flagos_doctor.results.resultsfile import ResultsFile

    made = []

    def open_with(setup: dict, overloads: dict, checkpoint: bool = False) -> ResultsFile:
        record = ResultsFile(str(tmp_path / f"r{len(made)}.json"), setup, sorted(overloads))
        record.load()
        record.start()
        for name, cases in overloads.items():
            record.record_profiles(name, [c["profile"] for c in cases])
            for one in cases:
                record.record_case(name, one)
            record.record_end(name)
        if checkpoint:
            record.checkpoint()
        made.append(record)
        return record

    yield open_with
    for record in made:
        record.close(False)


#: torch_fl's public source at 1adbc97 (a ``git archive`` tarball), beside the clone.
TORCH_FL_TARBALL = os.path.join(SHARED, "torch-fl", "Torch-FL-1adbc97-src.tar.gz")


#: The tests' build of torch_fl is compiled at -O0 (``--no-optimize``: a third less compile
#: time on a new machine); no test times torch_fl's own C++.
TORCH_FL_BUILD_ARGS = ("--no-optimize", TORCH_FL_TARBALL)


def real_torch_fl() -> str:
    """The import path of the real torch_fl built from :data:`TORCH_FL_TARBALL` for this
    interpreter (``python -m flagos_doctor.torch_fl_build --no-optimize``, which ``.ci/run``
    runs).

    Without ``../shared`` the test is skipped, saying so; with it, a missing build is a skip
    on a developer's machine and a failure in CI (``CI=true``), where ``.ci/run`` built it.
    """
    if not os.path.isfile(TORCH_FL_TARBALL):
        pytest.skip(f"no {TORCH_FL_TARBALL}: the real torch_fl tests need ../shared beside the clone")
    from flagos_doctor.torch_fl_build import find_build

    path = find_build(TORCH_FL_TARBALL, sys.executable, optimize=False)
    if path is None:
        why = (f"no torch_fl build of {TORCH_FL_TARBALL} for {sys.executable}: "
               f"run python -m flagos_doctor.torch_fl_build {' '.join(TORCH_FL_BUILD_ARGS)} (scripts/run-tests does)")
        if in_ci():
            pytest.fail(why)
        pytest.skip(why)
    return path


def in_ci() -> bool:
    """Whether this run is CI's: ``CI`` set to any non-empty value (CI=1 and CI=true alike)."""
    return bool(os.environ.get("CI"))


def find_python(version: str) -> str | None:
    """An interpreter of Python ``version`` ("3.12"), wherever this machine keeps one:
    ``$FLAGOS_DOCTOR_PYTHON3_12``, pyenv's versions, PATH, then uv's (scripts/run-tests
    installs the missing ones with ``uv python install``). Each is asked its version."""
    candidates = [os.environ.get(f"FLAGOS_DOCTOR_PYTHON{version.replace('.', '_')}")]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    candidates += sorted(glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}")), reverse=True)
    candidates.append(shutil.which(f"python{version}"))
    uv = ["uv"] if shutil.which("uv") else [sys.executable, "-m", "uv"] if importlib.util.find_spec("uv") else None
    if uv:
        found = subprocess.run([*uv, "python", "find", version], capture_output=True, text=True)
        candidates.append(found.stdout.strip() if found.returncode == 0 else None)
    for path in filter(None, candidates):
        try:
            said = subprocess.run([path, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if said.returncode == 0 and said.stdout.strip() == version:
            return path
    return None


def small_tmpfs(tmp_path, size: str, fill: bool = False, name: str = "tmpfs"):
    """A real tmpfs of ``size`` mounted on a new folder ``name`` of ``tmp_path``, filled to
    the last byte when ``fill`` (a full file system); None where mounting is not allowed.
    Unmount it with :func:`unmount`."""
    folder = tmp_path / name
    folder.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
                      capture_output=True).returncode != 0:
        return None
    if fill:
        try:
            with open(folder / "filler", "wb") as handle:
                while True:
                    handle.write(b"x" * 4096)
                    handle.flush()
        except OSError:
            pass
    return folder


def unmount(folder) -> None:
    if folder is not None:
        subprocess.run(["umount", str(folder)], capture_output=True)


#: The skips CI cannot satisfy, by the start of their reason, and why. Under CI every other
#: skip is a failure (pytest_runtest_makereport below): scripts/run-tests provides what the
#: tests need (torch, flag_gems 4.2.0 in /tmp/fg4, taskset, Python 3.10/3.12/3.13, the
#: real torch_fl build), so a skip there means something it should have provided is missing.
CI_MAY_SKIP = {
    "this machine has a CUDA runtime": "the missing-alias rule holds only where CUDA is absent (a GPU runner)",
    "needs 2 usable cores": "taskset pins to cores the runner has; a one-core runner cannot show two workers",
}


def _skip_reason(longrepr) -> str:
    reason = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return reason[len("Skipped: "):] if reason.startswith("Skipped: ") else reason


def _fail_a_skip_ci_can_run(report) -> None:
    if not in_ci() or not report.skipped or hasattr(report, "wasxfail"):
        return
    reason = _skip_reason(report.longrepr)
    if any(reason.startswith(allowed) for allowed in CI_MAY_SKIP):
        return
    report.outcome = "failed"
    report.longrepr = (f"skipped under CI={os.environ['CI']!r}, which can run it: {reason} "
                       "(tests/conftest.py CI_MAY_SKIP lists the skips CI cannot satisfy)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_a_skip_ci_can_run(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    # a module-level skip (pytest.importorskip("torch")) is a skipped collection
    outcome = yield
    _fail_a_skip_ci_can_run(outcome.get_result())


#: The longest the run stays silent: a test running past it is named, with its time so far.
HEARTBEAT_SECONDS = 50


class Heartbeat:
    """Progress a person can see: one line when every test of a file has ended (its
    outcomes), and, whenever no line came for :data:`HEARTBEAT_SECONDS`, the tests still
    running and for how long. In the process that reports (xdist's controller, or the only one)."""

    def __init__(self, reporter):
        self.reporter, self.lock = reporter, threading.Lock()
        self.started, self.last_line = time.monotonic(), time.monotonic()
        self.running: dict[str, float] = {}
        self.left: dict[str, int] = {}
        self.outcomes: dict[str, dict[str, int]] = {}
        self.seconds: dict[str, float] = {}  # each file's tests, setup and teardown included
        self.done = self.total = 0
        self.stop = threading.Event()

    def say(self, line: str) -> None:
        minutes, seconds = divmod(int(time.monotonic() - self.started), 60)
        if self.reporter._tw.width_of_current_line:  # on a line of its own, after xdist's dots
            self.reporter.write("\n")
        self.reporter.write_line(f"[tests {minutes}:{seconds:02d}, {self.done} of {self.total} done] {line}",
                                 flush=True)
        self.last_line = time.monotonic()

    def collected(self, nodeids) -> None:
        with self.lock:
            for nodeid in nodeids:
                path = nodeid.split("::", 1)[0]
                self.left[path] = self.left.get(path, 0) + 1
            self.total = sum(self.left.values())

    def started_test(self, nodeid: str) -> None:
        with self.lock:
            self.running[nodeid] = time.monotonic()

    def ended_test(self, report) -> None:
        path = report.nodeid.split("::", 1)[0]
        self.seconds[path] = self.seconds.get(path, 0.0) + report.duration
        if report.when != "teardown":
            if report.when == "call" or not report.passed:
                path = report.nodeid.split("::", 1)[0]
                counts = self.outcomes.setdefault(path, {})
                counts[report.outcome] = counts.get(report.outcome, 0) + 1
            return
        with self.lock:
            self.running.pop(report.nodeid, None)
            self.done += 1
            path = report.nodeid.split("::", 1)[0]
            self.left[path] = self.left.get(path, 1) - 1
            if self.left[path] == 0:
                counts = ", ".join(f"{n} {outcome}" for outcome, n in sorted(self.outcomes.get(path, {}).items()))
                self.say(f"{path}: {counts or 'nothing ran'}")

    def watch(self) -> None:
        while not self.stop.wait(5):
            with self.lock:
                if time.monotonic() - self.last_line < HEARTBEAT_SECONDS:
                    continue
                now = time.monotonic()
                running = sorted(self.running.items(), key=lambda item: item[1])
                named = "; ".join(f"{nodeid} ({int(now - began)} s)" for nodeid, began in running[:4])
                self.say(f"running: {named or 'collecting, or between tests'}")


@pytest.hookimpl(trylast=True)  # after the terminal reporter is registered
def pytest_configure(config):
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None or hasattr(config, "workerinput") or config.option.collectonly or NESTED:
        return  # an xdist worker reports through the controller
    heartbeat = Heartbeat(reporter)
    config.pluginmanager.register(_HeartbeatHooks(heartbeat), "flagos-doctor-heartbeat")
    threading.Thread(target=heartbeat.watch, daemon=True, name="flagos-doctor-heartbeat").start()


class _HeartbeatHooks:
    def __init__(self, heartbeat: Heartbeat):
        self.heartbeat = heartbeat

    def pytest_collection_finish(self, session):  # without xdist
        self.heartbeat.collected(item.nodeid for item in session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):  # each worker collects them all
        if not self.heartbeat.total:
            self.heartbeat.collected(ids)

    def pytest_runtest_logstart(self, nodeid, location):
        self.heartbeat.started_test(nodeid)

    def pytest_runtest_logreport(self, report):
        self.heartbeat.ended_test(report)

    def pytest_sessionfinish(self, session):
        if getattr(session.config, "cache", None) is not None and self.heartbeat.seconds:
            known = session.config.cache.get(FILE_SECONDS, {})
            session.config.cache.set(FILE_SECONDS, {**known, **{k: round(v, 1) for k, v in self.heartbeat.seconds.items()}})

    def pytest_unconfigure(self, config):
        self.heartbeat.stop.set()


#: Each test file's seconds in the last run that ran it (pytest's cache folder).
FILE_SECONDS = "flagos-doctor/file-seconds"


#: Before any run here (a fresh clone: no cache) the files slowest in a full run, in seconds
#: on one of three workers on two cores, so they still start first. An order only: a stale
#: figure costs time, not a result.
SLOW_FILES = {"tests/test_explain_chains.py": 160, "tests/test_survey.py": 95, "tests/test_survey_noise.py": 95,
              "tests/test_doc_blocks.py": 85, "tests/test_torch_fl_real.py": 80, "tests/test_survey_speed.py": 80,
              "tests/test_explain.py": 80, "tests/test_compile_pool.py": 55, "tests/test_survey_truth.py": 55,
              "tests/test_probe.py": 55, "tests/test_hardening.py": 50, "tests/test_hardening2.py": 40,
              "tests/test_forkserver.py": 35, "tests/test_torch_fl_build.py": 35,
              "tests/test_clauses_analysis.py": 30, "tests/test_ci_harden.py": 30,
              "tests/test_explain_processes.py": 30, "tests/test_readme.py": 30, "tests/test_bindings.py": 25,
              "tests/test_reports.py": 25, "tests/test_suite_compare.py": 25, "tests/test_report.py": 20,
              "tests/test_explain_records.py": 20, "tests/test_matrix_page.py": 20, "tests/test_foundation.py": 20,
              "tests/test_attribute.py": 20}


def pytest_collection_modifyitems(config, items):
    """The files that took longest last time first, each file's tests in their own order: xdist
    hands out whole files (--dist loadfile), and a long file started last ends the run late."""
    cache = getattr(config, "cache", None)  # none under -p no:cacheprovider
    seconds = {**SLOW_FILES, **cache.get(FILE_SECONDS, {})} if cache is not None and not NESTED else {}
    if seconds:
        first_seen = {}
        for index, item in enumerate(items):
            first_seen.setdefault(item.nodeid.split("::", 1)[0], index)
        items.sort(key=lambda item: (-seconds.get(item.nodeid.split("::", 1)[0], 0.0),
                                     first_seen[item.nodeid.split("::", 1)[0]]))
