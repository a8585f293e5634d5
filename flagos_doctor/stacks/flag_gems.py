"""The ``flag_gems`` stack: FlagGems alone, ``enable()``d on its own device (stock torch's).

Parent side: its name, what the probe imports, the survey's route set without ``--conf``
(``--routes flag_gems``: what it registers). Child side: ``setup()`` imports and enables
flag_gems; evidence from counted calls (below); its baseline is stock torch, without
flag_gems imported; the report asks flag_gems which device it uses.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections import Counter

from flagos_doctor.stacks.base import Stack
from flagos_doctor.stacks.evidence import route_of, strip_default
from flagos_doctor.stacks.stock_torch import TorchStack


class FlagGemsStack(Stack):
    """flag_gems alone: ``enable()`` on its own device; evidence from counted calls.

    Every implementation flag_gems registers passes through its registrar's
    ``register_impl``; a registrar subclass wraps each one with a call counter before it
    reaches torch, so a case knows whether flag_gems' kernel for its overload ran.
    """

    name = "flag_gems"
    description = "FlagGems alone, enable()d"
    probe_imports = ("flag_gems",)
    log_evidence = False
    default_listing = "flag_gems"
    route_source = True
    fork_after = ("torch", "triton")  # flag_gems imports both before it touches the device

    def __init__(self):
        self.calls: Counter = Counter()
        self._registered: list[str] = []

    # -- parent -----------------------------------------------------------------------
    def prepare_env(self, env, conf, keep_env):
        super().prepare_env(env, None, keep_env)

    # -- child ------------------------------------------------------------------------
    def setup(self) -> str:
        flag_gems = importlib.import_module("flag_gems")
        from flag_gems.runtime.register import Register

        calls, registered = self.calls, self._registered

        def counted(key, fn):
            @functools.wraps(fn)  # flag_gems lists its ops by function name
            def kernel(*args, **kwargs):
                calls[key] += 1
                return fn(*args, **kwargs)

            return kernel

        class CountingRegister(Register):
            def register_impl(self, key, fn):
                registered.append(key)
                return super().register_impl(key, counted(key, fn))

        flag_gems.enable(registrar=CountingRegister)
        return str(flag_gems.device)

    def setup_baseline(self) -> str:
        # flag_gems is not even imported: its import alone patches nothing of torch's
        # dispatch, but the native path must not depend on that.
        return TorchStack().setup()

    def baseline_label(self) -> str | None:
        return "stock torch"

    def registered(self) -> list[str]:
        import flag_gems

        try:
            names = list(flag_gems.all_registered_keys())  # overload names; *_ops() are function names
        except Exception:
            names = list(self._registered)
        return sorted({strip_default(str(name)) for name in names})

    def begin_case(self):
        return Counter(self.calls)

    def evidence(self, overload, before, captured, backend):
        return route_of(overload, self.calls - before, Counter())

    def describe_for_report(self, data, environ_before):
        # Imported, not enabled: the report only asks which device it would use.
        return getattr(sys.modules["flag_gems"], "device", None)
