"""The torch_fl backends conf: which backend each ATen overload is routed to.

Syntax, as torch_fl reads it::

    # a comment; '#' starts a comment anywhere on a line
    include other.conf          # relative to the including file, at most 8 deep
    abs = flagos_python         # op or op.overload = backend
    abs.out = cuda              # a later line for the same overload wins

Backend names are case-insensitive; ``flaggems_python`` is an alias of ``flagos_python``
and ``flaggems`` of ``flagos``. A backend torch_fl does not know is refused with its line
named (torch_fl itself routes it to ``flagos`` with a warning on stderr, which a survey
would otherwise hide). Pure standard library: the parent CLI and the child stacks both
use it.

A conf is user input, possibly the wrong file (``/proc/self/environ``, ``/dev/zero``):
only regular files of at most MAX_CONF_BYTES are read, and an error quotes at most a
short excerpt of the offending line, scrubbed of secrets (:mod:`flagos_doctor.redact`).
"""

from __future__ import annotations

import hashlib
import os
import re
from dataclasses import dataclass

from flagos_doctor import files, redact
from flagos_doctor.errors import BadInput

MAX_INCLUDE_DEPTH = 8
#: Torch-FL's largest conf is about 30 KB; a 50,000-route conf about 1.5 MB.
MAX_CONF_BYTES = 16 << 20
#: How much of an offending line an error message quotes.
EXCERPT_CHARS = 60

#: The backends torch_fl's conf parser knows (csrc/aten/common.cc, every branch to 2.9 and main).
KNOWN_BACKENDS = ("cuda", "metax", "tsingmicro", "gcu", "ascend", "musa", "flagos", "flaggems",
                  "flagos_python", "flaggems_python")

#: Backend aliases, to the canonical name torch_fl uses in its dispatch logs.
BACKEND_ALIASES = {
    "flaggems_python": "flagos_python",
    "flaggems": "flagos",
}

_OVERLOAD_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")
_BACKEND_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Route:
    """One overload's final backend, and the conf line that decided it."""

    overload: str
    backend: str
    file: str
    line: int


def canonical_backend(name: str) -> str:
    name = name.strip().lower()
    return BACKEND_ALIASES.get(name, name)


def parse_conf(path: str | os.PathLike) -> dict[str, Route]:
    """Return the final route of every overload named in ``path`` (and its includes).

    The dict keeps first-appearance order of the overloads. Raises BadInput naming
    ``file:line`` for a malformed line, a missing include, an include cycle or nesting
    deeper than MAX_INCLUDE_DEPTH.
    """
    routes: dict[str, Route] = {}
    _parse_into(os.path.abspath(os.fspath(path)), routes, stack=[], where=None)
    return routes


def excerpt(text: str) -> str:
    """A short, scrubbed quotation of ``text`` for an error message."""
    text = redact.scrub_environ(text.replace("\x00", " ").strip())
    if len(text) > EXCERPT_CHARS:
        text = text[:EXCERPT_CHARS] + "..."
    return repr(text)


def _read_lines(path: str, where: str | None) -> list[str]:
    try:
        return files.read_regular_text(path, MAX_CONF_BYTES, "conf file", where=where).splitlines()
    except FileNotFoundError:
        raise BadInput(f"conf file not found: {path}", where)
    except OSError as exc:
        raise BadInput(f"cannot read conf file {path}: {exc.strerror or type(exc).__name__}", where)


def _parse_into(path: str, routes: dict[str, Route], stack: list[str], where: str | None) -> None:
    if path in stack:
        cycle = " -> ".join(os.path.basename(p) for p in [*stack, path])
        raise BadInput(f"include cycle: {cycle}", where)
    if len(stack) >= MAX_INCLUDE_DEPTH:
        raise BadInput(f"includes nested deeper than {MAX_INCLUDE_DEPTH}", where)
    stack = [*stack, path]
    for number, raw in enumerate(_read_lines(path, where), start=1):
        here = f"{path}:{number}"
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("include") and (line == "include" or line[7].isspace()):
            target = line[7:].strip()
            if not target:
                raise BadInput("'include' needs a path", here)
            target = os.path.join(os.path.dirname(path), os.path.expanduser(target))
            _parse_into(os.path.abspath(target), routes, stack, here)
            continue
        name, sep, backend = line.partition("=")
        name, backend = name.strip(), backend.strip()
        if not sep:
            raise BadInput(f"expected 'op.overload = backend' or 'include PATH', got {excerpt(raw)}", here)
        # The whole line is scrubbed as one, so NAME=value of a secret-named NAME is masked.
        if not _OVERLOAD_RE.match(name):
            raise BadInput(f"not an overload name in {excerpt(raw)}", here)
        if not _BACKEND_RE.match(backend):
            raise BadInput(f"not a backend name in {excerpt(raw)}", here)
        if backend.lower() not in KNOWN_BACKENDS:
            # A line like MY_API_TOKEN = value is a secret pasted into the wrong file: never quoted.
            shown = "(its value not shown: the name says secret)" if redact.is_secret(name) else repr(backend)
            raise BadInput(
                f"unknown backend {shown} for {name} (torch_fl knows {', '.join(KNOWN_BACKENDS)}; "
                "it would route this overload to flagos)",
                here,
            )
        # Re-insert so the dict order says which line decided the route last.
        routes.pop(name, None)
        routes[name] = Route(name, canonical_backend(backend), path, number)


def op_override_var(overload: str) -> str:
    """torch_fl's per-op route override variable: ``FLAGOS_OP_<op with . as __>``.

    torch_fl's C++ side reads these once per process, when it first builds its backend
    table (``csrc/aten/common.cc``), and only for overloads already in the conf: so one
    holds for a whole process, never for one call.
    """
    name = overload[: -len(".default")] if overload.endswith(".default") else overload
    return "FLAGOS_OP_" + name.replace(".", "__")


def apply_op_overrides(routes: dict[str, Route], environ) -> dict[str, Route]:
    """``routes`` with the ``FLAGOS_OP_*`` overrides of ``environ`` applied, as torch_fl does."""
    result = dict(routes)
    for name, route in routes.items():
        value = environ.get(op_override_var(name))
        if value:
            result[name] = Route(name, canonical_backend(value), f"${op_override_var(name)}", 0)
    return result


def select(routes: dict[str, Route], backend: str = "flagos_python") -> list[str]:
    """The overloads whose final backend is ``backend`` (aliases accepted), sorted."""
    wanted = canonical_backend(backend)
    return sorted(name for name, route in routes.items() if route.backend == wanted)


def route_set_sha256(overloads) -> str:
    """A digest of a set of overload names, independent of order and duplicates."""
    body = "\n".join(sorted(set(overloads))) + "\n"
    return hashlib.sha256(body.encode()).hexdigest()


def file_sha256(path: str | os.PathLike) -> str:
    with open(path, "rb") as handle:
        return hashlib.sha256(handle.read()).hexdigest()
