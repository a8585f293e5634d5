"""The map of docs/CONVENTIONS.md holds: imports only point down the floors, with no circle;
the survey's parent side and child side stay apart; every command's views are registered with
the one output sink; the CLI names its command modules by plain imports; and no function runs
past 60 lines but a declarative table."""

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


def _modules() -> dict[str, str]:
    """Every module of the package, by dotted name (a package by its own name), to its file."""
    found = {}
    for folder, _, names in os.walk(PACKAGE):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                dotted = os.path.relpath(path[:-3], REPO_ROOT).replace(os.sep, ".")
                found[dotted.removesuffix(".__init__")] = path
    return found


MODULES = _modules()


def _module_of(name: str) -> str | None:
    """The package's module that an import of ``name`` loads (``a.b.c`` of an attribute ``c`` of ``a.b``: ``a.b``)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _graph() -> dict[str, set[str]]:
    """Module -> the package's modules it imports, at any depth (imports inside functions too)."""
    graph = {}
    for dotted, path in MODULES.items():
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        here = dotted if path.endswith("__init__.py") else dotted.rpartition(".")[0]
        targets = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from . import x, from ..y import z
                    parts = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                targets.update(f"{base}.{alias.name}" for alias in node.names)
        graph[dotted] = {m for m in map(_module_of, targets) if m and m != dotted}
    return graph


#: The floors of the house, top first: a module imports only from its own floor or below.
#: Each floor lists the top-level modules and packages of ``flagos_doctor`` on it; everything
#: not listed is a foundation (files, output, errors, children, the store...).
FLOORS = (
    ("the command line", ("cli", "__main__")),
    # report bundles a probe, a survey's results, a comparison and an explain document;
    # explain runs the user's program on the probe's watch and engine; ci merges the
    # comparisons of many vendor boxes into one PR comment
    ("the composite commands", ("report", "explain", "ci")),
    ("commands", ("probe", "survey", "compare", "suite", "matrix")),
    ("shared by commands", ("arms", "options")),
    ("stacks", ("stacks",)),
    ("the results model", ("results",)),
)
FOUNDATIONS = len(FLOORS)
COMMANDS = FLOORS[2][1]


def _top(module: str) -> str:
    """``compare`` for ``flagos_doctor.compare.build``; ``flagos_doctor`` for the package itself."""
    return module.split(".")[1] if "." in module else module


def _floor(module: str) -> int:
    """The floor of ``module``, 0 the top."""
    return next((index for index, (_, tops) in enumerate(FLOORS) if _top(module) in tops), FOUNDATIONS)


def _upward_imports() -> list[str]:
    graph = _graph()
    found = []
    for module, imported in sorted(graph.items()):
        for target in sorted(imported):
            if _floor(target) < _floor(module):
                found.append(f"{module} -> {target} (up from {_name(module)} to {_name(target)})")
            elif _top(module) in COMMANDS and _top(target) in COMMANDS and _top(module) != _top(target):
                found.append(f"{module} -> {target} (one command imports another)")
            elif target.endswith(".command") and _top(module) not in ("cli", _top(target)):
                found.append(f"{module} -> {target} (only the CLI runs a command)")
    return found


def _name(module: str) -> str:
    floor = _floor(module)
    return FLOORS[floor][0] if floor < FOUNDATIONS else "the foundations"


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(module):
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_the_import_graph_sees_imports_inside_functions():
    # The circle that once ran cli -> compare.command -> compare.build -> cli went through a
    # function-level import: the graph must see those, or the two tests below prove nothing.
    graph = _graph()
    assert "flagos_doctor.cli" not in graph["flagos_doctor.compare.build"]
    assert "flagos_doctor.survey.command" in graph["flagos_doctor.cli"]  # imported inside a function
    assert "flagos_doctor.probe.runner" in graph["flagos_doctor.report.bundle"]  # likewise
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_circles():
    assert _circles(_graph()) == []


def test_imports_only_point_down():
    assert _upward_imports() == []


def test_every_top_level_name_of_a_floor_exists():
    tops = {_top(module) for module in MODULES}
    for _, names in FLOORS:
        assert set(names) <= tops, names


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
    "flagos-doctor/matrix/1": ("json", "markdown", "csv", "html", "terminal"),
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


def _functions(path: str) -> dict[str, ast.FunctionDef]:
    with open(path, encoding="utf-8") as handle:
        tree = ast.parse(handle.read(), path)
    return {node.name: node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


#: The most lines a function of the package may take (``def`` to its last line, decorators left out).
MAX_FUNCTION_LINES = 60

#: Functions that are declarative tables, by file and name, whose table may run past
#: MAX_FUNCTION_LINES; what follows the table (the docstring on) may not.
DECLARATIVE = {
    # typer reads a command's options from its signature: one parameter per option, each a
    # typer.Option with its flag, metavar and help, is the table. Its body stays short.
    ("cli.py", "survey"),
}


def _lines(node: ast.AST) -> int:
    return node.end_lineno - node.lineno + 1


def test_no_function_is_over_sixty_lines_but_the_declarative_tables():
    long, tables = {}, {}
    for path in MODULES.values():
        where = os.path.relpath(path, PACKAGE)
        with open(path, encoding="utf-8") as handle:
            tree = ast.parse(handle.read(), path)
        # every def, nested ones and ones sharing a name included
        for node in ast.walk(tree):
            if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if (where, node.name) in DECLARATIVE:
                tables[(where, node.name)] = node.end_lineno - node.body[0].lineno + 1
            elif _lines(node) > MAX_FUNCTION_LINES:
                long[f"{where}:{node.lineno}:{node.name}"] = _lines(node)
    assert long == {}
    assert set(tables) == DECLARATIVE  # an entry for a function that is gone goes too
    assert {key: lines for key, lines in tables.items() if lines > MAX_FUNCTION_LINES} == {}


def test_the_survey_is_a_short_sequence_of_named_steps():
    functions = _functions(os.path.join(SURVEY, "command.py"))
    calls = sorted((node.lineno, node.col_offset, node.func.id) for node in ast.walk(functions["_survey"])
                   if isinstance(node, ast.Call) and isinstance(node.func, ast.Name))
    called = [name for _, _, name in calls]
    steps = ["_plan", "_start", "_run_tasks", "_confirm", "_file", "_render"]
    assert [name for name in called if name in steps] == steps
