"""What the probe watches: the default probes, and the ones a user adds.

A *probe* is a dotted name whose value the stack may replace (``torch.cuda.is_available``)
or an environment variable (written ``$NAME`` in records). Environment variables are
watched by pattern: a name, or a prefix ending in ``*``.

Imported by the parent (to validate ``--watch`` and ``--watch-file``) and by the child;
standard library only, except :func:`load_watch_file`, which imports yaml when called.
"""

from __future__ import annotations

import re

from flagos_doctor import files
from flagos_doctor.errors import BadInput, check_keys, excerpt

CUDA_PROBES = [
    "is_available",
    "device_count",
    "current_device",
    "set_device",
    "synchronize",
    "get_device_properties",
    "get_device_name",
    "get_device_capability",
    "_lazy_init",
]

#: Attribute probes watched by default. ``torch.<privateuse1>`` (the device module) and the
#: PrivateUse1 backend name are added by the tracer once the name is known.
DEFAULT_PROBES = (
    [f"torch.cuda.{name}" for name in CUDA_PROBES]
    + ["torch.device", "torch.Tensor.cuda", "torch.empty"]
    + ["triton.runtime.driver", "triton.runtime.driver._active", "triton.runtime.driver._default"]
)

#: Environment variables watched by default (``*`` ends a prefix).
DEFAULT_ENV = ["FLAGOS_*", "GEMS_*", "FLAGGEMS_*", "TORCH_DEVICE_BACKEND_AUTOLOAD", "TRITON_*", "ACCELERATOR"]

#: Our own variables (the record channel, test knobs): never reported.
OWN_ENV_PREFIX = "FLAGOS_DOCTOR_"

#: Pseudo-probes that are not attributes.
PRIVATEUSE1_NAME = "PrivateUse1 backend name"
TRITON_ACTIVE = "triton.runtime.driver.active"

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+$")
_ENV = re.compile(r"^\$?[A-Za-z_][A-Za-z0-9_]*\*?$")


def env_matches(name: str, patterns: list[str]) -> bool:
    """Whether environment variable ``name`` is watched by one of ``patterns``."""
    if name.startswith(OWN_ENV_PREFIX):
        return False
    for pattern in patterns:
        if pattern.endswith("*"):
            if name.startswith(pattern[:-1]):
                return True
        elif name == pattern:
            return True
    return False


def check_probe(name: str, where: str) -> str:
    """Return ``name`` if it is a dotted attribute name; raise BadInput otherwise."""
    if not isinstance(name, str) or not _DOTTED.match(name.strip()):
        raise BadInput(f"{excerpt(name)} is not a dotted name such as torch.cuda.Stream", where)
    return name.strip()


def check_env(name: str, where: str) -> str:
    if not isinstance(name, str) or not _ENV.match(name.strip()):
        raise BadInput(f"{excerpt(name)} is not an environment variable name (or a PREFIX_*)", where)
    return name.strip().lstrip("$")


def load_watch_file(path: str) -> tuple[list[str], list[str]]:
    """Probes and environment patterns listed in a YAML file.

    The file is either a list of dotted names, or a mapping with ``probes`` (or ``watch``)
    and ``env`` lists. Raises BadInput naming the file (and line) for anything else.
    """
    data = files.load_yaml(path, "watch file")
    if data is None:
        return [], []
    if isinstance(data, list):
        data = {"probes": data}
    if not isinstance(data, dict):
        raise BadInput("expected a list of dotted names, or a mapping with 'probes' and 'env'", path)
    unknown = set(check_keys(data, path)) - {"probes", "watch", "env"}
    if unknown:
        raise BadInput(f"unknown field {excerpt(sorted(unknown)[0])} (expected 'probes', 'env')", path)
    probes, env = [], []
    for field in ("probes", "watch"):
        items = data.get(field) or []
        if not isinstance(items, list):
            raise BadInput(f"field '{field}' must be a list", path)
        probes += [check_probe(item, f"{path}: field {field}") for item in items]
    items = data.get("env") or []
    if not isinstance(items, list):
        raise BadInput("field 'env' must be a list", path)
    env += [check_env(item, f"{path}: field env") for item in items]
    return probes, env
