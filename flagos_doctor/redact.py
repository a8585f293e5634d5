"""Keeping secrets out of every document flagos-doctor writes.

Variables whose names say token, key, secret or password (or end in ``_PASS``, ``_PWD``,
``_PAT``, ``_PRIVATE``, or hold ``AUTH``) are never printed, and neither is a password
inside a URL (also after path normalisation made ``https://`` into ``https:/``) or after
``password=`` in a connection string (a libpq DSN). Documents carry environment values in many places (the probe
records the ``FLAGOS_*`` / ``GEMS_*`` variables it watches, their writes and final values;
the report lists the runtime configuration), so a whole document is walked: every
occurrence of a secret value found in the environment is replaced, and any record about
a secret-named variable loses its values, including values the stack itself wrote.
"""

from __future__ import annotations

import re

SECRET_WORDS = ("token", "key", "secret", "password", "passwd", "credential")
#: Names that say secret by their shape rather than a word: GITHUB_PAT, DB_PASS, SMTP_PWD,
#: NPM_AUTH, GH_AUTH_HEADER, SSH_PRIVATE (AUTHOR, as in GIT_AUTHOR_NAME, is no secret).
SECRET_NAME_SHAPES = re.compile(r"(_PASS|_PWD|_PAT|_PRIVATE)$|(^|_)AUTH(?!ORS?(_|$))", re.IGNORECASE)
# One or two slashes after the scheme: os.path.normpath("https://u:pw@host/x") gives "https:/u:pw@host/x".
URL_USERINFO = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*:/{1,2})(?P<user>[^:/@\s]*):(?P<pw>[^@/\s]*)@")
#: ``password=...`` in a connection string ("host=db user=gems password=s3cret dbname=x").
DSN_PASSWORD = re.compile(r"(?P<key>\b(?:password|passwd|pwd)\s*=\s*)(?P<pw>'[^']*'|[^\s;&'\"]+)", re.IGNORECASE)


def is_secret(name: str) -> bool:
    """Whether a variable's name says it holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS) or bool(SECRET_NAME_SHAPES.search(name))


#: ``NAME=value`` as in an environment dump or a ``.env`` file; masked when NAME says secret.
ASSIGNMENT = re.compile(r"(?P<name>\b[A-Z][A-Z0-9_]*)(?P<eq>\s*=\s*)(?P<value>[^\s\x00]+)")


def mask_url_passwords(value: str) -> str:
    """``value`` with the password of every URL and connection string masked, and the
    value of every ``SECRET_NAME=value`` assignment."""
    value = URL_USERINFO.sub(lambda m: f"{m['scheme']}{m['user']}:***@", value)
    value = DSN_PASSWORD.sub(lambda m: f"{m['key']}***", value)
    return ASSIGNMENT.sub(lambda m: f"{m['name']}{m['eq']}{MASK}" if secret_name(m["name"]) else m[0], value)


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
        for match in (*URL_USERINFO.finditer(value), *DSN_PASSWORD.finditer(value)):
            if len(match["pw"].strip("'")) >= 4:
                found.add(match["pw"].strip("'"))
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


def scrub_environ(obj, environ=None):
    """``obj`` scrubbed of the secrets of ``environ`` (default: this process's environment).

    What every document and every message quoting the stack's or the user's text goes
    through: the probe, the report, the survey's records, a conf line in an error.
    """
    import os

    return scrub(obj, secret_values(os.environ if environ is None else environ))
