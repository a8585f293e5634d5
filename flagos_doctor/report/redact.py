"""Keeping secrets out of the report: a bundle is scrubbed before anything renders it.

The runtime configuration hides variables whose names say token, key, secret or password;
but other pieces carry environment values too (the probe records the ``FLAGOS_*`` /
``GEMS_*`` variables it watches, their writes and final values). So the whole bundle is
walked: every occurrence of a secret value (or a password inside a URL) found in the
environment is replaced, and any record about a secret-named variable loses its values,
including values the stack itself wrote at import.
"""

from __future__ import annotations

import re

from flagos_doctor.report.environment import _URL_USERINFO, is_secret

MASK = "<redacted>"
_ENV_NAME = re.compile(r"^\$?[A-Z][A-Z0-9_]*$")
_VALUE_FIELDS = ("value", "final", "previous", "original", "old", "new", "repr")


def secret_name(name) -> bool:
    """An environment-variable-like name (``HF_TOKEN``, ``$GEMS_PASSWORD``) that says secret."""
    return isinstance(name, str) and bool(_ENV_NAME.match(name)) and is_secret(name.lstrip("$"))


def secret_values(environ) -> list[str]:
    """Values to hide: those of secret-named variables, and passwords inside URLs."""
    found = set()
    for name, value in environ.items():
        if secret_name(name) and len(value) >= 4:
            found.add(value)
        for match in _URL_USERINFO.finditer(value):
            if len(match["pw"]) >= 4:
                found.add(match["pw"])
    return sorted(found, key=len, reverse=True)  # longest first: no partial leftovers


def scrub(obj, secrets: list[str]):
    """A copy of ``obj`` with every secret hidden (see the module docstring)."""
    if isinstance(obj, str):
        for secret in secrets:
            if secret in obj:
                obj = obj.replace(secret, MASK)
        return obj
    if isinstance(obj, list):
        return [scrub(item, secrets) for item in obj]
    if isinstance(obj, dict):
        about_secret = secret_name(obj.get("probe")) or secret_name(obj.get("name"))
        clean = {}
        for key, value in obj.items():
            if secret_name(key) and not isinstance(value, bool):
                clean[key] = MASK if value is not None else None
            elif about_secret and key in _VALUE_FIELDS and value is not None:
                clean[key] = MASK
            else:
                clean[key] = scrub(value, secrets)
        return clean
    return obj
