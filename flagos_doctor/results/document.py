"""The results document of a survey (schema ``flagos-doctor/survey/1``): a pure function
of the provenance, the route set and the case records.

Stable keys, for scripts: ``schema``, ``provenance``, ``summary`` {``registered``,
``tested``, ``basic``, ``strict``, ``verdicts``, ``statuses``}, ``overloads`` {name:
{``verdict``, ``measured``, ``cases``: [{``profile``, ``status``, ``route``, ``detail``,
and for a confirmed failure ``repeats`` and ``baseline`` {``status``, ``detail``}}]}},
``census_sha256``, ``failure_groups`` (the non-PASS cases grouped by cause,
:mod:`.groups`). Also: ``comparable`` (the setup's fields that a resume checks and the
store's fingerprint digests, :mod:`.comparable`), ``routes`` (the route set) and ``complete``. :func:`load` reads one back,
checked field by field, its census digest recomputed.
"""

from __future__ import annotations

import hashlib
import json

from flagos_doctor import files, output
from flagos_doctor.errors import BadInput, excerpt
from flagos_doctor.results import case, census, groups, model, verdicts

#: Order of a case's keys does not matter in JSON, but its profiles keep the spec's order.


def spec_sha256(spec_dict: dict) -> str:
    return hashlib.sha256(json.dumps(spec_dict, sort_keys=True, default=repr).encode()).hexdigest()


def _ordered(cases: list[dict], profiles: list[str] | None) -> list[dict]:
    order = {name: index for index, name in enumerate(profiles or [])}
    return sorted(cases, key=lambda case: (order.get(case["profile"], len(order)), case["profile"]))


def build(
    provenance: dict,
    comparable: dict,
    route_set: list[str],
    finished: dict[str, list[dict]],
    partial: dict[str, list[dict]] | None = None,
    profiles: dict[str, list[str]] | None = None,
    measured: dict[str, str] | None = None,
) -> dict:
    """The results document. ``measured``: when each finished overload's verdict was
    measured (the start of the run that did)."""
    profiles = profiles or {}
    measured = measured or {}
    partial = partial or {}
    overloads = {}
    done = {}
    for name in route_set:
        if name in finished:
            cases = _ordered(finished[name], profiles.get(name))
            overloads[name] = {"verdict": verdicts.verdict(cases), "cases": cases}
            if name in measured:
                overloads[name]["measured"] = measured[name]
            if name in profiles:
                overloads[name]["profiles"] = profiles[name]
            done[name] = {"cases": cases}
        else:
            overloads[name] = {"verdict": model.PENDING, "cases": []}
            if partial.get(name):
                overloads[name]["partial_cases"] = _ordered(partial[name], profiles.get(name))
                if name in profiles:
                    overloads[name]["profiles"] = profiles[name]
    text = census.census_text(done)
    return {
        "schema": model.RESULTS_SCHEMA,
        "provenance": provenance,
        "comparable": comparable,
        "routes": list(route_set),
        "complete": len(done) == len(route_set),
        "summary": verdicts.summarize(route_set, done),
        "overloads": overloads,
        "failure_groups": groups.failure_groups(overloads),
        "census_sha256": census.census_sha256(text),
    }


@output.register(model.RESULTS_SCHEMA, "census")
def census_of(document: dict) -> str:
    """The census text of a results document."""
    done = {name: {"cases": entry.get("cases", [])}  # a file may leave an empty list out
            for name, entry in document["overloads"].items() if entry["verdict"] != model.PENDING}
    return census.census_text(done)


def _check_cases(cases, where: str, field: str) -> None:
    if not isinstance(cases, list):
        raise BadInput(f"field '{field}' is {type(cases).__name__}, expected a list of cases", where)
    for index, one in enumerate(cases):
        case.check(one, where, f"{field}[{index}]")


def _check_verdicts(document: dict, where: str) -> None:
    """Every stored verdict and summary figure is what the cases give (a file edited by
    hand, or a duplicated key, is refused rather than shown). A summary key an older
    harness did not write is left absent."""
    done = {}
    for name, entry in document["overloads"].items():
        if entry["verdict"] == model.PENDING:
            continue
        found = verdicts.verdict(entry.get("cases") or [])
        if found != entry["verdict"]:
            raise BadInput(f"field 'overloads.{name}.verdict' is {entry['verdict']!r}, but its cases give {found!r}", where)
        done[name] = {"cases": entry.get("cases") or []}
    routes = document.get("routes")
    if not isinstance(routes, list):
        return  # a file without its route set: no summary to recompute
    summary = verdicts.summarize(routes, done)
    for key, stored in document["summary"].items():
        if key in summary and summary[key] != stored:
            raise BadInput(f"field 'summary.{key}' is {excerpt(stored)}, but the cases give {excerpt(summary[key])}", where)


#: The shape of every field a reader of a results file uses (compare, matrix, report, the
#: store, a resume, ``--hints``): checked once here, so a file of the wrong shape is one
#: line naming the field for every reader, before any of them starts work. ``None`` among
#: the types: the field may be null. Absent fields are the readers' to default.
SHAPES = {
    "provenance": (dict,), "comparable": (dict,), "routes": (list,), "failure_groups": (list,),
    "complete": (bool,), "census_sha256": (str, type(None)),
    "summary.verdicts": (dict,), "summary.statuses": (dict,), "summary.routes": (dict,),
    "summary.registered": (int,), "summary.tested": (int,), "summary.basic": (int,), "summary.strict": (int,),
    "summary.missing_functions": (dict,), "summary.fallback_overloads": (list,), "summary.fallback_passes": (int,),
    "summary.native_also": (int,), "summary.native_also_overloads": (list,),
    "provenance.device": (dict, type(None)), "provenance.runs": (list,), "provenance.spec": (dict, type(None)),
    "provenance.routes": (dict,), "provenance.visible_devices": (dict, type(None)),
    **{f"provenance.{name}": (str, type(None)) for name in (
        "stack", "torch", "triton", "flag_gems", "python", "harness_version", "store_key", "started", "ended",
        "baseline", "store_path", "spec_path")},
    "provenance.torch_fl": (dict, str, type(None)),
}


def _check_shapes(document: dict, where: str) -> None:
    for dotted, types in SHAPES.items():
        holder, value = document, None
        for part in dotted.split("."):
            if not isinstance(holder, dict) or part not in holder:
                break
            holder = value = holder[part]
        else:
            if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
                expected = " or ".join("null" if t is type(None) else {"dict": "an object", "list": "a list"}.get(
                    t.__name__, f"a {t.__name__}") for t in types)
                raise BadInput(f"field '{dotted}' is {type(value).__name__}, expected {expected}", where)
    for counts in ("summary.verdicts", "summary.statuses"):
        section, name = counts.split(".")
        for key, value in (document.get(section, {}).get(name) or {}).items():
            if not isinstance(value, int) or isinstance(value, bool):
                raise BadInput(f"field '{counts}.{excerpt(key)}' is {excerpt(value)}, expected a count", where)


def check(document: dict, where: str) -> dict:
    """``document`` read back from ``where``, checked as a results file of this schema; its
    ``census_sha256`` recomputed from its cases (a digest in a file is never trusted).

    Raises BadInput naming the file and the first field at fault: another or a newer
    schema, overloads that are not objects, a verdict or status that is not one of the
    survey's words, ``cases`` that are not a list of cases (:func:`.case.check`), cases of
    a PENDING overload (it has none: what ran so far is ``partial_cases``), a verdict or
    summary figure that its cases do not give.
    """
    schema = document.get("schema")
    if schema != model.RESULTS_SCHEMA:
        newer = isinstance(schema, str) and schema.startswith(model.RESULTS_SCHEMA.rsplit("/", 1)[0] + "/")
        why = "made by another version of flagos-doctor; " if newer else ""
        raise BadInput(f"field 'schema' is {schema!r}: {why}this one reads {model.RESULTS_SCHEMA}", where)
    overloads = document.get("overloads")
    if not isinstance(overloads, dict):
        raise BadInput("field 'overloads' is missing or not an object: not a survey results file", where)
    if not isinstance(document.get("summary"), dict):
        raise BadInput("field 'summary' is missing or not an object: not a survey results file", where)
    _check_shapes(document, where)
    for name, entry in overloads.items():
        field = f"overloads.{name}"
        if not isinstance(entry, dict):
            raise BadInput(f"field '{field}' is {type(entry).__name__}, expected an object", where)
        if entry.get("verdict") not in model.VERDICTS:
            raise BadInput(f"field '{field}.verdict' is {entry.get('verdict')!r}, not a verdict ({', '.join(model.VERDICTS)})", where)
        _check_cases(entry.get("cases", []), where, f"{field}.cases")
        if entry["verdict"] == model.PENDING and entry.get("cases"):
            raise BadInput(f"field '{field}.cases' holds {len(entry['cases'])} cases of a PENDING overload "
                           "(the cases of an unfinished one are its partial_cases)", where)
        if "partial_cases" in entry:
            _check_cases(entry["partial_cases"], where, f"{field}.partial_cases")
    _check_verdicts(document, where)
    document["census_sha256"] = census.census_sha256(census_of(document))
    return document


def load(path: str) -> dict:
    """Read and :func:`check` a survey results file; BadInput naming the file when unusable."""
    return check(files.load_json(path, model.RESULTS_SCHEMA.rsplit("/", 1)[0] + "/"), path)
