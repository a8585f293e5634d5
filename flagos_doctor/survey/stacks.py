"""The stacks a survey can run on, behind one small interface.

A :class:`Stack` has a parent half (:meth:`Stack.prepare_env`: the environment its worker
starts with) and a child half (:meth:`Stack.setup`: import and enable the stack, return the
device; :meth:`Stack.registered`: the overloads it registers; :meth:`Stack.evidence`: which
route one case took). Module level imports nothing but the standard library: the parent
reads this module too; the child halves import torch when called.

Kinds: ``torch_fl``, ``flag_gems``, ``demo``, ``torch`` (stock torch: nothing enabled, torch's
own kernels on the default accelerator), or any importable module with ``setup() -> str``.

The baseline (``survey --baseline native``): the same case on the stack's native path, in a
worker of its own, so that a failure the stack shares with it is not blamed on the stack.
Parent half :meth:`Stack.prepare_baseline_env`, child half :meth:`Stack.setup_baseline`;
:meth:`Stack.baseline_label` (child side) names it, or is None when the stack has none.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
from collections import Counter

from flagos_doctor import conf as backends_conf
from flagos_doctor.survey import model

#: The demo stack's own conf (importing flagos_doctor.demo would import torch).
DEMO_CONF = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "demo", "backends_demo.conf")

#: Lines torch_fl's C++ side (and the demo) print to stderr with FLAGOS_LOG_DISPATCH=1 /
#: FLAGOS_LOG_FALLBACK=1. torch_fl's fallback line names the op's schema (``aten::erf``),
#: not the overload.
DISPATCH_RE = re.compile(r"^\[flagos dispatch\] (?:aten::)?(\S+) -> (\S+)\s*$", re.M)
FALLBACK_RE = re.compile(r"^\[flagos cpu_fallback\] (?:aten::)?(\S+)\s*$", re.M)


class NoBaseline(RuntimeError):
    """The stack has no native path to compare with."""


def default_accelerator() -> str:
    """The device type torch itself would use: the current accelerator, else ``cpu``."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    if accelerator is not None and accelerator.is_available():
        return str(accelerator.current_accelerator().type)
    return "cuda" if torch.cuda.is_available() else "cpu"


def strip_default(name: str) -> str:
    return name[: -len(".default")] if name.endswith(".default") else name


def route_of(overload: str, kernels: Counter, fallbacks: Counter) -> tuple[str, str]:
    """Which route ``overload`` took, from the calls counted while its case ran.

    ``kernels`` / ``fallbacks`` count calls per overload (or op) name. Direct evidence for
    the overload wins; without it (a composite overload that decomposed), any routed kernel
    means kernel, else any fallback means CPU fallback. Returns (route, note); the route is
    :data:`model.ROUTE_UNKNOWN` when nothing was seen.
    """
    name = strip_default(overload)
    base = name.split(".", 1)[0]
    kernels = Counter({strip_default(k): v for k, v in kernels.items() if v})
    fallbacks = Counter({strip_default(k): v for k, v in fallbacks.items() if v})
    if kernels.get(name):
        return model.ROUTE_KERNEL, ""
    if fallbacks.get(name) or fallbacks.get(base):
        return model.ROUTE_FALLBACK, ""
    if kernels:
        return model.ROUTE_KERNEL, "via " + ",".join(sorted(kernels))
    if fallbacks:
        return model.ROUTE_FALLBACK, "via " + ",".join(sorted(fallbacks))
    return model.ROUTE_UNKNOWN, ""


def counts_from_log(text: str, backend: str | None = None) -> tuple[Counter, Counter]:
    """Kernel and fallback calls named by dispatch / fallback log lines in ``text``.

    A dispatch line to another backend than ``backend`` (when given) is not this route's
    kernel; it is counted under ``<overload>@<backend>`` so it shows in the note.
    """
    kernels: Counter = Counter()
    for name, target in DISPATCH_RE.findall(text):
        kernels[name if backend is None or target == backend else f"{name}@{target}"] += 1
    fallbacks = Counter(FALLBACK_RE.findall(text))
    return kernels, fallbacks


def strip_evidence(text: str) -> str:
    """``text`` without dispatch and fallback log lines (what is left is real stderr)."""
    return FALLBACK_RE.sub("", DISPATCH_RE.sub("", text)).strip("\n")


class Stack:
    """One kind of stack. Subclasses override what differs."""

    name = "stack"
    #: Environment variable that restricts a worker to its devices (``--devices``).
    visible_devices_var = "CUDA_VISIBLE_DEVICES"
    #: Whether its workers print torch_fl-style dispatch / fallback lines.
    log_evidence = True

    # -- parent half -------------------------------------------------------------------
    def prepare_env(self, env: dict, conf: str | None, keep_env: bool) -> None:
        """Edit ``env``, the environment the worker will start with."""
        if not keep_env:
            for key in [k for k in env if k.startswith("FLAGOS_OP_")]:
                del env[key]
        if conf:
            env["FLAGOS_BACKEND_CONFIG"] = os.path.abspath(conf)
        if self.log_evidence:
            env["FLAGOS_LOG_DISPATCH"] = "1"
            env["FLAGOS_LOG_FALLBACK"] = "1"

    def prepare_baseline_env(self, env: dict, overloads: list[str], native_route: str | None) -> None:
        """Edit ``env`` of a baseline worker (after :meth:`prepare_env`)."""

    # -- child half --------------------------------------------------------------------
    def setup(self) -> str:
        """Import and enable the stack; return its device string."""
        raise NotImplementedError

    def setup_baseline(self) -> str:
        """Set up the stack's native path instead of the stack; return the device string."""
        raise NoBaseline(f"stack {self.name!r} has no native path to compare with")

    def baseline_label(self) -> str | None:
        """What the native path is, in a few words ("stock torch"), or None when there is none."""
        return None

    def registered(self) -> list[str]:
        """The overloads the stack registers kernels for (``--routes``)."""
        raise NotImplementedError(f"stack {self.name!r} cannot list what it registers")

    def key(self) -> str:
        """The results-store key when there is no torch_fl commit: ``<stack>-<version>``."""
        return f"{self.name}-{dist_version(self.name) or 'unknown'}"

    def begin_case(self) -> object:
        """A snapshot taken before a case, handed back to :meth:`evidence`."""
        return None

    def evidence(self, overload: str, before: object, captured: str, backend: str) -> tuple[str, str]:
        """(route, note) of one case from the snapshot and the stderr it printed."""
        if not self.log_evidence:
            return model.ROUTE_UNKNOWN, ""
        kernels, fallbacks = counts_from_log(captured, backend)
        return route_of(overload, kernels, fallbacks)


class TorchFLStack(Stack):
    name = "torch_fl"

    #: The route its baseline forces on every surveyed overload (``--native-route``).
    default_native_route = "cuda"

    def setup(self) -> str:
        importlib.import_module("torch_fl")  # before torch: it sets up its environment first
        return "flagos"

    def prepare_baseline_env(self, env, overloads, native_route):
        route = native_route or self.default_native_route
        for overload in overloads:
            env[backends_conf.op_override_var(overload)] = route
        env["FLAGOS_DOCTOR_NATIVE_ROUTE"] = route  # for baseline_label, in the child

    def setup_baseline(self) -> str:
        return self.setup()

    def baseline_label(self) -> str | None:
        return f"torch_fl's {os.environ.get('FLAGOS_DOCTOR_NATIVE_ROUTE', self.default_native_route)} route"

    def registered(self) -> list[str]:
        return backends_conf.select(backends_conf.parse_conf(os.environ["FLAGOS_BACKEND_CONFIG"]))


class DemoStack(Stack):
    """The built-in demo; evidence from its kernel and fallback counters."""

    name = "demo"
    visible_devices_var = "FLAGOS_DEMO_VISIBLE_DEVICES"

    def prepare_env(self, env: dict, conf: str | None, keep_env: bool) -> None:
        super().prepare_env(env, conf or DEMO_CONF, keep_env)

    def setup(self) -> str:
        import flagos_doctor.demo as demo

        return demo.setup()

    def prepare_baseline_env(self, env, overloads, native_route):
        # The demo reads FLAGOS_OP_* as torch_fl does; any route but flagos_python is its fallback.
        for overload in overloads:
            env[backends_conf.op_override_var(overload)] = native_route or "cpu"

    def setup_baseline(self) -> str:
        return self.setup()

    def baseline_label(self) -> str | None:
        return "the demo's CPU fallback"

    def registered(self) -> list[str]:
        import flagos_doctor.demo as demo

        return sorted(demo.registered_overloads)

    def key(self) -> str:
        from flagos_doctor import __version__

        return f"demo-{__version__}"

    def begin_case(self):
        from flagos_doctor.demo import kernels

        return Counter(kernels.kernel_calls), Counter(kernels.fallback_calls)

    def evidence(self, overload, before, captured, backend):
        from flagos_doctor.demo import kernels

        kernel_before, fallback_before = before
        return route_of(
            overload, kernels.kernel_calls - kernel_before, kernels.fallback_calls - fallback_before
        )


class FlagGemsStack(Stack):
    """flag_gems alone: ``enable()`` on its own device; evidence from counted calls.

    Every implementation flag_gems registers passes through its registrar's
    ``register_impl``; a registrar subclass wraps each one with a call counter before it
    reaches torch, so a case knows whether flag_gems' kernel for its overload ran.
    """

    name = "flag_gems"
    log_evidence = False

    def __init__(self):
        self.calls: Counter = Counter()
        self._registered: list[str] = []

    def prepare_env(self, env, conf, keep_env):
        super().prepare_env(env, None, keep_env)

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
        route, note = route_of(overload, self.calls - before, Counter())
        return route, note


class TorchStack(Stack):
    """Stock torch: nothing imported or enabled, torch's own kernels on its default accelerator.

    Survey a route set with it (``--stack torch --routes flag_gems``) to learn which cases
    torch itself answers differently on the device and on CPU: those are the harness's
    questions, not a stack's bugs.
    """

    name = "torch"
    log_evidence = False

    def setup(self) -> str:
        return default_accelerator()


class ModuleStack(Stack):
    """Any importable module with ``setup() -> str``; evidence from torch_fl-style log lines.

    A module that also has ``baseline() -> str`` offers a native path: a baseline worker
    calls it instead of ``setup()``.
    """

    def __init__(self, module: str):
        self.name = module

    def setup(self) -> str:
        return str(importlib.import_module(self.name).setup())

    def setup_baseline(self) -> str:
        module = importlib.import_module(self.name)
        if not hasattr(module, "baseline"):
            return super().setup_baseline()
        return str(module.baseline())

    def baseline_label(self) -> str | None:
        return f"{self.name}.baseline()" if hasattr(importlib.import_module(self.name), "baseline") else None

    def registered(self) -> list[str]:
        module = importlib.import_module(self.name)
        if hasattr(module, "registered"):
            return sorted(module.registered())
        return super().registered()

    def key(self) -> str:
        version = dist_version(self.name.split(".", 1)[0])
        if version is None:
            try:
                version = getattr(importlib.import_module(self.name), "__version__", None)
            except Exception:
                version = None
        return f"{self.name}-{version or 'unknown'}"


def get_stack(name: str) -> Stack:
    """The stack called ``name``: a built-in kind, else a module with ``setup()``."""
    kinds = {"torch_fl": TorchFLStack, "flag_gems": FlagGemsStack, "demo": DemoStack, "torch": TorchStack}
    return kinds[name]() if name in kinds else ModuleStack(name)


def distribution(name: str):
    """The installed distribution of an import name (``flag_gems`` or ``flag-gems``), or None."""
    from importlib import metadata

    for candidate in (name, name.replace("_", "-")):
        try:
            return metadata.distribution(candidate)
        except metadata.PackageNotFoundError:
            continue
    return None


def dist_version(name: str) -> str | None:
    dist = distribution(name)
    return dist.version if dist else None
