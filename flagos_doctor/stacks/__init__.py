"""The stacks flagos-doctor diagnoses: one module each, and this registry, for every command.

A stack module holds everything one kind of stack is (:class:`~.base.Stack`): its name and
description, the modules the probe's child and the report's env child import, how a survey
worker sets it up, where the survey's route set comes from without ``--conf``, how a case's
route is told (its evidence), its native path (the ``--baseline native`` worker), and what
the report asks of it. Built in: :mod:`.demo`, :mod:`.torch_fl`, :mod:`.flag_gems`,
:mod:`.stock_torch` (``torch``); any other name is a module stack (:mod:`.module`).

Adding a stack: a module beside these with a :class:`~.base.Stack` subclass, and one entry
in :data:`BUILT_IN`. probe, survey and report, their ``--help`` and their error messages
take the names from here.

Which stack a command uses (one rule, :data:`DEFAULT_RULE`):

* ``--stack NAME``: the built-in stack NAME, else the importable module NAME (probe, survey
  and report alike);
* no ``--stack``: probe and report look at what the chosen interpreter has: ``torch_fl``
  when it can import it, else stock ``torch`` (:func:`detect`, run in their child, the
  interpreter of ``--python``); ``--import MOD`` names modules to import instead. The
  survey runs ``demo`` (:data:`SURVEY_DEFAULT`): a survey needs a route set, and only the
  demo brings one whatever is installed (torch_fl needs ``FLAGOS_BACKEND_CONFIG`` or
  ``--conf``, stock torch ``--routes``), so its first command works anywhere.

Sides: this package imports only the standard library and flagos_doctor's own
standard-library modules at module level; the parent reads it (it must not import torch),
and so do the children, which call the methods marked *child*.
"""

from __future__ import annotations

from flagos_doctor.errors import BadInput
from flagos_doctor.stacks.base import Checks, NoBaseline, Stack, dist_version, distribution
from flagos_doctor.stacks.demo import DemoStack
from flagos_doctor.stacks.flag_gems import FlagGemsStack
from flagos_doctor.stacks.module import ModuleStack
from flagos_doctor.stacks.stock_torch import TorchStack
from flagos_doctor.stacks.torch_fl import TorchFLStack

#: The built-in stacks by ``--stack`` name, in the order help and errors list them.
BUILT_IN: dict[str, type[Stack]] = {cls.name: cls for cls in (DemoStack, TorchFLStack, FlagGemsStack, TorchStack)}

#: The survey's ``--stack`` default (see the module docstring for why it is not detected).
SURVEY_DEFAULT = DemoStack.name
#: What probe and report look at without ``--stack`` or ``--import``: the first of these
#: the chosen interpreter can import (the last is always taken).
DETECTED = (TorchFLStack.name, TorchStack.name)
DEFAULT_RULE = (f"without --stack, probe and report take {DETECTED[0]} when the chosen --python can import it, "
                f"else {DETECTED[1]}; the survey takes {SURVEY_DEFAULT}")


def names() -> list[str]:
    """The built-in stack names."""
    return list(BUILT_IN)


def route_sources() -> tuple[str, ...]:
    """``--routes`` values: each built-in stack whose registrations make a route set of
    their own (:attr:`~.base.Stack.route_source`), then ``stack`` (the chosen stack's)."""
    return tuple(name for name, cls in BUILT_IN.items() if cls.route_source) + ("stack",)


def is_module_name(name: str) -> bool:
    return bool(name) and all(part.isidentifier() for part in name.split("."))


def choices() -> str:
    """``demo | torch_fl | flag_gems | torch | MODULE``, each with its few words: for ``--help``."""
    return " | ".join([f"{cls.name} ({cls.description})" for cls in BUILT_IN.values()]
                      + [f"MODULE ({ModuleStack.description})"])


def get(name: str) -> Stack:
    """Either side. The stack called ``name``: a built-in, else the module stack of that
    module (not imported here). Raises BadInput for a name that is neither."""
    if name in BUILT_IN:
        return BUILT_IN[name]()
    if not is_module_name(name):
        raise not_importable(name)
    return ModuleStack(name)


def not_importable(name: str) -> BadInput:
    """The one error for a stack that is neither built in nor importable by the chosen
    interpreter (probe, survey and report alike)."""
    from flagos_doctor.errors import excerpt

    return BadInput(f"no stack or importable module {excerpt(name)}; stacks: {', '.join(names())}", "--stack")


def check(name: str | None, python: str, env: dict | None = None, timeout: float = 60.0) -> None:
    """Parent. Refuse ``--stack name`` before any work when it is neither a built-in stack
    nor a module ``python`` can find (``importlib.util.find_spec`` in a short child under
    the children's import-path policy, which imports no stack)."""
    import subprocess

    if name is None or name in BUILT_IN:
        return
    get(name)  # not even a module name: refused here
    from flagos_doctor.childproc import child_env

    finder = "import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(sys.argv[1]) else 1)"
    try:
        found = subprocess.run([python, "-c", finder, name], env=child_env(env), stdin=subprocess.DEVNULL,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=timeout).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return  # the interpreter itself is checked apart (checks.interpreter); the child will say
    if not found:
        raise not_importable(name)


def detect() -> str:
    """Child (the interpreter of ``--python``). The stack probe and report look at when
    none is named: the first of :data:`DETECTED` this interpreter can import."""
    import importlib.util

    for name in DETECTED[:-1]:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except Exception:  # a blocking finder, a broken namespace package: not importable
            continue
    return DETECTED[-1]


__all__ = ["BUILT_IN", "Checks", "DEFAULT_RULE", "DETECTED", "SURVEY_DEFAULT", "NoBaseline", "Stack", "choices", "detect",
           "check", "dist_version", "distribution", "get", "is_module_name", "names", "not_importable", "route_sources"]
