"""What a stack is, for every command: :class:`Stack`, which each stack module subclasses.

A stack is used on both sides of the process boundary, and each method says which:

* **parent** (the CLI process, which never imports torch): plain data and the survey's
  ``prepare_*`` methods, which edit a worker's environment before it starts;
* **child** (the survey's worker, the report's env child, the probe's child, started with
  the user's ``--python``): the methods that import the stack, and torch with it.

Module level imports nothing but the standard library and flagos_doctor's own
standard-library modules: the parent reads this module, and so does the probe's child
before its tracer is in place.
"""

from __future__ import annotations

import os
import sys

from flagos_doctor.stacks.evidence import counts_from_log, route_of
from flagos_doctor.results import model

GIB = 1 << 30


class NoBaseline(RuntimeError):
    """The stack has no native path to compare with."""


class Checks:
    """A stack's checks before any case, running (:meth:`Stack.start_checks`): none here."""

    def result(self, found: dict) -> dict:
        """Provenance fields of the checks, given what the first worker found (its provenance)."""
        return {}

    def stop(self) -> None:
        """End the checks unread (a survey that ended before it needed them)."""


class Stack:
    """One kind of stack. Subclasses override what differs."""

    #: The ``--stack`` name.
    name = "stack"
    #: A few words for ``--help`` and error messages.
    description = ""

    # -- probe and report (data, read on both sides) -----------------------------------
    #: The modules the probe's child and the report's env child import, in order.
    probe_imports: tuple[str, ...] = ()
    #: How to make :attr:`probe_imports` importable when they are not (the probe's notice).
    install_hint: str | None = None
    #: The device type the stack offers, when known without importing it (the report's
    #: bundle says it); None: the report's env child asks :meth:`describe_for_report`.
    device_type: str | None = None

    # -- survey, parent side -------------------------------------------------------------
    #: Environment variable that restricts a worker to its devices (``--devices``).
    visible_devices_var = "CUDA_VISIBLE_DEVICES"
    #: Modules a survey worker may import before the stack's ``setup()``: imported once, in
    #: a process the workers are forked from (survey/forkserver.py). Never one whose import
    #: touches a device, nor one the stack's own first steps must precede (torch_fl sets its
    #: environment and loads its libraries before torch). Empty: each worker is spawned,
    #: always; None: the stack does not say (a module stack), ``FLAGOS_DOCTOR_FORK`` may.
    fork_after: tuple[str, ...] | None = None
    #: Whether its workers print torch_fl-style dispatch / fallback lines.
    log_evidence = True
    #: Host memory a survey worker is expected to need (survey/sizing.py): measured on CPU
    #: a flag_gems worker peaks at about 0.35 GB; a CUDA runtime and the compilers a Triton
    #: worker spawns add to that, hence the margin.
    worker_host_bytes = 3 * GIB
    #: Where the route set comes from without ``--conf`` / ``--routes`` when
    #: :meth:`default_conf` gives none: a ``--routes`` source (``flag_gems``), or None: the
    #: user must say.
    default_listing: str | None = None
    #: Whether ``--routes NAME`` takes the overloads this stack registers as the route set
    #: of a survey of any stack (a worker of this stack lists them).
    route_source = False

    def default_conf(self) -> str | None:
        """Parent. The backends conf whose routes the survey takes without ``--conf`` / ``--routes``."""
        return None

    #: The package whose ``configs/`` folder holds the stack's own backends confs (torch_fl's),
    #: where a bare ``--conf NAME`` not in the current folder is looked up.
    configs_package: str | None = None

    def configs_folder(self, python: str, env: dict | None = None) -> str | None:
        """Parent. The stack's ``configs/`` folder as ``python`` finds its package (a short
        child that imports nothing: ``find_spec``), or None."""
        import subprocess

        from flagos_doctor.childproc import child_env

        if not self.configs_package:
            return None
        finder = ("import importlib.util, os, sys; s = importlib.util.find_spec(sys.argv[1]); "
                  "print(os.path.join(list(s.submodule_search_locations)[0], 'configs') if s and s.submodule_search_locations else '')")
        try:
            done = subprocess.run([python, "-c", finder, self.configs_package], env=child_env(env), stdin=subprocess.DEVNULL,
                                  capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            return None
        folder = done.stdout.strip()
        return folder if done.returncode == 0 and os.path.isdir(folder) else None

    def prepare_env(self, env: dict, conf: str | None, keep_env: bool) -> None:
        """Parent. Edit ``env``, the environment a survey worker will start with."""
        if not keep_env:
            for key in [k for k in env if k.startswith("FLAGOS_OP_")]:
                del env[key]
        if conf:
            env["FLAGOS_BACKEND_CONFIG"] = os.path.abspath(conf)
        if self.log_evidence:
            env["FLAGOS_LOG_DISPATCH"] = "1"
            env["FLAGOS_LOG_FALLBACK"] = "1"

    def prepare_baseline_env(self, env: dict, overloads: list[str], native_route: str | None) -> None:
        """Parent. Edit ``env`` of a baseline worker (after :meth:`prepare_env`)."""

    def start_checks(self, python: str, env: dict) -> "Checks":
        """Parent. The stack's checks before any case, started beside the workers (``python``,
        ``env``: how they start), so that their imports run side by side."""
        return Checks()

    def given_commit(self, found: dict, commit: str) -> dict:
        """Parent. ``found`` (the first worker's provenance) with the commit the user gave
        (``--torch-fl-commit``) for a torch_fl build that records none: the torch_fl it
        loaded says so, and its runs are filed under that commit. Unchanged without one."""
        if not found.get("torch_fl"):
            return found
        from flagos_doctor.torch_fl_source import with_commit  # here: the parent imports nothing named torch

        return {**found, "torch_fl": with_commit(found["torch_fl"], commit), "store_key": commit}

    # -- survey, child side (the worker) -------------------------------------------------
    def setup(self) -> str:
        """Child. Import and enable the stack; return its device string."""
        raise NotImplementedError

    def setup_baseline(self) -> str:
        """Child. Set up the stack's native path instead of the stack; return the device string."""
        raise NoBaseline(f"stack {self.name!r} has no native path to compare with")

    def baseline_label(self) -> str | None:
        """Child. What the native path is, in a few words ("stock torch"), or None when there is none."""
        return None

    def registered(self) -> list[str]:
        """Child. The overloads the stack registers kernels for (``--routes stack``)."""
        raise NotImplementedError(f"stack {self.name!r} cannot list what it registers")

    def version(self) -> str | None:
        """Child. The stack's version: its distribution's, None when unknown."""
        return dist_version(self.name)

    def loaded_torch_fl(self) -> dict | None:
        """Child, after setup. The torch_fl the stack loaded (any stack may import it), or None."""
        return torch_fl_info() if "torch_fl" in sys.modules else None

    def key(self, torch_fl: dict | None = None) -> str:
        """Child. The results-store key: the commit of the loaded torch_fl (``-dirty`` when its
        tree was), the code under test; else ``<stack>-<version>``."""
        if torch_fl and torch_fl.get("commit"):
            return torch_fl["commit"] + ("-dirty" if torch_fl.get("dirty") else "")
        return f"{self.name}-{self.version() or 'unknown'}"

    def provenance(self) -> dict:
        """Child, after setup. The stack's part of a survey's provenance: ``stack``,
        ``store_key`` (:meth:`key`) and ``torch_fl`` (:meth:`loaded_torch_fl`)."""
        torch_fl = self.loaded_torch_fl()
        return {"stack": self.name, "store_key": self.key(torch_fl), "torch_fl": torch_fl}

    def begin_case(self) -> object:
        """Child. A snapshot taken before a case, handed back to :meth:`evidence`."""
        return None

    def evidence(self, overload: str, before: object, captured: str, backend: str) -> tuple[str, str]:
        """Child. (route, note) of one case from the snapshot and the stderr it printed."""
        if not self.log_evidence:
            return model.ROUTE_UNKNOWN, ""
        kernels, fallbacks = counts_from_log(captured, backend)
        return route_of(overload, kernels, fallbacks)

    # -- report, child side (the env child, after importing :attr:`probe_imports`) ------
    def describe_for_report(self, data: dict, environ_before: dict) -> str | None:
        """Child. Add what the report tells of this stack to ``data`` (the env child's stack
        step; ``environ_before``: the environment before the imports); return the device
        type whose accelerator the report describes, or None: the report looks for one
        (PrivateUse1's name, then cuda)."""
        return self.device_type


def distribution(name: str):
    """The installed distribution of an import name (``flag_gems`` or ``flag-gems``), or None.

    Either side: reads package metadata, imports nothing."""
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


def torch_fl_info() -> dict | None:
    """Child. torch_fl's version, commit, dirty flag and extension md5 (see
    :mod:`flagos_doctor.torch_fl_source`), or None when it is not installed."""
    import importlib.util

    from flagos_doctor.torch_fl_source import source_details

    dist = distribution("torch_fl")
    try:
        spec = importlib.util.find_spec("torch_fl")
    except (ImportError, ValueError):
        spec = None
    if dist is None and spec is None:
        return None
    package_dir = list(spec.submodule_search_locations)[0] if spec is not None and spec.submodule_search_locations else None
    return {"version": dist.version if dist else None, **source_details(package_dir, dist)}
