"""``flagos-doctor probe``: run the probe, show it, write the requested files, pick the exit code."""

from __future__ import annotations

import sys

from flagos_doctor.errors import EXIT_FINDING, EXIT_OK
from flagos_doctor import checks, output, stacks
from flagos_doctor.options import ProbeOptions
from flagos_doctor.probe.formats import markdown, terminal  # noqa: F401  (they register the probe's views)
from flagos_doctor.probe.runner import run_probe


def exit_code(document: dict) -> int:
    """1 for a crash, a timeout or an error-level finding; else 0."""
    if document["outcome"] in ("crashed", "timeout"):
        return EXIT_FINDING
    if any(f["severity"] == "error" for f in document["findings"]):
        return EXIT_FINDING
    return EXIT_OK


def run(options: ProbeOptions) -> int:
    checks.interpreter(options.python, "--python")
    stacks.check(options.stack, options.python)
    checks.writable_file(options.json_path, "--json")
    checks.writable_file(options.markdown_path, "--markdown")
    document = run_probe(options)
    to_stdout = "-" in (options.json_path, options.markdown_path)
    for notice in document.get("notices", []):
        if options.quiet or to_stdout:  # else the terminal view shows them
            print(f"flagos-doctor: {notice}", file=sys.stderr)
    output.emit(
        document, {"json": options.json_path, "markdown": options.markdown_path},
        terminal=None if options.quiet else output.STDOUT,
        options={"markdown": output.page(options.max_chars, options.json_path,
                                         "the probe's JSON (`probe --json PATH`, the same options)")},
    )
    return exit_code(document)
