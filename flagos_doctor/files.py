"""Reading and writing the JSON documents flagos-doctor produces.

Writes are atomic (a temporary file in the same folder, then ``os.replace``), so a
process killed mid-write leaves the previous version intact. Reads turn a truncated or
malformed file into a one-line BadInput naming the file.
"""

from __future__ import annotations

import json
import os
import tempfile

from flagos_doctor.errors import BadInput


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Replace ``path`` with ``text`` in one step; the file gets the mode any new file of
    the user's would (0666 less the umask), not the private 0600 of a temporary file."""
    path = os.fspath(path)
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def dump_json(document: dict) -> str:
    """The canonical text of a document: sorted keys, two-space indent, final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: str | os.PathLike, document: dict) -> None:
    atomic_write_text(path, dump_json(document))


def load_json(path: str | os.PathLike, schema_prefix: str | None = None) -> dict:
    """Load a JSON document, checking its ``schema`` field starts with ``schema_prefix``.

    Raises BadInput naming the file for a missing, unreadable, truncated or foreign file.
    """
    where = os.fspath(path)
    try:
        with open(where, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        raise BadInput("no such file", where)
    except (OSError, UnicodeDecodeError) as exc:
        raise BadInput(f"cannot read: {exc}", where)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        kind = "truncated" if exc.pos >= len(text.rstrip()) else "malformed"
        raise BadInput(f"{kind} JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}", where)
    if not isinstance(document, dict):
        raise BadInput("expected a JSON object at the top level", where)
    if schema_prefix is not None:
        schema = document.get("schema")
        if not isinstance(schema, str) or not schema.startswith(schema_prefix):
            raise BadInput(f"field 'schema' is {schema!r}, expected {schema_prefix}N", where)
    return document
