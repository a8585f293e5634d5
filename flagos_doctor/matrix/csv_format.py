"""The matrix document as CSV: a header row of run labels, then one row per overload.

A cell is the verdict, with its marks after ``+`` (``FAILED+native-also``); empty where
the run has no such overload. Renders from the document alone.
"""

from __future__ import annotations

import csv
import io

from flagos_doctor import output
from flagos_doctor.matrix.build import MATRIX_SCHEMA


@output.register(MATRIX_SCHEMA, "csv")
def render(matrix: dict) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["overload", "family", *(c.get("label") for c in matrix.get("columns") or [])])
    for row in matrix.get("rows") or []:
        writer.writerow([row["overload"], row["family"], *(
            "" if value is None else "+".join([str(value.get("verdict")), *(value.get("marks") or [])])
            for value in row["cells"]
        )])
    return buffer.getvalue()
