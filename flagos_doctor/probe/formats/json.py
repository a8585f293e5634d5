"""The probe document as canonical JSON text."""

from __future__ import annotations

from flagos_doctor.files import dump_json


def format(document: dict) -> str:
    return dump_json(document)
