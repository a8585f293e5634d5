"""``flagos-doctor matrix RESULTS...``: find the runs, build the matrix, write the views.

Exit codes: 0 the matrix was written; 2 bad input (a RESULTS argument that finds nothing,
an unreadable results file, two outputs on standard output).
"""

from __future__ import annotations

import json
import sys

from flagos_doctor.errors import BadInput
from flagos_doctor.files import atomic_write_text, dump_json
from flagos_doctor.markdown import full_record
from flagos_doctor.matrix import build, csv_format, markdown, sources
from flagos_doctor.options import MatrixOptions
from flagos_doctor.store import Store


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        atomic_write_text(path, text)


def run(options: MatrixOptions) -> int:
    if not options.results:
        raise BadInput("name at least one run: a results file, a store key prefix or a store query (key=*)")
    outputs = [p for p in (options.json_path, options.csv_path, options.markdown_path) if p]
    if outputs.count("-") > 1:
        raise BadInput("only one of --json, --csv and --markdown can write to standard output (-)")
    runs = sources.find(list(options.results), Store(options.store))
    matrix = build.build([
        {"document": r.document, "facts": sources.describe(r.document), "ref": r.ref, "path": r.path,
         "source": r.source, "store_key": r.store_key, "fingerprint": r.fingerprint}
        for r in runs
    ])
    # Every view renders from exactly what --json writes.
    matrix = json.loads(dump_json(matrix))
    if options.json_path:
        _write(options.json_path, dump_json(matrix))
    if options.csv_path:
        _write(options.csv_path, csv_format.render(matrix))
    if options.markdown_path:
        record = options.json_path if options.json_path and options.json_path != "-" else options.csv_path
        _write(options.markdown_path, markdown.render(matrix, options.max_chars, full_record(
            record if record and record != "-" else None,
            "the matrix JSON or CSV (the same command with `--json PATH` or `--csv PATH`)")))
    if not options.quiet and "-" not in outputs:
        from flagos_doctor.console import output_console
        from flagos_doctor.matrix import terminal

        terminal.render(matrix, output_console(highlight=False))
    return 0
