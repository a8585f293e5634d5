"""Control characters written as their escapes wherever text reaches a terminal.

A terminal acts on control characters: ESC starts a sequence that recolours, moves the
cursor, clears the screen or retitles the window; CR and backspace let later text hide
earlier text. The strings flagos-doctor shows come from programs, kernels, confs and paths
nobody here wrote, so every terminal view is drawn from its document made inert
(:func:`inert_document`, in :mod:`flagos_doctor.output`) and every one-line error is made
inert (:func:`flagos_doctor.errors.one_line`): the text shows as ``\\x1b[2J``, the
terminal does nothing. Rich's own colours are added after, and stay. Files (JSON,
Markdown) keep the text as it was.
"""

from __future__ import annotations

import re

#: C0 controls but tab and newline, DEL and the C1 controls (U+0080-U+009F: a terminal may
#: read U+009B as ESC [).
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _escape(match: re.Match) -> str:
    return f"\\x{ord(match.group()):02x}"


def inert(text: str) -> str:
    """``text`` with each control character a terminal acts on written as its escape."""
    return _CONTROL.sub(_escape, text) if _CONTROL.search(text) else text


def inert_document(value):
    """``value`` (a document: dicts, lists, tuples, strings, numbers) with :func:`inert`
    applied to every string, keys included; the same object when no string has a control."""
    if isinstance(value, str):
        return inert(value)
    if isinstance(value, dict):
        items = [(inert_document(k), inert_document(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items())):
            return value
        return dict(items)
    if isinstance(value, (list, tuple)):
        items = [inert_document(v) for v in value]
        if all(v is v0 for v, v0 in zip(items, value)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    return value
