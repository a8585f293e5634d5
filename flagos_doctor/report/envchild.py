"""Child side of ``flagos-doctor report``: what the chosen interpreter has installed.

Run as ``python -m flagos_doctor.report.envchild STACK_JSON`` by :mod:`.environment`, with
the standard library alone until the steps that import torch and the stack. Each step
announces itself (``{"record": "begin", "step": step}``) and then sends what it found
(``{"record": "step", "step": step, "data": {...}}``, or ``"error"``) straight over the record channel, so a stack that aborts or segfaults
on import still leaves every earlier step with the parent, and the parent knows which step
was under way.

Steps, in order of risk:

1. ``python``: interpreter, platform, OS release;
2. ``packages``: versions of torch, torch_fl, flag_gems, triton, transformers, ... from
   their distributions' metadata, without importing them; for torch_fl also PEP 610's
   ``direct_url.json``, the git commit, branch and dirty flag of its checkout, and the md5
   of its compiled extension;
3. ``torch``: ``import torch``: build kind (CUDA / HIP / CPU), vendor suffix, native
   ``torch.cuda`` answers;
4. ``stack``: imports the stack's modules in order, lets the stack add what the report
   tells of it (:meth:`flagos_doctor.stacks.base.Stack.describe_for_report`), then reads the
   accelerator it offers (PrivateUse1 backend name, device count, device name). Without
   ``--stack`` or ``--import``, the stack is the one the default-stack rule finds here
   (:func:`flagos_doctor.stacks.detect`); with ``--import``, the last module named is it.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import platform
import sys

from flagos_doctor import stacks
from flagos_doctor.channel import ChildChannel
from flagos_doctor.torch_fl_source import source_details

#: Top-level modules whose versions the report gives, in the report's order.
PACKAGES = ("torch", "torch_fl", "flag_gems", "triton", "transformers", "torch_musa", "torch_npu", "numpy")


def _os_release() -> str | None:
    try:
        with open("/etc/os-release", encoding="utf-8") as handle:
            fields = dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)
        return fields.get("PRETTY_NAME", "").strip('"') or None
    except OSError:
        return None


def step_python() -> dict:
    return {
        "executable": sys.executable,
        "version": platform.python_version(),
        "implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "os": _os_release() or platform.system(),
        "kernel": platform.release(),
    }


def _find(module: str) -> tuple[str | None, str | None]:
    """(location, error) of a top-level module, without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except Exception as exc:  # a blocking finder, a broken namespace package
        return None, f"{type(exc).__name__}: {exc}"
    if spec is None:
        return None, None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0], None
    return spec.origin, None


def _distribution(module: str):
    from importlib import metadata

    names = metadata.packages_distributions().get(module) or [module, module.replace("_", "-")]
    for name in names:
        try:
            return metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def step_packages() -> dict:
    found = {}
    for module in PACKAGES:
        location, error = _find(module)
        if location is None:
            found[module] = {"found": False, "why": error or f"{module} is not importable by {sys.executable}"}
            continue
        entry = {"found": True, "location": location}
        dist = None
        try:
            dist = _distribution(module)
        except Exception as exc:
            entry["metadata_error"] = f"{type(exc).__name__}: {exc}"
        if dist is not None:
            entry["version"] = dist.version
            entry["distribution"] = dist.metadata["Name"]
        else:
            entry["version"] = None
        if module == "torch_fl" and os.path.isdir(location):
            entry.update(source_details(location, dist))
        found[module] = entry
    return found


def step_torch() -> dict:
    import torch

    version = torch.__version__
    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    if hip:
        build = f"HIP {hip}"
    elif cuda:
        build = f"CUDA {cuda}"
    else:
        build = "CPU"
    data = {
        "version": str(version),
        "build": build,
        "cuda": cuda,
        "hip": hip,
        "vendor_suffix": str(version).partition("+")[2] or None,
        "git_version": getattr(torch.version, "git_version", None),
        "debug": bool(getattr(torch.version, "debug", False)),
    }
    try:
        data["cudnn"] = torch.backends.cudnn.version() if cuda else None
    except Exception:
        data["cudnn"] = None
    try:
        data["cuda_available_native"] = bool(torch.cuda.is_available())
        data["cuda_device_count_native"] = int(torch.cuda.device_count())
    except Exception as exc:
        data["cuda_error"] = f"{type(exc).__name__}: {exc}"
    return data


def _accelerator(device_type: str | None) -> dict:
    import torch

    info: dict = {"privateuse1": torch._C._get_privateuse1_backend_name()}
    candidates = [device_type] if device_type else []
    if info["privateuse1"] != "privateuseone":
        candidates.append(info["privateuse1"])
    candidates.append("cuda")
    for kind in candidates:
        module = getattr(torch, kind, None)
        if module is None or not hasattr(module, "device_count"):
            continue
        try:
            count = int(module.device_count())
        except Exception as exc:
            info.setdefault("errors", []).append(f"torch.{kind}.device_count(): {type(exc).__name__}: {exc}")
            continue
        if count or "type" not in info:  # none anywhere: name the stack's own device type, not the last one asked
            info.update(type=kind, count=count)
        if count and hasattr(module, "get_device_name"):
            try:
                info["name"] = str(module.get_device_name(0))
            except Exception as exc:
                info["name_error"] = f"torch.{kind}.get_device_name(0): {type(exc).__name__}: {exc}"
        if count:
            break
    return info


def step_stack(stack_name: str | None, modules: list[str]) -> dict:
    """Import ``modules``; what the stack (``stack_name``, else the last module's) tells of itself; its accelerator."""
    environ_before = dict(os.environ)
    imported = []
    for module in modules:
        importlib.import_module(module)
        imported.append(module)
    data = {"imported": imported}
    stack = stacks.get(stack_name or modules[-1])
    data["accelerator"] = _accelerator(stack.describe_for_report(data, environ_before))
    return data


def main() -> None:
    channel = ChildChannel.from_env()
    request = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    steps = [("python", step_python), ("packages", step_packages), ("torch", step_torch)]
    stack_name, modules = request.get("stack"), request.get("modules")
    if modules is None:
        # The default-stack rule, as the probe's: torch_fl when it can be found, else stock torch.
        stack_name = stacks.detect()
        modules = list(stacks.get(stack_name).probe_imports)
    steps.append(("stack", lambda: step_stack(stack_name, modules)))
    for name, function in steps:
        channel.emit({"record": "begin", "step": name})
        try:
            channel.emit({"record": "step", "step": name, "data": function()})
        except BaseException as exc:  # a broken piece is reported, never fatal
            channel.emit({"record": "step", "step": name, "error": f"{type(exc).__name__}: {exc}"})
            if name == "torch":
                break  # without torch there is no stack to import


if __name__ == "__main__":
    main()
