"""Finding the runs of a matrix: results files, store key prefixes, or store queries.

A RESULTS argument is, in this order:

* a path to a survey results file;
* a folder: every ``*.json`` file directly in it, by name, each a survey results file
  (``matrix surveys/results``);
* a store query, ``FIELD=GLOB[,FIELD=GLOB...]``, matched (``fnmatch``) against every
  survey run in the store; fields: ``key`` (the store key: torch_fl commit or
  ``<stack>-<version>``), ``stack``, ``version``, ``device`` (name or type), ``commit``,
  ``fingerprint``; ``key=*`` takes every run;
* a store key prefix (a commit as git abbreviates it, ``flag_gems-5``): every run filed
  under a matching key, one column per fingerprint.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass

from flagos_doctor import files
from flagos_doctor.errors import BadInput
from flagos_doctor.store import SURVEY_KIND, Entry, Store
from flagos_doctor.results.document import load as load_results

QUERY_FIELDS = ("key", "stack", "version", "device", "commit", "fingerprint")


@dataclass
class Run:
    """One column's run: where it came from and its results document."""

    ref: str  # the RESULTS argument that found it
    path: str
    source: str  # "file" | "store"
    document: dict
    store_key: str | None = None
    fingerprint: str | None = None


def _version(value) -> str | None:
    """A version as the provenance records it: a string, or what was loaded (``{"version", ...}``)."""
    value = value.get("version") if isinstance(value, dict) else value
    return value if isinstance(value, str) else None


def describe(document: dict) -> dict:
    """Stack, version, flag_gems version, device, commit and date of a results document
    (None where unknown)."""
    provenance = document.get("provenance") or {}
    comparable = document.get("comparable") or {}
    torch_fl = provenance.get("torch_fl") if isinstance(provenance.get("torch_fl"), dict) else {}
    device = provenance.get("device") if isinstance(provenance.get("device"), dict) else {}
    stack = provenance.get("stack") or comparable.get("stack")
    store_key = provenance.get("store_key") or comparable.get("store_key")
    versions = provenance.get("versions") if isinstance(provenance.get("versions"), dict) else {}
    # The stack's own entry of the provenance: a version, or what it loaded ({"version", ...}).
    own = (provenance.get(stack) or versions.get(stack)) if isinstance(stack, str) else None
    version = own.get("version") if isinstance(own, dict) else own
    if not isinstance(version, str) and isinstance(store_key, str) and isinstance(stack, str) \
            and store_key.startswith(stack + "-"):
        version = store_key[len(stack) + 1:]  # the store key of a run without a commit
    return {
        "stack": stack,
        "version": version,
        "flag_gems": _version(provenance.get("flag_gems")) or _version(versions.get("flag_gems")),
        "device": device.get("name") or device.get("type") or comparable.get("device_type"),
        "device_type": device.get("type") or comparable.get("device_type"),
        "commit": torch_fl.get("commit"),
        "store_key": store_key,
        "date": provenance.get("started") or provenance.get("ended"),
    }


def _parse_query(text: str) -> list[tuple[str, str]]:
    terms = []
    for term in text.split(","):
        field, _, pattern = term.partition("=")
        field = field.strip()
        if field not in QUERY_FIELDS or not pattern:
            raise BadInput(f"store query term {term!r}: expected FIELD=GLOB with FIELD one of {', '.join(QUERY_FIELDS)}", text)
        terms.append((field, pattern.strip()))
    return terms


def _matches(terms, entry: Entry, facts: dict) -> bool:
    values = {"key": entry.key, "fingerprint": entry.fingerprint, **facts}
    for field, pattern in terms:
        value = values.get(field)
        if field == "device":
            candidates = [facts.get("device"), facts.get("device_type")]
        else:
            candidates = [value]
        if not any(c is not None and fnmatch.fnmatchcase(str(c), pattern) for c in candidates):
            return False
    return True


def _from_store(store: Store, ref: str, entries: list[Entry]) -> list[Run]:
    return [Run(ref=ref, path=e.path, source="store", document=load_results(e.path), store_key=e.key,
                fingerprint=e.fingerprint) for e in entries]


def _from_folder(ref: str) -> list[Run]:
    names = sorted(name for name in os.listdir(ref) if name.endswith(".json"))
    paths = [os.path.join(ref, name) for name in names]
    paths = [path for path in paths if os.path.isfile(path)]
    if not paths:
        raise BadInput("a folder without results files (*.json)", ref)
    return [Run(ref=ref, path=path, source="file", document=load_results(path)) for path in paths]


def _found(ref: str, store: Store) -> list[Run]:
    """The runs one RESULTS argument other than a folder names."""
    files.refuse_special(ref)  # a FIFO or a device is called what it is, never looked up as a key
    if os.path.isfile(ref):
        return [Run(ref=ref, path=ref, source="file", document=load_results(ref))]
    if "=" in ref:
        terms = _parse_query(ref)
        found = []
        for entry in store.entries(SURVEY_KIND):
            document = load_results(entry.path)
            if _matches(terms, entry, describe(document)):
                found.append(Run(ref=ref, path=entry.path, source="store", document=document,
                                 store_key=entry.key, fingerprint=entry.fingerprint))
        if not found:
            raise BadInput(f"no survey run in the store {store.root} matches the query", ref)
        return found
    entries = [e for e in store.entries(SURVEY_KIND) if e.key.startswith(ref)]
    if not entries:
        raise BadInput(f"no results file and no survey run filed under {ref!r} in the store {store.root}", ref)
    return _from_store(store, ref, entries)


def find(refs: list[str], store: Store) -> list[Run]:
    """Every run the RESULTS arguments name, in argument order, each path once.

    Raises BadInput naming the argument when one finds nothing.
    """
    runs: list[Run] = []
    seen: set[str] = set()
    for ref in refs:
        for run in _from_folder(ref) if os.path.isdir(ref) else _found(ref, store):
            real = os.path.realpath(run.path)
            if real not in seen:
                seen.add(real)
                runs.append(run)
    return runs
