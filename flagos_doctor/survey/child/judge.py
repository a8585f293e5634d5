"""Judging one case: the device's results against the CPU reference's.

Each result (returned tensors, then the arguments the op writes: ``out=`` buffers and
in-place ``self``) must be on the device, and have the reference's shape and dtype. Then:

* floating and complex values agree within the spec's tolerance for their dtype
  (``|got - want| <= atol + rtol * |want|``, NaN equal to NaN); integers and bools exactly;
* index outputs of sorts, top-k, k-th value, median, mode, max/min along a dim, cumulative
  max/min and max pools are judged by what they point at: the input gathered at the
  device's indices must give the device's values (ties may pick any index), the values
  themselves agree with the reference (for ``mode``, any value as frequent as the
  reference's);
* eigenvalues agree as a multiset (their order is unspecified);
* nondeterministic ops (the spec's ``random_ops``) are judged on device, dtype, shape,
  finiteness and the op's value range where known, never on values.

Every check returns None when it holds, else a short reason for the case's detail.
"""

from __future__ import annotations

import math

import torch

#: op (name without trailing ``_``) -> (values output, indices output, how indices point)
INDEXED = {
    "sort": (0, 1, "dim"), "topk": (0, 1, "dim"), "kthvalue": (0, 1, "dim"),
    "median": (0, 1, "dim"), "nanmedian": (0, 1, "dim"), "mode": (0, 1, "dim"),
    "max": (0, 1, "dim"), "min": (0, 1, "dim"), "cummax": (0, 1, "dim"), "cummin": (0, 1, "dim"),
    "max_pool2d_with_indices": (0, 1, "pool2"), "max_pool3d_with_indices": (0, 1, "pool3"),
    "max_pool1d_with_indices": (0, 1, "pool1"),
}
#: ops whose results are a set in unspecified order.
UNORDERED = {"_linalg_eigvals", "linalg_eigvals"}

_BATCH_NORM_SAVED = ("save_mean", "save_invstd", "save_rstd", "save_var")

#: op -> outputs that are saved statistics whose dtype is the backend's choice: for a 16-bit
#: input CPU keeps them in the input's dtype and CUDA in float32 (its accumulation type).
#: Their values are compared (in the narrower dtype, at its tolerance); their dtype
#: is not, or stock CUDA would be WRONG against stock CPU.
STATISTICS_DTYPE_FREE = {"native_layer_norm": frozenset({1, 2})}


def undefined_results(overload: str, inputs: dict) -> tuple[frozenset, frozenset, str]:
    """Results an op leaves undefined for these inputs: (output indices, written argument
    names, why). Backends may return anything there (CPU an empty tensor or zero, CUDA a
    copy or uninitialised memory), so they are not compared.
    """
    base = overload.split(".", 1)[0]
    if base in ("native_batch_norm", "_native_batch_norm_legit", "_native_batch_norm_legit_functional",
                "_native_batch_norm_legit_no_training", "_batch_norm_no_update", "_batch_norm_with_update",
                "_batch_norm_impl_index"):
        outputs, why = set(), []
        if base in ("_native_batch_norm_legit_no_training", "_batch_norm_no_update") or inputs.get("training") is False:
            outputs |= {1, 2}
            why.append("saved statistics are undefined in eval mode")
        if base in ("_batch_norm_no_update", "_batch_norm_with_update", "_batch_norm_impl_index"):
            outputs |= {3} | ({4} if base == "_batch_norm_impl_index" else set())
            why.append("the reserve space (and implementation index) belong to the backend")
        names = _BATCH_NORM_SAVED if {1, 2} <= outputs else ()
        return frozenset(outputs), frozenset(names), "; ".join(why)
    if base in ("nll_loss_forward", "nll_loss2d_forward") and inputs.get("reduction") == 0:
        return frozenset({1}), frozenset({"total_weight"}), "total_weight is undefined with reduction none"
    return frozenset(), frozenset(), ""


def flatten(value) -> list:
    """The leaves of a result: tensors, None (undefined tensors) and plain values."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in flatten(item)]
    return [value]


def dtype_name(dtype) -> str:
    return str(dtype).rsplit(".", 1)[-1]


class Judge:
    """Compares one case's device results with its reference results."""

    def __init__(self, spec, device_type: str):
        self.spec = spec
        self.device_type = device_type

    # -- plain comparison ----------------------------------------------------------------
    def tensor(self, want, got, what: str):
        """None when ``got`` (a device tensor) matches ``want`` (a CPU tensor), else why not."""
        if want is None or got is None:
            if want is None and got is None:
                return None
            return f"{what}: {'undefined' if got is None else 'a tensor'} where the reference has {'a tensor' if got is None else 'none'}"
        if not isinstance(got, torch.Tensor):
            return f"{what}: {type(got).__name__} where the reference has a tensor"
        problem = self.placement(want, got, what)
        if problem:
            return problem
        return self.values(want, got.detach().cpu(), what)

    def placement(self, want, got, what: str):
        if got.device.type != self.device_type:
            return f"{what}: on {got.device.type}, not {self.device_type}"
        if tuple(got.shape) != tuple(want.shape):
            return f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
        if got.dtype != want.dtype:
            return f"{what}: dtype {dtype_name(got.dtype)} != {dtype_name(want.dtype)}"
        return None

    def values(self, want, got, what: str):
        want = want.detach()
        if want.is_complex():
            want, got = torch.view_as_real(want.resolve_conj()), torch.view_as_real(got.resolve_conj())
        if want.is_floating_point():
            tol = self.spec.tolerance(dtype_name(want.dtype) if not want.is_complex() else dtype_name(want.dtype))
            atol, rtol = (tol.atol, tol.rtol) if tol else (0.0, 0.0)
            w, g = want.double(), got.double()
            close = torch.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
            if bool(close.all()):
                return None
            bad = int((~close).sum())
            diff = (g - w).abs()
            diff = torch.where(close, torch.zeros_like(diff), diff.nan_to_num(nan=math.inf))
            worst = int(diff.reshape(-1).argmax()) if diff.numel() else 0  # results may be strided (out= buffers)
            where = list(torch.unravel_index(torch.tensor(worst), want.shape)) if want.dim() else []
            where = [int(i) for i in where]
            return (f"{what}: {bad} of {want.numel()} values differ, worst at {where}: "
                    f"{g.reshape(-1)[worst].item():.6g} vs {w.reshape(-1)[worst].item():.6g} "
                    f"(atol {atol:g}, rtol {rtol:g})")
        if torch.equal(want, got):
            return None
        bad = int((want != got).sum())
        return f"{what}: {bad} of {want.numel()} values differ"

    # -- whole results -------------------------------------------------------------------
    def results(self, overload: str, expected, actual, inputs: dict):
        """Compare returned values; None when all agree."""
        want, got = flatten(expected), flatten(actual)
        if len(want) != len(got):
            return f"returned {len(got)} values, the reference {len(want)}"
        base = overload.split(".", 1)[0].rstrip("_") or overload
        skipped, _, _ = undefined_results(overload, inputs)
        if skipped:
            want = [w for index, w in enumerate(want) if index not in skipped]
            got = [g for index, g in enumerate(got) if index not in skipped]
        pair = INDEXED.get(base)
        if pair and len(want) > max(pair[:2]) and not _stable_sort(overload, inputs):
            return self._indexed(base, pair, want, got, inputs)
        if base in UNORDERED and len(want) == 1:
            return self._unordered(want[0], got[0])
        free = STATISTICS_DTYPE_FREE.get(base, frozenset()) if not skipped else frozenset()
        for index, (w, g) in enumerate(zip(want, got)):
            what = f"output {index}" if len(want) > 1 else "output"
            if index in free and isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) and g.dtype != w.dtype \
                    and w.is_floating_point() and g.is_floating_point():
                narrow = w.dtype if w.dtype.itemsize <= g.dtype.itemsize else g.dtype  # its tolerance applies
                w, g = w.to(narrow), g.to(narrow)
            problem = self._leaf(w, g, what)
            if problem:
                return problem
        return None

    def _leaf(self, w, g, what):
        if isinstance(w, torch.Tensor) or w is None:
            return self.tensor(w, g, what)
        if isinstance(w, float) and isinstance(g, float) and (math.isclose(w, g, rel_tol=1e-6) or (w != w and g != g)):
            return None
        return None if w == g else f"{what}: {g!r} != {w!r}"

    def _indexed(self, base, pair, want, got, inputs):
        vi, ii, how = pair
        for index, (w, g) in enumerate(zip(want, got)):
            if index == ii:
                continue
            problem = self.tensor(w, g, "values" if index == vi else f"output {index}")
            if problem and not (base == "mode" and index == vi and problem.startswith("values:") and "differ" in problem):
                return problem
        problem = self.tensor(want[ii], got[ii], "indices")
        if problem is None:
            return None
        if "differ" not in problem:
            return problem  # wrong device, shape or dtype: no tie explains that
        src = inputs.get("self")
        if not isinstance(src, torch.Tensor):
            return problem
        values = got[vi].detach().cpu()
        indices = got[ii].detach().cpu()
        if how.startswith("pool"):
            nd = int(how[-1])
            flat_src = src.flatten(-nd)
            flat_idx = indices.flatten(-nd)
            if bool(((flat_idx < 0) | (flat_idx >= flat_src.shape[-1])).any()):
                return "indices: out of range"
            picked = flat_src.gather(-1, flat_idx).reshape(values.shape)
        else:
            if src.dim() == 0:
                return problem
            dim = inputs.get("dim", -1)
            dim = (dim if isinstance(dim, int) else -1) % src.dim()
            idx = indices if indices.dim() == src.dim() else indices.unsqueeze(dim)
            if bool(((idx < 0) | (idx >= src.shape[dim])).any()):
                return "indices: out of range"
            picked = src.gather(dim, idx)
            if indices.dim() != src.dim():
                picked = picked.squeeze(dim)
        if not _same(picked, values):
            return "indices: the input at the device's indices is not the device's values"
        if base == "mode":
            dim = inputs.get("dim", -1) % src.dim()
            count = lambda v: (src == (v if v.dim() == src.dim() else v.unsqueeze(dim))).sum(dim)  # noqa: E731
            if not torch.equal(count(values), count(want[vi])):
                return "values: a value less frequent than the reference's mode"
        return None

    def _unordered(self, want, got):
        problem = self.placement(want, got, "output") if isinstance(got, torch.Tensor) else "output: not a tensor"
        if problem:
            return problem
        w = want.detach().reshape(-1, want.shape[-1]) if want.dim() else want.reshape(1, 1)
        g = got.detach().cpu().reshape(w.shape)
        tol = self.spec.tolerance(dtype_name(want.dtype))
        atol, rtol = (tol.atol, tol.rtol) if tol else (0.0, 0.0)
        for row in range(w.shape[0]):
            left = list(g[row])
            for value in w[row]:
                distances = [abs(complex(x) - complex(value)) for x in left]
                if not distances:
                    return "output: fewer values than the reference"
                best = min(range(len(left)), key=distances.__getitem__)
                if distances[best] > atol + rtol * abs(complex(value)) and not (value != value and left[best] != left[best]):
                    return f"output: {complex(value):.6g} has no match within tolerance"
                left.pop(best)
        return None

    # -- random ops ----------------------------------------------------------------------
    def random(self, expected, actual):
        """Device, dtype, shape and finiteness of each result; never its values."""
        want, got = flatten(expected), flatten(actual)
        if len(want) != len(got):
            return f"returned {len(got)} values, the reference {len(want)}"
        for index, (w, g) in enumerate(zip(want, got)):
            what = f"output {index}" if len(want) > 1 else "output"
            if not isinstance(w, torch.Tensor):
                continue
            if not isinstance(g, torch.Tensor):
                return f"{what}: not a tensor"
            problem = self.placement(w, g, what)
            if problem:
                return problem
            host = g.detach().cpu()
            if (host.is_floating_point() or host.is_complex()) and not bool(torch.isfinite(host).all()):
                return f"{what}: non-finite values"
        return None


def _same(a, b) -> bool:
    if a.is_floating_point() or a.is_complex():
        return bool(torch.isclose(a, b, rtol=0, atol=0, equal_nan=True).all())
    return torch.equal(a, b)


def _stable_sort(overload: str, inputs: dict) -> bool:
    return overload.startswith("sort") and inputs.get("stable") is True


# -- value ranges of random ops ----------------------------------------------------------------


def random_range(overload: str, inputs: dict, result):
    """None when a random op's result lies in its documented range, else why not."""
    base = overload.split(".", 1)[0].rstrip("_")
    leaves = [t for t in flatten(result) if isinstance(t, torch.Tensor)]
    if not leaves:
        return None
    out = leaves[0].detach().cpu()
    if out.numel() == 0:
        return None
    if base in ("uniform",):
        low, high = inputs.get("from", 0.0), inputs.get("to", 1.0)
        if bool((out.double() < low).any() | (out.double() > high).any()):
            return f"values outside [{low}, {high}]"
    elif base in ("rand", "rand_like"):
        if bool((out < 0).any() | (out > 1).any()):
            return "values outside [0, 1]"
    elif base in ("bernoulli",):
        if not bool(((out == 0) | (out == 1)).all()):
            return "values other than 0 and 1"
    elif base in ("exponential",):
        if bool((out < 0).any()):
            return "negative values"
    elif base in ("randint", "randint_like"):
        high = inputs.get("high")
        low = inputs.get("low", 0)
        if isinstance(high, int) and bool((out < low).any() | (out >= high).any()):
            return f"values outside [{low}, {high})"
    elif base == "randperm":
        n = inputs.get("n")
        if isinstance(n, int) and not torch.equal(out.sort().values.long(), torch.arange(n)):
            return "not a permutation"
    elif base == "multinomial":
        probs = inputs.get("self")
        if isinstance(probs, torch.Tensor):
            if bool((out < 0).any() | (out >= probs.shape[-1]).any()):
                return "category indices out of range"
            if not inputs.get("replacement", False):
                rows = out.reshape(-1, out.shape[-1])
                if any(len(set(r.tolist())) != len(r) for r in rows):
                    return "a category drawn twice without replacement"
    elif base == "native_dropout":
        if len(leaves) > 1:
            mask = leaves[1].detach().cpu()
            kept = leaves[0].detach().cpu()
            if bool((kept[~mask] != 0).any()):
                return "dropped elements are not zero"
    return None
