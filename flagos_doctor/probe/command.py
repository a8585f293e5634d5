"""``flagos-doctor probe``: run the probe, show it, write the requested files, pick the exit code."""

from __future__ import annotations

import sys

from flagos_doctor.errors import EXIT_FINDING, EXIT_OK
from flagos_doctor import checks
from flagos_doctor.files import atomic_write_text, write_stdout
from flagos_doctor.markdown import full_record
from flagos_doctor.options import ProbeOptions
from flagos_doctor.probe.formats import json as json_format
from flagos_doctor.probe.formats import markdown, terminal
from flagos_doctor.probe.runner import run_probe


def exit_code(document: dict) -> int:
    """1 for a crash, a timeout or an error-level finding; else 0."""
    if document["outcome"] in ("crashed", "timeout"):
        return EXIT_FINDING
    if any(f["severity"] == "error" for f in document["findings"]):
        return EXIT_FINDING
    return EXIT_OK


def _write(path: str, text: str, option: str) -> None:
    if path == "-":
        write_stdout(text, option)
    else:
        atomic_write_text(path, text)


def run(options: ProbeOptions) -> int:
    checks.interpreter(options.python, "--python")
    checks.writable_file(options.json_path, "--json")
    checks.writable_file(options.markdown_path, "--markdown")
    document = run_probe(options)
    to_stdout = "-" in (options.json_path, options.markdown_path)
    if not options.quiet and not to_stdout:
        terminal.show(document)
    for notice in document.get("notices", []):
        if options.quiet or to_stdout:
            print(f"flagos-doctor: {notice}", file=sys.stderr)
    if options.json_path:
        _write(options.json_path, json_format.format(document), "--json")
    if options.markdown_path:
        _write(options.markdown_path, markdown.format(document, options.max_chars, full_record(
            options.json_path, "the probe's JSON (`probe --json PATH`, the same options)")), "--markdown")
    return exit_code(document)
