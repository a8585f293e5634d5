"""The map of docs/CONVENTIONS.md holds: the survey's parent side and child side stay apart,
every command's views are registered with the one output sink, and the CLI names its
command modules by plain imports."""

from __future__ import annotations

import ast
import os

import pytest

from conftest import REPO_ROOT

PACKAGE = os.path.join(REPO_ROOT, "flagos_doctor")
SURVEY = os.path.join(PACKAGE, "survey")


def _imported(path: str) -> set[str]:
    """Every module ``path`` imports, at any depth (function-level imports included)."""
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


PARENT_SIDE = sorted(f for f in os.listdir(SURVEY) if f.endswith(".py"))


@pytest.mark.parametrize("name", PARENT_SIDE)
def test_the_survey_parent_side_imports_neither_torch_nor_the_child_side(name):
    imported = _imported(os.path.join(SURVEY, name))
    assert not {m for m in imported if m == "torch" or m.startswith("torch.")}, name
    assert not {m for m in imported if m.startswith("flagos_doctor.survey.child")}, name


def test_the_pool_starts_the_child_side_worker():
    from flagos_doctor.survey import pool

    assert pool.WORKER_MODULE == "flagos_doctor.survey.child.worker"
    assert os.path.isfile(os.path.join(SURVEY, "child", "worker.py"))


#: Each document schema's views, as the commands emit them.
VIEWS = {
    "flagos-doctor/probe/1": ("json", "markdown", "terminal"),
    "flagos-doctor/report/1": ("json", "markdown"),
    "flagos-doctor/survey/1": ("json", "census", "terminal"),
    "flagos-doctor/compare/1": ("json", "markdown", "terminal"),
    "flagos-doctor/attribution/1": ("json", "markdown", "terminal"),
    "flagos-doctor/suite-compare/1": ("json", "markdown", "terminal"),
    "flagos-doctor/matrix/1": ("json", "markdown", "csv", "terminal"),
    "flagos-doctor/explain/1": ("json", "markdown", "terminal"),
}


@pytest.mark.parametrize("schema", sorted(VIEWS))
def test_every_command_registers_its_views_with_the_output_sink(schema):
    # Importing the command modules registers every view (what the CLI does, one command at a time).
    from flagos_doctor import output
    from flagos_doctor.compare import attribute_views as _attribution  # noqa: F401  (compare --attribute imports it)
    from flagos_doctor.compare import command as _compare  # noqa: F401
    from flagos_doctor.explain import command as _explain  # noqa: F401
    from flagos_doctor.matrix import command as _matrix  # noqa: F401
    from flagos_doctor.probe import command as _probe  # noqa: F401
    from flagos_doctor.report import command as _report  # noqa: F401
    from flagos_doctor.suite import command as _suite  # noqa: F401
    from flagos_doctor.survey import command as _survey  # noqa: F401

    for format in VIEWS[schema]:
        assert output.view({"schema": schema}, format), (schema, format)
    with pytest.raises(LookupError, match="no pdf view of"):
        output.view({"schema": schema}, "pdf")


def test_the_cli_names_its_command_modules_by_plain_imports():
    imported = _imported(os.path.join(PACKAGE, "cli.py"))
    assert "importlib" not in imported
    for area in ("probe", "survey", "compare", "report", "suite", "matrix", "explain"):
        assert f"flagos_doctor.{area}.command" in imported, area
