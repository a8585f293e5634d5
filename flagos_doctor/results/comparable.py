"""What makes two surveys comparable: the one definition that resume, the store and compare use.

A survey records the fields of its setup in its results file (``comparable``, and in the
journal's header). Each field below says what it is used for:

* ``recorded``: in that record, and so checked when a results file is resumed. A resume
  continues one run, so every recorded field must agree, the code under test
  (``store_key``) and torch's version included (:func:`check_resumable`);
* ``fingerprinted``: in the digest the store files a run under
  (``<store>/survey/<store_key>/<fingerprint>.json``, :func:`fingerprint`): every recorded
  field but the store key, which is the folder itself;
* ``same_work``: shared by a stored run whose case times order a new survey
  (:data:`SAME_WORK`, :mod:`flagos_doctor.survey.history`);
* ``compared``: must agree for ``survey --compare A B`` (:func:`differences`): the same
  cases (harness, route set, and the parts of the spec that make or judge a case: profiles,
  tolerances, random ops, implementation-defined cases), on the same kind of device,
  through the same stack. What one compares runs across is left out: the code under test
  (``store_key``), torch's version, and what only leads to the route set (the conf's
  backend class: its route set is compared) or to the device type (``--device``).
  The spec is compared by its parts, not by ``spec_sha256``: that digest also covers the
  spec's name, and results documents written before the digest was recorded lack it.

A compared field is read from a results document at the first of its ``paths`` present,
so older and newer provenance layouts still read.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

from flagos_doctor.errors import BadInput


@dataclass(frozen=True)
class Field:
    name: str
    recorded: bool  # in the results file's ``comparable`` record; checked on resume
    fingerprinted: bool  # in the store's fingerprint
    compared: bool  # must agree for ``survey --compare``
    paths: tuple = ()  # where a results document holds it, first present wins (compared fields)
    same_work: bool = False  # shared by a run whose case times order this one (survey/history.py)


def _spec(part: str) -> tuple:
    return (("provenance", "spec", part), ("spec", part))


#: The fields, in the order a mismatch is named.
FIELDS = (
    Field("route_set_sha256", recorded=True, fingerprinted=True, compared=True, same_work=True,
          paths=(("provenance", "route_set_sha256"), ("provenance", "routes", "route_set_sha256"),
                 ("comparable", "route_set_sha256"))),
    Field("harness_version", recorded=True, fingerprinted=True, compared=True,
          paths=(("provenance", "harness_version"), ("comparable", "harness_version"))),
    Field("spec_sha256", recorded=True, fingerprinted=True, compared=False),
    Field("profiles", recorded=False, fingerprinted=False, compared=True, paths=_spec("profiles")),
    Field("tolerances", recorded=False, fingerprinted=False, compared=True, paths=_spec("tolerances")),
    Field("random_ops", recorded=False, fingerprinted=False, compared=True, paths=_spec("random_ops")),
    Field("implementation_defined", recorded=False, fingerprinted=False, compared=True,
          paths=_spec("implementation_defined")),
    Field("device_type", recorded=True, fingerprinted=True, compared=True, same_work=True,
          paths=(("provenance", "device", "type"), ("provenance", "device_type"), ("comparable", "device_type"))),
    Field("stack", recorded=True, fingerprinted=True, compared=True, same_work=True,
          paths=(("provenance", "stack"), ("comparable", "stack"))),
    Field("backend", recorded=True, fingerprinted=True, compared=False),
    Field("device", recorded=True, fingerprinted=True, compared=False, same_work=True),
    Field("torch", recorded=True, fingerprinted=True, compared=False),
    Field("store_key", recorded=True, fingerprinted=False, compared=False),
)

RECORDED = tuple(f.name for f in FIELDS if f.recorded)
COMPARED = tuple(f.name for f in FIELDS if f.compared)
#: Where each compared field is read in a results document.
PATHS = {f.name: f.paths for f in FIELDS if f.compared}
_NOT_FINGERPRINTED = frozenset(f.name for f in FIELDS if not f.fingerprinted)
#: The fields a stored run must share with a survey to give it case times when its
#: fingerprint differs: the same stack, route set and device (so the same kernels run).
SAME_WORK = tuple(f.name for f in FIELDS if f.same_work)

#: Provenance a comparison and a report show beside the summary (informational: two runs
#: compared may differ on them), each read at the first of its paths present.
CONTEXT = (
    ("store key", (("provenance", "store_key"), ("comparable", "store_key"))),
    ("torch_fl version", (("provenance", "torch_fl", "version"),)),
    ("torch_fl commit", (("provenance", "torch_fl", "commit"),)),
    ("torch_fl dirty", (("provenance", "torch_fl", "dirty"),)),
    ("torch_fl extension md5", (("provenance", "torch_fl", "extension_md5"),)),
    ("torch", (("provenance", "versions", "torch"), ("provenance", "torch"))),
    ("flag_gems", (("provenance", "versions", "flag_gems"), ("provenance", "flag_gems"))),
    ("triton", (("provenance", "versions", "triton"), ("provenance", "triton"))),
    ("python", (("provenance", "versions", "python"), ("provenance", "python"))),
    ("device", (("provenance", "device", "name"), ("provenance", "device_name"))),
    ("device count", (("provenance", "device", "count"),)),
    ("conf", (("provenance", "conf", "path"), ("provenance", "routes", "conf"))),
    ("baseline", (("provenance", "baseline"),)),
    ("conf sha256", (("provenance", "conf", "sha256"), ("provenance", "routes", "conf_sha256"))),
    ("spec sha256", (("provenance", "spec_sha256"), ("provenance", "spec", "sha256"), ("comparable", "spec_sha256"))),
    ("started", (("provenance", "started"),)),
    ("finished", (("provenance", "finished"), ("provenance", "ended"))),
)

_MISSING = object()


def lookup(document: dict, paths) -> object:
    """The value at the first of ``paths`` present in ``document``, else None."""
    for path in paths:
        node = document
        for key in path:
            if isinstance(node, dict) and key in node:
                node = node[key]
            else:
                node = _MISSING
                break
        if node is not _MISSING:
            return node
    return None


def fingerprint(record: dict) -> str:
    """The store's short digest of a ``comparable`` record: its fingerprinted fields.

    Every key of the record but the unfingerprinted ones (the store key) goes in, as it
    always did, so runs filed by earlier versions keep their fingerprints.
    """
    fields = {k: v for k, v in record.items() if k not in _NOT_FINGERPRINTED}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


def check_resumable(found: dict, wanted: dict, where: str, names=RECORDED) -> None:
    """Raise BadInput naming the first of ``names`` that ``wanted`` (this survey's record)
    holds and ``found`` (a results file's or journal's record) does not agree on."""
    for name in names:
        if name in wanted and found.get(name) != wanted[name]:
            raise BadInput(
                f"field 'comparable.{name}' is {found.get(name)!r} there, {wanted[name]!r} for this survey: "
                "it was made with another setup; choose another --output (or delete it)",
                where,
            )


def differences(a: dict, b: dict, names=COMPARED) -> list[dict]:
    """The fields of ``names`` (compared fields) on which results documents ``a`` and ``b``
    disagree: ``[{field, a, b}]``, in definition order."""
    found = []
    for name in names:
        va, vb = lookup(a, PATHS[name]), lookup(b, PATHS[name])
        if va != vb:
            found.append({"field": name, "a": va, "b": vb})
    return found
