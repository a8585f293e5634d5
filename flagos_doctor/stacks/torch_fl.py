"""The ``torch_fl`` stack: Torch-FL, the out-of-tree PyTorch backend with the ``flagos`` device.

Parent side: its name, what the probe imports, the survey's route set without ``--conf``
(``$FLAGOS_BACKEND_CONFIG``), the environment of its workers and of its baseline (every
surveyed overload forced to ``--native-route`` through ``FLAGOS_OP_*``). Child side: ``setup()``
imports torch_fl (before torch: it sets up its environment first); evidence comes from its
``[flagos dispatch]`` / ``[flagos cpu_fallback]`` lines (the base class reads them); the
report records the backends conf in force and who chose it.
"""

from __future__ import annotations

import importlib
import os

from flagos_doctor.stacks import torch_fl_bindings
from flagos_doctor.stacks.base import Checks, Stack, torch_fl_info


class TorchFLStack(Stack):
    name = "torch_fl"
    description = "Torch-FL, its flagos device"
    probe_imports = ("torch_fl",)
    install_hint = ("build it with `python -m flagos_doctor.torch_fl_build` (no clone needed) and set the "
                    "`PYTHONPATH=...` line it prints, then run this again")
    device_type = "flagos"
    configs_package = "torch_fl"
    #: Never forked: torch_fl chooses its conf and loads its libraries before torch (its
    #: import order is what a worker must reproduce).
    fork_after = ()

    #: The route its baseline forces on every surveyed overload (``--native-route``).
    default_native_route = "cuda"

    # -- parent -----------------------------------------------------------------------
    def default_conf(self) -> str | None:
        return os.environ.get("FLAGOS_BACKEND_CONFIG") or None

    def prepare_baseline_env(self, env, overloads, native_route):
        from flagos_doctor import conf as backends_conf

        route = native_route or self.default_native_route
        for overload in overloads:
            env[backends_conf.op_override_var(overload)] = route
        env["FLAGOS_DOCTOR_NATIVE_ROUTE"] = route  # for baseline_label, in the child

    def start_checks(self, python, env):
        return BindingsCheck(torch_fl_bindings.CheckInChild(python, env))

    # -- child ------------------------------------------------------------------------
    def loaded_torch_fl(self):
        return torch_fl_info()

    def setup(self) -> str:
        importlib.import_module("torch_fl")  # before torch: it sets up its environment first
        return "flagos"

    def setup_baseline(self) -> str:
        return self.setup()

    def baseline_label(self) -> str | None:
        return f"torch_fl's {os.environ.get('FLAGOS_DOCTOR_NATIVE_ROUTE', self.default_native_route)} route"

    def registered(self) -> list[str]:
        from flagos_doctor import conf as backends_conf

        return backends_conf.select(backends_conf.parse_conf(os.environ["FLAGOS_BACKEND_CONFIG"]))

    def describe_for_report(self, data, environ_before):
        # The backends conf in force: torch_fl picks one at import unless the user named one.
        data["backend_config"] = {
            "path": os.environ.get("FLAGOS_BACKEND_CONFIG"),
            "chosen_by": "the user (FLAGOS_BACKEND_CONFIG)" if environ_before.get("FLAGOS_BACKEND_CONFIG") else "torch_fl at import",
        }
        return self.device_type


class BindingsCheck(Checks):
    """torch_fl's bindings against the installed flag_gems (:mod:`.torch_fl_bindings`), read
    only when the first worker loaded a torch_fl."""

    def __init__(self, child: torch_fl_bindings.CheckInChild):
        self.child = child

    def result(self, found):
        if not found.get("torch_fl"):
            self.child.stop()
            return {}
        return {"flag_gems_bindings": self.child.result()}

    def stop(self):
        self.child.stop()
