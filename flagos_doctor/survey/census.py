"""The census: the canonical, sorted list of (overload, profile, status, route) of a survey.

It holds nothing else (no times, paths, pids, details), so two surveys with equal outcomes
give byte-identical census text and the same ``census_sha256``. One tab-separated line a
case; an overload the installed torch lacks is one line with profile and route ``-``.
"""

from __future__ import annotations

import hashlib


def census_text(overloads: dict[str, dict]) -> str:
    """The census of ``overloads`` (name -> ``{"cases": [...]}``) as text."""
    rows = sorted(
        (name, case["profile"], case["status"], case.get("route", "-"))
        for name, entry in overloads.items()
        for case in entry["cases"]
    )
    return "".join("\t".join(row) + "\n" for row in rows)


def census_sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
