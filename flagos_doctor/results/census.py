"""The census: the canonical, sorted list of (overload, profile, status, route) of a survey.

It holds nothing else (no times, paths, pids, details), so two surveys with equal outcomes
give byte-identical census text and the same ``census_sha256``. One tab-separated line a
case; an overload the installed torch lacks is one line with profile and route ``-``.

A failure the stack's native path shares reads ``WRONG+native`` (its verdict does not
count it, so the census says so); a FLAKY case reads ``FLAKY`` whatever its repeats gave,
so two runs of a stack with flaky cases still give the same census.
"""

from __future__ import annotations

import hashlib

from flagos_doctor.results.verdicts import is_native_also


def census_status(case: dict) -> str:
    """The status column of a case's census line."""
    return case["status"] + ("+native" if is_native_also(case) else "")


def census_text(overloads: dict[str, dict]) -> str:
    """The census of ``overloads`` (name -> ``{"cases": [...]}``) as text."""
    rows = sorted(
        (name, case["profile"], census_status(case), case.get("route", "-"))
        for name, entry in overloads.items()
        for case in entry["cases"]
    )
    return "".join("\t".join(row) + "\n" for row in rows)


def census_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
