"""A module stack: any importable module named by ``--stack MODULE`` that is not a built-in.

For the survey it has ``setup() -> str`` (import and enable, return the device string)
and optionally ``baseline() -> str`` (its native path) and ``registered() -> list`` (for
``--routes stack``); evidence comes from torch_fl-style log lines. The probe imports it;
the report imports it and calls its ``setup()``, when it has one, to learn its device.

Parent side: data only (the module is never imported there). Child side: every method
that imports the module.
"""

from __future__ import annotations

import importlib

from flagos_doctor.errors import BadInput
from flagos_doctor.stacks.base import Stack, dist_version


def device_of(module, name: str, function: str = "setup") -> str:
    """Child. What ``module.setup()`` (or ``baseline()``) returns, a device string; BadInput
    naming the module when it has no such function or it returns nothing (None, '')."""
    call = getattr(module, function, None)
    if not callable(call):
        raise BadInput(f"module {name} has no {function}() -> device string (what a survey stack module needs)",
                       "--stack")
    device = call()
    if device is None or not str(device):  # (a torch.device is as good as its string)
        raise BadInput(f"{name}.{function}() returned {device!r}, not a device string "
                       "such as 'cuda' or 'flagos:0'", "--stack")
    return str(device)


class ModuleStack(Stack):
    """Any importable module with ``setup() -> str``; evidence from torch_fl-style log lines.

    A module that also has ``baseline() -> str`` offers a native path: a baseline worker
    calls it instead of ``setup()``.
    """

    description = "a module with setup() -> device"

    def __init__(self, module: str):
        self.name = module
        self.probe_imports = (module,)

    # -- child ------------------------------------------------------------------------
    def setup(self) -> str:
        return device_of(importlib.import_module(self.name), self.name)

    def setup_baseline(self) -> str:
        module = importlib.import_module(self.name)
        if not hasattr(module, "baseline"):
            return super().setup_baseline()
        return device_of(module, self.name, "baseline")

    def baseline_label(self) -> str | None:
        return f"{self.name}.baseline()" if hasattr(importlib.import_module(self.name), "baseline") else None

    def registered(self) -> list[str]:
        module = importlib.import_module(self.name)
        if hasattr(module, "registered"):
            return sorted(module.registered())
        return super().registered()

    def version(self) -> str | None:
        version = dist_version(self.name.split(".", 1)[0])
        if version is None:
            try:
                version = getattr(importlib.import_module(self.name), "__version__", None)
            except Exception:
                version = None
        return version

    def describe_for_report(self, data, environ_before):
        setup = getattr(importlib.import_module(self.name), "setup", None)
        if not callable(setup):
            return None
        # A survey stack module: setup() enables it and names its device.
        data["setup"] = str(setup()).split(":")[0]
        return data["setup"]
