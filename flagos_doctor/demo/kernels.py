"""The demo stack's ATen kernels for the PrivateUse1 key, registered with ``torch.library``.

A ``flagos`` tensor is a storage-less tensor made by ``torch._C._acc.create_empty_tensor``
whose data is a CPU tensor kept by its storage (:data:`_DATA`), so C++'s own detach and
alias (sharing the storage) keep it: ``nn.Parameter``s and buffers live on the device. Every kernel unwraps its
arguments to those CPU tensors, runs the ATen overload on them and wraps the results;
in-place and ``out=`` overloads return the very tensors they were given, as ATen does.

Three kinds of registration, as in torch_fl:

* plumbing (allocation, copies, views, ``.item()``), which every backend must have;
* the overloads the backends conf routes to ``flagos_python`` and that the demo has a
  kernel for (:data:`DEMO_KERNELS`): these count their calls in :data:`kernel_calls`
  and, with ``FLAGOS_LOG_DISPATCH=1``, print ``[flagos dispatch] <overload> -> flagos_python``
  to file descriptor 2, as torch_fl's C++ side does;
* a boxed fallback for everything else: it counts :data:`fallback_calls` and, with
  ``FLAGOS_LOG_FALLBACK=1``, prints ``[flagos cpu_fallback] <overload>``.
"""

from __future__ import annotations

import os
import weakref
from collections import Counter

import torch
from torch.utils._python_dispatch import _disable_current_modes
from torch.utils._pytree import tree_map

#: Calls into the demo's own kernels, per overload name (``abs.out``).
kernel_calls: Counter = Counter()
#: Calls that went through the CPU fallback, per overload name.
fallback_calls: Counter = Counter()

#: The overloads the demo has a kernel for. The conf may route more to flagos_python; those
#: fall back to CPU (the case a survey must not count as a kernel PASS).
DEMO_KERNELS = frozenset(
    """
    abs abs.out neg exp log sqrt rsqrt sin cos tanh sigmoid relu gelu silu
    add.Tensor sub.Tensor mul.Tensor div.Tensor pow.Tensor_Scalar maximum minimum
    where.self eq.Tensor lt.Tensor bitwise_and.Tensor clamp add_.Tensor mul_.Tensor
    sum sum.dim_IntList mean.dim amax argmax mm bmm addmm softmax.int _softmax
    _log_softmax sort topk cumsum layer_norm native_layer_norm rand_like dropout
    """.split()
)

_PLUMBING = (
    "empty.memory_format",
    "empty_strided",
    "copy_",
    "_copy_from",
    "_copy_from_and_resize",
    "view",
    "_unsafe_view",
    "as_strided",
    "_reshape_alias",
    "_local_scalar_dense",
    "resize_",
    "set_.source_Tensor",
    "fill_.Scalar",
    "zero_",
)


def overload_name(op) -> str:
    """``aten::abs.out`` -> ``abs.out``; the default overload is named by its op alone."""
    name = op._schema.name.split("::", 1)[-1]
    return name if not op._schema.overload_name else f"{name}.{op._schema.overload_name}"


def resolve(name: str):
    """The OpOverload for a conf name such as ``abs`` or ``add.Tensor``."""
    op, _, overload = name.partition(".")
    return getattr(getattr(torch.ops.aten, op), overload or "default")


#: The CPU data of each flagos tensor, by its storage. Not an attribute of the tensor: torch
#: detaches and aliases in C++ (``nn.Parameter`` makes its subclass from ``t.detach()``,
#: whose Python object must not exist yet), and the alias shares only the storage. An entry
#: goes when its storage does (torch keeps a storage's Python object as long as the storage).
_DATA: dict[int, torch.Tensor] = {}
#: The tensor :func:`wrap` made for each storage's data, weakly: once it is gone, another
#: tensor of the storage (a view Inductor's wrapper made before ``del buf2``) can be given its
#: address, and is not it.
_MADE: dict[int, weakref.ref] = {}


def _forget(key: int) -> None:
    _DATA.pop(key, None)
    _MADE.pop(key, None)


def _remember(tensor, data) -> None:
    storage = tensor.untyped_storage()
    _DATA[storage._cdata] = data
    _MADE[storage._cdata] = weakref.ref(tensor)
    weakref.finalize(storage, _forget, storage._cdata)


def wrap(value):
    if isinstance(value, torch.Tensor) and value.device.type in ("cpu", "meta"):
        tensor = torch._C._acc.create_empty_tensor(list(value.shape), value.dtype)
        if value.device.type == "cpu":
            _remember(tensor, value)
        return tensor
    return value


def _viewed(tensor, data):
    """``data`` seen through ``tensor``'s own geometry. The data is the truth for the tensor
    :func:`wrap` made (an ``out=`` kernel may resize the data, not the tensor) and for an
    alias of the same geometry (detach); an alias made in C++ without dispatch (Inductor's
    ``reinterpret_tensor``) shares the storage with a geometry of its own."""
    made = (_MADE.get(tensor.untyped_storage()._cdata) or (lambda: None))() is tensor
    if made or (tensor.shape == data.shape and tensor.storage_offset() == 0 and tensor.is_contiguous()):
        return data
    if not (data.is_contiguous() and data.storage_offset() == 0):
        raise RuntimeError(f"flagos demo: cannot view data of shape {tuple(data.shape)} and strides "
                           f"{data.stride()} as size {tuple(tensor.shape)}, strides {tensor.stride()}")
    with _disable_current_modes():
        return data.as_strided(tensor.shape, tensor.stride(), tensor.storage_offset())


def unwrap(value):
    if isinstance(value, torch.Tensor) and value.device.type not in ("cpu", "meta"):
        data = _DATA.get(value.untyped_storage()._cdata)
        if data is None:
            # A data-less flagos tensor: torch.compile's fake tensors make these while
            # tracing. Shapes and dtypes are all they need, so meta tensors serve.
            return torch.empty_strided(value.shape, value.stride(), dtype=value.dtype, device="meta")
        return _viewed(value, data)
    if isinstance(value, torch.device) and value.type != "cpu":
        return torch.device("cpu")
    return value


def _log(line: str) -> None:
    # Straight to fd 2: torch_fl's C++ side prints there, and a survey captures it there.
    os.write(2, (line + "\n").encode())


def _aliased_arguments(schema) -> dict[int, int]:
    """Map a return's position to the position of the argument it aliases (in-place, out=)."""
    aliased = {}
    for r_index, ret in enumerate(schema.returns):
        if ret.alias_info is None or not ret.alias_info.is_write:
            continue
        for a_index, arg in enumerate(schema.arguments):
            if arg.alias_info is not None and arg.alias_info.before_set == ret.alias_info.before_set:
                aliased[r_index] = a_index
    return aliased


def _tensors_for_numbers(op, args):
    # Python's boxing turns ATen's "wrapped number" tensors (a Scalar promoted by a
    # composite such as remainder.Scalar) back into Python numbers; a Tensor argument
    # must get a tensor again when the overload is re-called on CPU.
    fixed = list(args)
    for index, (arg, value) in enumerate(zip(op._schema.arguments, args)):
        if isinstance(value, (int, float, bool, complex)) and isinstance(arg.type, torch.TensorType):
            fixed[index] = torch.tensor(value)
    return fixed


def _run_on_cpu(op, args, kwargs):
    """Run ``op`` on the CPU copies of its arguments; return results as flagos tensors."""
    cpu_args = tree_map(unwrap, _tensors_for_numbers(op, args))
    cpu_kwargs = tree_map(unwrap, kwargs)
    if "device" in cpu_kwargs:
        cpu_kwargs["device"] = torch.device("cpu")
    # While torch.compile traces, a fake-tensor mode is active; the CPU copy of the work
    # must run outside it, or it dispatches straight back here.
    with _disable_current_modes():
        out = op(*cpu_args, **cpu_kwargs)
    aliased = _aliased_arguments(op._schema)
    if not aliased:
        return tree_map(wrap, out)
    arguments = op._schema.arguments
    given = {arguments[i].name: value for i, value in enumerate(args)}
    given.update(kwargs)

    def returned(r_index, value):
        if r_index in aliased:
            return given[arguments[aliased[r_index]].name]
        return wrap(value)

    if len(op._schema.returns) == 1:
        return returned(0, out)
    return tuple(returned(i, value) for i, value in enumerate(out))


def _plumbing_kernel(op):
    def kernel(*args, **kwargs):
        return _run_on_cpu(op, args, kwargs)

    return kernel


def _view(tensor, size):
    # A flagos tensor's metadata is contiguous whatever its CPU data's strides (a transposed
    # view's data is not): view where the data allows, else a copy, as reshape would.
    data = unwrap(tensor)
    with _disable_current_modes():
        try:
            return wrap(data.view(size))
        except RuntimeError:
            return wrap(data.reshape(size))


def _copy_from(src, dst, non_blocking=False):
    dst_cpu = unwrap(dst)
    dst_cpu.copy_(unwrap(src))
    return dst


def _copy_from_and_resize(src, dst):
    dst_cpu = unwrap(dst)
    dst_cpu.resize_(src.shape)
    dst_cpu.copy_(unwrap(src))
    return dst


def _routed_kernel(op, name: str, log_dispatch: bool):
    def kernel(*args, **kwargs):
        kernel_calls[name] += 1
        if log_dispatch:
            _log(f"[flagos dispatch] {name} -> flagos_python")
        return _run_on_cpu(op, args, kwargs)

    return kernel


def _fallback(log_fallback: bool):
    def fallback(op, *args, **kwargs):
        name = overload_name(op)
        fallback_calls[name] += 1
        if log_fallback:
            _log(f"[flagos cpu_fallback] {name}")
        return _run_on_cpu(op, args, kwargs)

    return fallback


_libraries = []  # torch.library registrations live as long as their Library object


def register(routed: list[str]) -> list[str]:
    """Register plumbing, the routed overloads the demo has kernels for, and the fallback.

    Returns the routed overloads that got a demo kernel.
    """
    log_dispatch = os.environ.get("FLAGOS_LOG_DISPATCH") == "1"
    log_fallback = os.environ.get("FLAGOS_LOG_FALLBACK") == "1"
    lib = torch.library.Library("aten", "IMPL")
    _libraries.append(lib)
    for name in _PLUMBING:
        if name == "_copy_from":
            lib.impl(name, _copy_from, "PrivateUse1")
        elif name == "_copy_from_and_resize":
            lib.impl(name, _copy_from_and_resize, "PrivateUse1")
        elif name == "view":
            lib.impl(name, _view, "PrivateUse1")
        else:
            lib.impl(name, _plumbing_kernel(resolve(name)), "PrivateUse1")
    registered = []
    for name in routed:
        if name in DEMO_KERNELS and name not in _PLUMBING:
            lib.impl(name, _routed_kernel(resolve(name), name, log_dispatch), "PrivateUse1")
            registered.append(name)
    fallback_lib = torch.library.Library("_", "IMPL")
    _libraries.append(fallback_lib)
    fallback_lib.fallback(_fallback(log_fallback), dispatch_key="PrivateUse1")
    return registered
