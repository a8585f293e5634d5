"""``torch.flagos``: the device module of the demo stack.

One device, always available: the data of every ``flagos`` tensor lives in a CPU tensor
(see :mod:`flagos_doctor.demo.kernels`). Lazy initialisation happens on the first device
call, the way real backends initialise their runtime late; it writes an environment
variable, so a probe can show a writer that acts only after import.
"""

import os

import torch

_initialized = False


def _lazy_init() -> None:
    global _initialized
    if not _initialized:
        _initialized = True
        os.environ["FLAGOS_DEVICE_INITIALIZED"] = "1"


def is_initialized() -> bool:
    return _initialized


def is_available() -> bool:
    return True


def device_count() -> int:
    return 1


def current_device() -> int:
    _lazy_init()
    return 0


def set_device(device) -> None:
    _lazy_init()
    index = device.index if isinstance(device, torch.device) else int(device)
    if index not in (None, 0):
        raise RuntimeError(f"flagos: invalid device index {index} (1 device)")


def synchronize(device=None) -> None:
    _lazy_init()


def get_device_name(device=None) -> str:
    return "flagos demo device (CPU memory)"


def get_device_capability(device=None):
    return (0, 0)


class _DeviceProperties:
    name = "flagos demo device (CPU memory)"
    total_memory = 0
    multi_processor_count = 1
    major, minor = 0, 0
    # Inductor names the device of a build without torch.version.cuda by this (ROCm's field).
    gcnArchName = "flagos-demo"

    def __repr__(self):
        return f"_FlagosDeviceProperties(name={self.name!r})"


def get_device_properties(device=None):
    return _DeviceProperties()


def _is_in_bad_fork() -> bool:
    return False


def manual_seed_all(seed: int) -> None:
    # flagos data lives in CPU tensors, so the CPU generator is the device's generator.
    # torch.manual_seed calls this after seeding it: calling back would recurse.
    torch.default_generator.manual_seed(seed)


def manual_seed(seed: int) -> None:
    torch.default_generator.manual_seed(seed)


def get_rng_state(device=None):
    return torch.get_rng_state()


def set_rng_state(state, device=None) -> None:
    torch.set_rng_state(state)


def get_amp_supported_dtype():
    return [torch.float16, torch.bfloat16]
