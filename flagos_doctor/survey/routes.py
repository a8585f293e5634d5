"""Which overloads a survey covers: its route set, and the subset a run selects.

The route set comes from a backends conf (``--conf``: every unique overload whose final
backend is ``--backend``, after includes and last-wins), or from the stack itself
(``--routes NAME``: what the stack NAME registers, e.g. ``flag_gems``; ``--routes stack``: what the chosen
stack registers), listed by a child process. ``--ops`` selects a subset to run now; the
results file still covers the whole route set (the rest stays PENDING).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from flagos_doctor import conf as conf_parser
from flagos_doctor.errors import BadInput


@dataclass(frozen=True)
class RouteSet:
    overloads: list[str]  # sorted, unique
    source: str  # "conf", "stack", or the stack that listed it (--routes NAME)
    conf_path: str | None = None
    conf_sha256: str | None = None
    backend: str = "flagos_python"

    @property
    def sha256(self) -> str:
        return conf_parser.route_set_sha256(self.overloads)

    def provenance(self) -> dict:
        return {
            "source": self.source,
            "conf": self.conf_path,
            "conf_sha256": self.conf_sha256,
            "backend": self.backend,
            "route_set_sha256": self.sha256,
            "count": len(self.overloads),
        }


def from_conf(path: str, backend: str) -> RouteSet:
    routes = conf_parser.parse_conf(path)
    overloads = conf_parser.select(routes, backend)
    if not overloads:
        raise BadInput(f"no overload is routed to {conf_parser.canonical_backend(backend)!r}", path)
    return RouteSet(overloads, "conf", os.path.abspath(path), conf_parser.file_sha256(path), conf_parser.canonical_backend(backend))


def from_listing(source: str, overloads: list[str], backend: str) -> RouteSet:
    if not overloads:
        raise BadInput(f"the {source} stack registers no overload", "--routes")
    return RouteSet(sorted(set(overloads)), source, backend=conf_parser.canonical_backend(backend))


def select(route_set: RouteSet, ops: list[str]) -> list[str]:
    """The overloads of ``route_set`` named by ``--ops`` (all when empty), in route-set order."""
    if not ops:
        return list(route_set.overloads)
    known = set(route_set.overloads)
    unknown = [op for op in ops if op not in known]
    if unknown:
        raise BadInput(f"not in the route set ({len(known)} overloads): {', '.join(unknown)}", "--ops")
    wanted = set(ops)
    return [name for name in route_set.overloads if name in wanted]
