"""The ``demo`` stack: flagos_doctor's own pure-Python ``flagos`` device (:mod:`flagos_doctor.demo`).

Parent side: its name, what the probe imports, its conf (the survey's route set without
``--conf``), the environment of its workers. Child side (survey worker, report env
child): ``setup()`` and the rest import :mod:`flagos_doctor.demo`, hence torch, when called.
Evidence comes from the demo's own kernel and fallback counters.
"""

from __future__ import annotations

import os
from collections import Counter

from flagos_doctor.stacks.base import GIB, Stack
from flagos_doctor.stacks.evidence import route_of

#: The demo's own conf, found without importing flagos_doctor.demo (that imports torch).
DEMO_CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo", "backends_demo.conf")


class DemoStack(Stack):
    """The built-in demo; evidence from its kernel and fallback counters."""

    name = "demo"
    description = "the built-in pure-Python flagos device"
    probe_imports = ("flagos_doctor.demo",)
    device_type = "flagos"
    visible_devices_var = "FLAGOS_DEMO_VISIBLE_DEVICES"
    fork_after = ("torch",)  # the demo's setup imports torch first thing
    #: Measured on CPU a demo worker peaks at about 0.25 GB.
    worker_host_bytes = 1 * GIB

    # -- parent -----------------------------------------------------------------------
    def default_conf(self) -> str | None:
        return DEMO_CONF

    def prepare_env(self, env: dict, conf: str | None, keep_env: bool) -> None:
        super().prepare_env(env, conf or DEMO_CONF, keep_env)

    def prepare_baseline_env(self, env, overloads, native_route):
        from flagos_doctor import conf as backends_conf

        # The demo reads FLAGOS_OP_* as torch_fl does; any route but flagos_python is its fallback.
        for overload in overloads:
            env[backends_conf.op_override_var(overload)] = native_route or "cpu"

    # -- child ------------------------------------------------------------------------
    def setup(self) -> str:
        import flagos_doctor.demo as demo

        return demo.setup()

    def setup_baseline(self) -> str:
        return self.setup()

    def baseline_label(self) -> str | None:
        return "the demo's CPU fallback"

    def registered(self) -> list[str]:
        import flagos_doctor.demo as demo

        return sorted(demo.registered_overloads)

    def version(self) -> str:
        from flagos_doctor import __version__

        return __version__

    def begin_case(self):
        from flagos_doctor.demo import kernels

        return Counter(kernels.kernel_calls), Counter(kernels.fallback_calls)

    def evidence(self, overload, before, captured, backend):
        from flagos_doctor.demo import kernels

        kernel_before, fallback_before = before
        return route_of(
            overload, kernels.kernel_calls - kernel_before, kernels.fallback_calls - fallback_before
        )
