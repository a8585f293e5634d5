"""Keeping secrets out of everything flagos-doctor writes: files, the store, stdout, stderr
and crash logs.

Variables whose names say token, key, secret or password (or end in ``_PASS``, ``_PWD``,
``_PAT``, ``_PRIVATE``, or hold ``AUTH``) are never printed, and neither is a password
inside a URL (also after path normalisation made ``https://`` into ``https:/``, and when
the password itself holds a ``/``), after ``password=`` in a connection string (a libpq
DSN), after ``Bearer``/``Basic``/``token`` or an ``Authorization:`` header. Documents carry
environment values in many places (the probe records the ``FLAGOS_*`` / ``GEMS_*``
variables it watches, their writes and final values; the report lists the runtime
configuration), so a whole document is walked: every occurrence of a secret value is
replaced, and any record about a secret-named variable loses its values, including
values the stack itself wrote.

Which values are secret: those of this process's environment, and those a child learnt in
its own (a stack's ``setup()`` may set ``MY_API_KEY`` that the parent never had). A child's
channel announces them before its records (:mod:`flagos_doctor.channel`), the parent
:func:`remember`\\ s them, and every sink scrubs them too: a crash's stderr tail, a crash log.

Every pattern here runs in time linear in the text (a 10 MB line without a space takes
about as long as a plain scan: ``benchmarks/scrub_linear.py``): no regular expression can
scan forward from each of many start positions.
"""

from __future__ import annotations

import re

SECRET_WORDS = ("token", "key", "secret", "password", "passwd", "credential")
#: Names that say secret by their shape rather than a word: GITHUB_PAT, DB_PASS, SMTP_PWD,
#: NPM_AUTH, GH_AUTH_HEADER, SSH_PRIVATE (AUTHOR, as in GIT_AUTHOR_NAME, is no secret).
SECRET_NAME_SHAPES = re.compile(r"(_PASS|_PWD|_PAT|_PRIVATE)$|(^|_)AUTH(?!ORS?(_|$))", re.IGNORECASE)
#: ``password=...`` in a connection string ("host=db user=gems password=s3cret dbname=x").
DSN_PASSWORD = re.compile(r"(?P<key>\b(?:password|passwd|pwd)[ \t]*=[ \t]*)(?P<pw>'[^'\n]*'|[^\s;&'\"]+)", re.IGNORECASE)
#: A bearer credential (``Bearer abc...``, anywhere: a header quoted in a log line). The word
#: is kept; what follows it is the secret. ("basic" or "token" alone are ordinary words.)
AUTH_SCHEME = re.compile(r"(?P<key>\bbearer[ \t]+)(?P<pw>[A-Za-z0-9._~+/=-]{8,})", re.IGNORECASE)
#: ``Authorization: [Basic|token|...] xyz`` (and its kin): the header's credential.
AUTH_HEADER = re.compile(r"(?P<key>\b(?:proxy-)?authorization[ \t]*[:=][ \t]*(?:[A-Za-z]+[ \t]+(?=[^\s\"',;]))?)"
                         r"(?P<pw>[^\s\"',;]+)", re.IGNORECASE)
#: ``NAME=value`` as in an environment dump or a ``.env`` file; masked when NAME says secret.
#: (A value already masked, ``<redacted: why>``, is left as it is: scrubbing twice changes nothing.)
ASSIGNMENT = re.compile(r"(?P<name>\b[A-Z][A-Z0-9_]*)(?P<eq>[ \t]*=[ \t]*)(?P<value>(?!<redacted)[^\s\x00]+)")
#: A scheme's end: ``:/`` or ``://`` (found with str.find; the scheme is read backwards).
_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_MAX_SCHEME = 32
_SPACE = re.compile(r"\s")

MASK = "<redacted>"
URL_MASK = "***"
_ENV_NAME = re.compile(r"^\$?[A-Z][A-Z0-9_]*$")
_VALUE_FIELDS = ("value", "final", "previous", "original", "old", "new", "repr")
#: Secret values learnt from children (their environment at the time), for this process's life.
_learned: set[str] = set()
#: Shorter values are not hidden: "1" or "on" would mask half a document.
MIN_SECRET = 4


def is_secret(name: str) -> bool:
    """Whether a variable's name says it holds a secret."""
    lowered = name.lower()
    return any(word in lowered for word in SECRET_WORDS) or bool(SECRET_NAME_SHAPES.search(name))


def url_passwords(text: str):
    """``(start, end)`` of the password of every ``scheme://user:password@`` in ``text``.

    Linear: each ``:/`` is found once with ``str.find``; its scheme is read backwards (at
    most 32 characters); its userinfo is looked for only up to the next ``:/``, so the
    stretches scanned never overlap. The password runs from the first ``:`` of the
    userinfo to the first ``@`` after it, so it may hold a ``/`` (``u:pa/ss@host``).
    """
    found = []
    if "@" not in text:
        return found
    marker = text.find(":/")
    while marker != -1:
        after = marker + 2 + (text.startswith("/", marker + 2))
        following = text.find(":/", after)
        at = text.find("@", after, following if following != -1 else len(text))
        if at != -1:
            begin = marker
            while begin > 0 and marker - begin < _MAX_SCHEME and text[begin - 1] in _SCHEME_CHARS:
                begin -= 1
            colon = text.find(":", after, at)
            if (begin < marker and text[begin].isalpha() and colon != -1 and "/" not in text[after:colon]
                    and not _SPACE.search(text, after, at)):
                found.append((colon + 1, at))
        marker = following
    return found


def mask_url_passwords(value: str) -> str:
    """``value`` with the password of every URL, connection string and HTTP credential
    masked, and the value of every ``SECRET_NAME=value`` assignment."""
    spans = url_passwords(value) if ":/" in value else []
    if spans:
        pieces, last = [], 0
        for start, end in spans:
            pieces.append(value[last:start])
            pieces.append(URL_MASK)
            last = end
        pieces.append(value[last:])
        value = "".join(pieces)
    # Each pattern runs only where its word is (a cheap scan first): a long line of text
    # costs a few passes of str.find, not a regular expression tried at every word.
    lowered = value.lower()
    if "pw" in lowered or "passw" in lowered:
        value = DSN_PASSWORD.sub(lambda m: f"{m['key']}{URL_MASK}", value)
    if "authorization" in lowered:
        value = AUTH_HEADER.sub(lambda m: f"{m['key']}{MASK}", value)
    if "bearer" in lowered:
        value = AUTH_SCHEME.sub(lambda m: f"{m['key']}{MASK}", value)
    if "=" in value:
        value = ASSIGNMENT.sub(lambda m: f"{m['name']}{m['eq']}{MASK}" if secret_name(m["name"]) else m[0], value)
    return value


def secret_name(name) -> bool:
    """An environment-variable-like name (``HF_TOKEN``, ``$GEMS_PASSWORD``) that says secret."""
    return isinstance(name, str) and bool(_ENV_NAME.match(name)) and is_secret(name.lstrip("$"))


def secret_values(environ, learned: bool = False) -> list[str]:
    """Values to hide: those of secret-named variables, and passwords inside URLs and
    connection strings (with ``learned``, also those children announced)."""
    found = set(_learned) if learned else set()
    for name, value in environ.items():
        if secret_name(name) and len(value) >= MIN_SECRET:
            found.add(value)
        passwords = [value[start:end] for start, end in url_passwords(value)] if ":/" in value else []
        passwords += [match["pw"].strip("'") for match in DSN_PASSWORD.finditer(value)]
        found.update(pw for pw in passwords if len(pw) >= MIN_SECRET)
    return sorted(found, key=len, reverse=True)  # longest first: no partial leftovers


def secret_arguments(argv) -> list[str]:
    """Values given to secret-named options in a command line: ``--api-key VALUE``,
    ``--token=VALUE``, ``-password VALUE`` (the option's name says secret, as a variable's would)."""
    found = []
    for index, arg in enumerate(argv):
        if not isinstance(arg, str) or not arg.startswith("-"):
            continue
        name, eq, value = arg.lstrip("-").partition("=")
        if not name or not is_secret(name.replace("-", "_")):
            continue
        if eq:
            found.append(value)
        elif index + 1 < len(argv) and isinstance(argv[index + 1], str):
            found.append(argv[index + 1])
    return [value for value in found if len(value) >= MIN_SECRET]


def remember(values) -> None:
    """Hide ``values`` too, from now on (secrets a child found in its own environment)."""
    _learned.update(value for value in values if isinstance(value, str) and len(value) >= MIN_SECRET)


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
                clean[key] = scrub(value, secrets) if isinstance(value, (str, list, dict)) else value
            if isinstance(key, str) and any(secret in key for secret in secrets):
                # a secret as a key (an overload or profile named by one): hidden too
                clean[scrub(key, secrets)] = clean.pop(key)
        return clean
    return obj


def scrub_environ(obj, environ=None):
    """``obj`` scrubbed of the secrets of ``environ`` (default: this process's environment
    and what its children announced).

    What every sink goes through: the files and the store (:mod:`flagos_doctor.files`),
    stdout and stderr (:class:`ScrubbingStream`), crash logs, and every message quoting
    the stack's or the user's text.
    """
    import os

    if environ is None:
        return scrub(obj, secret_values(os.environ, learned=True))
    return scrub(obj, secret_values(environ))


class ScrubbingStream:
    """A text stream (``sys.stdout``, ``sys.stderr``) that scrubs what is written to it.

    Every line the CLI prints (an error, a progress note, a terminal view, ``--json -``)
    goes through it, so no sink is forgotten. Everything else is the wrapped stream's."""

    def __init__(self, stream):
        self._stream = stream

    @property
    def unscrubbed(self):
        """The wrapped stream, for a text already scrubbed where it was built (a page)."""
        return self._stream

    def write(self, text):
        return self._stream.write(scrub_environ(text) if isinstance(text, str) else text)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self._stream, name)
