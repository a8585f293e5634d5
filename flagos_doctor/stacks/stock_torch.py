"""The ``torch`` stack: stock torch, nothing imported or enabled, torch's own kernels on its
default accelerator. (This file is not called ``torch.py`` so that nothing mistakes it for torch.)

Survey a route set with it (``--stack torch --routes flag_gems``) to learn which cases
torch itself answers differently on the device and on CPU: those are the harness's
questions, not a stack's bugs. It is also what probe and report look at when the chosen
interpreter has no torch_fl (the default-stack rule in :mod:`flagos_doctor.stacks`).

Parent side: data only. Child side: :func:`default_accelerator` and ``setup()`` import torch.
"""

from __future__ import annotations

from flagos_doctor.stacks.base import Stack


def default_accelerator() -> str:
    """Child. The device type torch itself would use: the current accelerator, else ``cpu``."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        return str(accelerator.current_accelerator().type)
    return "cuda" if torch.cuda.is_available() else "cpu"


class TorchStack(Stack):
    """Stock torch: nothing imported or enabled, torch's own kernels on its default accelerator."""

    name = "torch"
    description = "stock torch, nothing enabled"
    probe_imports = ("torch",)
    log_evidence = False
    fork_after = ("torch",)

    def setup(self) -> str:
        return default_accelerator()
