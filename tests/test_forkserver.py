"""Survey workers forked from a server that imported torch once (survey/forkserver.py), on CPU.

Every claim against the same survey with every worker spawned (``FLAGOS_DOCTOR_FORK=0``):
the same census, real crashes (a null read, ``os.abort()``), a hang and a sticky error
recorded alike; a survey killed with SIGKILL leaves neither the server nor a worker behind; a
server that dies while importing leaves the survey to spawn its workers, and says so. And
which stacks are forked at all: each built-in keeps its own import order (torch_fl never),
the variable speaks only for a module stack. A forked worker finds the preload frozen.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from conftest import FAULT_ENV_WITHOUT_GEMS, FIXTURES, alive, checkout_first, run_cli
from flagos_doctor.results import model

FAULT_CONF = os.path.join(FIXTURES, "fault.conf")
#: The fault stack's kernels that end their worker: a null read, os.abort(), an hour's sleep,
#: CUDA's illegal memory access (each on its 1d-f32 case), and abs beside them.
FATAL = "abs,trunc,frac,sinh,cosh"


def survey(tmp, name, *args, fork, env=None):
    done = run_cli("survey", *args, "--no-store", "-o", f"{name}.json", "--census", f"{name}.census",
                   env={**(env or {}), "FLAGOS_DOCTOR_FORK": fork}, cwd=str(tmp))
    with open(tmp / f"{name}.json", encoding="utf-8") as handle:
        doc = json.load(handle)
    return doc, (tmp / f"{name}.census").read_text(), done


def births(doc):
    return doc["provenance"]["runs"][-1]["worker_births"]


def test_the_fault_stacks_crashes_hang_and_sticky_error_are_recorded_alike_forked_and_spawned(tmp_path):
    # A module stack says nothing of its imports: FLAGOS_DOCTOR_FORK=torch forks its workers
    # after torch, =0 spawns them.
    args = ("--stack", "faultstack", "--conf", FAULT_CONF, "--ops", FATAL, "--timeout", "3", "--workers", "2",
            "--repeats", "1")
    forked, forked_census, done = survey(tmp_path, "forked", *args, fork="torch", env=FAULT_ENV_WITHOUT_GEMS)
    assert done.returncode == 1, done.stderr
    spawned, spawned_census, _ = survey(tmp_path, "spawned", *args, fork="0", env=FAULT_ENV_WITHOUT_GEMS)
    assert forked_census == spawned_census
    assert births(forked)["spawned"] == 0 and births(forked)["preloaded"] == ["torch"]
    assert births(forked)["forked"] >= 4  # two, then a replacement for each worker a case ended
    # one import for every worker, the main phase's and its repeat lane's, though each pool
    # has a scratch folder of its own
    assert births(forked)["servers"] == 1 and forked["provenance"]["runs"][-1]["confirm"]["passes"]["count"] == 1
    assert births(spawned) == {"forked": 0, "spawned": births(spawned)["spawned"], "preloaded": [], "servers": 0}
    for doc in (forked, spawned):
        fatal = {name: next(c for c in doc["overloads"][name]["cases"] if c["profile"] == "1d-f32")
                 for name in ("trunc", "frac", "sinh", "cosh")}
        assert (fatal["trunc"]["status"], fatal["trunc"]["signal"]) == (model.CRASH, "SIGSEGV")
        assert 'File "' in fatal["trunc"]["stderr_tail"]  # faulthandler's stack, read from the worker's capture
        assert (fatal["frac"]["status"], fatal["frac"]["signal"]) == (model.CRASH, "SIGABRT")
        assert fatal["sinh"]["status"] == model.TIMEOUT
        assert fatal["cosh"]["poison"] == "illegal memory access"


def test_per_overload_isolation_forks_a_worker_an_overload_with_the_census_of_spawned_ones(tmp_path):
    # A demo kernel, the CPU fallback (erf), a binary op and a reduction: each spawned worker
    # is an import of torch, so four overloads, not more.
    args = ("--stack", "demo", "--isolation", "per-overload", "--workers", "2", "--ops", "abs,erf,add.Tensor,sum")
    forked, forked_census, _ = survey(tmp_path, "forked", *args, fork="")  # the demo's own choice: torch
    spawned, spawned_census, _ = survey(tmp_path, "spawned", *args, fork="0")
    assert forked_census == spawned_census
    selected = forked["provenance"]["runs"][-1]["selected"]
    assert births(forked) == {"forked": selected, "spawned": 0, "preloaded": ["torch"], "servers": 1}
    assert births(spawned)["spawned"] == selected


def _descendants(pid: int) -> set[int]:
    parents = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open(f"/proc/{name}/stat") as handle:
                    parents[int(name)] = int(handle.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def test_a_survey_killed_with_sigkill_leaves_neither_its_fork_server_nor_a_forked_worker(tmp_path):
    cmd = [sys.executable, "-m", "flagos_doctor", "survey", "--stack", "demo", "--workers", "2", "--no-store",
           "-q", "-o", "k.json"]
    env = dict(os.environ, PYTHONPATH=checkout_first(os.environ.get("PYTHONPATH")), FLAGOS_DOCTOR_FORK="")
    proc = subprocess.Popen(cmd, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    journal = tmp_path / "k.json.journal"
    deadline = time.monotonic() + 120
    family: set[int] = set()
    while time.monotonic() < deadline and proc.poll() is None:
        family |= _descendants(proc.pid)
        if journal.exists() and journal.read_text().count('"kind": "case"') >= 20:
            family |= _descendants(proc.pid)
            proc.send_signal(signal.SIGKILL)
            break
        time.sleep(0.01)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, "the survey ended before it could be killed"
    # the server and the two workers it forked (their parent is the server, not the survey)
    assert len(family) >= 3, family
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and any(alive(pid) for pid in family):
        time.sleep(0.05)
    assert not [pid for pid in family if alive(pid)]


def test_a_fork_server_that_dies_while_importing_leaves_the_survey_to_spawn_its_workers(tmp_path):
    # abort_on_import: os.abort() when imported (the server's preload), never by a worker.
    # No flag_gems-bound op: no spawned worker imports flag_gems (about a second each).
    args = ("--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,erf", "--workers", "2")
    secret = "fixture-token-0d1e2f3a4b5c"
    doc, census_text, done = survey(tmp_path, "fallback", *args, fork="torch,abort_on_import",
                                    env={**FAULT_ENV_WITHOUT_GEMS, "ABORT_FIXTURE_TOKEN": secret})
    assert done.returncode == 0, done.stderr
    _, spawned_census, _ = survey(tmp_path, "spawned", *args, fork="0", env=FAULT_ENV_WITHOUT_GEMS)
    assert census_text == spawned_census
    born = births(doc)
    assert born["forked"] == 0 and born["spawned"] >= 2
    assert born["fork_failed"].startswith("the fork server ended"), born
    # what the dying server printed says why, scrubbed of its environment's secrets
    assert "aborting on import, token " in born["fork_failed"], born
    assert secret not in (tmp_path / "fallback.json").read_text()


def test_each_stack_keeps_its_own_import_order_and_the_variable_speaks_for_those_that_say_nothing(monkeypatch):
    from flagos_doctor import stacks
    from flagos_doctor.survey import forkserver

    own = {name: stacks.get(name).fork_after for name in stacks.names()}
    assert own == {"demo": ("torch",), "torch_fl": (), "flag_gems": ("torch", "triton"), "torch": ("torch",)}
    module = stacks.get("faultstack").fork_after
    assert module is None  # a module stack of the user's says nothing
    for given, expected in ((None, {**own, "faultstack": ()}),
                            ("torch,triton", {**own, "faultstack": ("torch", "triton")}),
                            ("0", {name: () for name in [*own, "faultstack"]}),
                            ("off", {name: () for name in [*own, "faultstack"]})):
        if given is None:
            monkeypatch.delenv(forkserver.FORK_VAR, raising=False)
        else:
            monkeypatch.setenv(forkserver.FORK_VAR, given)
        assert {name: forkserver.preload(choice) for name, choice in {**own, "faultstack": module}.items()} == expected


def test_a_forked_worker_finds_the_preload_frozen_and_collects_only_its_own_objects(tmp_path):
    # gc.freeze() in the server after its preload: a collection in the worker never walks
    # (and writes to, so copies) the pages it shares with the server; what the worker makes
    # itself is collected as in any process.
    from flagos_doctor.survey import forkserver

    (tmp_path / "gcreport.py").write_text(
        "import gc, json\n"
        "class Cycle:\n"
        "    pass\n"
        "a, b = Cycle(), Cycle()\n"
        "a.other, b.other = b, a\n"
        "del a, b\n"
        "print(json.dumps({'frozen': gc.get_freeze_count(), 'collected': gc.collect()}))\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), checkout_first(os.environ.get("PYTHONPATH"))])}
    server = forkserver.ForkServer(sys.executable, env, ("json",), forkserver.LAZY_VARS)
    try:
        with open(tmp_path / "out.txt", "wb") as out:
            worker = server.fork(env, {1: out.fileno()}, "gcreport")
            assert worker.wait(timeout=60) == 0
        assert server.preloaded == ["json"]
    finally:
        server.close()
    report = json.loads((tmp_path / "out.txt").read_text())
    assert report["frozen"] > 0 and report["collected"] >= 2, report
