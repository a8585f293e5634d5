"""The shapes ``explain`` trusts: the records of its side-channel file and its JSON document.

Both are checked before anything uses them, so a malformed one is one line naming the
place (the record's line, the document's field) and exit 2, never a traceback. The side
channel is written by the watch alone; a record of the wrong shape was written by something
else (the program itself, which can find the file) and the run's account cannot be trusted.
A line torn by a dying program is not malformed: it is skipped (:mod:`.runner`).
Parent side, standard library only.
"""

from __future__ import annotations

from flagos_doctor.errors import BadInput, excerpt

FAILURE_KINDS = ("exception", "test", "exit")
_TEXT = (str, type(None))


def _frame(frame, where: str) -> None:
    if not isinstance(frame, dict):
        raise BadInput(f"a traceback frame is {type(frame).__name__}, not an object", where)
    for key, kind in (("file", str), ("line", int), ("function", str)):
        if not isinstance(frame.get(key), kind) or isinstance(frame.get(key), bool):
            raise BadInput(f"a traceback frame without {kind.__name__} '{key}'", where)


def _fields(record: dict, fields: dict, where: str, what: str) -> None:
    for key, kind in fields.items():
        value = record.get(key)
        if isinstance(kind, tuple) and all(isinstance(k, str) for k in kind):
            if value not in kind:
                raise BadInput(f"{what} with '{key}' {value!r}, expected one of {', '.join(kind)}", where)
        elif not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
            raise BadInput(f"{what} without a valid '{key}' (got {type(value).__name__})", where)


class Each:
    """A shape: a list whose items, or (``Each(shape, keys=True)``) a mapping whose values, are ``shape``."""

    def __init__(self, shape, keys: bool = False):
        self.shape, self.keys = shape, keys


class Required:
    """A field of a nested mapping that must be there (the others may be absent)."""

    def __init__(self, shape):
        self.shape = shape


_INT = (int, type(None))
_FRAME = {"file": _TEXT, "line": _INT, "function": _TEXT, "path": _TEXT}
_VALUE = ({"repr": Required(str), "defined_at": _TEXT}, type(None))
_CALL = {"repr": Required(_TEXT), "ok": (bool, type(None))}
_ANSWER = (_CALL, type(None))
_DECISION = {"probe": str, "file": _TEXT, "line": _INT, "original_answer": Required(_CALL),
             "replaced_answer": Required(_CALL), "decision": (dict, type(None))}
#: Each record type of the side channel: the fields the parent reads, and their shapes (a
#: field of a nested mapping may be absent; a record's own fields are required).
RECORD_FIELDS = {
    "hello": {"pid": int},
    "event": {"seq": int, "kind": str, "probe": str},
    "saved": {"seq": int, "probe": str, "saves": str},
    "phase": {"name": str},
    "notice": {"text": str},
    "driver": {"seq": int},
    "failure": {"kind": ("exception", "test"), "error": _TEXT, "type": _TEXT, "traceback": list},
    "test": {"nodeid": str, "when": str, "outcome": str},
    "final": {},
    "dropped": {"events": dict},
    "lost": {"records": int},
    "done": {},
}
#: The optional fields of each record type the parent reads, and their shapes.
INNER_FIELDS = {
    "event": {"where": _FRAME, "noticed_at": _FRAME, "callers": Each(_FRAME), "via": Each(str), "value": _VALUE,
              "previous": _VALUE, "saves": str, "saw": _INT, "answer": _ANSWER, "original_answer": _ANSWER,
              "is_active": Each((bool, type(None)), keys=True), "active_backends": Each(str), "step": _TEXT,
              "phase": _TEXT},
    "driver": {"raised": _TEXT},
    "final": {"probes": Each({"name": Required(str), "kind": str, "final": _VALUE, "original_value": _VALUE,
                              "call": _ANSWER, "original_call": _ANSWER}),
              # null facts: a run that recorded none (no decisions), explained as such
              "facts": ({"env": Each({"final": Required(_TEXT), "original": _TEXT}, keys=True),
                         "native_cuda_available": _ANSWER, "cuda_maps_to": _ANSWER, "device_count": _ANSWER,
                         "decisions": Each(_DECISION), "reads": Each(dict), "triton": (dict, type(None))},
                        type(None))},
}


def _shape(value, shape, field: str, where: str) -> None:
    """BadInput naming ``field`` unless ``value`` has ``shape`` (a type or tuple of types, a
    mapping of optional fields, an :class:`Each`, or a tuple of those)."""
    options = shape if isinstance(shape, tuple) else (shape,)
    for option in options:
        if isinstance(option, type):
            if isinstance(value, option) and not (isinstance(value, bool) and option is int):
                return
        elif isinstance(option, Each) and isinstance(value, dict if option.keys else list):
            items = value.items() if option.keys else enumerate(value)
            for key, item in items:
                _shape(item, option.shape, f"{field}[{excerpt(key, 40)}]", where)
            return
        elif isinstance(option, dict) and isinstance(value, dict):
            for key, inner in option.items():
                if isinstance(inner, Required) and key not in value:
                    raise BadInput(f"field '{field}' has no '{key}', which the watch writes", where)
                if key in value:
                    _shape(value[key], inner.shape if isinstance(inner, Required) else inner, f"{field}.{key}", where)
            return
    raise BadInput(f"field '{field}' is {type(value).__name__}, not of the shape the watch writes", where)


def record(value, where: str) -> dict:
    """``value`` (one decoded line of the side channel) if it is a record of a known shape."""
    if not isinstance(value, dict):
        raise BadInput(f"a JSON {type(value).__name__}, not a record: the file was written by something "
                       "other than the watch", where)
    name = value.get("record")
    if name not in RECORD_FIELDS:
        raise BadInput(f"an unknown record {name!r}: the file was written by something other than the watch",
                       where)
    _fields(value, RECORD_FIELDS[name], where, f"a {name!r} record")
    for key, shape in INNER_FIELDS.get(name, {}).items():
        if key in value:
            _shape(value[key], shape, key, f"{where} (a {name!r} record)")
    if name == "failure":
        for frame in value["traceback"]:
            _frame(frame, where)
        if value["kind"] == "test" and not isinstance(value.get("test"), str):
            raise BadInput("a test failure without its node id 'test'", where)
        if not isinstance(value.get("causes", []), list):
            raise BadInput("a failure whose 'causes' is not a list", where)
    return value


def document(doc: dict, schema: str, where: str) -> dict:
    """``doc`` (an ``explain --json`` document) if its schema is ``schema`` and every field a
    view reads has its shape; BadInput naming the field otherwise."""
    if doc.get("schema") != schema:
        raise BadInput(f"field 'schema' is {doc.get('schema')!r}; this flagos-doctor reads {schema}", where)
    program = doc.get("program")
    if not isinstance(program, dict):
        raise BadInput("field 'program' is missing or not an object", where)
    _fields(program, {"command": list, "returncode": int, "ended": str}, f"{where}: field program", "a program")
    if not isinstance(doc.get("stack"), _TEXT):
        raise BadInput("field 'stack' is not a string", where)
    if not isinstance(doc.get("notices", []), list) or not all(isinstance(n, str) for n in doc.get("notices", [])):
        raise BadInput("field 'notices' is not a list of strings", where)
    processes = doc.get("processes", [])
    if not isinstance(processes, list) or not all(isinstance(p, dict) for p in processes):
        raise BadInput("field 'processes' is not a list of objects", where)
    tests = doc.get("tests")
    if tests is not None and not (isinstance(tests, dict) and isinstance(tests.get("counts"), dict)):
        raise BadInput("field 'tests' is neither null nor an object with 'counts'", where)
    causes = doc.get("causes")
    if not isinstance(causes, list) or not all(isinstance(c, dict) for c in causes):
        raise BadInput("field 'causes' is not a list of objects", where)
    for number, cause in enumerate(causes):
        _fields(cause, {"id": int, "failure": int, "message": str}, f"{where}: field causes[{number}]", "a cause")
    failures = doc.get("failures")
    if not isinstance(failures, list) or not all(isinstance(f, dict) for f in failures):
        raise BadInput("field 'failures' is not a list of objects", where)
    known = {c["id"] for c in causes}
    for number, failure in enumerate(failures):
        at = f"{where}: field failures[{number}]"
        _fields(failure, {"id": int, "kind": FAILURE_KINDS, "error": _TEXT, "causes": list}, at, "a failure")
        for frame in failure.get("traceback") or []:
            _frame(frame, at)
        unknown = [c for c in failure["causes"] if c not in known]
        if unknown:
            raise BadInput(f"cause id {unknown[0]!r} is not among the document's causes", at)
    return doc
