"""Which FlagGems function each torch_fl ``flagos_python`` binding calls, and whether the
installed flag_gems has it.

torch_fl's generated bindings (``csrc/aten/generated/flaggems_python_kernels.cc``, written by
``scripts/codegen_ops.py`` on whichever machine ran the codegen) name their FlagGems function
by a dotted qualname frozen at codegen time::

    auto result = CallPythonOp_Generic("flag_gems.ops.abs.abs", {self});

and ``python_op_caller.cc:GetFunc`` resolves it at the first call: import the module, take
the attribute; when either fails, retry ``flag_gems.ops.<function>``; a bare name is looked
up on ``flag_gems.ops`` alone. When the retry fails too, the op raises
``AttributeError: module 'flag_gems.ops' has no attribute '<function>'`` on every call. The
bindings and the installed flag_gems drift apart (the codegen ran against another flag_gems
version), so that error is not a kernel bug: the survey gives such a case its own status,
:data:`model.MISSING_FUNCTION`, and names the function.

Two ways to know, both here:

* from a case's error (:func:`flagos_doctor.results.model.missing_from_detail`), on any build;
* statically, before a case runs: the functions a build calls (:func:`qualnames_in_library`,
  from the compiled ``libtorch_fl.so``; or :func:`binding_map`, overload -> function, from a
  torch_fl source tree) checked against the installed flag_gems (:func:`lookup_error`, which
  imports flag_gems: child side only).

The parsing is standard library only, so the parent can read it too.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess

from flagos_doctor.childproc import child_env

#: The generated file of bindings, the dispatcher table (op name -> function type) and the
#: registration of each binding to its function type, relative to a torch_fl source tree.
KERNELS_FILE = os.path.join("csrc", "aten", "generated", "flaggems_python_kernels.cc")
OPS_FILE = os.path.join("csrc", "aten", "generated", "ops.cc")

#: ``<Name>KernelPython(...) {`` then, in its body, the first ``CallPythonOp_*("qualname"``.
_KERNEL_RE = re.compile(r"^\S.*?\b(\w+KernelPython)\(.*?\{\s*$(.*?)^\}", re.M | re.S)
_CALL_RE = re.compile(r'CallPythonOp_\w*\(\s*"([^"]+)"')
#: ``REGISTER_IMPL_TO_DISPATCHER(FnType, dispatcher, Backend::kFlagOsPython, KernelName)``
_REGISTER_RE = re.compile(r"REGISTER_IMPL_TO_DISPATCHER\(\s*(\w+)\s*,\s*\w+\s*,\s*Backend::kFlagOsPython\s*,\s*(\w+)\s*\)")
#: ``ADD_IMPL_TO_DISPATCHER(FnType, dispatcher, "op.overload")``
_OPS_RE = re.compile(r'ADD_IMPL_TO_DISPATCHER\(\s*(\w+)\s*,\s*\w+\s*,\s*"([^"]+)"\s*\)')
#: A FlagGems qualname as it sits among a library's strings.
_QUALNAME_BYTES_RE = re.compile(rb"flag_gems(?:\.[A-Za-z_][A-Za-z0-9_]*)+(?=\x00)")


def binding_map(source_dir: str) -> dict[str, str]:
    """``{overload: FlagGems qualname}`` for every ``flagos_python`` binding of a torch_fl
    source tree (conf names: ``abs``, ``add.Tensor``, ``_adaptive_avg_pool2d``).

    Raises FileNotFoundError when ``source_dir`` has no generated bindings.
    """
    with open(os.path.join(source_dir, KERNELS_FILE), encoding="utf-8") as handle:
        kernels_text = handle.read()
    with open(os.path.join(source_dir, OPS_FILE), encoding="utf-8") as handle:
        ops_text = handle.read()
    calls = {}
    for kernel, body in _KERNEL_RE.findall(kernels_text):
        found = _CALL_RE.search(body)
        if found:
            calls[kernel] = found.group(1)
    ops_of_type: dict[str, list[str]] = {}
    for fn_type, op in _OPS_RE.findall(ops_text):
        ops_of_type.setdefault(fn_type, []).append(op)
    result = {}
    for fn_type, kernel in _REGISTER_RE.findall(kernels_text):
        if kernel in calls:
            for op in ops_of_type.get(fn_type, []):
                result[op] = calls[kernel]
    return dict(sorted(result.items()))


def qualnames_in_library(path: str) -> list[str]:
    """The FlagGems qualnames compiled into a torch_fl library (``torch_fl/lib/libtorch_fl.so``):
    what that build calls, whatever source it came from. Sorted, without ``flag_gems.ops``
    itself (the module every lookup starts from)."""
    with open(path, "rb") as handle:
        data = handle.read()
    names = {match.decode() for match in _QUALNAME_BYTES_RE.findall(data)}
    names.discard("flag_gems.ops")
    return sorted(names)


def library_of(package_dir: str) -> str | None:
    """The library holding the bindings in an installed torch_fl package folder, or None."""
    path = os.path.join(package_dir, "lib", "libtorch_fl.so")
    return path if os.path.isfile(path) else None


def lookup_error(qualname: str) -> str | None:
    """None when torch_fl's lookup of ``qualname`` finds a callable in the installed flag_gems,
    else what it raises (``AttributeError: ...``). Imports flag_gems: child side only.

    The same two steps as ``GetFunc`` (see the module docstring), so a qualname whose module
    moved but whose function ``flag_gems.ops`` still exports counts as present, as it does
    for torch_fl.
    """
    ops = importlib.import_module("flag_gems.ops")
    module_path, _, function = qualname.rpartition(".")
    if module_path:
        try:
            getattr(importlib.import_module(module_path), function)
            return None
        except Exception:
            pass
    try:
        getattr(ops, function)
        return None
    except AttributeError as exc:
        return f"AttributeError: {exc}"


def missing_functions(qualnames) -> dict[str, str]:
    """``{qualname: error}`` for each of ``qualnames`` the installed flag_gems lacks (child side)."""
    missing = {}
    for name in sorted(set(qualnames)):
        error = lookup_error(name)
        if error:
            missing[name] = error
    return missing


def missing_detail(function: str, error: str) -> str:
    """The detail of a MISSING_FUNCTION case: which function, which flag_gems, the error."""
    from flagos_doctor.stacks.base import dist_version

    return f"flag_gems {dist_version('flag_gems') or '(version unknown)'} has no {function} ({error})"


def summary_line(summary: dict, flag_gems_version: str | None) -> str | None:
    """``N overloads call functions flag_gems X lacks: a, b, ...`` from a survey summary, or
    None when none does (the line the terminal, Markdown and README show)."""
    missing = summary.get("missing_functions") or {}
    if not missing:
        return None
    count = len(missing)
    noun = "overload calls a function" if count == 1 else "overloads call functions"
    return f"{count} {noun} flag_gems {flag_gems_version or '(version unknown)'} lacks"


#: Seconds for the static check's child (importing flag_gems on a GPU machine takes seconds).
CHECK_TIMEOUT = 600.0


class CheckInChild:
    """:func:`static_check` in a fresh child of ``python`` with ``env`` (parent side), started
    now and read with :meth:`result`: the survey starts it beside its workers, whose imports
    it would otherwise wait behind (seconds on a 16-core machine starting 16 workers).

    Never in a survey worker: importing flag_gems there, before torch_fl's first device call
    imports it, would change the order of imports the survey is meant to observe.
    """

    def __init__(self, python: str, env: dict, timeout: float = CHECK_TIMEOUT):
        self.timeout = timeout
        self.failed: str | None = None
        code = ("import json\nfrom flagos_doctor.stacks.torch_fl_bindings import static_check\n"
                "print(json.dumps(static_check()))")
        try:  # a child of ours: under the children's one import-path policy (child_env)
            self.child = subprocess.Popen([python, "-c", code], env=child_env(env), stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        except OSError as exc:
            self.child = None
            self.failed = f"{type(exc).__name__}: {exc}"[:300]

    def result(self) -> dict | None:
        """The check, None when there is no torch_fl, or ``{"error": ...}`` when the child failed."""
        if self.child is None:
            return {"error": self.failed}
        try:
            out, err = self.child.communicate(timeout=self.timeout)
        except subprocess.TimeoutExpired as exc:
            self.stop()
            return {"error": f"{type(exc).__name__}: {exc}"[:300]}
        lines = out.strip().splitlines()
        if self.child.returncode != 0 or not lines:
            tail = err.strip().splitlines()[-1:] or [f"exit {self.child.returncode}"]
            return {"error": tail[0][:300]}
        return json.loads(lines[-1])

    def stop(self) -> None:
        """Kill the child if it still runs (a survey that ended before it needed the check)."""
        if self.child is not None and self.child.poll() is None:
            self.child.kill()
            self.child.communicate()


def check_in_child(python: str, env: dict, timeout: float = CHECK_TIMEOUT) -> dict | None:
    """:class:`CheckInChild`, waited for."""
    return CheckInChild(python, env, timeout).result()


def static_check() -> dict | None:
    """What the installed torch_fl's bindings call that the installed flag_gems lacks, found
    before any case runs (child side: imports flag_gems, not torch_fl).

    ``library`` (the ``libtorch_fl.so`` read), ``calls`` (how many FlagGems functions it
    names), ``missing`` {qualname: error}; and, when the package sits in a source checkout
    with the generated bindings (an editable install), ``source`` and ``overloads``
    {overload: qualname} of the bindings whose function is missing. None when no torch_fl
    library is found; ``error`` when flag_gems cannot be imported.
    """
    import importlib.util

    try:
        spec = importlib.util.find_spec("torch_fl")
    except (ImportError, ValueError):
        spec = None
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    library = library_of(locations[0]) if locations else None
    if library is None:
        return None
    result: dict = {"library": library}
    calls = qualnames_in_library(library)
    result["calls"] = len(calls)
    try:
        result["missing"] = missing_functions(calls)
    except Exception as exc:  # flag_gems itself will not import: every case will say so
        result["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return result
    source = os.path.dirname(os.path.abspath(locations[0]))
    if os.path.isfile(os.path.join(source, KERNELS_FILE)):
        result["source"] = source
        result["overloads"] = {op: name for op, name in binding_map(source).items() if name in result["missing"]}
    return result
