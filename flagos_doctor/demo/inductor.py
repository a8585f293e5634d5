"""Inductor for the demo's ``flagos`` device: Inductor's CPU code generator over the device's data.

torch_fl registers an Inductor backend for ``flagos`` (Triton scheduling and a wrapper) so
that plain ``torch.compile(model)`` works on its device. A demo ``flagos`` tensor's data is a
CPU tensor (:mod:`flagos_doctor.demo.kernels`), so the demo registers Inductor's CPU (C++)
scheduling for ``flagos``: the kernels Inductor generates are the C++ it generates for CPU,
and the Python wrapper hands each kernel the CPU data of its flagos arguments
(``cpp_fused_add_0(_flagos_data(buf0), ...)``); extern kernels (``extern_kernels.addmm``)
dispatch to the demo's kernels like any eager call. Only the ``flagos`` entries are registered:
how CPU graphs compile is unchanged.

Not covered: the C++ wrapper (``cpp_wrapper=True``) and AOTInductor, Triton kernels (no GPU),
and kernels in a subgraph's wrapper (a higher-order op's body: ``torch.cond``, flex attention),
which Inductor writes with a wrapper class of its own; those stop with Inductor's "device
flagos nyi".
"""

from __future__ import annotations

import sys

from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
from torch._inductor.codegen.cpp import CppScheduling
from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.scheduler import BaseSchedulerNode
from torch._inductor import config, utils
from torch._inductor.virtualized import V

DEVICE = "flagos"
#: The wrapper's name for :func:`flagos_doctor.demo.kernels.unwrap` (a flagos tensor's CPU data).
DATA = "_flagos_data"


class FlagosWrapper(PythonWrapperCodegen):
    """Inductor's Python wrapper, whose generated (C++) kernel calls get CPU data for flagos tensors."""

    @staticmethod
    def create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures=None):
        if is_subgraph:
            return PythonWrapperCodegen.create(is_subgraph, subgraph_name, parent_wrapper, partition_signatures)
        return FlagosWrapper()

    def write_header(self) -> None:
        super().write_header()
        self.imports.writeline(f"from flagos_doctor.demo.kernels import unwrap as {DATA}")

    def _generate_kernel_call_helper(self, kernel_name, call_args, *, device=None, triton=True, **kwargs):
        device = device or V.graph.get_current_device_or_throw()
        if triton or device.type != DEVICE:
            return super()._generate_kernel_call_helper(kernel_name, call_args, device=device, triton=triton, **kwargs)
        # A C++ kernel reads data pointers: those of the CPU tensors the flagos ones hold.
        self.writeline(self.wrap_kernel_call(kernel_name, [f"{DATA}({arg})" for arg in call_args]))


class FlagosInterface(CpuInterface):
    """Dynamo's runtime view of the device (Inductor sizes a reduction by its properties):
    the host's, where a flagos tensor's data lives."""


def _is_cpu_or_flagos(node) -> bool:
    device = node.get_device()
    return device is not None and device.type in ("cpu", DEVICE)


def _cpp_for_flagos(stock):
    def get_current_backend(device_type: str | None = None) -> str:
        if (device_type or V.graph.get_current_device_or_throw().type) == DEVICE:
            return config.cpu_backend
        return stock(device_type)

    get_current_backend.__wrapped__ = stock
    return get_current_backend


def _name_cpp_the_backend_of_flagos() -> None:
    # Inductor asks get_current_backend() which code a kernel is written in (dtype checks,
    # masked loads): "triton" for any device but cpu/mps/xpu/tpu; the flagos kernels are C++.
    # Each module that imported the function holds it by name.
    stock = utils.get_current_backend
    replaced = _cpp_for_flagos(stock)
    for name, module in list(sys.modules.items()):
        if name.startswith("torch._inductor") and getattr(module, "get_current_backend", None) is stock:
            module.get_current_backend = replaced


def register() -> None:
    """Inductor's entries for ``flagos``: the CPU scheduling, the wrapper above, the host's
    no-op device ops (no streams, nothing to synchronise) and its device interface. The
    scheduler keeps GPU-only fusions (loop reordering, reindexing) off nodes it knows run C++
    by ``is_cpu()``: a flagos node runs C++ too."""
    BaseSchedulerNode.is_cpu = _is_cpu_or_flagos
    _name_cpp_the_backend_of_flagos()
    register_backend_for_device(DEVICE, CppScheduling, FlagosWrapper)
    register_device_op_overrides(DEVICE, CpuDeviceOpOverrides())
    register_interface_for_device(DEVICE, FlagosInterface)
