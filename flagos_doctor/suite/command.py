"""``flagos-doctor suite --compare A B``: the command, wiring arms, comparison and views.

Exit codes: 0 fine; 1 when the comparison fails ``--fail-on`` (default: any regression);
2 for bad input (an unreadable arm, a failed build, and with ``--same-collection`` arms
that did not collect the same tests).
"""

from __future__ import annotations

import sys

from flagos_doctor.errors import EXIT_FINDING, EXIT_OK, BadInput
from flagos_doctor.files import atomic_write_text, dump_json
from flagos_doctor.markdown import full_record
from flagos_doctor.options import SuiteOptions
from flagos_doctor.store import Store
from flagos_doctor.suite import markdown
from flagos_doctor.suite.arms import resolve_arm
from flagos_doctor.suite.compare import compare_runs, same_collection_error
from flagos_doctor.suite.flaky import load_flaky

FAIL_ON = ("any", "regression", "never")


def exit_code(document: dict, fail_on: str) -> int:
    """``regression``: 1 on any regression outside the flaky list. ``any``: 1 on any
    difference at all (a transition of any kind, or a difference in the collected sets),
    flaky tests excepted. ``never``: 0."""
    if fail_on == "never":
        return EXIT_OK
    if fail_on == "regression":
        return EXIT_FINDING if document["regressions"] else EXIT_OK
    coll = document["collection"]
    differs = document["transitions"] or not coll["same"] or coll["renamed"]
    return EXIT_FINDING if differs else EXIT_OK


def run(options: SuiteOptions) -> int:
    if options.fail_on not in FAIL_ON:
        raise BadInput(f"--fail-on must be one of {', '.join(FAIL_ON)}, not {options.fail_on!r}")
    if options.repo is None and (options.test_cmd or options.build_cmd):
        raise BadInput("--test-cmd and --build-cmd need --repo PATH (the checkout to run them in)")
    if options.repo is not None and not options.test_cmd:
        raise BadInput("--repo needs --test-cmd CMD (how to run the tests of each arm)")
    flaky = load_flaky(options.flaky)
    store = Store(options.store)
    say = None if options.quiet else (lambda line: print(f"flagos-doctor: suite: {line}", file=sys.stderr))

    arms = [resolve_arm(ref, store, options.repo, options.test_cmd, options.build_cmd, say)
            for ref in (options.a, options.b)]
    document = compare_runs(arms[0].run, arms[1].run,
                            {"a": arms[0].describe(), "b": arms[1].describe()}, flaky)
    document["fail_on"] = options.fail_on
    if options.same_collection and not document["collection"]["same"]:
        raise BadInput(same_collection_error(document))

    to_stdout = "-" in (options.json_path, options.markdown_path)
    if options.json_path:
        _write(options.json_path, dump_json(document))
    if options.markdown_path:
        _write(options.markdown_path, markdown.format(document, options.max_chars, full_record(
            options.json_path, "the comparison's JSON (`suite --compare A B --json PATH`)")))
    if not options.quiet and not to_stdout:
        from flagos_doctor.console import output_console  # only the terminal view needs rich
        from flagos_doctor.suite import terminal

        terminal.render(document, output_console(soft_wrap=True, highlight=False))
    return exit_code(document, options.fail_on)


def _write(path: str, text: str) -> None:
    if path == "-":
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
        sys.stdout.flush()
    else:
        atomic_write_text(path, text)
