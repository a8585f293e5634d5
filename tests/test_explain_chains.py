"""Cause chains: a failure whose path read no redirected probe, tied to a guard that read one
long before (at import) and skipped the code that would have written what the failure used.

Real CLI, real subprocesses, real torch 2.13 (CPU) and transformers; the stack is the built-in
demo, whose seed bug (``FLAGOS_DEMO_SEED_BUG=1``) makes its alias guard read the redirected probe.
"""

from __future__ import annotations

import os
import sys

import pytest

from conftest import REPO_ROOT, run_cli
from flagos_doctor.errors import EXIT_CAUSE
from test_explain import EXPLAIN, explain, run_cli_bare

SEED_BUG = {"FLAGOS_DEMO_SEED_BUG": "1"}
#: For a child that compiles C++ kernels with Inductor in a cache of its own: Inductor's dry-run
#: g++ build of each vector ISA is redone in every fresh cache (the generated-kernel child: 17
#: CPU-s with it, 7.6 without). Off, the kernels are generated scalar; no assertion here is on
#: vectorised code, and the outputs are still compared with eager's and CPU's.
NO_VEC_ISA = {"TORCHINDUCTOR_VEC_ISA_OK": "0"}
DEMO = os.path.join(REPO_ROOT, "flagos_doctor", "demo", "__init__.py")


def demo_line(text: str) -> int:
    with open(DEMO) as handle:
        return next(n for n, line in enumerate(handle, start=1) if text in line)


def chain_of(document: dict, failure: dict) -> dict:
    (chain,) = [c for c in document["causes"] if c["failure"] == failure["id"] and c["how"] == "skipped-write"]
    return chain


def assert_chain_names_redirect_guard_and_skipped_alias(chain: dict) -> None:
    steps = [s["step"] for s in chain["chain"]]
    assert steps == ["redirect", "guard", "skipped", "symptom"]
    redirect, guard, skipped, _ = chain["chain"]
    assert redirect["where"] == {"file": "flagos_doctor/demo/__init__.py", "function": "_patch_vendor_compat",
                                 "line": demo_line("torch.cuda.is_available = torch.flagos.is_available")}
    assert guard["where"]["function"] == "_native_cuda_available"
    assert guard["branch"].startswith(f"took the branch of `if _native_cuda_available():` "
                                      f"(line {demo_line('if _native_cuda_available():')}) and returned")
    assert {"torch.device", "torch.Tensor.cuda", "torch.cuda.get_rng_state"} <= set(skipped["writes"])
    message = chain["message"]
    assert message.index("(1) flagos_doctor/demo/__init__.py:") < message.index("(2) ") < message.index("(3) so lines ")
    assert f"torch.device (line {demo_line('torch.device = device')})" in message


@pytest.fixture(scope="module")
def alias_tests(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("alias")
    return explain(tmp, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "alias_tests.py",
                   options=("--stack", "demo", "--markdown", str(tmp / "why.md")), env=SEED_BUG, cwd=EXPLAIN) \
        + ((tmp / "why.md").read_text(),)


def test_the_alias_assertion_gets_the_chain_and_the_plain_one_no_cause(alias_tests):
    done, document, page = alias_tests
    assert done.returncode == EXIT_CAUSE, done.stderr
    by_test = {f["test"].rsplit("::", 1)[1]: f for f in document["failures"]}
    alias, plain = by_test["test_cuda_means_flagos"], by_test["test_plain_wrong_assertion"]
    assert "'cuda' == 'flagos'" in alias["error"]
    chain = chain_of(document, alias)
    assert_chain_names_redirect_guard_and_skipped_alias(chain)
    symptom = chain["chain"][-1]
    assert symptom["uses"] == "torch.device" and symptom["frame"]["function"] == "test_cuda_means_flagos"
    assert plain["causes"] == []
    view = done.stderr.split("flagos-doctor explain: ", 1)[1]
    assert "a chain of causes, root first" in view and "no cause found" in view
    # The run's findings follow the failures, in the terminal and in the Markdown.
    assert view.index("Failures") < view.index("ERROR stale-guard") < view.index("Watched probes the run wrote: ")
    assert "ERROR alias-missing torch.device" in view and "orphan-original" in view
    assert "never ran, which would have written torch.device" in view
    assert "### Findings of the run" in page and "stale-guard" in page and "a chain of causes" in page


#: Runs the seed's lines, then replays their random draws (the Linear's initialisation, then
#: the input) to compute the same model eagerly on the device. Explained itself: one watched
#: child compiles the seed's lines and checks them against eager (a second, unwatched child
#: loading the graph again cost a torch and dynamo import).
SEED_AGAINST_EAGER = """
import runpy, sys, torch
torch.manual_seed(0)
seed = runpy.run_path(sys.argv[1])
torch.manual_seed(0)
replayed = torch.nn.Linear(10, 10)
x = torch.randn(2, 10)
assert torch.equal(replayed.weight, seed["model"].weight.cpu()), "the replay drew other numbers"
eager = seed["model"](x.to("flagos"))
print("compiled equals eager:", torch.equal(seed["out"].cpu(), eager.cpu()), eager.device)
"""


def test_the_seed_lines_compile_with_inductor_on_the_fixed_demo_as_eager_computes(tmp_path):
    seed = os.path.join(EXPLAIN, "seed_demo.py")
    # A cache of its own: Inductor compiles (or loads) this graph, and logs its wrapper either way.
    inductor = {"TORCH_LOGS": "output_code", "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")}
    fixed, document = explain(tmp_path, "python", "-c", SEED_AGAINST_EAGER, seed, options=("--stack", "demo"),
                              env=inductor)
    assert fixed.returncode == 0, fixed.stderr
    # The seed's own line, then the replay's: what it compiled equals what eager computes.
    assert fixed.stdout == "flagos:0 (2, 10)\ncompiled equals eager: True flagos:0\n" and document["failures"] == []
    # The wrapper Inductor wrote for the flagos device: the Linear is one extern addmm.
    assert "empty_strided((2, 10), (10, 1), device='flagos', dtype=torch.float32)" in fixed.stderr
    assert "extern_kernels.addmm(primals_2, primals_3, reinterpret_tensor(primals_1" in fixed.stderr


#: A flagos graph that needs generated kernels (a fused pointwise op, a reduction), then the
#: same function on CPU. CPU's compiled sin (scalar under NO_VEC_ISA; vectorised, Sleef,
#: without it) may differ from eager's by an ulp on some machines: close, not equal.
NEEDS_A_KERNEL = """
import torch
import flagos_doctor.demo
fn = lambda x: (x.sin() + 1).sum(0)
x = torch.randn(3, 5)
out = torch.compile(fn, fullgraph=True)(x.to("flagos"))
print("flagos:", out.device, torch.allclose(out.cpu(), fn(x), rtol=1e-6, atol=1e-6))
print("cpu:", torch.allclose(torch.compile(fn, fullgraph=True)(x), fn(x), rtol=1e-6, atol=1e-6))
"""


def test_a_flagos_graph_needing_a_generated_kernel_gets_cpus_code_generator_and_cpu_is_unchanged(tmp_path):
    done = run_cli_bare([sys.executable, "-c", NEEDS_A_KERNEL], {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"),
                                                                 "TORCH_LOGS": "output_code", **NO_VEC_ISA}, None)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-2:] == ["flagos: flagos:0 True", "cpu: True"]
    # The flagos graph's wrapper: one C++ kernel, handed the CPU data of its flagos tensors.
    assert "device='flagos'" in done.stderr
    assert "cpp_fused_add_sin_sum_0(_flagos_data(arg0_1), _flagos_data(buf0))" in done.stderr
    assert "cpp_fused_add_sin_sum_0(arg0_1, buf0)" in done.stderr  # the CPU graph's, as without the demo


def test_the_seed_lines_are_explained_under_the_seed_bug(tmp_path):
    seed = os.path.join(EXPLAIN, "seed_demo.py")
    broken, document = explain(tmp_path, "python", seed, options=("--stack", "demo"), env=SEED_BUG)
    assert broken.returncode == EXIT_CAUSE
    (failure,) = document["failures"]
    assert "Torch not compiled with CUDA enabled" in failure["error"]
    hows = [c["how"] for c in document["causes"]]
    assert hows == ["on-path", "skipped-write"]  # dynamo's direct read, then the chain
    chain = chain_of(document, failure)
    assert_chain_names_redirect_guard_and_skipped_alias(chain)
    assert chain["chain"][-1]["uses"] == "torch.cuda.get_rng_state"
    assert "ran stock torch.cuda.get_rng_state" in chain["message"]
    view = broken.stderr.split("flagos-doctor explain: ", 1)[1]
    assert view.index("CAUSE ") < view.index("ERROR stale-guard torch.cuda.is_available") \
        < view.index("ERROR alias-missing torch.device")


def test_a_program_that_never_imports_the_stack_is_told_no_stack_patched_torch(tmp_path):
    # `--stack demo` names the stack; a program that only imports torch runs torch as
    # installed, seed bug or not: no cause, and the view says why there can be none.
    program = tmp_path / "plain.py"
    program.write_text('import torch\ndev = torch.device("cuda")\nprint(torch.ones(2).to(dev))\n')
    done, document = explain(tmp_path, "python", str(program), options=("--stack", "demo"), env=SEED_BUG)
    assert done.returncode == 1 and document["causes"] == [] and len(document["failures"]) == 1
    assert not [e for e in document["events"] if e["kind"] == "write"]
    assert "no cause found: nothing wrote a watched probe in this run, so no stack had patched torch" in done.stderr
    # once it imports the stack, the same lines get the seed's chain
    program.write_text("import flagos_doctor.demo\n" + program.read_text())
    done, document = explain(tmp_path, "python", str(program), options=("--stack", "demo"), env=SEED_BUG)
    assert done.returncode == EXIT_CAUSE and "nothing wrote a watched probe" not in done.stderr


def test_a_transformers_causal_lm_compiled_fullgraph_runs_on_the_fixed_demo_and_is_explained_under_the_seed_bug(tmp_path):
    """Plain ``torch.compile(model, fullgraph=True)`` of a tiny Qwen3: on the fixed demo with
    the model on "cuda" (the alias) it matches CPU; under the seed bug on "flagos" it fails
    where the seed's did (dynamo's random state), and on "cuda" in transformers' own
    ``model.to``; each gets the chain."""
    lm = os.path.join(EXPLAIN, "tiny_causal_lm.py")
    inductor = {"TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor"), **NO_VEC_ISA}
    fixed, document = explain(tmp_path, "python", lm, "cuda", options=("--stack", "demo"), env=inductor)
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.splitlines()[-1] == "flagos:0 (1, 4, 64) matches cpu: True"
    broken, document = explain(tmp_path, "python", lm, "flagos", options=("--stack", "demo"), env={**SEED_BUG, **inductor})
    assert broken.returncode == EXIT_CAUSE, broken.stderr
    (failure,) = document["failures"]
    chain = chain_of(document, failure)
    assert_chain_names_redirect_guard_and_skipped_alias(chain)
    assert chain["chain"][-1]["uses"] == "torch.cuda.get_rng_state"
    broken, document = explain(tmp_path, "python", lm, "cuda", options=("--stack", "demo"), env={**SEED_BUG, **inductor})
    (failure,) = document["failures"]
    assert "Torch not compiled with CUDA enabled" in failure["error"]
    chain = chain_of(document, failure)
    assert_chain_names_redirect_guard_and_skipped_alias(chain)
    assert chain["chain"][-1]["uses"] == "torch.device"
    assert any(f["file"].startswith("transformers/") and f["function"] == "to" for f in failure["traceback"])


FORMS = ("test_module_constant", "test_default_argument", "test_dataclass_field", "test_fixture",
         "test_library_to_device")
OTHER_CAUSES = ("test_plain_assertion", "test_shape_error", "test_cuda_stream_no_alias_redirects",
                "test_cuda_init_no_alias_redirects")


def explain_forms(tmp_path, *pytest_options, env=None):
    done, document = explain(tmp_path, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_options,
                             "device_forms_tests.py", options=("--stack", "demo"), env=env, cwd=EXPLAIN)
    return done, document, {f["test"].rsplit("::", 1)[1]: f for f in document["failures"]}


def test_a_device_made_on_one_line_and_used_on_another_gets_the_chain_in_every_form(tmp_path):
    done, document, by_test = explain_forms(tmp_path, env=SEED_BUG)
    assert sorted(by_test) == sorted(FORMS + OTHER_CAUSES), done.stderr
    symptoms = {}
    for name in FORMS:
        failure = by_test[name]
        assert "Torch not compiled with CUDA enabled" in failure["error"]
        chain = chain_of(document, failure)
        assert_chain_names_redirect_guard_and_skipped_alias(chain)
        symptom = chain["chain"][-1]
        assert symptom["uses"] == "torch.device" and "reached torch's CUDA initialisation" in symptom["how"]
        assert "where the skipped alias (torch.device) would have sent cuda to the stack's device" in chain["message"]
        symptoms[name] = (symptom["frame"]["file"], symptom["frame"]["function"])
    forms = "device_forms_tests.py"
    assert symptoms == {"test_module_constant": (forms, "scale"), "test_default_argument": (forms, "scale"),
                        "test_dataclass_field": (forms, "test_dataclass_field"),
                        "test_fixture": (forms, "test_fixture"),
                        "test_library_to_device": ("torch/nn/modules/module.py", "convert")}
    for name in OTHER_CAUSES:  # a plain assertion, a shape error, torch.cuda's own calls: no cause
        assert by_test[name]["causes"] == [], by_test[name]["causes"]


def test_the_forms_pass_on_the_fixed_demo_and_without_the_alias_get_no_cause(tmp_path):
    done, document, by_test = explain_forms(tmp_path)
    assert sorted(by_test) == sorted(OTHER_CAUSES), done.stderr
    assert document["tests"]["counts"]["passed"] == len(FORMS)
    assert all(f["causes"] == [] for f in document["failures"])
    # The alias turned off by the user: no guard read the probe, so nothing skipped the alias.
    done, document, by_test = explain_forms(tmp_path, env={**SEED_BUG, "FLAGOS_ALIAS_CUDA": "0"})
    assert sorted(by_test) == sorted(FORMS + OTHER_CAUSES), done.stderr
    assert all(f["causes"] == [] for f in document["failures"])


@pytest.fixture(scope="module")
def xdist_tests(tmp_path_factory):
    """alias_tests.py and device_forms_tests.py (no test name in both) under one ``pytest -n 2``:
    each file's tests in the workers, read by the two tests below (a run each cost a second
    pytest and two more workers, each importing torch)."""
    tmp = tmp_path_factory.mktemp("xdist")
    done, document = explain(tmp, "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", "alias_tests.py",
                             "device_forms_tests.py", options=("--stack", "demo"), env=SEED_BUG, cwd=EXPLAIN)
    return done, document, {f["test"].rsplit("::", 1)[1]: f for f in document["failures"]}


def test_the_forms_get_the_chain_in_pytest_xdist_workers(xdist_tests):
    done, document, by_test = xdist_tests
    roles = {p["pid"]: p["role"] for p in document["processes"]}
    for name in FORMS:
        assert roles[by_test[name]["process"]].startswith("pytest-xdist worker"), done.stderr
        assert_chain_names_redirect_guard_and_skipped_alias(chain_of(document, by_test[name]))
    assert all(by_test[name]["causes"] == [] for name in OTHER_CAUSES)


MANY = '''
import pytest
import torch

import flagos_doctor.demo  # noqa: F401


@pytest.mark.parametrize("i", range(1500))
def test_alias(i):
    assert torch.device("cuda").type == "flagos"


@pytest.mark.parametrize("i", range(1500))
def test_plain(i):
    assert i < 0
'''


def test_three_thousand_failures_stay_within_every_views_budget(tmp_path):
    (tmp_path / "many_tests.py").write_text(MANY)
    # --tb=no: explain's records come from its own plugin, not pytest's report of 3,000
    # tracebacks (a fifth of this test's time)
    done, document = explain(tmp_path, "python", "-m", "pytest", "-q", "--tb=no", "-p", "no:cacheprovider", "many_tests.py",
                             options=("--stack", "demo", "--markdown", str(tmp_path / "why.md")), env=SEED_BUG)
    assert done.returncode == EXIT_CAUSE and len(document["failures"]) == 3000
    assert sum(1 for f in document["failures"] if f["causes"]) == 1500
    page = (tmp_path / "why.md").read_text()
    assert len(page) <= 60_000 and "2975 more failures not listed (1475 with a cause, 1500 without)" in page
    assert page.count("a chain of causes, root first") == 1 and "the same chain as failure #" in page
    view = done.stderr.split("flagos-doctor explain: ", 1)[1]
    assert len(view.splitlines()) <= 150, len(view.splitlines())
    assert "2975 more failures not listed" in view
    (tmp_path / "why.json").write_text((tmp_path / "explain.json").read_text())
    report = run_cli("report", "--stack", "demo", "--explain", str(tmp_path / "why.json"), cwd=str(tmp_path))
    assert report.returncode == 0, report.stderr
    assert len(report.stdout) <= 60_000 and "2975 more failures not listed" in report.stdout


GUARD_MODULE = '''import torch
from torch import Tensor


def _install_alias():
    torch.device = object
    Tensor.cuda = None
    setattr(torch.cuda, "current_device", None)


def alias():
    if torch.cuda.is_available():
        return
    local = object()
    local.attribute = 1
    _install_alias()
'''


def test_the_skipped_code_names_the_writes_of_the_module_functions_it_calls(tmp_path):
    from flagos_doctor.probe import decisions
    from flagos_doctor.probe.finding import skipped_words

    path = tmp_path / "guarded.py"
    path.write_text(GUARD_MODULE)
    guard = GUARD_MODULE.splitlines().index("    if torch.cuda.is_available():") + 1
    decision = decisions.source_decision(str(path), guard, "is_available", True)
    skipped = decision["skipped"]
    assert skipped["lines"] == [guard + 2, guard + 4] and skipped["ended_by"] == "return"
    assert skipped["calls"] == [{"call": "_install_alias()", "line": guard + 4,
                                 "writes": ["torch.device", "torch.Tensor.cuda", "torch.cuda.current_device"]}]
    assert skipped_words(skipped) == (f"lines {guard + 2}-{guard + 4} never ran, which would have written "
                                      f"`_install_alias()` (line {guard + 4}) -> torch.device, torch.Tensor.cuda, "
                                      "torch.cuda.current_device")
    # With the other answer only the `return` is skipped, and it writes nothing.
    other = decisions.source_decision(str(path), guard, "is_available", False)["skipped"]
    assert other == {"lines": [guard + 1, guard + 1], "ended_by": None, "writes": [], "calls": []}


def test_the_chain_holds_in_pytest_xdist_workers(xdist_tests):
    """The same two tests under ``pytest -n 2`` (beside the forms, one run): each failure recorded
    under its worker process, the alias assertion's chain found in that worker's own events, the
    plain one still no cause."""
    done, document, by_test = xdist_tests
    assert done.returncode == EXIT_CAUSE, done.stderr
    alias, plain = by_test["test_cuda_means_flagos"], by_test["test_plain_wrong_assertion"]
    roles = {p["pid"]: p["role"] for p in document["processes"]}
    assert sorted(roles.values())[-2:] == ["pytest-xdist worker gw0", "pytest-xdist worker gw1"]
    assert roles[alias["process"]].startswith("pytest-xdist worker")  # failed in a worker, not the parent
    assert_chain_names_redirect_guard_and_skipped_alias(chain_of(document, alias))
    assert plain["causes"] == []


def test_without_stack_explain_records_the_stack_the_program_imported_and_report_probes_it(tmp_path):
    """No ``--stack``: the run names the demo (its code wrote the watched probes), so
    ``report --explain`` probes the demo and its page carries the run's own findings; a program
    importing no stack names none."""
    program = tmp_path / "constant.py"
    program.write_text("import torch\nimport flagos_doctor.demo  # noqa: F401\n\nDEVICE = torch.device('cuda')\n"
                       "print(torch.ones(2).to(DEVICE))\n")
    done, document = explain(tmp_path, "python", str(program), env=SEED_BUG)
    assert done.returncode == EXIT_CAUSE and document["stack"] == "demo", done.stderr
    assert "(stack demo)" in done.stderr
    assert_chain_names_redirect_guard_and_skipped_alias(chain_of(document, document["failures"][0]))
    report = run_cli("report", "--explain", str(tmp_path / "explain.json"), cwd=str(tmp_path))
    assert report.returncode == 0, report.stderr
    assert "| stack imported | flagos_doctor.demo |" in report.stdout
    findings = report.stdout.split("#### Findings of the run", 1)[1]
    assert "- **error** stale-guard `torch.cuda.is_available`" in findings
    assert "- **error** alias-missing `torch.device`" in findings
    plain = tmp_path / "plain.py"
    plain.write_text("import torch\nprint(torch.ones(2).sum().item())\n")
    done, document = explain(tmp_path, "python", str(plain))
    assert done.returncode == 0 and document["stack"] is None, done.stderr


def test_a_cause_exits_with_a_status_of_its_own_apart_from_the_programs_own_one(tmp_path):
    """The program's own 1 (an uncaught error, pytest's failed tests) passes through; a failure
    with a cause exits 10, or the status ``--cause-status`` names."""
    program = tmp_path / "fixture_device.py"
    program.write_text("import torch\nimport flagos_doctor.demo  # noqa: F401\n\n\ndef run(device=torch.device('cuda')):\n"
                       "    return torch.zeros(3).to(device)\n\n\nrun()\n")
    done, document = explain(tmp_path, "python", str(program), env=SEED_BUG)
    assert document["program"]["returncode"] == 1 and done.returncode == EXIT_CAUSE == 10, done.stderr
    assert document["causes"][0]["how"] == "skipped-write"
    done, _ = explain(tmp_path, "python", str(program), options=("--cause-status", "42"), env=SEED_BUG)
    assert done.returncode == 42
    done, document = explain(tmp_path, "python", str(program))  # the fixed demo: it runs
    assert done.returncode == 0 and document["failures"] == []
    bad = run_cli("explain", "--cause-status", "126", "--", "python", str(program), cwd=str(tmp_path))
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["flagos-doctor: error: --cause-status: 126 is not 1-125 (0 is success; "
                                               "126 and up are the shell's and signals')"]


def test_a_device_made_in_a_module_constant_gets_the_chain_in_a_subprocess(tmp_path):
    """The program only spawns ``python constant_device.py``: the failure is the subprocess's,
    its chain found in that process's own events, and the stack named from them."""
    spawner = tmp_path / "spawner.py"
    spawner.write_text("import subprocess\nimport sys\n\n"
                       "sys.exit(subprocess.run([sys.executable, sys.argv[1]]).returncode)\n")
    done, document = explain(tmp_path, "python", str(spawner), os.path.join(EXPLAIN, "constant_device.py"),
                             env=SEED_BUG)
    assert done.returncode == EXIT_CAUSE and document["stack"] == "demo", done.stderr
    (failure,) = document["failures"]
    roles = {p["pid"]: p["role"] for p in document["processes"]}
    assert roles[failure["process"]] == "subprocess"
    chain = chain_of(document, failure)
    assert_chain_names_redirect_guard_and_skipped_alias(chain)
    assert chain["chain"][-1]["frame"] == {"file": "constant_device.py", "line": 11, "function": "scale"}
