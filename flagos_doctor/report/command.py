"""``flagos-doctor report``: collect the bundle, write it as JSON and/or Markdown.

Exit code 0 whenever a report was written, even when pieces of it could not be collected
(the report says which and why); 2 for bad usage, including a stack that is neither built
in nor importable and a ``--survey``/``--compare`` file that is no survey results file
(refused before the 10 to 15 s of probing). Progress goes to stderr, and the paths written.
"""

from __future__ import annotations

import dataclasses
import sys

from flagos_doctor import checks, output, stacks
from flagos_doctor.errors import BadInput
from flagos_doctor.options import ReportOptions
from flagos_doctor.report import bundle as bundle_mod
from flagos_doctor.report import markdown  # noqa: F401  (registers the report's Markdown view)


def run(options: ReportOptions) -> int:
    checks.interpreter(options.python, "--python")
    checks.writable_file(options.json_path, "--json")
    checks.writable_file(options.markdown_path, "--markdown")
    from_explain = False
    if options.explain:  # a file the user named must be readable before the probe's minute starts
        named = bundle_mod.explain_piece_or_raise(options.explain).get("stack")
        if options.stack is None and named:  # the stack the program ran on is the one to probe
            options, from_explain = dataclasses.replace(options, stack=named), True
    try:
        stacks.check(options.stack, options.python)
    except BadInput as exc:
        if not from_explain:
            raise
        raise BadInput(f"{exc.message} (give --stack to probe another)", f"{options.explain}: field stack")

    def progress(step: str) -> None:
        print(f"flagos-doctor: report: {step}...", file=sys.stderr, flush=True)

    bundle = output.as_written(bundle_mod.collect(options, progress))
    markdown_path = options.markdown_path
    if markdown_path == "-" and options.json_path == "-":
        markdown_path = None  # one document on stdout
    output.emit(bundle, {"json": options.json_path, "markdown": markdown_path}, options={
        "markdown": output.page(options.max_chars, options.json_path,
                                "the report's JSON bundle (`report --json PATH`, the same options)")})
    for problem in bundle["problems"]:
        print(f"flagos-doctor: note: {problem.splitlines()[0] if problem else problem}", file=sys.stderr)
    for what, path in (("JSON bundle", options.json_path), ("Markdown report", markdown_path)):
        if path and path != "-":
            print(f"flagos-doctor: report: {what} written to {path}", file=sys.stderr)
    return 0
