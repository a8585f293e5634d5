"""``flagos-doctor suite --compare A B``: the command, wiring arms, comparison and views.

Exit codes: 0 fine; 1 when the comparison fails ``--fail-on`` (default: any regression);
2 for bad input (an unreadable arm, a failed build, and with ``--same-collection`` arms
that did not collect the same tests).
"""

from __future__ import annotations

import sys

from flagos_doctor import arms, checks, output
from flagos_doctor.errors import BadInput
from flagos_doctor.options import SuiteOptions
from flagos_doctor.store import Store
from flagos_doctor.suite import markdown, terminal  # noqa: F401  (they register the comparison's views)
from flagos_doctor.suite.arms import SuiteArms, describe
from flagos_doctor.suite.compare import compare_runs, same_collection_error
from flagos_doctor.suite.flaky import load_flaky


def exit_code(document: dict, fail_on: str) -> int:
    """:func:`flagos_doctor.arms.exit_code`: a regression is a test that stopped passing,
    outside the flaky list; a difference is any transition (flaky tests excepted) or any
    difference in the collected sets."""
    coll = document["collection"]
    differs = bool(document["transitions"] or not coll["same"] or coll["renamed"])
    return arms.exit_code(fail_on, document["regressions"], differs)


def run(options: SuiteOptions) -> int:
    arms.check_fail_on(options.fail_on)
    if options.repo is None and (options.test_cmd or options.build_cmd):
        raise BadInput("--test-cmd and --build-cmd need --repo PATH (the checkout to run them in)")
    if options.repo is not None and not options.test_cmd:
        raise BadInput("--repo needs --test-cmd CMD (how to run the tests of each arm)")
    checks.writable_file(options.json_path, "--json")
    checks.writable_file(options.markdown_path, "--markdown")
    flaky = load_flaky(options.flaky)
    store = Store(options.store)
    say = None if options.quiet else (lambda line: print(f"flagos-doctor: suite: {line}", file=sys.stderr))

    kind = SuiteArms(options.repo, options.test_cmd, options.build_cmd)
    arm_a, arm_b = (arms.resolve(ref, kind, store, options.repo, options.build_cmd, say,
                                 store_hint=" (or give --repo PATH --test-cmd CMD to run it)")
                    for ref in (options.a, options.b))
    document = compare_runs(arm_a.content, arm_b.content, {"a": describe(arm_a), "b": describe(arm_b)}, flaky)
    document["fail_on"] = options.fail_on
    if options.same_collection and not document["collection"]["same"]:
        raise BadInput(same_collection_error(document))

    output.emit(
        document, {"json": options.json_path, "markdown": options.markdown_path},
        terminal=None if options.quiet else output.STDOUT,
        options={"markdown": output.page(options.max_chars, options.json_path,
                                         "the comparison's JSON (`suite --compare A B --json PATH`)")},
    )
    return exit_code(document, options.fail_on)
