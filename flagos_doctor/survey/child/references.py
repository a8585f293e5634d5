"""References for overloads with no CPU kernel: the same result from another source.

Each entry computes on the CPU what the overload must return, from a documented
equivalent (a general ATen op, float64 math, autograd of the plain formula), or says
why no reference can judge it (:class:`Unverifiable`, recorded as UNVERIFIABLE with the
reason in the case's detail).
"""

from __future__ import annotations

import torch


class Unverifiable(Exception):
    """No reference can judge this case; the message says why."""


class Alternative:
    def __init__(self, source: str, fn):
        self.source = source
        self.fn = fn

    def run(self, named: dict, case):
        return self.fn(named, case)


ALTERNATIVES: dict = {}


def alternative(overload: str, source: str):
    def register(fn):
        ALTERNATIVES[overload] = Alternative(source, fn)
        return fn

    return register


@alternative("_conv_depthwise2d", "aten.convolution with groups = input channels")
def _conv_depthwise2d(a, case):
    x = a["self"]
    return torch.ops.aten.convolution(x, a["weight"], a["bias"], a["stride"], a["padding"], a["dilation"],
                                      False, [0, 0], x.shape[1])


@alternative("cudnn_convolution", "aten.convolution")
def _cudnn_convolution(a, case):
    return torch.ops.aten.convolution(a["self"], a["weight"], None, a["stride"], a["padding"], a["dilation"],
                                      False, [0] * len(a["padding"]), a["groups"])


def _addmm_dtype(a):
    out_dtype = a["out_dtype"]
    inputs = (a["self"], a["mat1"], a["mat2"])
    if any(not t.is_floating_point() for t in inputs):
        raise TypeError("addmm with out_dtype takes floating inputs")
    if out_dtype != inputs[1].dtype and not (out_dtype == torch.float32 and inputs[1].dtype in (torch.float16, torch.bfloat16)):
        raise TypeError(f"out_dtype {out_dtype} needs float16/bfloat16 inputs or their own dtype")
    wide = [t.double() for t in inputs]
    result = torch.addmm(wide[0], wide[1], wide[2], beta=a.get("beta", 1), alpha=a.get("alpha", 1))
    return result.to(out_dtype)


@alternative("addmm.dtype", "float64 addmm cast to out_dtype")
def _addmm_dtype_fn(a, case):
    return _addmm_dtype(a)


@alternative("addmm.dtype_out", "float64 addmm cast to out_dtype, written to out")
def _addmm_dtype_out(a, case):
    result = _addmm_dtype(a)
    out = case.kwargs["out"]
    out.resize_(result.shape)
    out.copy_(result)
    return out


@alternative("_thnn_fused_lstm_cell_backward_impl", "float64 math of the LSTM cell's gradient")
def _lstm_cell_backward(a, case):
    workspace = a["workspace"]
    if not workspace.is_floating_point():
        raise TypeError("LSTM cell gradients take floating tensors")
    dtype = workspace.dtype
    ws = workspace.double()
    hidden = ws.shape[1] // 4
    in_gate, forget_gate, cell_gate, out_gate = ws.split(hidden, dim=1)
    cx, cy = a["cx"].double(), a["cy"].double()
    grad_hy = a["grad_hy"].double() if a["grad_hy"] is not None else torch.zeros_like(cy)
    grad_cy = a["grad_cy"].double() if a["grad_cy"] is not None else torch.zeros_like(cy)
    tanh_cy = cy.tanh()
    grad_cell = grad_hy * out_gate * (1 - tanh_cy * tanh_cy) + grad_cy
    grad_gates = torch.cat([
        grad_cell * cell_gate * in_gate * (1 - in_gate),
        grad_cell * cx * forget_gate * (1 - forget_gate),
        grad_cell * in_gate * (1 - cell_gate * cell_gate),
        grad_hy * tanh_cy * out_gate * (1 - out_gate),
    ], dim=1)
    grad_cx = grad_cell * forget_gate
    grad_bias = grad_gates.sum(0) if a["has_bias"] else None
    return (grad_gates.to(dtype), grad_cx.to(dtype), grad_bias.to(dtype) if grad_bias is not None else None)


_ATTENTION_REASON = (
    "attention backward with no CPU kernel: its inputs (out, logsumexp, RNG state) are "
    "produced by the matching device forward, in a layout that forward defines"
)

for _name in ("_efficient_attention_backward", "_flash_attention_backward",
              "_scaled_dot_product_cudnn_attention_backward",
              "_scaled_dot_product_efficient_attention_backward",
              "_scaled_dot_product_flash_attention_backward"):
    def _unverifiable(a, case, _name=_name):
        raise Unverifiable(_ATTENTION_REASON)

    ALTERNATIVES[_name] = Alternative("none", _unverifiable)
