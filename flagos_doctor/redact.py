"""Keeping secrets out of every document flagos-doctor writes.

Variables whose names say token, key, secret or password are never printed, and neither
is a password inside a URL. Documents carry environment values in many places (the probe
records the ``FLAGOS_*`` / ``GEMS_*`` variables it watches, their writes and final values;
the report lists the runtime configuration), so a whole document is walked: every
occurrence of a secret value found in the environment is replaced, and any record about
a secret-named variable loses its values, including values the stack itself wrote.
"""

from __future__ import annotations

import re

SECRET_WORDS = ("token", "key", "secret", "password", "passwd", "credential")
URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]*)@")


def is_secret(name: str) -> bool:
    """Whether a variable's name says it holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS)


def mask_url_passwords(value: str) -> str:
    return URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", value)


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
        for match in URL_USERINFO.finditer(value):
            if len(match["pw"]) >= 4:
                found.add(match["pw"])
    return sorted(found, key=len, reverse=True)  # longest first: no partial leftovers


def _masked(value):
    # Keep a record's shape (views read value["repr"]), hide what it says.
    if isinstance(value, dict):
        return {k: (_masked(v) if k in _VALUE_FIELDS else v) for k, v in value.items()}
    return MASK


def scrub(obj, secrets: list[str]):
    """A copy of ``obj`` with every secret hidden (see the module docstring)."""
    if isinstance(obj, str):
        for secret in secrets:
            if secret in obj:
                obj = obj.replace(secret, MASK)
        return mask_url_passwords(obj)
    if isinstance(obj, list):
        return [scrub(item, secrets) for item in obj]
    if isinstance(obj, dict):
        about_secret = secret_name(obj.get("probe")) or secret_name(obj.get("name"))
        clean = {}
        for key, value in obj.items():
            if secret_name(key) and not isinstance(value, bool):
                clean[key] = MASK if value is not None else None
            elif about_secret and key in _VALUE_FIELDS and value is not None:
                clean[key] = _masked(value)
            else:
                clean[key] = scrub(value, secrets)
        return clean
    return obj
