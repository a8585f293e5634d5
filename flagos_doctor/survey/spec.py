"""The survey spec: the profiles each overload is run with, tolerances, random ops, and the
cases whose values are implementation-defined.

A spec is a small YAML file (``surveys/default.yaml`` is the default; ``--spec PATH`` picks
another). Loading it is pure (standard library and PyYAML, no torch), so the parent
process can check a spec and record it in a results file's provenance before any worker
starts. Errors name the file and the field: ``BadInput(where="spec.yaml: profiles[2].dtype")``.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
from dataclasses import dataclass, field

from flagos_doctor import files
from flagos_doctor.errors import BadInput, check_keys, excerpt

#: The spec ``load_spec(None)`` reads: the packaged copy of ``surveys/default.yaml``.
DEFAULT_SPEC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "default.yaml")

#: dtypes a profile may name (torch attribute names).
PROFILE_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "uint8", "int16",
                  "int32", "int64", "bool", "complex64", "complex128")
#: dtypes a tolerance may be given for (integer and bool results are compared exactly).
TOLERANCE_DTYPES = ("float16", "bfloat16", "float32", "float64", "complex64", "complex128")
LAYOUTS = ("contiguous", "strided")


@dataclass(frozen=True)
class Profile:
    """One case per overload: the shape hint, dtype and layout of its synthesised tensors."""

    name: str
    shape: tuple
    dtype: str
    layout: str = "contiguous"

    def to_dict(self) -> dict:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype, "layout": self.layout}


@dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float


@dataclass(frozen=True)
class Spec:
    """A loaded survey spec. ``sha256`` digests its content (not its comments or layout)."""

    name: str
    profiles: tuple
    tolerances: dict = field(hash=False)
    random_ops: frozenset
    path: str = ""
    #: (op or overload name, profile names or None for all, reason): cases whose values
    #: backends may legitimately choose differently (stock torch on a GPU and on the CPU
    #: disagree); only their device, dtype and shape are judged.
    implementation_defined: tuple = ()

    def profile(self, name: str) -> Profile:
        for profile in self.profiles:
            if profile.name == name:
                return profile
        raise KeyError(name)

    def tolerance(self, dtype: str) -> Tolerance | None:
        """The tolerance for results of ``dtype`` (``"float32"``); None: compare exactly."""
        return self.tolerances.get(dtype)

    def is_random(self, overload: str) -> bool:
        """Whether ``overload`` (``"uniform_"``, ``"bernoulli_.float"``) is nondeterministic."""
        if overload in self.random_ops:
            return True
        op = overload.split(".", 1)[0]
        return op in self.random_ops or op.rstrip("_") in self.random_ops

    def implementation_defined_reason(self, overload: str, profile: str) -> str | None:
        """Why the values of this case are implementation-defined, or None when they are not."""
        op = overload.split(".", 1)[0]
        for name, profiles, reason in self.implementation_defined:
            if name in (overload, op, op.rstrip("_")) and (profiles is None or profile in profiles):
                return reason
        return None

    def content(self) -> dict:
        return {
            "name": self.name,
            "profiles": [p.to_dict() for p in self.profiles],
            "tolerances": {k: {"atol": t.atol, "rtol": t.rtol} for k, t in sorted(self.tolerances.items())},
            "random_ops": sorted(self.random_ops),
            # only when present: a spec without it keeps the digest it always had
            **({"implementation_defined": [{"op": op, "profiles": list(profiles) if profiles is not None else None,
                                            "reason": reason} for op, profiles, reason in self.implementation_defined]}
               if self.implementation_defined else {}),
        }

    @property
    def sha256(self) -> str:
        body = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(body.encode()).hexdigest()

    def to_dict(self) -> dict:
        """For a results file's provenance: the content, its sha256 and where it came from."""
        return {**self.content(), "sha256": self.sha256, "path": self.path}


def load_spec(path: str | os.PathLike | None = None) -> Spec:
    """Load and check a spec file; None loads the default spec.

    Raises BadInput naming the file (and field) for a missing or unreadable file, bad
    YAML, or a field of the wrong shape.
    """
    path = DEFAULT_SPEC if path is None else os.fspath(path)
    label = os.path.basename(path)
    data = files.load_yaml(path, "survey spec")
    return parse_spec(data, label, path=os.path.abspath(path))


def parse_spec(data, label: str = "spec", path: str = "") -> Spec:
    """Check the parsed YAML document ``data``; ``label`` names it in errors."""
    if not isinstance(data, dict):
        raise BadInput("a survey spec is a mapping (name, profiles, tolerances, random_ops)", label)
    bad = _complaint(label)
    check_keys(data, label)
    unknown = sorted(set(data) - {"name", "profiles", "tolerances", "random_ops", "implementation_defined"})
    if unknown:
        raise bad(f"unknown field {excerpt(unknown[0])}", unknown[0][:80])
    name = data.get("name", "unnamed")
    if not isinstance(name, str) or not name:
        raise bad("expected a non-empty string", "name")
    profiles = _profiles(data.get("profiles"), label)
    tolerances = _tolerances(data.get("tolerances", {}), label)
    raw_random = data.get("random_ops", [])
    if not isinstance(raw_random, list):
        raise bad("expected a list of op or overload names", "random_ops")
    for index, op in enumerate(raw_random):
        if not isinstance(op, str) or not op or any(c.isspace() for c in op):
            raise bad("expected an op or overload name", f"random_ops[{index}]")
    defined = _implementation_defined(data.get("implementation_defined", []), label, {p.name for p in profiles})
    return Spec(name, tuple(profiles), tolerances, frozenset(raw_random), path, tuple(defined))


def _complaint(label: str):
    """The BadInput for a field of the spec ``label``."""
    return lambda message, fieldname: BadInput(message, f"{label}: {fieldname}")


def _profiles(raw_profiles, label: str) -> list[Profile]:
    bad = _complaint(label)
    if not isinstance(raw_profiles, list) or not raw_profiles:
        raise bad("expected a non-empty list of profiles", "profiles")
    profiles, seen = [], set()
    for index, raw in enumerate(raw_profiles):
        here = f"profiles[{index}]"
        if not isinstance(raw, dict):
            raise bad("expected a mapping with name, shape, dtype, layout", here)
        extra = sorted(set(check_keys(raw, f"{label}: {here}")) - {"name", "shape", "dtype", "layout"})
        if extra:
            raise bad(f"unknown field {excerpt(extra[0])}", f"{here}.{extra[0][:80]}")
        pname = raw.get("name")
        if not isinstance(pname, str) or not pname or any(c.isspace() for c in pname):
            raise bad("expected a name without spaces", f"{here}.name")
        if pname in seen:  # a string by now: hashable
            raise bad(f"profile {excerpt(pname)} named twice", f"{here}.name")
        seen.add(pname)
        shape = raw.get("shape")
        if (not isinstance(shape, list) or not shape or len(shape) > 6
                or not all(isinstance(s, int) and not isinstance(s, bool) and 0 < s <= 4096 for s in shape)):
            raise bad("expected a list of 1 to 6 sizes, each 1..4096", f"{here}.shape")
        dtype = raw.get("dtype")
        if dtype not in PROFILE_DTYPES:
            raise bad(f"expected one of {', '.join(PROFILE_DTYPES)}", f"{here}.dtype")
        layout = raw.get("layout", "contiguous")
        if layout not in LAYOUTS:
            raise bad(f"expected one of {', '.join(LAYOUTS)}", f"{here}.layout")
        profiles.append(Profile(pname, tuple(shape), dtype, layout))
    return profiles


def _tolerances(raw_tol, label: str) -> dict:
    bad = _complaint(label)
    if not isinstance(raw_tol, dict):
        raise bad("expected a mapping of dtype to {atol, rtol}", "tolerances")
    tolerances = {}
    for dtype, raw in check_keys(raw_tol, f"{label}: tolerances").items():
        here = f"tolerances.{dtype}"
        if dtype not in TOLERANCE_DTYPES:
            raise bad(f"expected one of {', '.join(TOLERANCE_DTYPES)}", here)
        if not isinstance(raw, dict) or set(check_keys(raw, f"{label}: {here}")) != {"atol", "rtol"}:
            raise bad("expected {atol: number, rtol: number}", here)
        values = []
        for key in ("atol", "rtol"):
            value = raw[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise bad(f"expected a finite number >= 0, not {excerpt(value)}", f"{here}.{key}")
            values.append(float(value))
        tolerances[dtype] = Tolerance(*values)
    return tolerances


def _implementation_defined(raw_defined, label: str, profile_names: set) -> list[tuple]:
    bad = _complaint(label)
    if not isinstance(raw_defined, list):
        raise bad("expected a list of {op, profiles, reason}", "implementation_defined")
    defined = []
    for index, raw in enumerate(raw_defined):
        here = f"implementation_defined[{index}]"
        if (not isinstance(raw, dict) or not {"op", "reason"} <= set(check_keys(raw, f"{label}: {here}"))
                or set(raw) - {"op", "profiles", "reason"}):
            raise bad("expected {op, reason} and optionally profiles", here)
        op, reason, chosen = raw["op"], raw["reason"], raw.get("profiles")
        if not isinstance(op, str) or not op or any(c.isspace() for c in op):
            raise bad("expected an op or overload name", f"{here}.op")
        if not isinstance(reason, str) or not reason.strip():
            raise bad("expected a reason: why backends may differ here", f"{here}.reason")
        if chosen is not None:
            if not isinstance(chosen, list) or not all(isinstance(p, str) and p in profile_names for p in chosen):
                raise bad("expected a list of this spec's profile names", f"{here}.profiles")
            chosen = tuple(chosen)
        defined.append((op, chosen, reason.strip()))
    return defined
