"""``flagos-doctor report``: collect the bundle, write it as JSON and/or Markdown.

Exit code 0 whenever a report was written, even when pieces of it could not be collected
(the report says which and why); 2 for bad usage.
"""

from __future__ import annotations

import json
import sys

from flagos_doctor import checks
from flagos_doctor.files import atomic_write_text, dump_json, write_json
from flagos_doctor.markdown import full_record
from flagos_doctor.options import ReportOptions
from flagos_doctor.report import bundle as bundle_mod
from flagos_doctor.report import markdown


def run(options: ReportOptions) -> int:
    checks.writable_file(options.json_path, "--json")
    checks.writable_file(options.markdown_path, "--markdown")
    # Round-tripped through its JSON text, so the Markdown renders from exactly what
    # --json writes (same key order too).
    bundle = json.loads(dump_json(bundle_mod.collect(options)))
    if options.json_path:
        if options.json_path == "-":
            sys.stdout.write(dump_json(bundle))
        else:
            write_json(options.json_path, bundle)
    markdown_path = options.markdown_path
    if markdown_path == "-" and options.json_path == "-":
        markdown_path = None  # one document on stdout
    if markdown_path:
        text = markdown.render(bundle, max_chars=options.max_chars, full_record=full_record(
            options.json_path, "the report's JSON bundle (`report --json PATH`, the same options)"))
        if markdown_path == "-":
            sys.stdout.write(text)
        else:
            atomic_write_text(markdown_path, text)
    for problem in bundle["problems"]:
        print(f"flagos-doctor: note: {problem.splitlines()[0] if problem else problem}", file=sys.stderr)
    return 0
