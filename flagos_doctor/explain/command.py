"""``flagos-doctor explain -- CMD``: run the program under the watch, show why it failed.

Exit code: 130 or 143 when explain itself was interrupted by SIGINT or SIGTERM (the signal
was the program's too; the document says so); 10 (``--cause-status N``) when a failure of the
program has a cause, apart from Python's 1 and pytest's 0-5, so a script tells "explained"
from the program's own failure; otherwise the program's own (128 + N for a program killed
by signal N, as a shell says it); 2 for bad usage.
"""

from __future__ import annotations

import signal

from flagos_doctor import checks, output
from flagos_doctor.errors import BadInput
from flagos_doctor.explain import markdown, terminal  # noqa: F401  (they register the views)
from flagos_doctor.explain.runner import run_explain
from flagos_doctor.options import ExplainOptions


def exit_code(document: dict, cause_status: int) -> int:
    """128 + N when explain was interrupted by signal N (130, 143); ``cause_status`` where a cause
    was found; else the program's return code (128 + N for signal N)."""
    interrupted = document["program"].get("interrupted")
    if interrupted:
        return 128 + signal.Signals[interrupted["signal"]].value
    if document["causes"]:
        return cause_status
    returncode = document["program"]["returncode"]
    return 128 - returncode if returncode < 0 else returncode


def run(options: ExplainOptions) -> int:
    checks.interpreter(options.python, "--python")
    for path, option in ((options.json_path, "--json"), (options.markdown_path, "--markdown")):
        if path == "-":
            raise BadInput("stdout is the program's; give a file", option)
        checks.writable_file(path, option)
    document = output.as_written(run_explain(options))
    output.emit(
        document, {"json": options.json_path, "markdown": options.markdown_path},
        terminal=None if options.quiet else output.STDERR,
        options={"markdown": output.page(options.max_chars, options.json_path,
                                         "the JSON of `explain --json PATH -- CMD`")},
    )
    return exit_code(document, options.cause_status)
