"""The shapes ``explain`` trusts: the records of its side-channel file and its JSON document.

Both are checked before anything uses them, so a malformed one is one line naming the
place (the record's line, the document's field) and exit 2, never a traceback. The side
channel is written by the watch alone; a record of the wrong shape was written by something
else (the program itself, which can find the file) and the run's account cannot be trusted.
A line torn by a dying program is not malformed: it is skipped (:mod:`.runner`).
Parent side, standard library only.
"""

from __future__ import annotations

from flagos_doctor.errors import BadInput

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


#: Each record type of the side channel: the fields the parent reads, and their types.
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
