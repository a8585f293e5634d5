"""Shared test helpers: the repository root, the shared data beside it, running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(REPO_ROOT), "shared")
FIXTURES = os.path.join(REPO_ROOT, "tests", "fixtures")
# The fault stack's environment: this checkout's flagos_doctor after the fixtures (an
# installed one elsewhere must not win); flag_gems importable on CPU for its bound kernels.
FAULT_ENV = {
    "PYTHONPATH": os.pathsep.join([FIXTURES, REPO_ROOT]),
    "GEMS_VENDOR": "nvidia",
    "FLAGGEMS_DB_URL": f"sqlite:///{tempfile.gettempdir()}/flagos-doctor-fault-{os.getpid()}.db",
}
CONFS = os.path.join(SHARED, "torch-fl-confs")


def checkout_first(pythonpath: str | None) -> str:
    """``pythonpath`` with this checkout in front (once): the flagos_doctor a child imports
    is this checkout's, whatever is installed."""
    rest = [p for p in pythonpath.split(os.pathsep) if p != REPO_ROOT] if pythonpath else []
    return os.pathsep.join([REPO_ROOT, *rest])


# Every child a test starts with this environment: tests that start ``python -m
# flagos_doctor`` themselves (a pipe to /dev/full, taskset, a Popen to kill) found an
# editable install of another clone, or none. run_cli does the same for the env it is given.
os.environ["PYTHONPATH"] = checkout_first(os.environ.get("PYTHONPATH"))


def run_cli(*args, env=None, cwd=None, timeout=600, input=None):
    """Run ``python -m flagos_doctor ARGS`` in a real subprocess; return CompletedProcess."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    # The CLI under test is this checkout's, whatever is installed: without this, a child
    # started in a temporary folder imported an editable install of another clone.
    full_env["PYTHONPATH"] = checkout_first(full_env.get("PYTHONPATH"))
    return subprocess.run(
        [sys.executable, "-m", "flagos_doctor", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=cwd,
        timeout=timeout,
        input=input,
    )


@pytest.fixture
def cli():
    return run_cli


@pytest.fixture
def flag_gems_env(tmp_path):
    """Environment in which flag_gems imports on a CPU-only machine."""
    return {"GEMS_VENDOR": "nvidia", "FLAGGEMS_DB_URL": f"sqlite:///{tmp_path}/flaggems.db"}


#: torch_fl's public source at 1adbc97 (a ``git archive`` tarball), beside the clone.
TORCH_FL_TARBALL = os.path.join(SHARED, "torch-fl", "Torch-FL-1adbc97-src.tar.gz")


def real_torch_fl() -> str:
    """The import path of the real torch_fl built from :data:`TORCH_FL_TARBALL` for this
    interpreter (``python -m flagos_doctor.torch_fl_build``, which ``.ci/run`` runs).

    Without ``../shared`` the test is skipped, saying so; with it, a missing build is a skip
    on a developer's machine and a failure in CI (``CI=true``), where ``.ci/run`` built it.
    """
    if not os.path.isfile(TORCH_FL_TARBALL):
        pytest.skip(f"no {TORCH_FL_TARBALL}: the real torch_fl tests need ../shared beside the clone")
    from flagos_doctor.torch_fl_build import find_build

    path = find_build(TORCH_FL_TARBALL, sys.executable)
    if path is None:
        why = (f"no torch_fl build of {TORCH_FL_TARBALL} for {sys.executable}: "
               f"run python -m flagos_doctor.torch_fl_build {TORCH_FL_TARBALL} (scripts/run-tests does)")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(why)
        pytest.skip(why)
    return path
