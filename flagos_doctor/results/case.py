"""The survey's case record, declared once: its fields, the side that writes each, which
are optional, and how a record read back is checked. Pure standard library.

A case is one overload run with one input profile. Its record is a JSON object written
by four sides, in this order:

* ``worker``: the worker process that ran the case (``survey/child/worker.py``), or the
  parent pool for a case its worker did not survive (``CRASH``, ``TIMEOUT``);
* ``pool``: the parent's pool (``survey/pool.py``) adds which worker ran it;
* ``confirm``: the confirmation (``survey/confirm.py``) runs failures again and on the
  native path;
* ``replay``: the replay (``survey/replay.py``) traces a sticky device error.

Confirm and replay change a recorded case only through
:class:`flagos_doctor.results.resultsfile.ResultsFile`, which applies :func:`settle`.

Adding a field is one entry of :data:`FIELDS`: a field the worker computes names its
``derive(record, outcome)`` (the record so far and the engine's outcome; None leaves
the field out), which the worker calls for every case; a field with ``compared`` is part
of a case's view in a comparison (``survey --compare``), so a change of it is a changed
case. The results file, its journal, a resume and the loader keep every declared field
as they find it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from flagos_doctor.errors import BadInput, excerpt
from flagos_doctor.results import model

WORKER, POOL, CONFIRM, REPLAY = "worker", "pool", "confirm", "replay"

NUMBER = (int, float)


@dataclass(frozen=True)
class Field:
    """One field of the case record."""

    types: tuple  # the JSON types it may hold
    writer: str  # the side that writes it (WORKER, POOL, CONFIRM, REPLAY)
    required: bool = False  # every record has it (a record read back without it is refused)
    compared: bool = False  # part of a case's view in a comparison
    derive: Callable | None = None  # WORKER fields only: derive(record, outcome) -> value or None


#: The case record. A declarative table (one line a field); its order is the order a
#: record is built in.
FIELDS: dict[str, Field] = {
    "profile": Field((str,), WORKER, required=True),  # the input profile ("-": the overload as a whole)
    "status": Field((str,), WORKER, required=True, compared=True),  # a model.CASE_STATUSES word
    "route": Field((str,), WORKER, compared=True),  # which implementation ran (model.ROUTE_*)
    "detail": Field((str,), WORKER),  # why it failed, in words ("" for a pass)
    "evidence": Field((str,), WORKER),  # the stack's note on the route
    "seconds": Field(NUMBER, WORKER),  # the case's wall time (left out of the census)
    "device_seconds": Field(NUMBER, WORKER),
    "triton": Field((dict,), WORKER),  # Triton's compile and autotune figures
    "compile_ahead": Field((dict,), WORKER),  # its autotunings' configurations compiled ahead or not (compile_pool.py)
    "poison": Field((str,), WORKER),  # the sticky device error that ended the worker's context
    "stderr_tail": Field((str,), WORKER),
    "signal": Field((str,), WORKER),  # a CRASH: the signal that killed the worker
    "spent": Field((dict,), WORKER),  # a TIMEOUT: where its clock's time went (case_clock.py)
    "worker": Field((str,), POOL),  # which worker ran it
    "worker_order": Field((int,), POOL),  # its place among that worker's cases
    "repeats": Field((list,), CONFIRM),  # every run's status, the first run's first
    "repeat_details": Field((list,), CONFIRM),  # each repeat's detail, signal, poison, stopped_in, alone
    "baseline": Field((dict,), CONFIRM),  # {status, detail} on the native path
    "first_run": Field((dict,), CONFIRM),  # {status, detail} before confirm or replay changed them
    "replay": Field((dict,), REPLAY),  # {runs, cases, came_back[, known: a culprit the store knew]}
    "poisoned_by": Field((dict,), REPLAY),  # {overload, profile} (or {overload: null, cases})
    "poisoned": Field((list,), REPLAY),  # [[overload, profile]] a culprit poisoned
}


def compared() -> tuple[str, ...]:
    """The fields of a case's view in a comparison."""
    return tuple(name for name, field in FIELDS.items() if field.compared)


def derived(record: dict, outcome: dict) -> dict:
    """The fields the worker derives for ``record`` (declared with ``derive``)."""
    found = {}
    for name, field in FIELDS.items():
        if field.derive is not None and field.writer == WORKER:
            value = field.derive(record, outcome)
            if value is not None:
                found[name] = value
    return found


def _expected(types: tuple) -> str:
    words = {dict: "an object", list: "a list", str: "a string", int: "an integer", float: "a number", bool: "a boolean"}
    return " or ".join(dict.fromkeys(words.get(t, t.__name__) for t in types))


def check(case, where: str, field: str) -> dict:
    """``case`` read back (from ``where``, as ``field``), checked against :data:`FIELDS`:
    an object, every required field present, every declared field of its type, a status
    that is a case status. Fields not declared are kept unchecked (a later version's).
    Raises BadInput naming the file and the field."""
    if not isinstance(case, dict):
        raise BadInput(f"field '{field}' is {type(case).__name__}, expected a case (an object)", where)
    for name, spec in FIELDS.items():
        if name not in case:
            if spec.required:
                raise BadInput(f"field '{field}.{name}' is missing: every case has one", where)
            continue
        value = case[name]
        if not isinstance(value, spec.types) or (isinstance(value, bool) and bool not in spec.types):
            raise BadInput(f"field '{field}.{name}' is {excerpt(value)}, expected {_expected(spec.types)}", where)
    if case["status"] not in model.CASE_STATUSES:
        raise BadInput(f"field '{field}.status' is {case['status']!r}, not a case status "
                       f"({', '.join(model.CASE_STATUSES)})", where)
    return case


def settle(case: dict, status: str, detail: str) -> bool:
    """Give ``case`` the ``status`` and ``detail`` that confirm or replay found, keeping its
    first run's in ``first_run`` (once: the run the survey itself made). True when this
    call is the one that kept it."""
    first = "first_run" not in case
    if first:
        case["first_run"] = first_run(case)
    case["status"], case["detail"] = status, detail
    return first


def first_run(case: dict) -> dict:
    """The survey's own run of ``case``: {status, detail}. Its status is the first of its
    ``repeats`` (a FLAKY case keeps its first run's detail, not its status); once confirm
    or replay changed the case, its ``first_run``."""
    if "first_run" in case:
        return case["first_run"]
    return {"status": (case.get("repeats") or [case["status"]])[0], "detail": case.get("detail", "")}
