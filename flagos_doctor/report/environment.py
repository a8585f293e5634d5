"""Parent side of the report's environment: the interpreter's packages, vendor tools, env vars.

Everything here says why a field is missing instead of failing: a tool that is not
installed is ``not found: mx-smi``, one that hangs is ``timed out after 10 s``, a stack
that crashes on import leaves the steps before it and a line naming the crash.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time

from flagos_doctor.childproc import Child, ChildEnded, ChildTimeout
from flagos_doctor.redact import is_secret, mask_url_passwords

#: Vendor tools: (name, argv, what the report wants from it). Each runs with its own timeout.
TOOLS = (
    ("nvidia-smi", ["nvidia-smi", "--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"]),
    ("nvidia-smi (CUDA)", ["nvidia-smi"]),
    ("nvcc", ["nvcc", "--version"]),
    ("mthreads-gmi", ["mthreads-gmi", "-q"]),
    ("musa_toolkits", ["musa_toolkits_version"]),
    ("npu-smi", ["npu-smi", "info"]),
    ("mx-smi", ["mx-smi"]),
    ("hy-smi", ["hy-smi"]),
    ("rocm-smi", ["rocm-smi", "--showproductname"]),
    ("ixsmi", ["ixsmi"]),
    ("cnmon", ["cnmon"]),
)
TOOL_TIMEOUT = 10.0
HEAD_LINES = 20

#: Toolkit version files, per vendor (first existing wins), for the template's
#: "CUDA/MACA/CANN/MUSA Version" field.
TOOLKITS = (
    ("MACA", ("MACA_PATH", "/opt/maca"), ("Version.txt", "version.txt")),
    ("CANN", ("ASCEND_TOOLKIT_HOME", "/usr/local/Ascend/ascend-toolkit/latest"),
     ("version.cfg", "compiler/version.info", "x86_64-linux/ascend_toolkit_install.info",
      "aarch64-linux/ascend_toolkit_install.info")),
    ("MUSA", ("MUSA_HOME", "MUSA_PATH", "/usr/local/musa"), ("version.txt", "version.json")),
)

#: Runtime configuration: variables with these prefixes, or these exact names.
ENV_PREFIXES = ("FLAGOS_", "GEMS_", "FLAGGEMS_", "TRITON_", "HF_", "TRANSFORMERS_")
ENV_NAMES = ("TORCH_DEVICE_BACKEND_AUTOLOAD", "ACCELERATOR", "PPU_SDK", "ARCH", "CUDA_VISIBLE_DEVICES",
             "ASCEND_RT_VISIBLE_DEVICES", "MUSA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "PYTORCH_CUDA_ALLOC_CONF")


def runtime_config(environ=None) -> list[dict]:
    """The runtime configuration variables that are set, secrets redacted.

    ``[{name, value}]``, or ``[{name, redacted: true}]`` for a name that says token, key,
    secret or password; a password inside a URL (``scheme://user:pw@host``) is masked too.
    """
    environ = os.environ if environ is None else environ
    found = []
    for name in sorted(environ):
        if not (name.startswith(ENV_PREFIXES) or name in ENV_NAMES):
            continue
        if name == "FLAGOS_DOCTOR_CHANNEL":
            continue
        if is_secret(name):
            found.append({"name": name, "redacted": True})
            continue
        value = mask_url_passwords(environ[name])
        found.append({"name": name, "value": value})
    return found


def run_tool(name: str, argv: list[str], timeout: float = TOOL_TIMEOUT) -> dict:
    """Run one vendor tool with its own timeout; say why when it gives nothing."""
    path = shutil.which(argv[0])
    entry = {"name": name, "command": " ".join(argv)}
    if path is None:
        return {**entry, "found": False, "why": f"not found: {argv[0]}"}
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL,
                              errors="replace")
    except subprocess.TimeoutExpired:
        return {**entry, "found": True, "path": path, "why": f"timed out after {timeout:g} s"}
    except OSError as exc:
        return {**entry, "found": True, "path": path, "why": f"could not run: {exc}"}
    lines = (done.stdout or done.stderr).strip().splitlines()
    result = {**entry, "found": True, "path": path, "exit": done.returncode,
              "seconds": round(time.monotonic() - started, 2), "output": "\n".join(lines[:HEAD_LINES])}
    if done.returncode != 0:
        result["why"] = f"exited with {done.returncode}"
    match = re.search(r"CUDA Version:\s*([\d.]+)", done.stdout or "")
    if match:
        result["cuda_version"] = match.group(1)
    match = re.search(r"Driver Version:\s*([\d.]+)", done.stdout or "")
    if match:
        result["driver_version"] = match.group(1)
    match = re.search(r"release ([\d.]+)", done.stdout or "")
    if name == "nvcc" and match:
        result["cuda_version"] = match.group(1)
    return result


def vendor_tools(timeout: float = TOOL_TIMEOUT) -> list[dict]:
    return [run_tool(name, argv, timeout) for name, argv in TOOLS]


def toolkits(environ=None) -> list[dict]:
    """Vendor toolkit versions from their version files (MACA, CANN, MUSA)."""
    environ = os.environ if environ is None else environ
    found = []
    for vendor, roots, files in TOOLKITS:
        homes = [environ.get(r) if not r.startswith("/") else r for r in roots]
        entry = {"name": vendor, "found": False, "why": f"not found: {vendor} toolkit ({', '.join(roots)})"}
        for home in filter(None, homes):
            for relative in files:
                path = os.path.join(home, relative)
                if os.path.isfile(path):
                    try:
                        with open(path, encoding="utf-8", errors="replace") as handle:
                            text = handle.read(2000).strip()
                    except OSError:
                        continue
                    match = re.search(r"(\d+\.\d+(?:\.\w+)*)", text)
                    entry = {"name": vendor, "found": True, "path": path,
                             "version": match.group(1) if match else text.splitlines()[0] if text else None}
                    break
            if entry["found"]:
                break
        found.append(entry)
    return found


def collect_interpreter(python: str, stack: str | None, modules: list[str] | None, timeout: float) -> dict:
    """Run the env child with ``python``; return ``{steps: {name: data}, errors: {name: why}, end}``.

    ``stack`` is ``--stack`` (None with ``--import`` or neither), ``modules`` the modules to
    import (None: the env child finds the stack by the default-stack rule).
    """
    request = json.dumps({"stack": stack, "modules": modules})
    steps: dict = {}
    errors: dict = {}
    under_way = None
    try:
        child = Child(python, "flagos_doctor.report.envchild", [request])
    except OSError as exc:
        return {"steps": {}, "errors": {"python": f"cannot start {python}: {exc}"}, "end": None}
    with child:
        try:
            for record in child.records(timeout):
                if record.get("record") == "begin":
                    under_way = record["step"]
                elif record.get("record") == "step":
                    under_way = None
                    if "error" in record:
                        errors[record["step"]] = record["error"]
                    else:
                        steps[record["step"]] = record.get("data")
            ended = child.wait(timeout=30)
        except ChildTimeout:
            ended = child.terminate_after_timeout()
        end = {"returncode": ended.returncode, "signal": ended.signal, "timed_out": ended.timed_out,
               "describe": ended.describe()}
        if under_way is not None:
            what = under_way if under_way != "stack" else f"importing {', '.join(modules) if modules else 'the stack found by default'}"
            errors[under_way] = f"the child {ended.describe()} while {what}"
            end["step_under_way"] = under_way
            end["stderr_tail"] = child.stderr_tail(20)
        elif ended.returncode not in (0, None) and not steps:
            errors["python"] = f"{python} {ended.describe()}: {child.stderr_tail(5)}"
    return {"steps": steps, "errors": errors, "end": end}


__all__ = ["collect_interpreter", "runtime_config", "vendor_tools", "toolkits", "is_secret", "ChildEnded"]
