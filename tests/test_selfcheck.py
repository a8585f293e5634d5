"""The engine judged against itself and against device kernels known right or wrong.

* Self-check: with the device arm on the CPU too, every CPU-valid case of every route of
  backends_flaggems.conf must PASS (a harness that disagrees with itself is a defect).
* The demo stack (device ``flagos``): its kernels must PASS.
* Deliberately wrong PrivateUse1 kernels (wrong values, unwritten in-place ``self``, wrong
  ``out=``, wrong indices, out-of-range random values, a raise, a CPU result) must be WRONG
  or ERROR; a kernel that breaks ties differently must still PASS.

Each runs in a subprocess: the PrivateUse1 backend can be set up once per process, and a
crash in a reference must not take pytest down with it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from conftest import CONFS, REPO_ROOT

pytest.importorskip("torch")

FLAGGEMS_CONF = os.path.join(CONFS, "backends_flaggems.conf")


def run_child(code: str, timeout: int = 600) -> dict:
    env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=env, cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


SELF_CHECK = """
import json, sys
from flagos_doctor import conf
from flagos_doctor.survey.child.engine import CaseRunner
from flagos_doctor.survey.spec import load_spec
routes = conf.select(conf.parse_conf(sys.argv[1] if len(sys.argv) > 1 else %r), "flagos_python")
runner = CaseRunner(device="cpu", spec=load_spec(None))
results = {o: {p: runner.run_case(o, p) for p in runner.profiles(o)} for o in routes}
print(json.dumps(results))
"""


def test_self_check_on_backends_flaggems_routes():
    assert os.path.isfile(FLAGGEMS_CONF), f"shared confs missing: {FLAGGEMS_CONF}"
    results = run_child(SELF_CHECK % FLAGGEMS_CONF)
    assert len(results) == 389
    bad = [(o, p, r) for o, cases in results.items() for p, r in cases.items() if r["status"] in ("WRONG", "ERROR")]
    assert bad == []
    statuses = {r["status"] for cases in results.values() for r in cases.values()}
    assert statuses <= {"PASS", "INVALID_CASE", "UNVERIFIABLE"}
    covered = [o for o, cases in results.items() if any(r["status"] == "PASS" for r in cases.values())]
    assert len(covered) >= 370
    # the overloads with no CPU kernel: an independent reference, or a reason
    for overload in ("_conv_depthwise2d", "cudnn_convolution", "addmm.dtype", "addmm.dtype_out",
                     "_thnn_fused_lstm_cell_backward_impl", "_flash_attention_backward"):
        details = [r["detail"] for r in results[overload].values() if r["status"] == "UNVERIFIABLE"]
        assert details and all(d for d in details), overload
    cases = sum(r["status"] == "PASS" for c in results.values() for r in c.values())
    assert cases > 1824  # upstream's CPU-valid cases on the same routes


DEMO = """
import json
import flagos_doctor.demo as demo
from flagos_doctor.survey.child.engine import CaseRunner
from flagos_doctor.survey.spec import load_spec
runner = CaseRunner(device=demo.setup(), spec=load_spec(None))
results = {o: {p: runner.run_case(o, p) for p in runner.profiles(o)} for o in demo.registered_overloads}
print(json.dumps({"results": results, "kernel_calls": dict(demo.kernels.kernel_calls)}))
"""


def test_demo_stack_kernels_pass():
    out = run_child(DEMO)
    results = out["results"]
    assert len(results) >= 40
    bad = [(o, p, r) for o, cases in results.items() for p, r in cases.items() if r["status"] in ("WRONG", "ERROR")]
    assert bad == []
    for overload, cases in results.items():
        assert any(r["status"] == "PASS" for r in cases.values()), overload
        assert out["kernel_calls"].get(overload, 0) > 0, overload  # the demo kernel really ran


WRONG_KERNELS = """
import json
import torch
import flagos_doctor.demo as demo
from flagos_doctor.demo.kernels import unwrap, wrap
from flagos_doctor.survey.child.engine import CaseRunner
from flagos_doctor.survey.spec import load_spec

lib = torch.library.Library("aten", "IMPL")

def erf(self):                      # values off by 0.01
    return wrap(torch.erf(unwrap(self)) + 0.01)

def abs_(self):                     # a right new tensor, but self is never written
    return wrap(unwrap(self).abs())

def exp_out(self, *, out):          # right result returned, out= left wrong
    unwrap(out).copy_(unwrap(self).exp() * 2)
    return wrap(unwrap(self).exp())

def kthvalue(self, k, dim=-1, keepdim=False):   # right values, indices that point elsewhere
    values, indices = torch.kthvalue(unwrap(self), k, dim, keepdim)
    return wrap(values), wrap((indices + 1) % unwrap(self).shape[dim])

def cummax(self, dim):              # other, equally right, indices among ties: the first
    x = unwrap(self)
    values, _ = torch.cummax(x, dim)
    d = dim % x.dim()
    firsts = [(x.narrow(d, 0, i + 1) == values.narrow(d, i, 1)).int().argmax(d, keepdim=True)
              for i in range(x.shape[d])]
    return wrap(values), wrap(torch.cat(firsts, d))

def uniform_(self, from_=0.0, to=1.0, *, generator=None):   # values outside [from, to]
    unwrap(self).fill_(to + 1.0)
    return self

def floor(self):                    # the device raises
    raise RuntimeError("device exploded")

def ceil(self):                     # the result stays on the CPU
    return torch.ceil(unwrap(self))

for name, fn in (("erf", erf), ("abs_", abs_), ("exp.out", exp_out), ("kthvalue", kthvalue),
                 ("cummax", cummax), ("uniform_", uniform_), ("floor", floor), ("ceil", ceil)):
    lib.impl(name, fn, "PrivateUse1")

runner = CaseRunner(device=demo.setup(), spec=load_spec(None))
names = ["erf", "abs_", "exp.out", "kthvalue", "cummax", "uniform_", "floor", "ceil"]
print(json.dumps({o: {p: runner.run_case(o, p) for p in ("2d-f32", "2d-i64")} for o in names}))
"""


def test_wrong_device_results_are_wrong():
    results = run_child(WRONG_KERNELS)
    f32 = {o: r["2d-f32"] for o, r in results.items()}
    assert f32["erf"]["status"] == "WRONG" and "differ" in f32["erf"]["detail"]
    assert f32["abs_"]["status"] == "WRONG"  # the op's result is self: unwritten, so wrong
    assert f32["exp.out"]["status"] == "WRONG" and f32["exp.out"]["detail"].startswith("out")
    assert f32["kthvalue"]["status"] == "WRONG" and f32["kthvalue"]["detail"].startswith("indices")
    assert f32["uniform_"]["status"] == "WRONG" and "outside" in f32["uniform_"]["detail"]
    assert f32["floor"] == {"status": "ERROR", "detail": "RuntimeError: device exploded"}
    assert f32["ceil"]["status"] == "WRONG" and "on cpu" in f32["ceil"]["detail"]
    # int64 values have many ties: other right indices are not a failure
    assert results["cummax"]["2d-i64"]["status"] == "PASS", results["cummax"]
    assert results["cummax"]["2d-f32"]["status"] == "PASS", results["cummax"]
