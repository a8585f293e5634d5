"""Input synthesis: the arguments of one case, built on the CPU from the ATen schema.

Every argument gets, in this order of preference:

1. a value from the op's *recipe* (:data:`RECIPES`), for ops whose arguments depend on
   each other (matrix shapes, pads, pool windows, index ranges, norm statistics, ...);
2. the schema's default value, when it has one;
3. a value chosen by the argument's type and name (:func:`_generic_value`).

``out=`` buffers come last: the op's functional overload runs once on copies of the
inputs to learn each output's shape and dtype, and the buffers are zero-filled tensors of
those (transposed views under a strided profile).

A profile fixes dtype and layout; its shape is a hint. Ops of a fixed rank (``mm``, ``bmm``,
convolutions, pools) derive their shapes from the profile's sizes with :meth:`Synth.dims`
(leading sizes merged, or 1s prepended), so a 1-d or 4-d profile still yields a case of the
right rank. Index-like arguments (indices, targets, repeats, counts) are int64 whatever the
profile. All randomness comes from one generator seeded per case, so a fresh worker
rebuilds identical inputs.
"""

from __future__ import annotations

import math
import re

import torch

#: ops (name without a trailing ``_``) whose ``self`` argument has a restricted domain.
_DOMAINS = {
    "log": "positive", "log10": "positive", "log2": "positive", "log1p": "positive",
    "sqrt": "positive", "rsqrt": "positive", "digamma": "positive", "lgamma": "positive",
    "acos": "unit", "asin": "unit", "atanh": "unit", "logit": "prob", "reciprocal": "nonzero",
    "acosh": "above_one", "erfinv": "unit", "polygamma": "positive",
    "isinf": "specials", "isnan": "specials", "isneginf": "specials", "isposinf": "specials",
    "nan_to_num": "specials", "isfinite": "specials",
}
#: ops whose second operand divides (integer division by zero raises on the CPU).
_DIVIDES = {"div", "remainder", "fmod", "floor_divide", "addcdiv"}

_FACTORY_DTYPES = {"dtype"}


class Declined(Exception):
    """The recipe has no input of this profile for the op (the case is INVALID_CASE)."""


def normalize_type(type_str: str) -> tuple[str, bool]:
    """``Optional[List[int]]`` -> (``int[]``, True); ``SymInt`` -> ``int``; ``number`` -> ``Scalar``."""
    t, optional = type_str.strip(), False
    while True:
        if t.endswith("?"):
            t, optional = t[:-1], True
        elif t.startswith("Optional[") and t.endswith("]"):
            t, optional = t[len("Optional["):-1], True
        else:
            break
    if t.startswith("List[") and t.endswith("]"):
        t = t[len("List["):-1] + "[]"
    t = re.sub(r"\[\d+\]", "[]", t)
    t = {"SymInt": "int", "number": "Scalar", "SymInt[]": "int[]", "Optional[Tensor][]": "Tensor?[]",
         "str?": "str"}.get(t, t)
    return t, optional


class Synth:
    """Builds the tensors and values of one case for one profile."""

    def __init__(self, overload: str, profile, seed: int):
        self.overload = overload
        self.op = overload.split(".", 1)[0]
        self.base = self.op.rstrip("_") or self.op  # abs_ -> abs; in-place forms share recipes
        self.profile = profile
        self.dtype = getattr(torch, profile.dtype)
        self.shape = tuple(profile.shape)
        self.strided = profile.layout == "strided"
        self.seed = seed
        self.gen = torch.Generator().manual_seed(seed)

    # -- properties of the profile --------------------------------------------------
    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype.is_floating_point

    @property
    def is_complex(self) -> bool:
        return self.dtype.is_complex

    @property
    def is_bool(self) -> bool:
        return self.dtype == torch.bool

    @property
    def is_int(self) -> bool:
        return not (self.is_float or self.is_complex or self.is_bool)

    def dims(self, k: int) -> list:
        """The profile's sizes as a rank-``k`` shape: leading sizes merged, or 1s prepended."""
        shape = list(self.shape)
        while len(shape) > k:
            shape = [shape[0] * shape[1], *shape[2:]]
        while len(shape) < k:
            shape = [1, *shape]
        return shape

    def at_least(self, k: int) -> list:
        """The profile's shape with 1s prepended up to rank ``k``."""
        shape = list(self.shape)
        while len(shape) < k:
            shape = [1, *shape]
        return shape

    # -- values -----------------------------------------------------------------------
    def _uniform(self, shape, low, high):
        return torch.rand(shape, generator=self.gen) * (high - low) + low

    def _randint(self, low, high, shape):
        return torch.randint(low, high, tuple(shape), generator=self.gen, dtype=torch.int64)

    def tensor(self, shape=None, dtype=None, kind: str = "any", layout: bool = True) -> torch.Tensor:
        """A tensor of ``shape`` (default: the profile's) and ``dtype`` (default: the profile's).

        ``kind``: ``any``, ``positive``, ``nonzero``, ``unit`` (-0.9..0.9), ``prob``
        (0.05..0.95), ``above_one``, ``specials`` (some NaN and infinities). Under a strided
        profile a tensor of rank >= 2 is a transposed view (``layout=False`` opts out).
        """
        shape = list(self.shape if shape is None else shape)
        dtype = self.dtype if dtype is None else dtype
        if layout and self.strided and len(shape) >= 2:
            return self._values([*shape[:-2], shape[-1], shape[-2]], dtype, kind).transpose(-1, -2)
        return self._values(shape, dtype, kind)

    def _values(self, shape, dtype, kind):
        if dtype == torch.bool:
            if kind in ("positive", "nonzero"):
                return torch.ones(shape, dtype=torch.bool)
            return self._uniform(shape, 0, 1) < 0.5
        if dtype.is_floating_point or dtype.is_complex:
            real = torch.float64 if dtype in (torch.float64, torch.complex128) else torch.float32
            if kind == "positive":
                value = self._uniform(shape, 0.5, 2.0)
            elif kind == "nonzero":
                sign = torch.where(self._uniform(shape, 0, 1) < 0.5, -1.0, 1.0)
                value = sign * self._uniform(shape, 0.25, 2.0)
            elif kind == "unit":
                value = self._uniform(shape, -0.9, 0.9)
            elif kind == "prob":
                value = self._uniform(shape, 0.05, 0.95)
            elif kind == "above_one":
                value = self._uniform(shape, 1.1, 3.0)
            else:
                value = torch.randn(shape, generator=self.gen)
                if kind == "specials" and value.numel() >= 4:
                    flat = value.view(-1)
                    picks = torch.randperm(flat.numel(), generator=self.gen)[: max(3, flat.numel() // 8)]
                    for i, index in enumerate(picks.tolist()):
                        flat[index] = (math.nan, math.inf, -math.inf)[i % 3]
            value = value.to(real)
            if dtype.is_complex:
                imag = torch.randn(shape, generator=self.gen).to(real)
                return torch.complex(value, imag).to(dtype)
            return value.to(dtype)
        if kind in ("positive", "nonzero", "above_one"):
            value = self._randint(1, 9, shape)
        elif kind in ("prob", "unit"):
            value = self._randint(0, 2, shape)
        else:
            value = self._randint(-8, 9, shape)
        if dtype == torch.uint8:
            value = value.abs()
        return value.to(dtype)

    def index(self, high: int, shape) -> torch.Tensor:
        """int64 indices in ``[0, high)`` (repeats allowed)."""
        return self._randint(0, max(1, high), shape)

    def unique_index(self, shape, dim: int, high: int) -> torch.Tensor:
        """int64 indices of ``shape``, distinct along ``dim`` (each below ``high``)."""
        dim = dim % len(shape)
        full = list(shape)
        full[dim] = high
        order = torch.rand(full, generator=self.gen).argsort(dim=dim)
        return order.narrow(dim, 0, shape[dim]).contiguous()

    def scalar(self, kind: str = "any"):
        """A Python scalar suited to the profile's dtype (an int for integers, a bool for bool)."""
        if self.is_bool:
            return True
        if self.is_int:
            return {"nonzero": 3, "positive": 3, "unit": 1, "prob": 1}.get(kind, 2)
        return {"nonzero": 1.5, "positive": 1.5, "unit": 0.5, "prob": 0.3}.get(kind, 0.5)

    def like_output(self, fn, *args, kind="any", **kwargs):
        """A random tensor shaped like ``fn(*args)``'s result (a gradient for a backward op)."""
        try:
            result = fn(*args, **kwargs)
        except Exception as exc:  # the forward rejects this profile: so would the backward
            raise Declined(f"forward for gradient shape: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
        if isinstance(result, (tuple, list)):
            result = result[0]
        return self.tensor(list(result.shape), dtype=result.dtype, kind=kind)


# -- generic values by type and name ------------------------------------------------------


def _generic_value(c: Synth, arg, values: dict):
    base, optional = normalize_type(str(arg.type))
    name = arg.name
    lname = name.lower()
    if lname in ("dtype", "out_dtype", "input_dtype") or base == "ScalarType":
        if c.base in _FACTORY_OPS or not optional:
            return c.dtype
        return None
    if base == "Device":
        return torch.device("cpu")
    if base in ("Layout", "MemoryFormat", "Generator"):
        return None
    if optional:
        return None
    if base == "Tensor":
        return _generic_tensor(c, lname, values)
    if base == "Tensor[]":
        return [c.tensor(), c.tensor()]
    if base == "Tensor?[]":  # advanced indices (index, index_put): int64 whatever the profile
        return [c.index(c.shape[0], [max(1, c.shape[0] // 2)])]
    if base == "int":
        return _generic_int(c, lname)
    if base == "int[]":
        if lname in ("dim", "dims", "axis", "axes"):
            return [-1]
        if lname == "normalized_shape":
            return [c.shape[-1]]
        return list(c.shape)
    if base == "Scalar":
        if lname in ("alpha", "beta", "scale", "input_scale", "value"):
            return c.scalar("positive") if c.is_int else 1.5
        return c.scalar()
    if base == "float":
        if lname == "eps":
            return 1e-5
        if lname == "momentum":
            return 0.1
        if lname in ("p", "dropout_p"):
            return 0.5
        return 0.5
    if base == "bool":
        return False
    if base == "bool[]":
        return [True] * (getattr(arg, "N", None) or 3)
    if base == "str":
        if lname == "reduce":
            return "sum"
        return "none"
    raise Declined(f"no synthesis for argument {name} of type {arg.type}")


def _generic_int(c: Synth, lname: str) -> int:
    """An ``int`` argument by its name: a dimension, a count the shape bounds, else 1."""
    if lname in ("dim", "axis", "dim2"):
        return -1 if lname != "dim2" else 1
    if lname in ("dim0", "dim1", "start", "offset", "diagonal"):
        return 0
    if "group" in lname:
        return 1
    if lname in ("n", "end", "size", "length", "steps", "num_samples", "high", "bins"):
        return c.shape[0]
    if lname == "m":
        return c.shape[-1]
    if lname == "k":
        return min(3, c.shape[-1])
    if lname == "reduction":
        return 1
    return 1


def _generic_tensor(c: Synth, lname: str, values: dict):
    if any(word in lname for word in ("index", "indices", "target", "label", "repeats")):
        return c.index(c.shape[0], [c.shape[0]])
    if "mask" in lname or lname == "condition":
        return c.tensor(dtype=torch.bool)
    kind = "any"
    if lname in ("self", "input", "x") and c.base in _DOMAINS:
        kind = _DOMAINS[c.base]
    elif lname in ("other", "tensor2") and c.base in _DIVIDES:
        kind = "nonzero"
    return c.tensor(kind=kind)


# -- recipes --------------------------------------------------------------------------------

RECIPES: dict = {}
_FACTORY_OPS = {"arange", "eye", "full", "full_like", "linspace", "logspace", "ones", "ones_like",
                "zeros", "zeros_like", "empty", "empty_like", "rand", "rand_like", "randn", "randn_like",
                "randint", "randint_like", "randperm", "scalar_tensor", "new_ones", "new_zeros", "new_full"}


#: overload -> fn(named device arguments) -> {name: replacement}: the device arm's inputs
#: where what they must be depends on the backend that runs them (:func:`adapt_on_device`).
_ON_DEVICE = {}


def _registrar(table: dict):
    """A decorator factory: ``@registrar(name, ...)`` files the function under each name."""

    def names_for(*names):
        def register(fn):
            for name in names:
                table[name] = fn
            return fn

        return register

    return names_for


#: Register an adjustment of the device arm's inputs for these overloads.
on_device = _registrar(_ON_DEVICE)


def adapt_on_device(overload: str, op, device_case: "Case") -> None:
    """Adjust ``device_case`` (already on the device) for inputs whose form is the backend's
    choice, e.g. saved statistics a forward returned. A no-op for almost every overload."""
    fn = _ON_DEVICE.get(overload)
    if fn is None:
        return
    names = [a.name for a in op._schema.arguments]
    named = dict(zip(names, device_case.args))
    named.update(device_case.kwargs)
    for name, value in fn(named).items():
        if name in device_case.kwargs:
            device_case.kwargs[name] = value
        else:
            device_case.args[names.index(name)] = value


#: Register a recipe for op names (``mm``: every overload, ``mm.out``: one overload).
recipe = _registrar(RECIPES)


def find_recipe(overload: str, base: str):
    return RECIPES.get(overload) or RECIPES.get(base)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


# Matrix products ---------------------------------------------------------------------------


@recipe("mm", "matmul")
def _mm(c):
    m, k = c.dims(2)
    return {"self": c.tensor([m, k]), "mat2": c.tensor([k, max(2, m // 2)])}


@recipe("bmm")
def _bmm(c):
    b, m, k = c.dims(3)
    return {"self": c.tensor([b, m, k]), "mat2": c.tensor([b, k, max(2, m // 2)])}


@recipe("addmm")
def _addmm(c):
    m, k = c.dims(2)
    n = max(2, m // 2)
    values = {"self": c.tensor([m, n]), "mat1": c.tensor([m, k]), "mat2": c.tensor([k, n])}
    if c.is_float:
        values.update(beta=0.5, alpha=1.5)
    return values


@recipe("addmm.dtype", "addmm.dtype_out")
def _addmm_dtype(c):
    values = _addmm(c)
    values["out_dtype"] = torch.float32
    return values


@recipe("baddbmm", "addbmm")
def _baddbmm(c):
    b, m, k = c.dims(3)
    n = max(2, m // 2)
    out = [b, m, n] if c.base == "baddbmm" else [m, n]
    return {"self": c.tensor(out), "batch1": c.tensor([b, m, k]), "batch2": c.tensor([b, k, n])}


@recipe("mv")
def _mv(c):
    m, k = c.dims(2)
    return {"self": c.tensor([m, k]), "vec": c.tensor([k])}


@recipe("addmv")
def _addmv(c):
    m, k = c.dims(2)
    values = {"self": c.tensor([m]), "mat": c.tensor([m, k]), "vec": c.tensor([k])}
    if c.is_float:
        values.update(beta=0.5, alpha=1.5)
    return values


@recipe("addr")
def _addr(c):
    m, n = c.dims(2)
    return {"self": c.tensor([m, n]), "vec1": c.tensor([m]), "vec2": c.tensor([n])}


@recipe("dot", "vdot", "inner")
def _dot(c):
    (n,) = c.dims(1)
    return {"self": c.tensor([n]), "tensor": c.tensor([n]), "other": c.tensor([n])}


@recipe("trace")
def _trace(c):
    return {"self": c.tensor(c.dims(2))}


@recipe("_euclidean_dist", "cdist", "_cdist_forward")
def _euclidean(c):
    n, d = c.dims(2)
    return {"x1": c.tensor([n, d]), "x2": c.tensor([max(1, n // 2), d])}


@recipe("_linalg_eigvals", "linalg_eigvals")
def _eigvals(c):
    n = c.shape[-1]
    shape = [*c.shape[:-2], n, n] if c.rank >= 2 else [n, n]
    return {"self": c.tensor(shape), "input": c.tensor(shape)}


# Element-wise with constraints -----------------------------------------------------------------


@recipe("clamp", "clip")
def _clamp(c):
    if c.overload.endswith(".Tensor"):
        low = c.tensor(kind="any")
        return {"min": low, "max": low + (c.tensor(kind="positive") if not c.is_bool else low)}
    if c.is_int:
        return {"min": -3, "max": 4}
    return {"min": -0.5, "max": 0.5}


@recipe("clamp_min")
def _clamp_min(c):
    return {"min": -3 if c.is_int else -0.5}


@recipe("clamp_max")
def _clamp_max(c):
    return {"max": 4 if c.is_int else 0.5}


@recipe("fill", "fill_")
def _fill(c):
    value = c.tensor(shape=[], kind="any") if ".Tensor" in c.overload else c.scalar()
    return {"value": value}


@recipe("masked_fill", "masked_fill_")
def _masked_fill(c):
    value = c.tensor(shape=[], kind="any") if c.overload.endswith(".Tensor") else c.scalar()
    return {"mask": c.tensor(dtype=torch.bool), "value": value}


@recipe("masked_scatter", "masked_scatter_")
def _masked_scatter(c):
    return {"mask": c.tensor(dtype=torch.bool), "source": c.tensor()}


@recipe("where")
def _where(c):
    return {"condition": c.tensor(dtype=torch.bool), "self": c.tensor(), "other": c.tensor()}


@recipe("lerp")
def _lerp(c):
    weight = c.tensor(kind="prob") if c.overload.endswith(".Tensor") else 0.3
    return {"end": c.tensor(), "weight": weight}


@recipe("addcdiv", "addcmul")
def _addc(c):
    return {"tensor1": c.tensor(), "tensor2": c.tensor(kind="nonzero"),
            "value": 0.5 if c.is_float else 2}


@recipe("polar")
def _polar(c):
    return {"abs": c.tensor(kind="positive"), "angle": c.tensor()}


@recipe("special_chebyshev_polynomial_v", "special_chebyshev_polynomial_t",
        "special_chebyshev_polynomial_u", "special_chebyshev_polynomial_w",
        "special_hermite_polynomial_h", "special_legendre_polynomial_p")
def _polynomial(c):
    degree = c._randint(0, 6, list(c.shape)).to(c.dtype)
    return {"x": c.tensor(kind="unit"), "n": degree}


@recipe("pow")
def _pow(c):
    if c.overload in ("pow.Scalar",):
        return {"self": 2 if not c.is_float else 1.5, "exponent": c.tensor(kind="unit")}
    if c.overload.endswith("Tensor_Tensor") or c.overload == "pow_.Tensor":
        exponent = c._randint(0, 4, list(c.shape)).to(c.dtype) if not c.is_float else c.tensor(kind="unit") * 3
        return {"self": c.tensor(kind="positive" if c.is_float else "any"), "exponent": exponent}
    return {"exponent": 2 if not c.is_float else 2.5, "self": c.tensor(kind="positive" if c.is_float else "any")}


@recipe("isin")
def _isin(c):
    values = {"elements": c.tensor(), "test_elements": c.tensor([max(4, c.shape[-1] // 2)], layout=False)}
    values["element"] = c.scalar()
    values["test_element"] = c.scalar()
    return values


@recipe("div", "div_")
def _div(c):
    values = {"other": c.tensor(kind="nonzero") if "Tensor" in c.overload or c.overload.endswith(".out") else c.scalar("nonzero")}
    if "mode" in c.overload:
        values["rounding_mode"] = "floor" if c.seed % 2 else "trunc"
    return values


@recipe("remainder", "fmod", "floor_divide")
def _remainder(c):
    if c.overload.endswith("Scalar_Tensor"):
        return {"self": c.scalar("nonzero"), "other": c.tensor(kind="nonzero")}
    if "Scalar" in c.overload:
        return {"other": c.scalar("nonzero")}
    return {"other": c.tensor(kind="nonzero")}


@recipe("bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift")
def _bitwise(c):
    if c.overload.endswith("Scalar_Tensor"):
        return {"self": c.scalar(), "other": c.tensor()}
    if "Scalar" in c.overload:
        return {"other": c.scalar()}
    return {"other": c.tensor()}


@recipe("threshold")
def _threshold(c):
    return {"threshold": c.scalar("unit") if not c.is_bool else False, "value": c.scalar("positive")}


@recipe("threshold_backward")
def _threshold_backward(c):
    return {"grad_output": c.tensor(), "self": c.tensor(), "threshold": c.scalar("unit")}


@recipe("elu_backward")
def _elu_backward(c):
    return {"grad_output": c.tensor(), "alpha": 1.0, "scale": 1.0, "input_scale": 1.0,
            "is_result": False, "self_or_result": c.tensor()}


@recipe("rrelu_with_noise_backward")
def _rrelu_backward(c):
    return {"grad_output": c.tensor(), "self": c.tensor(), "noise": c.tensor(kind="prob"),
            "lower": 0.125, "upper": 1.0 / 3.0, "training": bool(c.seed % 2), "self_is_result": False}


@recipe("renorm")
def _renorm(c):
    return {"p": 2, "dim": 0, "maxnorm": 1.0}


@recipe("soft_margin_loss", "soft_margin_loss_backward")
def _soft_margin(c):
    sign = torch.where(c.tensor(dtype=torch.bool, layout=False), 1.0, -1.0).to(c.dtype) if not c.is_bool else None
    values = {"target": sign if sign is not None else c.tensor()}
    if c.base.endswith("backward"):
        values["grad_output"] = c.tensor(shape=[])
        values["reduction"] = 1
    return values


@recipe("mse_loss", "mse_loss_backward", "l1_loss", "smooth_l1_loss", "huber_loss")
def _mse(c):
    values = {"target": c.tensor()}
    if c.base.endswith("backward"):
        values["grad_output"] = c.tensor(shape=[])
        values["reduction"] = 1
    return values


# Reductions and sorting ---------------------------------------------------------------------------


@recipe("kthvalue")
def _kthvalue(c):
    return {"k": min(3, c.shape[-1]), "dim": -1}


@recipe("topk")
def _topk(c):
    return {"k": min(5, c.shape[-1]), "dim": -1, "largest": bool(c.seed % 2), "sorted": True}


@recipe("sort.stable")
def _sort_stable(c):
    return {"stable": True, "dim": -1, "descending": bool(c.seed % 2)}


@recipe("logsumexp")
def _logsumexp(c):
    return {"dim": [-1]}


@recipe("histc")
def _histc(c):
    return {"bins": 10, "min": -2, "max": 2}


@recipe("bincount")
def _bincount(c):
    n = min(64, math.prod(c.shape))
    values = {"self": c.index(12, [n]), "minlength": 4}
    values["weights"] = c.tensor([n], layout=False) if c.is_float else None
    return values


@recipe("multinomial")
def _multinomial(c):
    shape = c.dims(2) if c.rank >= 2 else [c.shape[0]]
    return {"self": c.tensor(shape, kind="positive"), "num_samples": min(4, shape[-1]),
            "replacement": bool(c.seed % 2)}


@recipe("repeat_interleave.Tensor")
def _repeat_interleave(c):
    (n,) = c.dims(1)
    n = min(n, 64)
    dtype = c.dtype if c.is_int else torch.int64
    return {"repeats": c._randint(0, 4, [n]).to(dtype)}


@recipe("unique_dim")
def _unique_dim(c):
    return {"dim": 0}


@recipe("unique_consecutive")
def _unique_consecutive(c):
    return {"return_inverse": True, "return_counts": True}


@recipe("_unique2")
def _unique2(c):
    return {"sorted": True, "return_inverse": True, "return_counts": True}


# Shapes, views' backwards and index ops ---------------------------------------------------------


@recipe("flip")
def _flip(c):
    return {"dims": [0] if c.rank == 1 else [0, c.rank - 1]}


@recipe("roll")
def _roll(c):
    return {"shifts": [3], "dims": [-1]}


@recipe("constant_pad_nd")
def _constant_pad(c):
    pad = [1, 2] if c.rank == 1 else [1, 2, 2, 0]
    return {"pad": pad, "value": c.scalar("positive")}


def _pad_recipe(spatial: int, batched_rank: int):
    def build(c):
        shape = c.dims(batched_rank) if c.rank > batched_rank else c.at_least(batched_rank - 1)
        padding = [2, 1, 1, 2, 1, 0][: 2 * spatial]
        values = {"self": c.tensor(shape), "padding": padding}
        if c.base.endswith("backward"):
            fwd = getattr(torch.ops.aten, c.base[: -len("_backward")])
            values["grad_output"] = c.like_output(fwd, values["self"], padding)
        return values

    return build


for _name, _spatial in (("reflection_pad1d", 1), ("reflection_pad2d", 2), ("reflection_pad3d", 3),
                        ("replication_pad1d", 1), ("replication_pad2d", 2), ("replication_pad3d", 3)):
    RECIPES[_name] = RECIPES[_name + "_backward"] = _pad_recipe(_spatial, _spatial + 2)


@recipe("diagonal_backward")
def _diagonal_backward(c):
    sizes = c.at_least(2)
    grad = torch.empty(sizes, device="meta").diagonal(0, 0, 1)
    return {"grad_output": c.tensor(list(grad.shape)), "input_sizes": sizes, "offset": 0, "dim1": 0, "dim2": 1}


@recipe("slice_backward")
def _slice_backward(c):
    sizes = list(c.shape)
    start, end, step = 1, sizes[0] - 1, 2
    grad = torch.empty(sizes, device="meta")[start:end:step]
    return {"grad_output": c.tensor(list(grad.shape)), "input_sizes": sizes, "dim": 0,
            "start": start, "end": end, "step": step}


@recipe("unfold_backward")
def _unfold_backward(c):
    sizes = list(c.shape)
    size, step = 4, 3
    grad = torch.empty(sizes, device="meta").unfold(-1, size, step)
    return {"grad_in": c.tensor(list(grad.shape)), "input_sizes": sizes, "dim": len(sizes) - 1,
            "size": size, "step": step}


@recipe("col2im")
def _col2im(c):
    kernel, out = [2, 3], [8, 9]
    blocks = (out[0] - kernel[0] + 1) * (out[1] - kernel[1] + 1)
    channels = 3 * kernel[0] * kernel[1]
    shape = [c.shape[0], channels, blocks] if c.rank >= 3 else [channels, blocks]
    return {"self": c.tensor(shape), "output_size": out, "kernel_size": kernel,
            "dilation": [1, 1], "padding": [0, 0], "stride": [1, 1]}


@recipe("im2col")
def _im2col(c):
    return {"self": c.tensor(c.dims(4)), "kernel_size": [2, 3], "dilation": [1, 1],
            "padding": [0, 1], "stride": [1, 2]}


@recipe("channel_shuffle", "native_channel_shuffle")
def _channel_shuffle(c):
    shape = c.at_least(3)
    groups = 3 if shape[1] % 3 == 0 else 2 if shape[1] % 2 == 0 else 1
    return {"self": c.tensor(shape), "groups": groups}


@recipe("pixel_unshuffle")
def _pixel_unshuffle(c):
    return {"self": c.tensor(c.at_least(3)), "downscale_factor": 2}


@recipe("pixel_shuffle")
def _pixel_shuffle(c):
    shape = c.at_least(3)
    shape[-3] *= 4
    return {"self": c.tensor(shape), "upscale_factor": 2}


@recipe("embedding")
def _embedding(c):
    rows = 10
    return {"weight": c.tensor([rows, c.shape[-1]]), "indices": c.index(rows, list(c.shape))}


def _index_args(c, unique: bool):
    shape = list(c.shape)
    count = max(1, shape[0] // 2)
    if unique:
        index = torch.randperm(shape[0], generator=c.gen)[:count]
    else:
        index = c.index(shape[0], [count])
    return {"dim": 0, "index": index, "source": c.tensor([count, *shape[1:]])}


@recipe("index_add")
def _index_add(c):
    values = _index_args(c, unique=False)
    values["alpha"] = 2 if not c.is_float else 1.5
    return values


@recipe("index_copy")
def _index_copy(c):
    return _index_args(c, unique=True)  # a repeated index would leave which write wins undefined


@recipe("index_reduce")
def _index_reduce(c):
    values = _index_args(c, unique=False)
    values.update(reduce=("amax", "amin", "prod", "mean")[c.seed % 4], include_self=True)
    return values


@recipe("index_put", "_index_put_impl", "_unsafe_index_put")
def _index_put(c):
    shape = list(c.shape)
    count = max(1, shape[0] // 2)
    accumulate = bool(c.seed % 2)
    # Without accumulate, a position written twice has no defined winner: distinct indices.
    index = c.index(shape[0], [count]) if accumulate else torch.randperm(shape[0], generator=c.gen)[:count]
    return {"indices": [index], "values": c.tensor([count, *shape[1:]]), "accumulate": accumulate}


@recipe("index_select")
def _index_select(c):
    return {"dim": 0, "index": c.index(c.shape[0], [max(1, c.shape[0] // 2)])}


@recipe("gather")
def _gather(c):
    shape = list(c.shape)
    shape[0] = max(1, shape[0] // 2)
    return {"dim": 0, "index": c.index(c.shape[0], shape)}


@recipe("scatter", "scatter_", "scatter_add", "scatter_add_", "scatter_reduce", "scatter_reduce_")
def _scatter(c):
    shape = list(c.shape)
    sub = list(shape)
    sub[0] = max(1, shape[0] // 2)
    reduces = c.base.startswith("scatter_reduce") or c.overload.endswith(".reduce") or c.base.startswith("scatter_add")
    # scatter without a reduction: a position written twice has no defined winner.
    index = c.index(shape[0], sub) if reduces else c.unique_index(sub, 0, shape[0])
    values = {"dim": 0, "index": index, "src": c.tensor(sub), "value": c.scalar()}
    if c.overload.endswith(".reduce"):
        values["reduce"] = "add" if c.seed % 2 else "multiply"
    elif c.base.startswith("scatter_reduce"):
        values["reduce"] = ("sum", "amax", "amin", "mean", "prod")[c.seed % 5]
        values["include_self"] = bool((c.seed >> 3) % 2)
    return values


# Pools and upsampling ---------------------------------------------------------------------------


def _spatial_shape(c, spatial: int) -> list:
    """An input of ``spatial`` spatial dims with batch and channel dims, from the profile."""
    return c.dims(spatial + 2) if c.rank > spatial + 2 else c.at_least(spatial + 2)


@recipe("_adaptive_avg_pool2d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d_backward")
def _adaptive_avg_pool2d(c):
    shape = _spatial_shape(c, 2)
    out = [max(1, shape[-2] // 2), max(1, shape[-1] // 3)]
    values = {"self": c.tensor(shape), "output_size": out}
    if c.base.endswith("backward"):
        values["grad_output"] = c.like_output(torch.ops.aten._adaptive_avg_pool2d, values["self"], out)
    return values


def _pool_recipe(spatial: int, kind: str):
    def build(c):
        shape = _spatial_shape(c, spatial)
        kernel, stride, padding = [3] * spatial, [2] * spatial, [1] * spatial
        values = {"self": c.tensor(shape), "kernel_size": kernel, "stride": stride, "padding": padding}
        if kind == "max":
            values.update(dilation=[1] * spatial, ceil_mode=bool(c.seed % 2))
        else:
            values.update(ceil_mode=bool(c.seed % 2), count_include_pad=bool((c.seed >> 1) % 2),
                          divisor_override=None)
        if c.base.endswith("backward"):
            fwd = getattr(torch.ops.aten, c.base[: -len("_backward")])
            args = [values[k] for k in ("self", "kernel_size", "stride", "padding")]
            if kind == "avg":
                args += [values["ceil_mode"], values["count_include_pad"], None]
            values["grad_output"] = c.like_output(fwd, *args)
        return values

    return build


RECIPES["avg_pool2d"] = RECIPES["avg_pool2d_backward"] = _pool_recipe(2, "avg")
RECIPES["avg_pool3d"] = RECIPES["avg_pool3d_backward"] = _pool_recipe(3, "avg")
RECIPES["avg_pool1d"] = _pool_recipe(1, "avg")
RECIPES["max_pool2d_with_indices"] = _pool_recipe(2, "max")
RECIPES["max_pool3d_with_indices"] = _pool_recipe(3, "max")


@recipe("upsample_bicubic2d", "upsample_bilinear2d", "upsample_nearest2d", "_upsample_bicubic2d_aa",
        "_upsample_bilinear2d_aa", "_upsample_nearest_exact2d")
def _upsample2d(c):
    shape = c.dims(4)
    values = {"self": c.tensor(shape), "input": c.tensor(shape),
              "output_size": [shape[-2] * 2, max(1, shape[-1] + 3)], "align_corners": bool(c.seed % 2),
              "scales_h": None, "scales_w": None}
    return values


@recipe("upsample_nearest1d", "upsample_linear1d")
def _upsample1d(c):
    shape = c.dims(3)
    return {"self": c.tensor(shape), "output_size": [shape[-1] * 2 - 1], "align_corners": bool(c.seed % 2)}


def _upsample_backward(spatial: int, forward: str):
    def build(c):
        input_size = c.dims(spatial + 2)
        output_size = [input_size[2] * 2 - 1] + [max(1, s // 2 + 1) for s in input_size[3:]]
        align = bool(c.seed % 2)
        fwd = getattr(torch.ops.aten, forward)
        probe = torch.empty(input_size)
        grad = c.like_output(fwd, probe, output_size, align, *([None] * spatial))
        return {"grad_output": grad, "output_size": output_size, "input_size": input_size,
                "align_corners": align}

    return build


RECIPES["upsample_linear1d_backward"] = _upsample_backward(1, "upsample_linear1d")
RECIPES["upsample_bilinear2d_backward"] = _upsample_backward(2, "upsample_bilinear2d")
RECIPES["upsample_bicubic2d_backward"] = _upsample_backward(2, "upsample_bicubic2d")
RECIPES["_upsample_bicubic2d_aa_backward"] = _upsample_backward(2, "_upsample_bicubic2d_aa")


@recipe("affine_grid_generator")
def _affine_grid(c):
    size = c.dims(4)
    return {"theta": c.tensor([size[0], 2, 3], layout=False), "size": size, "align_corners": bool(c.seed % 2)}


@recipe("grid_sampler_2d")
def _grid_sampler(c):
    shape = c.dims(4)
    return {"input": c.tensor(shape), "grid": c.tensor([shape[0], 5, 7, 2], kind="unit"),
            "interpolation_mode": 0, "padding_mode": 0, "align_corners": False}


@recipe("max_unpool2d")
def _max_unpool2d(c):
    shape = _spatial_shape(c, 2)
    try:
        pooled, indices = torch.ops.aten.max_pool2d_with_indices(c.tensor(shape, dtype=torch.float32), [2, 2], [2, 2])
    except Exception as exc:
        raise Declined(f"max pool for indices: {type(exc).__name__}: {_first_line(exc)}")
    # indices from a real max pool: arbitrary ones may point outside the output
    return {"self": c.tensor(list(pooled.shape)), "indices": indices, "output_size": shape[-2:]}


@recipe("_pdist_backward")
def _pdist_backward(c):
    x = c.tensor(c.dims(2), layout=False)
    try:
        dist = torch.ops.aten._pdist_forward(x, 2.0)
    except Exception as exc:
        raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
    return {"grad": c.tensor(list(dist.shape), dtype=dist.dtype), "self": x, "p": 2.0, "pdist": dist}


@recipe("bucketize", "searchsorted")
def _bucketize(c):
    boundaries = c.tensor([9], layout=False).sort().values if not c.is_bool else c.tensor([2], layout=False)
    return {"boundaries": boundaries, "sorted_sequence": boundaries, "right": bool(c.seed % 2)}


@recipe("_thnn_fused_lstm_cell")
def _lstm_cell(c):
    batch, hidden = c.dims(2)
    hidden = min(hidden, 16)
    return {"input_gates": c.tensor([batch, 4 * hidden]), "hidden_gates": c.tensor([batch, 4 * hidden]),
            "cx": c.tensor([batch, hidden]), "input_bias": c.tensor([4 * hidden], layout=False),
            "hidden_bias": c.tensor([4 * hidden], layout=False)}


@recipe("gcd", "lcm")
def _gcd(c):
    return {"other": c.tensor(kind="nonzero")}


# Activations' backwards, softmax ---------------------------------------------------------------


@recipe("glu")
def _glu(c):
    return {"dim": -1}


@recipe("glu_backward")
def _glu_backward(c):
    self_ = c.tensor()
    return {"self": self_, "dim": -1, "grad_output": c.like_output(torch.ops.aten.glu, self_, -1)}


@recipe("_softmax_backward_data", "_log_softmax_backward_data")
def _softmax_backward(c):
    fwd = torch.ops.aten._softmax if c.base == "_softmax_backward_data" else torch.ops.aten._log_softmax
    x = c.tensor()
    try:
        output = fwd(x, -1, False)
    except Exception as exc:
        raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
    return {"grad_output": c.tensor(), "output": output, "dim": -1, "input_dtype": c.dtype}


@recipe("native_dropout_backward")
def _dropout_backward(c):
    return {"grad_output": c.tensor(), "mask": c.tensor(dtype=torch.bool), "scale": 2.0}


@recipe("native_dropout")
def _native_dropout(c):
    return {"p": 0.5, "train": True}


# Normalisation ----------------------------------------------------------------------------------


@recipe("native_layer_norm", "layer_norm")
def _layer_norm(c):
    normalized = list(c.shape[-1:]) if c.rank < 3 else list(c.shape[-2:])
    return {"normalized_shape": normalized, "weight": c.tensor(normalized, layout=False),
            "bias": c.tensor(normalized, layout=False), "eps": 1e-5}


@recipe("native_layer_norm_backward")
def _layer_norm_backward(c):
    normalized = list(c.shape[-1:])
    x, w, b = c.tensor(), c.tensor(normalized), c.tensor(normalized)
    try:
        _, mean, rstd = torch.ops.aten.native_layer_norm(x, normalized, w, b, 1e-5)
    except Exception as exc:
        raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
    return {"grad_out": c.tensor(), "input": x, "normalized_shape": normalized, "mean": mean, "rstd": rstd,
            "weight": w, "bias": b, "output_mask": [True, True, True]}


@on_device("native_layer_norm_backward")
def _layer_norm_statistics_on_device(named: dict) -> dict:
    """mean and rstd are what the forward returned on the backend that runs the backward, and
    their dtype is that backend's choice: for a half input CPU keeps them in half, CUDA in
    float32, and each rejects the other's ("expected scalar type Float but found Half"). The
    device arm gets the CPU's values in the dtype the device's own forward returns."""
    try:
        _, mean, _ = torch.ops.aten.native_layer_norm(named["input"], named["normalized_shape"], named["weight"],
                                                      named["bias"], 1e-5)
    except Exception:
        return {}  # the device's forward fails: its backward will say so on its own
    return {name: named[name].to(mean.dtype) for name in ("mean", "rstd")}


def _group_norm_shape(c):
    shape = c.at_least(2)
    n, ch = shape[0], shape[1]
    hxw = math.prod(shape[2:]) if len(shape) > 2 else 1
    group = next(g for g in (4, 3, 2, 1) if ch % g == 0)
    return shape, n, ch, hxw, group


@recipe("native_group_norm")
def _group_norm(c):
    shape, n, ch, hxw, group = _group_norm_shape(c)
    return {"input": c.tensor(shape), "weight": c.tensor([ch], layout=False), "bias": c.tensor([ch], layout=False),
            "N": n, "C": ch, "HxW": hxw, "group": group, "eps": 1e-5}


@recipe("native_group_norm_backward")
def _group_norm_backward(c):
    shape, n, ch, hxw, group = _group_norm_shape(c)
    x, w = c.tensor(shape), c.tensor([ch], layout=False)
    try:
        _, mean, rstd = torch.ops.aten.native_group_norm(x, w, None, n, ch, hxw, group, 1e-5)
    except Exception as exc:
        raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
    return {"grad_out": c.tensor(shape), "input": x, "mean": mean, "rstd": rstd, "weight": w,
            "N": n, "C": ch, "HxW": hxw, "group": group, "output_mask": [True, True, True]}


def _batch_norm_inputs(c):
    shape = c.at_least(2)
    ch = shape[1]
    # Running statistics are always given: with training=False and none, the CPU kernel
    # reads through a null pointer (upstream's harness crashed its reference there).
    return shape, {
        "weight": c.tensor([ch], layout=False), "bias": c.tensor([ch], layout=False),
        "running_mean": c.tensor([ch], layout=False) * 0.1,
        "running_var": c.tensor([ch], kind="positive", layout=False), "eps": 1e-5,
    }


@recipe("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_no_training", "batch_norm",
        "_native_batch_norm_legit_functional", "_batch_norm_no_update", "_batch_norm_with_update",
        "_batch_norm_impl_index", "cudnn_batch_norm", "miopen_batch_norm")
def _batch_norm(c):
    shape, values = _batch_norm_inputs(c)
    values.update(input=c.tensor(shape), training=bool(c.seed % 2), momentum=0.1)
    return values


@recipe("native_batch_norm_backward")
def _batch_norm_backward(c):
    shape, values = _batch_norm_inputs(c)
    train = bool(c.seed % 2)
    x = c.tensor(shape)
    try:
        _, save_mean, save_invstd = torch.ops.aten.native_batch_norm(
            x, values["weight"], values["bias"], values["running_mean"].clone(), values["running_var"].clone(),
            train, 0.1, 1e-5)
    except Exception as exc:
        raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
    values.pop("bias")
    # In eval mode the forward's saved statistics are empty tensors, and autograd passes them
    # on as they are; None instead makes CUDA's half-precision path assert
    # ("save_mean->defined() INTERNAL ASSERT FAILED") where CPU accepts it.
    values.update(grad_out=c.tensor(shape), input=x, save_mean=save_mean, save_invstd=save_invstd, train=train,
                  output_mask=[True, True, True])
    return values


@recipe("_weight_norm_interface")
def _weight_norm(c):
    v = c.tensor()
    dim = 0
    # g has v's shape with every dim but `dim` set to 1; g shaped like v makes the CPU
    # kernel leave part of its output unwritten.
    g_shape = [size if d == dim else 1 for d, size in enumerate(v.shape)]
    return {"v": v, "g": c.tensor(g_shape, kind="positive", layout=False), "dim": dim}


@recipe("_weight_norm_interface_backward")
def _weight_norm_backward(c):
    values = _weight_norm(c)
    try:
        _, norms = torch.ops.aten._weight_norm_interface(values["v"], values["g"], 0)
    except Exception as exc:
        raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
    return {"grad_w": c.tensor(), "saved_v": values["v"], "saved_g": values["g"], "saved_norms": norms, "dim": 0}


# Losses -----------------------------------------------------------------------------------------


def _nll_inputs(c, spatial: bool):
    if spatial:
        n, ch, h, w = _spatial_shape(c, 2)
        self_shape, target_shape = [n, ch, h, w], [n, h, w]
    else:
        n, ch = c.dims(2)
        self_shape, target_shape = [n, ch], [n]
    if ch < 2:
        raise Declined("needs at least 2 classes")
    logp = c.tensor(self_shape)
    target = c.index(ch, target_shape)
    weight = c.tensor([ch], kind="positive", layout=False) if c.seed % 2 else None
    reduction = (c.seed >> 1) % 3  # none, mean, sum
    return {"self": logp, "target": target, "weight": weight, "reduction": reduction, "ignore_index": 1}


def _nll_recipe(spatial: bool, backward: bool):
    def build(c):
        values = _nll_inputs(c, spatial)
        if backward:
            fwd = torch.ops.aten.nll_loss2d_forward if spatial else torch.ops.aten.nll_loss_forward
            try:
                output, total_weight = fwd(values["self"], values["target"], values["weight"],
                                           values["reduction"], values["ignore_index"])
            except Exception as exc:
                raise Declined(f"forward: {type(exc).__name__}: {_first_line(exc)}")
            values["grad_output"] = c.tensor(list(output.shape), dtype=output.dtype)
            values["total_weight"] = total_weight
        return values

    return build


RECIPES["nll_loss_forward"] = _nll_recipe(False, False)
RECIPES["nll_loss_backward"] = _nll_recipe(False, True)
RECIPES["nll_loss2d_forward"] = _nll_recipe(True, False)
RECIPES["nll_loss2d_backward"] = _nll_recipe(True, True)


# Convolutions ------------------------------------------------------------------------------------


@recipe("_conv_depthwise2d")
def _conv_depthwise(c):
    n, ch, h, w = _spatial_shape(c, 2)
    mult = 2
    return {"self": c.tensor([n, ch, h, w]), "weight": c.tensor([ch * mult, 1, 3, 3], layout=False),
            "kernel_size": [3, 3], "bias": c.tensor([ch * mult], layout=False), "stride": [1, 2],
            "padding": [1, 1], "dilation": [1, 1]}


@recipe("cudnn_convolution", "convolution", "_convolution", "conv2d", "mkldnn_convolution")
def _convolution(c):
    n, ch, h, w = _spatial_shape(c, 2)
    out = 4
    return {"self": c.tensor([n, ch, h, w]), "input": c.tensor([n, ch, h, w]),
            "weight": c.tensor([out, ch, 3, 3], layout=False), "bias": None, "padding": [1, 1],
            "stride": [1, 2], "dilation": [1, 1], "groups": 1, "transposed": False, "output_padding": [0, 0],
            "benchmark": False, "deterministic": True, "allow_tf32": False}


def _conv_nd(spatial: int):
    def build(c):
        shape = _spatial_shape(c, spatial)
        ch = shape[1]
        values = {"input": c.tensor(shape), "weight": c.tensor([4, ch] + [3] * spatial, layout=False),
                  "bias": c.tensor([4], layout=False), "stride": [1] * spatial, "dilation": [1] * spatial,
                  "groups": 1}
        values["padding"] = ("same" if c.seed % 2 else "valid") if c.overload.endswith(".padding") else [1] * spatial
        return values

    return build


RECIPES["conv1d"] = _conv_nd(1)
RECIPES["conv2d"] = _conv_nd(2)
RECIPES["conv3d"] = _conv_nd(3)


@recipe("one_hot")
def _one_hot(c):
    return {"self": c.index(6, list(c.shape)), "num_classes": 6 + c.seed % 2}


@recipe("prelu")
def _prelu(c):
    channels = c.shape[1] if c.rank >= 2 else 1
    return {"weight": c.tensor([channels], layout=False)}


@recipe("quantile", "nanquantile")
def _quantile(c):
    return {"q": torch.tensor([0.1, 0.5, 0.9], dtype=c.dtype if c.is_float else torch.float32), "dim": -1}


@recipe("select_backward")
def _select_backward(c):
    sizes = list(c.shape)
    return {"grad_output": c.tensor(sizes[1:] or []), "input_sizes": sizes, "dim": 0, "index": sizes[0] // 2}


@recipe("select_scatter")
def _select_scatter(c):
    return {"src": c.tensor(list(c.shape[1:])), "dim": 0, "index": c.shape[0] // 2}


@recipe("tile")
def _tile(c):
    return {"dims": [2] + [1] * (c.rank - 1)}


@recipe("normal")
def _normal(c):
    return {"mean": c.tensor() if "Tensor_" in c.overload else 0.5,
            "std": c.tensor(kind="positive") if c.overload.endswith("_Tensor") else 1.5}


@recipe("upsample_nearest3d", "upsample_trilinear3d")
def _upsample3d(c):
    shape = _spatial_shape(c, 3)
    return {"self": c.tensor(shape), "output_size": [shape[2] * 2, shape[3] + 1, shape[4] // 2 + 1],
            "align_corners": bool(c.seed % 2)}


@recipe("_upsample_nearest_exact1d")
def _upsample_exact1d(c):
    shape = c.dims(3)
    return {"self": c.tensor(shape), "output_size": [shape[-1] * 2 - 1]}


@recipe("_assert_async")
def _assert_async(c):
    return {"self": c.tensor([], kind="positive")}


# Factories ---------------------------------------------------------------------------------------


@recipe("arange", "range")
def _arange(c):
    n = c.shape[0]
    return {"end": n, "start": -3, "step": 2, "dtype": c.dtype}


@recipe("linspace", "logspace")
def _linspace(c):
    return {"start": -2 if not c.is_float else -1.5, "end": 3 if not c.is_float else 2.0,
            "steps": c.shape[0], "base": 2.0, "dtype": c.dtype}


@recipe("eye")
def _eye(c):
    return {"n": c.shape[0], "m": c.shape[-1] if c.rank > 1 else c.shape[0] // 2, "dtype": c.dtype}


@recipe("full", "full_like")
def _full(c):
    return {"size": list(c.shape), "fill_value": c.scalar("positive"), "dtype": c.dtype}


@recipe("randint", "randint_like")
def _randint(c):
    return {"high": 10, "size": list(c.shape), "dtype": c.dtype}


@recipe("randperm")
def _randperm(c):
    return {"n": math.prod(c.shape), "dtype": torch.int64}


# Random in-place ----------------------------------------------------------------------------------


@recipe("bernoulli_", "bernoulli")
def _bernoulli(c):
    return {"p": 0.3}


@recipe("exponential_")
def _exponential(c):
    return {"lambd": 2.0}


@recipe("uniform_")
def _uniform(c):
    return {"from": -1.0, "to": 3.0}


# Recurrent cells -----------------------------------------------------------------------------------


@recipe("_thnn_fused_lstm_cell_backward_impl")
def _lstm_cell_backward(c):
    batch, hidden = c.dims(2)
    hidden = min(hidden, 16)
    gates = [c.tensor([batch, hidden], kind="prob", layout=False) for _ in range(4)]
    gates[2] = gates[2] * 2 - 1  # the cell gate went through tanh, the others through sigmoid
    return {"grad_hy": c.tensor([batch, hidden]), "grad_cy": c.tensor([batch, hidden]),
            "cx": c.tensor([batch, hidden]), "cy": c.tensor([batch, hidden]),
            "workspace": torch.cat(gates, dim=1), "has_bias": True}


# -- building a case -----------------------------------------------------------------------------


class Case:
    """The positional and keyword arguments of one case (CPU tensors), and its out= slots."""

    def __init__(self, args: list, kwargs: dict, written: list):
        self.args = args
        self.kwargs = kwargs
        #: (position or keyword, argument name) of every argument the op writes (out=, in place)
        self.written = written

    def values(self):
        return list(self.args) + list(self.kwargs.values())

    def get(self, slot):
        return self.kwargs[slot] if isinstance(slot, str) else self.args[slot]


def functional_of(op):
    """The overload of the same op that takes ``op``'s arguments minus its out= ones, or None."""
    schema = op._schema
    wanted = [(a.name, str(a.type)) for a in schema.arguments if not a.is_out]
    packet = getattr(torch.ops.aten, schema.name.split("::", 1)[-1])
    for name in packet.overloads():
        candidate = getattr(packet, name)
        args = candidate._schema.arguments
        if any(a.is_out for a in args):
            continue
        if [(a.name, str(a.type)) for a in args] == wanted:
            return candidate
    return None


def build_case(op, overload: str, profile, seed: int) -> Case:
    """Synthesise the CPU arguments of ``op`` (an OpOverload) for one profile.

    Raises :class:`Declined` when the op's recipe has no input for this profile, or any
    exception raised while building derived values (the caller records INVALID_CASE).
    """
    c = Synth(overload, profile, seed)
    schema = op._schema
    fn = find_recipe(overload, c.base) or find_recipe(overload, c.op)
    chosen = fn(c) if fn else {}
    args, kwargs, written, outs = [], {}, [], []
    values = {}
    for arg in schema.arguments:
        if arg.is_out:
            value = None
            outs.append(arg)
        elif arg.name in chosen:
            value = chosen[arg.name]
        elif normalize_type(str(arg.type))[0] == "Device":
            value = torch.device("cpu")  # the device arm swaps in its device
        elif arg.name == "dtype" and c.base in _FACTORY_OPS:
            value = c.dtype
        elif arg.has_default_value():
            value = arg.default_value
        else:
            value = _generic_value(c, arg, values)
        values[arg.name] = value
        slot = arg.name if arg.kwarg_only else len(args)
        if arg.alias_info is not None and arg.alias_info.is_write:
            written.append((slot, arg.name))
        if arg.kwarg_only:
            kwargs[arg.name] = value
        else:
            args.append(value)
    if outs:
        _fill_out_buffers(c, op, args, kwargs, outs)
    return Case(args, kwargs, written)


def _fill_out_buffers(c: Synth, op, args, kwargs, outs) -> None:
    functional = functional_of(op)
    results = None
    if functional is not None:
        plain_args = [clone_tree(v) for v in args]
        plain_kwargs = {k: clone_tree(v) for k, v in kwargs.items() if k not in {a.name for a in outs}}
        try:
            try:
                results = functional(*plain_args, **plain_kwargs)
            except NotImplementedError:
                # no CPU kernel for the functional form: its independent reference knows the shapes
                from flagos_doctor.survey.child import references

                name = functional._schema.name.split("::", 1)[-1]
                if functional._schema.overload_name:
                    name += "." + functional._schema.overload_name
                alternative = references.ALTERNATIVES.get(name)
                if alternative is None:
                    raise
                names = [a.name for a in functional._schema.arguments]
                named = dict(zip(names, plain_args))
                named.update(plain_kwargs)
                results = alternative.run(named, Case(plain_args, plain_kwargs, []))
        except Exception as exc:
            raise Declined(f"functional form rejects the input: {type(exc).__name__}: {_first_line(exc)}")
    if results is not None and not isinstance(results, (tuple, list)):
        results = [results]
    for index, arg in enumerate(outs):
        if results is not None and index < len(results) and isinstance(results[index], torch.Tensor):
            proto = results[index]
            buffer = c.tensor(list(proto.shape), dtype=proto.dtype, kind="any").zero_()
        else:
            first = next((v for v in args if isinstance(v, torch.Tensor)), None)
            buffer = torch.zeros(0, dtype=first.dtype if first is not None else c.dtype)
        kwargs[arg.name] = buffer


def clone_tree(value):
    """A copy of ``value`` whose tensors are fresh clones (strides kept)."""
    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, list):
        return [clone_tree(v) for v in value]
    if isinstance(value, tuple):
        return tuple(clone_tree(v) for v in value)
    return value
