"""The built-in demo stack: torch_fl's ``flagos_python`` route in miniature, in pure Python.

Importing this module does, in torch_fl's order, the same kinds of things torch_fl does at
import (see ``TORCH_FL_FACTS.md`` in the project's shared data):

1. before ``import torch``: chooses the backends conf (``FLAGOS_BACKEND_CONFIG``) and sets
   ``TORCH_DEVICE_BACKEND_AUTOLOAD=0`` with ``setdefault``;
2. registers a real PrivateUse1 device named ``flagos`` (``torch.flagos``) with
   ``torch.utils.backend_registration``, and ATen kernels for it with ``torch.library``;
3. the vendor-compat phase: points ``torch.cuda.is_available`` at the flagos probe, saving
   the original as ``torch.cuda._flagos_native_is_available``, and sets ``GEMS_VENDOR``;
4. the cuda alias (:func:`_alias_cuda_to_flagos`): where no real CUDA runtime exists and
   ``FLAGOS_ALIAS_CUDA`` is not 0/off/false, ``torch.device("cuda")`` and friends map to
   ``flagos``. Its guard reads the *saved original* probe, as torch_fl's fix does; with
   ``FLAGOS_DEMO_SEED_BUG=1`` it reads the redirected probe instead, reproducing the bug
   flagos-doctor was made for (the alias never installs).

As a survey stack it offers :func:`setup`, returning the device string.
"""

import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONF = os.path.join(_HERE, "backends_demo.conf")


def _choose_backend_config() -> None:
    if "FLAGOS_BACKEND_CONFIG" not in os.environ:
        os.environ["FLAGOS_BACKEND_CONFIG"] = DEFAULT_CONF
    os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")


_choose_backend_config()

import torch  # noqa: E402  (torch_fl imports torch only after its environment work)
from torch.utils import backend_registration  # noqa: E402

from flagos_doctor import conf as _conf  # noqa: E402
from flagos_doctor.demo import device as _device_module  # noqa: E402
from flagos_doctor.demo import kernels  # noqa: E402

#: Overloads routed to flagos_python by the conf in use, and those that got a demo kernel.
routed_overloads: list = []
registered_overloads: list = []


def _register_device() -> None:
    if torch._C._get_privateuse1_backend_name() != "privateuseone":
        raise RuntimeError(
            f"PrivateUse1 is already claimed by {torch._C._get_privateuse1_backend_name()!r}"
        )
    backend_registration._setup_privateuseone_for_python_backend(
        "flagos", backend_module=_device_module
    )


def _register_kernels() -> None:
    # FLAGOS_OP_* overrides as torch_fl's C++ side reads them (a survey's baseline uses them).
    routes = _conf.apply_op_overrides(_conf.parse_conf(os.environ["FLAGOS_BACKEND_CONFIG"]), os.environ)
    routed_overloads[:] = _conf.select(routes, "flagos_python")
    registered_overloads[:] = kernels.register(routed_overloads)


def _patch_vendor_compat() -> None:
    # Like torch_fl's vendor phase: CUDA-minded code (FlagGems, Triton's NVIDIA driver)
    # asks torch.cuda whether a device is there; answer for flagos.
    torch.cuda._flagos_native_is_available = torch.cuda.is_available
    torch.cuda.is_available = torch.flagos.is_available
    os.environ.setdefault("GEMS_VENDOR", "flagos_demo")


def _native_cuda_available() -> bool:
    if os.environ.get("FLAGOS_DEMO_SEED_BUG") == "1":
        return torch.cuda.is_available()  # the seed bug: reads the redirected probe
    return torch.cuda._flagos_native_is_available()


def _alias_cuda_to_flagos() -> None:
    # torch_fl's alias (1adbc97), what it covers and no more: a torch-function mode that
    # rewrites every ``device=`` argument naming cuda (a string or a torch.device) and
    # ``Tensor.to``'s positional device; ``torch.device("cuda")``; ``Tensor.cuda`` (so
    # ``Module.cuda``); and torch.cuda's is_available and friends.
    if os.environ.get("FLAGOS_ALIAS_CUDA", "1").strip().lower() in ("0", "off", "false"):
        return
    if _native_cuda_available():
        return
    real_device = torch.device

    def translate(kind):
        if isinstance(kind, str) and (kind == "cuda" or kind.startswith("cuda:")):
            return "flagos" + kind[4:]
        if isinstance(kind, real_device) and kind.type == "cuda":
            return real_device("flagos", kind.index if kind.index is not None else 0)
        return kind

    torch._C._push_on_torch_function_stack(_cuda_alias_mode(translate))

    class _DeviceMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real_device)

    class device(metaclass=_DeviceMeta):
        """``torch.device`` with ``cuda`` read as ``flagos``."""

        def __new__(cls, kind=None, index=None, type=None):  # noqa: A002  (torch.device's keyword)
            kind = type if kind is None else kind
            if isinstance(kind, real_device):
                kind = str(kind)
            kind = translate(kind)
            return real_device(kind) if index is None else real_device(kind, index)

    real_tensor_cuda = torch.Tensor.cuda

    def cuda(self, device=None, non_blocking=False, **kwargs):
        target = "flagos" if device is None else translate(str(device) if not isinstance(device, int) else f"flagos:{device}")
        return self.to(target, non_blocking=non_blocking)

    cuda.__wrapped__ = real_tensor_cuda
    torch.device = device
    _keep_device_checks(real_device, device)
    torch.Tensor.cuda = cuda
    torch.cuda.is_available = torch.flagos.is_available
    torch.cuda.device_count = torch.flagos.device_count
    torch.cuda.current_device = torch.flagos.current_device
    torch.cuda.set_device = torch.flagos.set_device
    torch.cuda.synchronize = torch.flagos.synchronize
    torch.cuda.get_device_properties = torch.flagos.get_device_properties
    # What torch.compile asks once is_available() says yes (dynamo saves and restores the
    # device's random state around each frame), as torch_fl's compile phase provides.
    torch.cuda.get_rng_state = torch.flagos.get_rng_state
    torch.cuda.set_rng_state = torch.flagos.set_rng_state


def _cuda_alias_mode(translate):
    """torch_fl's ``_CudaAliasMode``: factories parse ``device=`` in C++, past any Python
    ``torch.device``, so a torch-function mode, pushed for the whole process, rewrites it first."""
    from torch.overrides import TorchFunctionMode

    class CudaAliasMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if kwargs.get("device") is not None:
                kwargs = {**kwargs, "device": translate(kwargs["device"])}
            elif func is torch.Tensor.to and len(args) > 1:
                args = (args[0], translate(args[1])) + tuple(args[2:])
            return func(*args, **kwargs)

    return CudaAliasMode()


def _flagos_compiler(gm, example_inputs):
    # The graph op by op on the device's kernels, for graphs the demo's Inductor entries
    # refuse (it generates no kernel: see inductor.py). Dynamo traces the graph (its guards
    # and state saving run as for any device) whichever backend compiles it.
    return gm.forward


class _AfterImport:
    """Runs ``then(module)`` once ``name`` is imported: importing dynamo here would cost every
    import of the demo seconds (a survey worker's included)."""

    def __init__(self, name: str, then):
        self.name, self.then = name, then

    def find_spec(self, name, path=None, target=None):
        if name != self.name:
            return None
        import importlib.machinery

        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            run, then = spec.loader.exec_module, self.then

            def exec_module(module):
                run(module)
                then(module)

            spec.loader.exec_module = exec_module
        return spec


def after_import(name: str, then) -> None:
    """``then(module)`` now if ``name`` is imported, else right after its import."""
    if name in sys.modules:
        then(sys.modules[name])
    else:
        sys.meta_path.insert(0, _AfterImport(name, then))


def _keep_device_checks(real_device, alias) -> None:
    # As torch_fl does: two torch registries compare with torch.device by identity. FX
    # emits a device constant through the ``device`` builtin, and dynamo wraps values whose
    # type is in common_constant_types; a constructed device is always the real class.
    import copyreg

    from torch.fx.graph import _register_custom_builtin

    _register_custom_builtin("device", "from torch import device", alias)
    # Inductor's cache key pickles the graph, which names torch.device; a local class pickles
    # by reference to the torch.device installed, or Inductor compiles without its cache.
    copyreg.pickle(type(alias), lambda _alias: (_installed_device, ()))
    after_import("torch._dynamo.utils", lambda utils: utils.common_constant_types.add(real_device))


def _installed_device():
    return torch.device


def _register_compile_backend() -> None:
    # Like torch_fl's compile phase: a dynamo backend named after the device, and Inductor's
    # codegen entries for it, so that the default backend compiles a flagos graph too.
    after_import("torch._dynamo.backends.registry",
                 lambda registry: registry.register_backend(name="flagos")(_flagos_compiler))
    # Once Inductor's graph module is in, its wrapper and scheduler modules are too.
    after_import("torch._inductor.graph", lambda _: _inductor_for_device())


def _inductor_for_device() -> None:
    from flagos_doctor.demo import inductor

    inductor.register()


_register_device()
_register_kernels()
_patch_vendor_compat()
_alias_cuda_to_flagos()
_register_compile_backend()


def setup() -> str:
    """Survey-stack entry point: the stack is ready at import; return its device."""
    return "flagos"
