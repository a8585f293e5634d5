"""Which route a survey case took, from what the stack said while it ran.

torch_fl's C++ side (and the demo) print ``[flagos dispatch] ...`` and ``[flagos
cpu_fallback] ...`` lines to stderr with ``FLAGOS_LOG_DISPATCH=1`` / ``FLAGOS_LOG_FALLBACK=1``;
other stacks count calls in the worker. Both end in :func:`route_of`.

Both sides: the worker (child) reads a finished case's lines, the pool (parent) those of a
case its worker did not survive. Standard library only.
"""

from __future__ import annotations

import re
from collections import Counter

from flagos_doctor.results import model

#: torch_fl's fallback line names the op's schema (``aten::erf``), not the overload.
DISPATCH_RE = re.compile(r"^\[flagos dispatch\] (?:aten::)?(\S+) -> (\S+)\s*$", re.M)
FALLBACK_RE = re.compile(r"^\[flagos cpu_fallback\] (?:aten::)?(\S+)\s*$", re.M)


def strip_default(name: str) -> str:
    return name[: -len(".default")] if name.endswith(".default") else name


def route_of(overload: str, kernels: Counter, fallbacks: Counter) -> tuple[str, str]:
    """Which route ``overload`` took, from the calls counted while its case ran.

    ``kernels`` / ``fallbacks`` count calls per overload (or op) name. Direct evidence for
    the overload wins; without it (a composite overload that decomposed), any routed kernel
    means kernel, else any fallback means CPU fallback. Returns (route, note); the route is
    :data:`model.ROUTE_UNKNOWN` when nothing was seen.
    """
    name = strip_default(overload)
    base = name.split(".", 1)[0]
    kernels = Counter({strip_default(k): v for k, v in kernels.items() if v})
    fallbacks = Counter({strip_default(k): v for k, v in fallbacks.items() if v})
    if kernels.get(name):
        return model.ROUTE_KERNEL, ""
    if fallbacks.get(name) or fallbacks.get(base):
        return model.ROUTE_FALLBACK, ""
    if kernels:
        return model.ROUTE_KERNEL, "via " + ",".join(sorted(kernels))
    if fallbacks:
        return model.ROUTE_FALLBACK, "via " + ",".join(sorted(fallbacks))
    return model.ROUTE_UNKNOWN, ""


def counts_from_log(text: str, backend: str | None = None) -> tuple[Counter, Counter]:
    """Kernel and fallback calls named by dispatch / fallback log lines in ``text``.

    A dispatch line to another backend than ``backend`` (when given) is not this route's
    kernel; it is counted under ``<overload>@<backend>`` so it shows in the note.
    """
    kernels: Counter = Counter()
    for name, target in DISPATCH_RE.findall(text):
        kernels[name if backend is None or target == backend else f"{name}@{target}"] += 1
    fallbacks = Counter(FALLBACK_RE.findall(text))
    return kernels, fallbacks


def strip_evidence(text: str) -> str:
    """``text`` without dispatch and fallback log lines (what is left is real stderr)."""
    return FALLBACK_RE.sub("", DISPATCH_RE.sub("", text)).strip("\n")
