"""Where a bug of flagos-doctor leaves its traceback: a fresh file in a private folder.

The terminal gets one line naming the file, never the traceback itself. The file is made
with :func:`tempfile.mkstemp` inside a folder made with :func:`tempfile.mkdtemp` (mode
0700, a fresh name), never at a predictable path: a symlink planted there by another user
cannot make flagos-doctor (perhaps run as root) overwrite a file. With no usable
``$TMPDIR``, :func:`tempfile.gettempdir` falls back to ``/tmp``, ``/var/tmp`` or the
current folder, and after those to ``~/.cache/flagos-doctor``; when nothing is writable
the one line says so.

The traceback is scrubbed as every other sink is (:mod:`flagos_doctor.redact`): its frames
quote the values that the terminal line masks.
"""

from __future__ import annotations

import os
import tempfile
import traceback


def _candidate_folders() -> list[str]:
    folders = []
    try:
        folders.append(tempfile.gettempdir())
    except (OSError, FileNotFoundError):  # no usable temporary folder at all
        pass
    folders.append(os.path.join(os.path.expanduser("~"), ".cache", "flagos-doctor"))
    return folders


def save_traceback() -> tuple[str | None, str | None]:
    """Write the exception being handled to a new private file: (its path, None) or
    (None, why it could not be written)."""
    from flagos_doctor import redact

    text = redact.scrub_environ(traceback.format_exc())
    why = "no writable folder"
    for folder in _candidate_folders():
        try:
            os.makedirs(folder, mode=0o700, exist_ok=True)
            private = tempfile.mkdtemp(prefix="flagos-doctor-crash-", dir=folder)
            fd, path = tempfile.mkstemp(prefix="traceback-", suffix=".txt", dir=private)
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                handle.write(text)
            return path, None
        except OSError as exc:
            why = f"{folder}: {exc.strerror or exc}"
    return None, why
