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
    if os.environ.get("FLAGOS_ALIAS_CUDA", "1").strip().lower() in ("0", "off", "false"):
        return
    if _native_cuda_available():
        return
    real_device = torch.device

    def translate(kind):
        if isinstance(kind, str) and (kind == "cuda" or kind.startswith("cuda:")):
            return "flagos" + kind[4:]
        return kind

    class _DeviceMeta(type):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real_device)

    class device(metaclass=_DeviceMeta):
        """``torch.device`` with ``cuda`` read as ``flagos``."""

        def __new__(cls, kind=None, index=None):
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
    torch.Tensor.cuda = cuda
    torch.cuda.is_available = torch.flagos.is_available
    torch.cuda.device_count = torch.flagos.device_count
    torch.cuda.current_device = torch.flagos.current_device
    torch.cuda.set_device = torch.flagos.set_device
    torch.cuda.synchronize = torch.flagos.synchronize
    torch.cuda.get_device_properties = torch.flagos.get_device_properties


_register_device()
_register_kernels()
_patch_vendor_compat()
_alias_cuda_to_flagos()


def setup() -> str:
    """Survey-stack entry point: the stack is ready at import; return its device."""
    return "flagos"
