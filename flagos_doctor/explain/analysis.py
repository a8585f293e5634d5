"""Each failure of the program, given its causes (pure; parent side).

PLACEHOLDER until the causal engine of issue 24 (``flagos_doctor/probe/causes.py``) lands.
"""

from __future__ import annotations


def causes(document: dict) -> list[dict]:
    return []
