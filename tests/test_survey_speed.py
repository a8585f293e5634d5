"""A survey fast by default: the worker count the machine holds, shared autotuning, the schedule.

Real CLI runs in subprocesses with real workers. The core count is made certain with
``taskset`` (the workers inherit the affinity), never read from a speed; no assertion
depends on how fast anything ran.
"""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from conftest import FAULT_ENV, FAULT_ENV_WITHOUT_GEMS, FIXTURES, REPO_ROOT, run_cli, wrapped_python
from flagos_doctor.survey import history
from flagos_doctor.survey.schedule import Schedule

FAULT_CONF = os.path.join(FIXTURES, "fault.conf")
needs_taskset = pytest.mark.skipif(shutil.which("taskset") is None, reason="needs taskset (util-linux)")


def on_cores(cores: str, *args, cwd, env=None):
    """``flagos-doctor ARGS`` pinned to ``cores`` (taskset), in ``cwd``."""
    import subprocess

    full_env = dict(os.environ, **(env or {}))  # this checkout first on PYTHONPATH: conftest
    return subprocess.run(["taskset", "-c", cores, sys.executable, "-m", "flagos_doctor", *args],
                          capture_output=True, text=True, cwd=str(cwd), env=full_env, timeout=300)


def last_run(path) -> dict:
    with open(path, encoding="utf-8") as handle:
        return json.load(handle)["provenance"]["runs"][-1]


@needs_taskset
def test_default_workers_one_per_usable_core_and_said(tmp_path):
    done = on_cores("0", "survey", "--stack", "demo", "--ops", "abs,neg,exp", "--no-store", "-o", "one.json",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = last_run(tmp_path / "one.json")
    assert run["workers"] == 1 and run["workers_choice"]["requested"] is None
    assert run["workers_choice"]["limits"]["cores"] == 1
    assert run["worker_starts"]["count"] == 1
    assert "workers: 1, one per core (1 usable)" in done.stderr
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("needs 2 usable cores for the second half (one worker per core: two)")
    done = on_cores("0,1", "survey", "--stack", "demo", "--ops", "abs,neg,exp", "--no-store", "-q", "-o", "two.json",
                    cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = last_run(tmp_path / "two.json")
    # two main workers started; the second may be stopped while starting if the first ran
    # every case first (a busy machine), so the log, not the count of starts, says so
    main = [w for w in run["worker_log"] if w["for"].startswith("main")]
    assert run["workers"] == 2 and len(main) == 2, run["worker_log"]
    assert run["worker_starts"]["count"] == 2 or any("stopped while starting" in w["for"] for w in main)
    assert done.stderr == ""  # --quiet: the pick is in the provenance, not on the terminal


@needs_taskset
def test_explicit_workers_beyond_the_machine_capped_or_refused(tmp_path):
    done = on_cores("0", "survey", "--stack", "demo", "--ops", "abs,neg,exp,sin,cos,add.Tensor", "--workers", "6",
                    "--no-store", "-q", "-o", "cap.json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run = last_run(tmp_path / "cap.json")
    choice = run["workers_choice"]
    assert choice["requested"] == 6
    # 4 a core, or fewer where this machine's memory holds fewer
    held = min(4, choice["limits"].get("host_memory", 4))
    assert run["workers"] == held and choice["limits"]["holds"] == held
    assert run["worker_starts"]["count"] == held  # no worker beyond the cap ever started
    assert f"--workers 6 capped to {held}" in done.stderr  # said even with --quiet
    for absurd in ("10000", "0"):
        refused = on_cores("0", "survey", "--stack", "demo", "--workers", absurd, "--no-store", "-o", "x.json",
                           cwd=tmp_path)
        assert refused.returncode == 2, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "--workers" in refused.stderr
        assert not (tmp_path / "x.json").exists()


def test_shared_autotune_and_short_timing_are_on_by_default_in_the_workers_triton_and_can_be_turned_off(tmp_path, flag_gems_env, monkeypatch):
    # flag_gems on CPU with --device cpu: its workers import Triton, whose knob says what they got.
    args = ("survey", "--stack", "flag_gems", "--routes", "flag_gems", "--ops", "abs", "--device", "cpu",
            "--workers", "1", "--no-store", "-q")
    env = dict(flag_gems_env)
    monkeypatch.delenv("TRITON_CACHE_AUTOTUNING", raising=False)
    on = run_cli(*args, "-o", "on.json", env=env, cwd=str(tmp_path))
    assert on.returncode == 0, on.stderr
    off = run_cli(*args, "--no-shared-autotune", "--full-autotune", "-o", "off.json", env=env, cwd=str(tmp_path))
    assert off.returncode == 0, off.stderr
    docs = {}
    for name in ("on", "off"):
        with open(tmp_path / f"{name}.json", encoding="utf-8") as handle:
            docs[name] = json.load(handle)
    assert docs["on"]["provenance"]["triton_autotune_cache"] is True
    assert docs["on"]["provenance"]["runs"][-1]["shared_autotune"] == {"TRITON_CACHE_AUTOTUNING": "1", "set_by": "default"}
    assert docs["off"]["provenance"]["triton_autotune_cache"] is False
    assert docs["off"]["provenance"]["runs"][-1]["shared_autotune"]["set_by"] == "--no-shared-autotune"
    # the autotuners' timing budget: short by default, in the workers' Triton too; Triton's own with --full-autotune
    assert docs["on"]["provenance"]["runs"][-1]["autotune_timing"] == {"mode": "short", "set_by": "default"}
    assert docs["on"]["provenance"]["autotune_timing"] == {"mode": "short", "warmup_ms": 0, "rep_ms": 2}
    assert docs["off"]["provenance"]["runs"][-1]["autotune_timing"] == {"mode": "full", "set_by": "--full-autotune"}
    assert docs["off"]["provenance"]["autotune_timing"] == {"mode": "full"}
    assert docs["on"]["census_sha256"] == docs["off"]["census_sha256"]


def test_schedule_holds_an_overloads_other_cases_until_its_first_ended():
    tasks = [("a", ["x"]), ("a", ["y"]), ("b", ["x"]), ("a", ["z"]), ("c", None), ("b", ["y"])]
    schedule = Schedule(tasks)
    # the leads first, in order; a's and b's followers wait
    assert [schedule.take(), schedule.take()] == [("a", ["x"]), ("b", ["x"])]
    schedule.finished(("a", ["x"]))  # a's kernels are in the cache: its followers go before c's lead
    assert [schedule.take(), schedule.take(), schedule.take()] == [("a", ["y"]), ("a", ["z"]), ("c", None)]
    assert schedule.figures()["followers_early"] == 0
    # nothing else to do: b's follower goes although b's lead has not ended, and is counted
    assert schedule.take() == ("b", ["y"])
    assert schedule.take() is None and schedule.empty()
    assert schedule.figures() == {"hold_followers": True, "followers_early": 1, "hold_family": True,
                                  "family_waits": 0, "family_early": 0}
    unheld = Schedule(tasks, hold_followers=False)
    assert [unheld.take() for _ in tasks] == tasks
    # Slow last time (history.slow_first put them first): a's second case does work of its
    # own, so it runs beside a's first; b's second, not slow, waits for b's first.
    slow = Schedule()
    slow.put_all([("a", ["y"]), ("a", ["x"]), ("b", ["x"]), ("b", ["y"])], unheld=2)
    assert [slow.take(), slow.take(), slow.take()] == [("a", ["y"]), ("a", ["x"]), ("b", ["x"])]
    assert slow.figures()["followers_early"] == 0


def test_schedule_holds_a_family_siblings_case_of_the_same_profile_until_the_first_ended():
    # addcmul and addcmul.out (one packet, the same kernels and autotuning keys for a
    # profile): on the H200 mm and mm.out autotuned 2d-f32 at once. addcmul.out's 2d case
    # waits while addcmul's runs or is earlier and unfinished; its 1d case, whose sibling has ended, does
    # not. (A compile-heavy family, mm itself, is held stricter: the test below.)
    tasks = [("addcmul", ["2d"]), ("addcmul.out", ["2d"]), ("addcmul", ["1d"]), ("addcmul.out", ["1d"]), ("abs", ["2d"])]
    schedule = Schedule()
    schedule.put_all(tasks, unheld=4)  # all four slow last time: none waits for its overload's lead
    assert [schedule.take(), schedule.take()] == [("addcmul", ["2d"]), ("addcmul", ["1d"])]
    assert schedule.take() == ("abs", ["2d"])  # addcmul.out's cases wait for addcmul's of their profile
    schedule.finished(("addcmul", ["1d"]))
    assert schedule.take() == ("addcmul.out", ["1d"])
    # nothing ready: an idle worker takes the held sibling anyway, counted
    assert schedule.take() == ("addcmul.out", ["2d"])
    assert schedule.take() is None and schedule.empty()
    figures = schedule.figures()
    assert figures["hold_family"] is True and figures["family_early"] == 1 and figures["family_waits"] == 2
    assert figures["followers_early"] == 0
    # A task of every profile (None, --tasks overloads) stands for each; other families and
    # names that only share a prefix (addmm vs mm) never wait for each other.
    whole = Schedule([("conv2d", None), ("conv2d.padding", None), ("conv1d", None), ("addmm", ["2d"])])
    assert [whole.take(), whole.take(), whole.take()] == [("conv2d", None), ("conv1d", None), ("addmm", ["2d"])]
    whole.finished(("conv2d", None))
    assert whole.take() == ("conv2d.padding", None) and whole.figures()["family_early"] == 0
    # An earlier sibling not yet started holds a later one too; off, the order is the given one.
    order = [("bmm.out", ["x"]), ("bmm", ["x"])]
    held = Schedule(order)
    assert held.take() == ("bmm.out", ["x"])
    assert Schedule(order, hold_family=False).take() == ("bmm.out", ["x"])
    free = Schedule(order, hold_family=False)
    free.take()
    assert free.take() == ("bmm", ["x"]) and free.figures()["family_early"] == 0


def test_schedule_runs_one_familys_cases_of_other_shapes_side_by_side():
    # Cold H200: a rule per family and dtype held mm [1d-f32] (no kernel shared) behind
    # mm [2d-f32]: 115 s after 128 s. Shared kernels are the workers' compile lock's now;
    # the schedule holds only a sibling of the same profile (the same autotuning keys).
    tasks = [("mm", ["2d-f32"]), ("mm", ["1d-f32"]), ("mm", ["2d-f16"]), ("mm.out", ["2d-f32"]), ("abs", ["2d-f32"])]
    schedule = Schedule()
    schedule.put_all(tasks, unheld=4)
    assert [schedule.take(), schedule.take(), schedule.take(), schedule.take()] == [
        ("mm", ["2d-f32"]), ("mm", ["1d-f32"]), ("mm", ["2d-f16"]), ("abs", ["2d-f32"])]
    assert schedule.take() == ("mm.out", ["2d-f32"])  # nothing else left: taken, counted
    assert schedule.figures()["family_early"] == 1
    closed = Schedule(tasks)
    closed.close()  # the survey stops: nothing more is handed out
    assert closed.take() is None


def test_a_first_survey_starts_the_compile_heavy_families_first():
    # No timing hints: the shipped cold costs (compile_cost.py) order the work.
    tasks = [("abs", ["2d-f32"]), ("addmm", ["2d-f32"]), ("mm", ["2d-f32"]), ("neg", ["2d-f32"]), ("mm.out", ["1d-f32"])]
    ordered, slow = history.slow_first(tasks, {})
    assert ordered == [("mm", ["2d-f32"]), ("mm.out", ["1d-f32"]), ("addmm", ["2d-f32"]), ("abs", ["2d-f32"]),
                       ("neg", ["2d-f32"])]
    assert slow == 3
    # A measured time wins over the prediction (a warm cache: mm took 0.2 s)
    ordered, slow = history.slow_first(tasks, {("mm", "2d-f32"): 0.2, ("abs", "2d-f32"): 3.0})
    assert ordered[:3] == [("mm.out", ["1d-f32"]), ("abs", ["2d-f32"]), ("addmm", ["2d-f32"])] and slow == 3


def test_census_of_the_default_schedule_equals_the_per_overload_reference(tmp_path):
    # The fault stack's crashes, aborts, poison and NO_SCHEMA, pooled with held followers
    # against one process per overload (upstream's model); sinh's hour-long hang left out.
    # The main phase's schedule only: confirmation runs the same in either (its own census
    # test: test_survey_truth.test_confirmation_passes_at_once_give_the_census_of_passes_in_turn).
    ops = "abs,erf,floor,ceil,trunc,frac,cosh,no_such_op,is_nonzero"
    env = FAULT_ENV_WITHOUT_GEMS
    common = ("survey", "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", ops, "--timeout", "30", "--no-store", "-q",
              "--repeats", "0", "--baseline", "none")
    pooled = run_cli(*common, "--workers", "2", "-o", "p.json", "--census", "p.census", env=env, cwd=str(tmp_path))
    assert pooled.returncode == 1, pooled.stderr  # trunc and frac crash: exit 1
    reference = run_cli(*common, "--isolation", "per-overload", "-o", "r.json", "--census", "r.census",
                        env=env, cwd=str(tmp_path))
    assert reference.returncode == 1, reference.stderr
    census = (tmp_path / "p.census").read_text()
    assert census == (tmp_path / "r.census").read_text()
    assert "trunc\t1d-f32\tCRASH" in census and "cosh\t1d-f32\tERROR" in census
    schedule = last_run(tmp_path / "p.json")["schedule"]
    assert schedule["hold_followers"] is True and schedule["hold_family"] is True


def test_triton_times_count_a_real_compilation_and_a_cache_hit(tmp_path):
    # A real Triton compilation for an H100-class target (no GPU needed to compile), twice:
    # the second is a hit in the cache folder.
    code = r"""
import json, triton, triton.language as tl
from triton.backends.compiler import GPUTarget
from flagos_doctor.survey.child.triton_timing import TritonTimes
times = TritonTimes()
assert times.install()
@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
src = triton.compiler.ASTSource(fn=add_one, signature={"x_ptr": "*fp32", "n": "i32"}, constexprs={"BLOCK": 64})
start = times.snapshot()
triton.compile(src, target=GPUTarget("cuda", 90, 32))
first = times.since(start)
middle = times.snapshot()
triton.compile(src, target=GPUTarget("cuda", 90, 32))
print(json.dumps([first, times.since(middle), times.since(times.snapshot())]))
"""
    import subprocess

    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_DEFAULT_FP_FUSION="1",
               PYTHONPATH=REPO_ROOT)
    script = tmp_path / "compile_twice.py"  # @triton.jit reads its source from a file
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    first, second, nothing = json.loads(done.stdout.strip().splitlines()[-1])
    assert first["compiles"] == 1 and first["compile_seconds"] > 0 and first["compile_cache_hits"] == 0
    assert second["compiles"] == 0 and second["compile_cache_hits"] == 1
    assert nothing == {}


def test_autotune_figures_around_bench_agree_with_tritons_own_listener(tmp_path):
    # Triton 3.6 (the H200's) has no knobs.autotuning.listener: there the figures come from
    # timing around Autotuner._bench. Triton 3.9 here has both, so one process takes them
    # both ways over the same real Autotuner: the wrapper's counts must be the listener's.
    # No kernel runs on CPU: the Autotuner's own do_bench parameter stands in for the
    # device's timing (it times nothing), and each launch after the choice fails, caught.
    code = r"""
import json, triton, triton.language as tl
from flagos_doctor.survey.child.triton_timing import TritonTimes
listener, bench = TritonTimes(), TritonTimes()
assert listener.install() and bench.install(use_listener=False)
timed = []
def do_bench(kernel_call, quantiles):
    timed.append(1)
    return [2.0, 2.0, 2.0] if len(timed) % 2 else [1.0, 1.0, 1.0]  # the second config wins
@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"], do_bench=do_bench)
@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
ends = []
for n in (8, 8, 16):  # a new key, the same key (chosen already), another new key
    try:
        add_one[(1,)](0, n)
    except Exception as exc:  # no device to launch on
        ends.append(type(exc).__name__)
print(json.dumps({"listener": listener.snapshot(), "bench": bench.snapshot(), "timed": len(timed), "ends": ends,
                  "sources": [listener.autotune_source, bench.autotune_source],
                  "chosen": {str(k): c.kwargs for k, c in add_one.cache.items()}}))
"""
    import subprocess

    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_CACHE_AUTOTUNING="0", PYTHONPATH=REPO_ROOT)
    script = tmp_path / "autotune_twice.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["sources"] == ["listener", "bench"]
    assert got["timed"] == 4 and len(got["ends"]) == 3  # two autotunings of two configs each
    assert got["listener"]["autotunes"] == got["bench"]["autotunes"] == 2
    assert got["bench"]["autotune_seconds"] > 0 and got["bench"]["autotune_cache_hits"] == 0
    assert got["chosen"] == {"(8,)": {"BLOCK": 64}, "(16,)": {"BLOCK": 64}}  # the choice is Triton's own


def test_short_autotune_timing_shortens_only_an_autotuners_do_bench(tmp_path):
    # A real Triton Autotuner built the way FlagGems' LibTuner builds one on Triton 3.2+
    # (warmup=25, rep=100 given: Triton's own lambda calls triton.testing.do_bench at call
    # time). No kernel runs on CPU: a recorder stands in for do_bench, installed before the
    # survey's wrapper as the device's timing would be. Inside _bench the recorder must get
    # the short budget; a do_bench call anywhere else keeps its own arguments.
    code = r"""
import json, warnings, triton, triton.language as tl, triton.testing
warnings.simplefilter("ignore", DeprecationWarning)
seen = []
def recorder(fn, warmup=25, rep=100, grad_to_none=None, quantiles=None, return_mode="mean"):
    seen.append({"warmup": warmup, "rep": rep, "quantiles": list(quantiles) if quantiles else None})
    return [1.0, 1.0, 1.0] if quantiles else 1.0
triton.testing.do_bench = recorder
from flagos_doctor.survey.child import autotune_timing
from flagos_doctor.survey.child.triton_timing import TritonTimes
asked = autotune_timing.install(__import__("sys").argv[1])
times = TritonTimes(); times.install(use_listener=False)
@triton.autotune(configs=[triton.Config({"BLOCK": 32}), triton.Config({"BLOCK": 64})], key=["n"], warmup=25, rep=100)
@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    i = tl.arange(0, BLOCK)
    tl.store(x_ptr + i, tl.load(x_ptr + i, mask=i < n) + 1, mask=i < n)
try:
    add_one[(1,)](0, 8)
except Exception:
    pass  # no device to launch the chosen configuration on
inside = list(seen)
triton.testing.do_bench(lambda: None, warmup=25, rep=100)  # not an autotuner's: unchanged
print(json.dumps({"asked": asked, "inside": inside, "outside": seen[len(inside):],
                  "short_timed": times.snapshot()["autotune_short_timed"]}))
"""
    import subprocess

    env = dict(os.environ, TRITON_CACHE_DIR=str(tmp_path / "cache"), TRITON_CACHE_AUTOTUNING="0", PYTHONPATH=REPO_ROOT)
    script = tmp_path / "short_autotune.py"
    script.write_text(code)
    got = {}
    for mode in ("short", "full"):
        done = subprocess.run([sys.executable, str(script), mode], capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        got[mode] = json.loads(done.stdout.strip().splitlines()[-1])
    short, full = got["short"], got["full"]
    assert short["asked"] == {"mode": "short", "warmup_ms": 0, "rep_ms": 2}
    assert short["inside"] == [{"warmup": 0, "rep": 2, "quantiles": [0.5, 0.2, 0.8]}] * 2  # both configurations
    assert short["short_timed"] == 2
    assert full["asked"] == {"mode": "full"}
    assert full["inside"] == [{"warmup": 25, "rep": 100, "quantiles": [0.5, 0.2, 0.8]}] * 2
    assert full["short_timed"] == 0
    assert short["outside"] == full["outside"] == [{"warmup": 25, "rep": 100, "quantiles": None}]


def test_choose_workers_from_cores_memory_and_device():
    from flagos_doctor.errors import BadInput
    from flagos_doctor.survey import sizing

    gib = sizing.GIB
    h200_host = sizing.Machine(cores=16, memory_bytes=120 * gib)
    picked = sizing.choose(None, h200_host, "flag_gems")
    assert picked.workers == 16 and picked.requested is None and picked.notices == []
    small = sizing.choose(None, sizing.Machine(cores=16, memory_bytes=7 * gib), "flag_gems")
    assert small.workers == 2 and "memory decides" in small.why  # 3 GiB a flag_gems worker
    assert sizing.choose(None, sizing.Machine(cores=4, memory_bytes=None), "demo").workers == 4
    assert sizing.choose(None, h200_host, "flag_gems", per_overload=True).workers == 1  # upstream's model
    capped = sizing.choose(20, sizing.Machine(cores=2, memory_bytes=None), "demo")
    assert capped.workers == 8 and capped.notices and "capped to 8" in capped.notices[0]
    assert sizing.choose(80, sizing.Machine(cores=2, memory_bytes=None), "demo").workers == 8
    for absurd in (81, 10000, 0):
        with pytest.raises(BadInput):
            sizing.choose(absurd, sizing.Machine(cores=2, memory_bytes=None), "demo")
    # The first worker says its device has 5 GiB free: 2 workers at 2 GiB, twice that on 2 devices.
    assert sizing.after_first_worker(picked, {"memory_free": 5 * gib}, 1) == 2
    assert picked.workers == 2 and picked.limits["device_memory"] == 2 and "lowered to 2" in picked.notices[-1]
    roomy = sizing.choose(None, h200_host, "flag_gems")
    assert sizing.after_first_worker(roomy, {"memory_free": 140 * gib}, 1) is None and roomy.workers == 16
    assert sizing.after_first_worker(roomy, {"type": "flagos"}, 1) is None  # the stack cannot tell
    assert sizing.device_limit({"memory_free": 5 * gib}, 2) == 4


def test_the_first_workers_device_memory_lowers_the_worker_count(tmp_path):
    # smalldevicestack's device has 3 GiB free: one worker at 2 GiB, whatever was asked for.
    done = run_cli("survey", "--stack", "smalldevicestack", "--conf", FAULT_CONF, "--ops", "abs,erf,floor",
                   "--workers", "2", "--no-store", "-o", "s.json", "--census", "s.census", env={"PYTHONPATH": FIXTURES}, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "s.json", encoding="utf-8") as handle:
        doc = json.load(handle)
    assert doc["provenance"]["device"]["memory_free"] == 3 << 30
    run = doc["provenance"]["runs"][-1]
    assert run["workers"] == 1 and run["workers_choice"]["limits"]["device_memory"] == 1
    assert "lowered to 1: 3.0 GiB free on the device" in done.stderr
    assert doc["complete"] is False and all(doc["overloads"][name]["cases"] for name in ("abs", "erf", "floor"))


def _slowed(source, target, name, profile, seconds=50.0, **comparable):
    """A copy of results file ``source`` in which ``name`` on ``profile`` took ``seconds``."""
    with open(source, encoding="utf-8") as handle:
        doc = json.load(handle)
    (case,) = [c for c in doc["overloads"][name]["cases"] if c["profile"] == profile]
    case["seconds"] = seconds
    doc["comparable"].update(comparable)
    with open(target, "w", encoding="utf-8") as handle:
        json.dump(doc, handle)


def test_hints_from_a_given_results_file_order_the_run_and_change_no_case(tmp_path):
    args = ("survey", "--stack", "demo", "--ops", "abs,neg,exp", "--workers", "1", "--no-store", "-q")
    first = run_cli(*args, "-o", "first.json", "--census", "first.census", cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr
    _slowed(tmp_path / "first.json", tmp_path / "hints.json", "exp", "2d-f32")
    hinted = run_cli(*args, "--hints", "hints.json", "-o", "hinted.json", "--census", "hinted.census", cwd=str(tmp_path))
    assert hinted.returncode == 0, hinted.stderr
    run = last_run(tmp_path / "hinted.json")
    assert run["hints"] == [{"path": str(tmp_path / "hints.json"), "from": "--hints", "cases": 21}]
    assert run["slow_first"]["first"] == ["exp/2d-f32"]
    assert (tmp_path / "hinted.census").read_text() == (tmp_path / "first.census").read_text()
    # A bad hints file is one line, exit 2, before any work (nothing written).
    (tmp_path / "notresults.json").write_text('{"schema": "something/else"}')
    for bad in ("missing.json", "notresults.json", str(tmp_path)):
        refused = run_cli(*args, "--hints", bad, "-o", "x.json", cwd=str(tmp_path))
        assert refused.returncode == 2, refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
        assert not (tmp_path / "x.json").exists()


def test_hints_from_the_store_survive_a_harness_change_but_not_another_route_set(tmp_path):
    store = tmp_path / "store"
    conf = tmp_path / "three.conf"  # a whole route set (only complete surveys are filed)
    conf.write_text("abs = flagos_python\nneg = flagos_python\nexp = flagos_python\n")
    args = ("survey", "--stack", "demo", "--conf", str(conf), "--workers", "1", "-q", "--store", str(store))
    first = run_cli(*args, "-o", "first.json", cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr
    (filed,) = list((store / "survey").glob("*/*.json"))
    # The run as an older harness would have filed it (another fingerprint), and one of
    # another route set; the original gone, so no entry has this survey's fingerprint.
    _slowed(filed, filed.parent / "0000000000000000.json", "neg", "1d-f32", harness_version="0-older")
    _slowed(filed, filed.parent / "1111111111111111.json", "abs", "1d-f32", seconds=99.0,
            harness_version="0-older", route_set_sha256="another")
    os.utime(filed.parent / "1111111111111111.json", (2e9, 2e9))  # the newest: still not used
    filed.unlink()
    again = run_cli(*args, "--rerun", "--no-store", "-o", "second.json", cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr
    assert "hints" not in last_run(tmp_path / "second.json")  # --no-store: no store hints
    again = run_cli(*args, "-o", "third.json", cwd=str(tmp_path))
    assert again.returncode == 0, again.stderr
    run = last_run(tmp_path / "third.json")
    assert run["hints"] == [{"path": str(filed.parent / "0000000000000000.json"), "from": "store, same work"}]
    assert run["slow_first"]["first"] == ["neg/1d-f32"]


@pytest.fixture(scope="module")
def four_workers_run(tmp_path_factory):
    """The fault stack's abs and floor (floor's six cases fail) with four workers and the
    default confirmation: (its last run record, census text). Read by the lanes' test and
    the lent workers' test below, which ran this same survey each."""
    tmp = tmp_path_factory.mktemp("lanes")
    done = run_cli("survey", "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,floor", "--no-store",
                   "-o", "lent.json", "--census", "lent.census", "--workers", "4", env=FAULT_ENV, cwd=str(tmp))
    assert done.returncode == 0, done.stderr
    run = last_run(tmp / "lent.json")
    # both tests are of four workers: a machine short of memory caps them, and says why
    # (fewer than repeats chain the lanes: nothing lent, the second lane's queue empty)
    assert run["workers_choice"]["workers"] == 4, run["workers_choice"]["why"]
    return run, (tmp / "lent.census").read_text()


def test_a_confirmation_lane_starts_another_worker_only_for_work_worth_its_start(four_workers_run):
    # floor's six cases fail in a millisecond each, in the main phase's workers at about the
    # same moment, while each repeat lane's first worker is still importing torch: one worker
    # runs them all long before a second could be ready. Before, a lane started a worker for
    # each task no worker was free to take (here two each; on the H200 sixteen workers for
    # 393 repeats, eight of which ran one case).
    run, _ = four_workers_run
    assert run["confirm"]["passes"]["queued"] == [6, 6] and run["confirm"]["passes"]["started"] == [1, 1], run["confirm"]
    lanes = [w for w in run["worker_log"] if w["for"] in ("repeat 1", "repeat 2")]
    assert sorted(w["for"] for w in lanes) == ["repeat 1", "repeat 2"], run["worker_log"]  # (main workers lent help)


def test_a_lane_starts_a_worker_for_waiting_work_that_outlasts_a_start_and_never_for_a_free_slots():
    from flagos_doctor.survey.pool import worth_a_start

    # (waiting tasks, free slots, slots started, their expected seconds, a worker's start)
    assert worth_a_start(1, 0, 0, 0.001, 10.0)  # the first worker: nothing else would run it
    assert not worth_a_start(2, 2, 2, 500.0, 1.0)  # two slots free (idle or starting) take both
    assert not worth_a_start(9, 1, 1, 9.0, 10.0)  # one worker ends them before another is ready
    assert worth_a_start(9, 1, 1, 11.0, 10.0)  # it would still be busy when another is ready
    assert not worth_a_start(9, 0, 3, 29.0, 10.0) and worth_a_start(9, 0, 3, 31.0, 10.0)  # shared among three
    assert worth_a_start(3, 1, 1, None, 10.0) and worth_a_start(3, 1, 1, 0.1, None)  # unknown: as before


def test_a_lanes_expected_seconds_leave_out_the_compiling_its_caches_spare():
    from flagos_doctor.survey.confirm import expected_seconds

    assert expected_seconds({"seconds": 2.5}) == 2.5
    assert expected_seconds({"seconds": 60.0, "triton": {"compile_seconds": 50.0, "autotune_seconds": 8.0}}) == 2.0
    assert expected_seconds({"seconds": 1.0, "triton": {"compile_seconds": 3.0}}) == 0.0  # waits overlapped
    assert expected_seconds({"status": "CRASH"}) is None and expected_seconds({"seconds": None}) is None


def test_a_main_worker_with_no_task_left_takes_repeats_of_cases_it_did_not_run(four_workers_run, tmp_path):
    # Four main workers, floor's six cases failing: as the main phase runs out of tasks,
    # each main worker is lent to one repeat lane (in turn) and runs repeats there, while
    # the lanes' own workers still import torch. The records are those of a run whose
    # repeats all ran in the lanes' own workers, one after another (--workers 1).
    lent_run, lent_census = four_workers_run
    done = run_cli("survey", "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,floor", "--no-store",
                   "-o", "own.json", "--census", "own.census", "--workers", "1", env=FAULT_ENV, cwd=str(tmp_path))
    assert done.returncode == 0, done.stderr
    alone_run, alone_census = last_run(tmp_path / "own.json"), (tmp_path / "own.census").read_text()
    assert lent_census == alone_census
    assert alone_run["confirm"]["passes"]["lent"] == [0, 0]
    lent = [w for w in lent_run["worker_log"] if ", then repeat" in w["for"]]
    assert all(w["for"].startswith("main") for w in lent), lent
    # each lent to one lane, the lanes in turn (a worker still starting when the main phase's
    # last task ended is stopped, not lent)
    by_lane = [sum(w["for"].endswith(f"then repeat {n}") for w in lent) for n in (1, 2)]
    assert lent_run["confirm"]["passes"]["lent"] == by_lane and sum(by_lane) >= 1 and max(by_lane) - min(by_lane) <= 1
    main_cases = sum(w["cases"] for w in lent_run["worker_log"] if w["for"].startswith("main") and w not in lent)
    assert sum(w["cases"] for w in lent) > 14 - main_cases, lent_run["worker_log"]  # more than their main cases


def test_a_lent_worker_takes_only_the_tasks_it_may_and_waits_for_one_while_they_may_come():
    import threading

    schedule = Schedule(hold_followers=False, hold_family=False)
    schedule.stream(True)
    schedule.put_all([("floor", ["2d-f32"]), ("floor", ["1d-f32"])])
    not_2d = lambda task: task != ("floor", ["2d-f32"])  # noqa: E731 (it ran floor [2d-f32] itself)
    assert schedule.take(not_2d) == ("floor", ["1d-f32"])
    got = []
    waiter = threading.Thread(target=lambda: got.append(schedule.take(not_2d)), daemon=True)
    waiter.start()
    waiter.join(0.2)
    assert waiter.is_alive()  # floor [2d-f32] waits for another worker; this one for a task it may take
    schedule.put_all([("ceil", ["2d-f32"])])
    waiter.join(10)
    assert got == [("ceil", ["2d-f32"])]
    schedule.stream(False)
    assert schedule.take(not_2d) is None and schedule.take() == ("floor", ["2d-f32"])


def test_a_lent_worker_is_niced_in_every_thread_like_the_lanes_own():
    import subprocess
    import types

    from flagos_doctor.survey.pool import WorkerProcess

    # a real process with a second thread (Linux's niceness is a thread's)
    code = "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); print(1, flush=True); time.sleep(60)"
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        process.stdout.readline()
        threads = [int(tid) for tid in os.listdir(f"/proc/{process.pid}/task")]
        assert len(threads) == 2
        WorkerProcess.renice(types.SimpleNamespace(child=types.SimpleNamespace(proc=process)), 5)
        assert [os.getpriority(os.PRIO_PROCESS, tid) for tid in threads] == [max(5, os.nice(0))] * 2
    finally:
        process.kill()
        process.wait()


def test_a_worker_lost_under_a_case_is_not_replaced_when_the_cases_left_end_before_a_start_would(tmp_path):
    # cosh [1d-f32] reports CUDA's illegal memory access: its worker is lost. The --python given
    # makes a run's first worker start in 3 s and the others in 6; the cases left take
    # hundredths of a second each. The second run knows both from the first (--hints: cosh
    # [1d-f32] left a sticky error, so it goes first, every other case still waiting): the
    # other worker, ready or still starting (alone, the first is lost before the second is
    # ready; in a loaded suite both started first), runs the rest before a replacement could
    # be ready, so none starts, and the lost one's log says why.
    starts = tmp_path / "starts"
    starts.mkdir()
    python = wrapped_python(tmp_path, f"  *child.worker*) if mkdir {starts}/$WRAPPED_RUN 2>/dev/null; then sleep 3; else sleep 6; fi ;;")
    args = ("survey", "--stack", "faultstack", "--conf", FAULT_CONF, "--ops", "abs,erf,floor,ceil,cosh",
            "--workers", "2", "--repeats", "0", "--baseline", "none", "--no-store", "--python", str(python))
    # the --python sees each worker's start; no flag_gems-bound op, so no worker imports it
    # (a second of each spawned worker's start, beside the 3 or 6 s the --python holds it)
    env = {**FAULT_ENV_WITHOUT_GEMS, "FLAGOS_DOCTOR_FORK": "0"}
    first = run_cli(*args, "-o", "first.json", "--census", "first.census", env={**env, "WRAPPED_RUN": "1"},
                    cwd=str(tmp_path))
    assert first.returncode == 0, first.stderr  # floor, ceil and cosh fail: verdicts, not an error
    second = run_cli(*args, "--hints", "first.json", "-o", "second.json", "--census", "second.census",
                     env={**env, "WRAPPED_RUN": "2"}, cwd=str(tmp_path))
    assert second.returncode == 0, second.stderr
    assert (tmp_path / "second.census").read_text() == (tmp_path / "first.census").read_text()
    run = last_run(tmp_path / "second.json")
    assert run["slow_first"]["first"][0] == "cosh/1d-f32"
    log = run["worker_log"]
    assert not [w for w in log if "replacing" in w["for"]], log
    (lost,) = [w for w in log if ", not replaced: " in w["for"]]
    assert lost["cases"] == 1 and len(log) == 2, log  # cosh [1d-f32], and no third worker
    assert float(lost["for"].rsplit("a start takes ", 1)[1].removesuffix(" s")) >= 3.0, lost
