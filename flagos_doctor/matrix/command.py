"""``flagos-doctor matrix RESULTS...``: find the runs, build the matrix, write the views.

Exit codes: 0 the matrix was written; 2 bad input (a RESULTS argument that finds nothing,
a folder without results files, an unreadable results file, two outputs on standard output).
"""

from __future__ import annotations

from flagos_doctor import checks, output
from flagos_doctor.errors import BadInput
from flagos_doctor.matrix import build, csv_format, html, markdown, sources, terminal  # noqa: F401  (views register)
from flagos_doctor.options import MatrixOptions
from flagos_doctor.store import Store


def run(options: MatrixOptions) -> int:
    if not options.results:
        raise BadInput("name at least one run: a results file, a store key prefix or a store query (key=*)")
    to = {"json": options.json_path, "csv": options.csv_path, "markdown": options.markdown_path,
          "html": options.html_path}
    if list(to.values()).count("-") > 1:
        raise BadInput("only one of --json, --csv, --markdown and --html can write to standard output (-)")
    for format, path in to.items():
        checks.writable_file(path, f"--{format}")  # before any run is read
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
        to,
        terminal=None if options.quiet else output.STDOUT,
        options={"markdown": output.page(options.max_chars, record if record != "-" else None,
                                         "the matrix JSON or CSV (the same command with `--json PATH` or `--csv PATH`)")},
    )
    return 0
