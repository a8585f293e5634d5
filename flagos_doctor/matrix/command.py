"""``flagos-doctor matrix RESULTS...``: find the runs, build the matrix, write the views.

Exit codes: 0 the matrix was written; 2 bad input (a RESULTS argument that finds nothing,
an unreadable results file, two outputs on standard output).
"""

from __future__ import annotations

from flagos_doctor import checks, output
from flagos_doctor.errors import BadInput
from flagos_doctor.markdown import full_record
from flagos_doctor.matrix import build, csv_format, markdown, sources, terminal  # noqa: F401  (views register)
from flagos_doctor.options import MatrixOptions
from flagos_doctor.store import Store


def run(options: MatrixOptions) -> int:
    if not options.results:
        raise BadInput("name at least one run: a results file, a store key prefix or a store query (key=*)")
    outputs = [p for p in (options.json_path, options.csv_path, options.markdown_path) if p]
    if outputs.count("-") > 1:
        raise BadInput("only one of --json, --csv and --markdown can write to standard output (-)")
    for path, option in ((options.json_path, "--json"), (options.csv_path, "--csv"), (options.markdown_path, "--markdown")):
        checks.writable_file(path, option)
    runs = sources.find(list(options.results), Store(options.store))
    matrix = build.build([
        {"document": r.document, "facts": sources.describe(r.document), "ref": r.ref, "path": r.path,
         "source": r.source, "store_key": r.store_key, "fingerprint": r.fingerprint}
        for r in runs
    ])
    # The Markdown's closing line names the JSON file, else the CSV file, as the full record.
    record = options.json_path if options.json_path and options.json_path != "-" else options.csv_path
    output.emit(
        output.as_written(matrix),
        {"json": options.json_path, "csv": options.csv_path, "markdown": options.markdown_path},
        terminal=None if options.quiet else output.STDOUT,
        options={"markdown": {"max_chars": options.max_chars, "full_record": full_record(
            record if record and record != "-" else None,
            "the matrix JSON or CSV (the same command with `--json PATH` or `--csv PATH`)")}},
    )
    return 0
