"""The results document of a survey (schema ``flagos-doctor/survey/1``): a pure function
of the provenance, the route set and the case records.

Stable keys, for scripts: ``schema``, ``provenance``, ``summary`` {``registered``,
``tested``, ``basic``, ``strict``, ``verdicts``, ``statuses``}, ``overloads`` {name:
{``verdict``, ``measured``, ``cases``: [{``profile``, ``status``, ``route``, ``detail``,
and for a confirmed failure ``repeats`` and ``baseline`` {``status``, ``detail``}}]}},
``census_sha256``. Also: ``comparable`` (the fields two runs must share to be resumed
or compared), ``routes`` (the route set) and ``complete``.
"""

from __future__ import annotations

import hashlib
import json

from flagos_doctor.survey import census, model, verdicts

#: Order of a case's keys does not matter in JSON, but its profiles keep the spec's order.


def spec_sha256(spec_dict: dict) -> str:
    return hashlib.sha256(json.dumps(spec_dict, sort_keys=True, default=repr).encode()).hexdigest()


def fingerprint(comparable: dict) -> str:
    """A short digest of the comparability fields (the store's file name), key excluded."""
    fields = {k: v for k, v in comparable.items() if k != "store_key"}
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:16]


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
        "census_sha256": census.census_sha256(text),
    }


def census_of(document: dict) -> str:
    """The census text of a results document."""
    done = {name: entry for name, entry in document["overloads"].items() if entry["verdict"] != model.PENDING}
    return census.census_text(done)
