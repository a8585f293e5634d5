"""Shared test helpers: the repository root, the shared data beside it, running the CLI."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(REPO_ROOT), "shared")
CONFS = os.path.join(SHARED, "torch-fl-confs")


def run_cli(*args, env=None, cwd=None, timeout=600, input=None):
    """Run ``python -m flagos_doctor ARGS`` in a real subprocess; return CompletedProcess."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
        if "PYTHONPATH" in env:  # the CLI under test is this checkout's, whatever is installed
            full_env["PYTHONPATH"] = os.pathsep.join((env["PYTHONPATH"], REPO_ROOT))
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
