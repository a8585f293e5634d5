"""Reading and writing the JSON documents flagos-doctor produces.

Writes are atomic (a temporary file in the same folder, then ``os.replace``), so a
process killed mid-write, or a full disk, leaves the previous version intact. Reads
refuse anything but a regular file of bounded size (``/dev/zero``, a FIFO or
``/proc/self/environ`` given as an input would otherwise hang, exhaust memory or be
echoed) and turn a truncated, malformed or absurdly nested file into a one-line BadInput
naming the file.

Every write here is a sink that scrubs (:mod:`flagos_doctor.redact`): a document, a text
file, stdout. Nothing flagos-doctor writes can carry a secret of the environment (nor one a
child announced), a URL's password or a secret-named assignment, whichever part of the
program built the text.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import tempfile

from flagos_doctor import redact
from flagos_doctor.errors import BadInput, excerpt

#: Largest JSON document read (a results file of 50,000 overloads is tens of MB).
MAX_JSON_BYTES = 1 << 30
#: Largest YAML file read (a survey spec, a watch file: a few KB).
MAX_YAML_BYTES = 1 << 20


def describe_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words."""
    for test, word in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return word
    return "not a regular file"


def refuse_special(path: str, where: str | None = None) -> None:
    """BadInput when ``path`` exists but is no regular file (a directory, a FIFO, a device):
    for an argument that may name a file or something else (a store key), so a FIFO or
    ``/dev/zero`` is called what it is, never looked up as a key nor read."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return
    if not stat.S_ISREG(mode):
        raise BadInput(f"{describe_kind(mode)}, not a regular file", where or path)


def read_regular_text(path: str | os.PathLike, max_bytes: int, what: str = "file", where: str | None = None) -> str:
    """The text of ``path``, which must be a regular file of at most ``max_bytes``.

    Files under ``/proc`` and ``/sys`` are refused by name (they say regular, and hold the
    environment, secrets included); anything else not a regular file (a device, a FIFO, a
    directory) is refused after opening without blocking. Raises BadInput naming the
    file; FileNotFoundError propagates for the caller to word.
    """
    name = os.fspath(path)
    where = where or name
    top = "/" + os.path.realpath(name).split("/")[1]
    if top in ("/proc", "/sys"):
        raise BadInput(f"refusing to read {what} {name}: it is under {top}, not a regular file", where)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK)
    except IsADirectoryError:
        raise BadInput(f"{what} {name} is a directory", where)
    except PermissionError as exc:
        raise BadInput(f"cannot read {what} {name}: {exc.strerror}", where)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # before fdopen, which refuses a directory with an OSError of its own
        os.close(fd)
        raise BadInput(f"refusing to read {what} {name}: it is {describe_kind(info.st_mode)}, not a regular file", where)
    with os.fdopen(fd, "rb") as handle:
        if info.st_size > max_bytes:
            raise BadInput(f"{what} {name} is {info.st_size} bytes, more than the {max_bytes} this reads", where)
        data = handle.read(max_bytes + 1)
    if len(data) > max_bytes:
        raise BadInput(f"{what} {name} is more than the {max_bytes} bytes this reads", where)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadInput(f"cannot read {what} {name}: not UTF-8 text (byte {exc.start})", where)


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def refuse_lone_surrogates(value, where: str, text: str | None = None) -> None:
    """BadInput naming the field of ``value`` (parsed JSON) that holds a lone surrogate
    (``"\\ud800"``): JSON's escapes allow one and its reader keeps it, but UTF-8 cannot
    hold it, so nothing could be written from it (and nothing of ours wrote it). ``text``:
    the JSON ``value`` was parsed from; without such an escape in it there is nothing to find."""
    if text is not None and not _SURROGATE_ESCAPE.search(text):
        return
    pending = [(value, "")]
    while pending:
        item, field = pending.pop()
        if isinstance(item, dict):  # pushed last first: the first such field of the file is named
            for key, inner in reversed(item.items()):
                if isinstance(key, str) and not _is_utf8(key):
                    raise BadInput(f"a key in field {excerpt(field or '(top)', 120)} holds a lone surrogate "
                                   f"({excerpt(key, 40)}): not text UTF-8 can hold", where)
                pending.append((inner, f"{field}.{key}" if field else str(key)))
        elif isinstance(item, list):
            pending += [(item[number], f"{field}[{number}]") for number in range(len(item) - 1, -1, -1)]
        elif isinstance(item, str) and not _is_utf8(item):
            raise BadInput(f"field {excerpt(field, 120)} holds a lone surrogate ({excerpt(item, 40)}): "
                           "not text UTF-8 can hold", where)


def _is_utf8(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def write_failed(path: str, exc: OSError) -> BadInput:
    """The one-line error for ``exc`` raised while writing ``path``."""
    # A full disk or a lost permission while writing is the machine's state, not a bug:
    # one line naming the file; the previous version of the file is still in place.
    hint = "; its previous version is kept" if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else ""
    return BadInput(f"cannot write: {exc.strerror or exc}{hint}", path)


def _umask() -> int:
    """The process's umask (reading it means setting it: set it straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replaceable(path: str | os.PathLike, where: str | None = None) -> str:
    """The file a write of ``path`` replaces: through any symlink, its target, which must be
    a regular file or nothing yet. Anything else (``/dev/null``, a FIFO, a directory) is a
    BadInput naming ``where`` (default: the path): run as root, replacing ``/dev/null`` with a
    regular file would take it from every process on the machine."""
    target = os.path.realpath(os.fspath(path))
    try:
        mode = os.stat(target).st_mode
    except OSError:  # nothing there yet (or nothing we may look at: the write itself will say)
        return target
    if not stat.S_ISREG(mode):
        raise BadInput(f"{os.fspath(path)} is {describe_kind(mode)}, not a regular file: it is never replaced",
                       where or os.fspath(path))
    return target


def atomic_write_text(path: str | os.PathLike, text: str, scrub: bool = True) -> None:
    """Replace ``path`` (:func:`replaceable`: through a symlink, only a regular file) with
    ``text`` (scrubbed of secrets, unless ``scrub`` is False: a source file we build, not a
    document) in one step; the file gets the mode any new file of the user's would (0666
    less the umask), not the private 0600 of a temporary file."""
    where = os.fspath(path)
    path = replaceable(where)
    if scrub:
        text = redact.scrub_environ(text)
    folder = os.path.dirname(path)
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=folder)
    except OSError as exc:
        raise write_failed(where, exc) from None
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(exc, OSError):
            raise write_failed(where, exc) from None
        raise


def append_text(path: str, text: str, what: str) -> None:
    """Add ``text`` (scrubbed) at the end of ``path``, as GitHub's own tools add to
    ``$GITHUB_STEP_SUMMARY``: a regular file (made when missing) grows; a character
    device (``/dev/null``) is written through, never replaced; a FIFO without a reader, a
    directory or a full disk is one BadInput naming ``what``, never a hang."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        kind = f" ({describe_kind(os.stat(path).st_mode)})" if os.path.exists(path) and not os.path.isfile(path) else ""
        raise BadInput(f"cannot write {path}{kind}: {exc.strerror or exc}", what) from None
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(redact.scrub_environ(text).encode("utf-8"))
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}", what) from None


def write_stdout(text: str, option: str, commands: bool = False, scrub: bool = True) -> None:
    """Write ``text`` (scrubbed of secrets, unless ``scrub`` is False: a view that scrubbed its
    own data) to standard output; a failure (a full disk behind a redirect, a closed
    pipe) is one line naming ``option``, and stdout is pointed at /dev/null so the
    interpreter's own flush at exit adds no second complaint. ``commands``: ``text`` is
    workflow commands the doctor means, which a runner's guarded stdout lets through
    (:mod:`flagos_doctor.workflow`); other text has each line made inert there."""
    import sys

    if scrub:
        text = redact.scrub_environ(text)
    try:
        if commands and hasattr(sys.stdout, "write_commands"):
            sys.stdout.write_commands(text)
        else:
            (sys.stdout if scrub else getattr(sys.stdout, "unscrubbed", sys.stdout)).write(text)
        sys.stdout.flush()
    except OSError as exc:
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            os.close(devnull)
        except OSError:
            pass
        raise BadInput(f"cannot write to stdout: {exc.strerror or exc}", option) from None


def dump_json(document: dict, indent: int | None = 2) -> str:
    """The canonical text of a document: sorted keys, two-space indent (``indent=None``: on
    one line, which Python's C encoder writes several times faster), final newline."""
    return json.dumps(document, indent=indent, sort_keys=True, ensure_ascii=False) + "\n"


def write_json(path: str | os.PathLike, document: dict) -> None:
    """Write ``document`` scrubbed field by field (a secret inside a string a JSON text
    escapes, a record about a secret-named variable: :func:`flagos_doctor.redact.scrub`)."""
    atomic_write_text(path, dump_json(redact.scrub_environ(document)), scrub=False)


def load_json(path: str | os.PathLike, schema_prefix: str | None = None) -> dict:
    """Load a JSON document, checking its ``schema`` field starts with ``schema_prefix``.

    Raises BadInput naming the file for a missing, unreadable, truncated or foreign file.
    """
    where = os.fspath(path)
    try:
        text = read_regular_text(where, MAX_JSON_BYTES, "JSON file")
    except FileNotFoundError:
        raise BadInput("no such file", where)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}", where)
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        kind = "truncated" if exc.pos >= len(text.rstrip()) else "malformed"
        raise BadInput(f"{kind} JSON (line {exc.lineno}, column {exc.colno}): {exc.msg}", where)
    except RecursionError:
        raise BadInput("JSON nested too deeply to be a flagos-doctor document", where)
    if not isinstance(document, dict):
        raise BadInput("expected a JSON object at the top level", where)
    refuse_lone_surrogates(document, where, text)
    if schema_prefix is not None:
        schema = document.get("schema")
        if not isinstance(schema, str) or not schema.startswith(schema_prefix):
            raise BadInput(f"field 'schema' is {schema!r}, expected {schema_prefix}N", where)
    return document


def load_yaml(path: str | os.PathLike, what: str = "YAML file"):
    """The parsed YAML of ``path`` (any type; None for an empty file).

    Raises BadInput naming the file (and line) for a missing, special, oversized,
    malformed or absurdly nested file.
    """
    import yaml

    where = os.fspath(path)
    try:
        text = read_regular_text(where, MAX_YAML_BYTES, what)
    except FileNotFoundError:
        raise BadInput(f"{what} not found: {where}", where) from None
    except OSError as exc:
        raise BadInput(f"cannot read {what}: {exc.strerror or exc}", where) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f"{where}:{mark.line + 1}" if mark is not None else where
        raise BadInput(f"not valid YAML: {getattr(exc, 'problem', None) or exc}", at) from None
    except RecursionError:
        raise BadInput(f"{what} nested too deeply", where) from None
