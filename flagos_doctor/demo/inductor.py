"""Inductor for the demo's ``flagos`` device: its Python wrapper, every op an ATen call.

torch_fl registers an Inductor backend for ``flagos`` (Triton scheduling and a wrapper) so
that plain ``torch.compile(model)`` works on its device. The demo device has no code
generator (a flagos tensor's data is a CPU tensor), so its backend generates no kernel: the
wrapper Inductor writes calls extern kernels (``extern_kernels.addmm(..., out=buf0)``),
which dispatch to the demo's kernels like any eager call. A graph that needs a generated
kernel (a fused pointwise op, a reduction) is refused with an error naming its ATen ops.
Only the ``flagos`` entries are registered: how CPU graphs compile is unchanged.
"""

from __future__ import annotations

from torch._dynamo.device_interface import CpuInterface, register_interface_for_device
from torch._inductor.codegen.common import register_backend_for_device, register_device_op_overrides
from torch._inductor.codegen.cpu_device_op_overrides import CpuDeviceOpOverrides
from torch._inductor.codegen.wrapper import PythonWrapperCodegen
from torch._inductor.scheduler import BaseScheduling
from torch._inductor.utils import sympy_product
from torch._inductor.virtualized import V

DEVICE = "flagos"


class NoKernelGenerated(RuntimeError):
    """Inductor asked the demo device for a kernel of its own."""


def _aten_ops(node) -> str:
    ops = {str(origin.target) for part in node.get_nodes() if part.node is not None
           for origin in part.node.origins if origin.op == "call_function"}
    return ", ".join(sorted(ops)) or node.get_name()


def _refuse(node) -> None:
    raise NoKernelGenerated(
        f"the flagos demo device has no Inductor code generator, and this graph needs a kernel "
        f"generated for {_aten_ops(node)}; compile with backend=\"flagos\" (runs the graph op by op)"
    )


class FlagosScheduling(BaseScheduling):
    """No kernel of its own: extern kernels and views need no scheduling backend."""

    def group_fn(self, sizes):
        # As Inductor's GPU schedulings group: (elements, reduction elements).
        return tuple(V.graph.sizevars.simplify(sympy_product(size)) for size in sizes)

    def can_fuse_vertical(self, node1, node2) -> bool:
        return False

    def can_fuse_horizontal(self, node1, node2) -> bool:
        return False

    def codegen_node(self, node) -> None:
        _refuse(node)

    def codegen_template(self, template_node, epilogue_nodes, prologue_nodes, *args, **kwargs):
        _refuse(template_node)

    def codegen_sync(self) -> None:
        pass

    def ready_to_flush(self) -> bool:
        return False

    def flush(self) -> None:
        pass


class FlagosInterface(CpuInterface):
    """Dynamo's runtime view of the device (Inductor sizes a reduction by its properties):
    the host's, where a flagos tensor's data lives."""


def register() -> None:
    """Inductor's entries for ``flagos``: the no-kernel scheduling, the Python wrapper, the
    host's no-op device ops (no streams, nothing to synchronise) and its device interface."""
    register_backend_for_device(DEVICE, FlagosScheduling, PythonWrapperCodegen)
    register_device_op_overrides(DEVICE, CpuDeviceOpOverrides())
    register_interface_for_device(DEVICE, FlagosInterface)
