"""``flagos-doctor survey --compare A B``: find (or build) both arms, diff them, render.

Exit codes: 0 nothing regressed (per ``--fail-on``), 1 a regression, 2 bad input: an arm
that cannot be found or read, or runs that are not comparable (without ``--force``).
"""

from __future__ import annotations

import sys

from flagos_doctor import arms, checks, output
from flagos_doctor.compare import github, markdown, terminal  # noqa: F401  (they register the comparison's views)
from flagos_doctor.compare.build import build_comparison, describe, load_arms, not_comparable_message, short
from flagos_doctor.compare.diff import exit_code
from flagos_doctor.console import output_console
from flagos_doctor.errors import BadInput
from flagos_doctor.options import CompareOptions


def _progress(options: CompareOptions):
    """Where the arms' progress lines go (a build takes a while): stderr, unless ``--quiet``."""
    if options.quiet:
        return None
    return lambda line: print(f"flagos-doctor: survey: {line}", file=sys.stderr, flush=True)


def _refusal(comparison: dict) -> dict:
    keep = ("schema", "comparable", "differences", "census_sha256", "arms")
    return {**{k: comparison[k] for k in keep}, "refused": True}


def run(options: CompareOptions) -> int:
    arms.check_fail_on(options.fail_on)
    checks.writable_file(options.json_path, "--json")
    checks.writable_file(options.markdown_path, "--markdown")
    github.check_options(options.github, options.comment_file)
    on_github = github.active(options.github)
    stderr = output_console(stderr=True)
    if options.attribute:
        return run_attribution(options, stderr)
    comparison = build_comparison(options, say=_progress(options))
    diffs = comparison["differences"]
    if diffs and not options.force:
        output.emit(_refusal(comparison), {"json": options.json_path})
        if on_github:
            github.publish(_refusal(comparison), options.fail_on, options.comment_file, options.max_chars, None)
        raise BadInput(not_comparable_message(comparison), f"{options.a} vs {options.b}")
    if on_github:
        github.attach_routes(comparison, options.survey.conf if options.survey else None)
    if diffs:
        fields = ", ".join(d["field"] for d in diffs)
        stderr.print(f"[bold yellow]warning:[/] runs are not comparable ({fields} differ); comparing anyway (--force)")
    output.emit(
        output.as_written(comparison), {"json": options.json_path, "markdown": options.markdown_path},
        terminal=None if options.quiet else output.STDOUT_ELSE_STDERR,
        options={"markdown": output.page(options.max_chars, options.json_path,
                                         "the comparison's JSON (`survey --compare A B --force --json PATH`)"),
                 output.TERMINAL: {"show_all": options.show_all}},
    )
    if on_github:
        github.publish(output.as_written(comparison), options.fail_on, options.comment_file, options.max_chars,
                       options.json_path)
    return exit_code(comparison, options.fail_on)


def run_attribution(options: CompareOptions, stderr) -> int:
    """``--compare A B --attribute``: A's failing cases classified against B (:mod:`.attribute`).

    Refuses (exit 2) only when the cases are not the same cases (harness, profiles,
    tolerances), unless ``--force``; exit 1 when a case fails only under A.
    """
    from flagos_doctor.compare import attribute_views  # noqa: F401  (registers the attribution's views)
    from flagos_doctor.compare.attribute import attribute, exit_code as attribution_exit

    arm_a, arm_b = load_arms(options, say=_progress(options))
    doc = attribute(arm_a.content, arm_b.content, label_a=options.a, label_b=options.b)
    doc["arms"]["a"].update(describe(arm_a))
    doc["arms"]["b"].update(describe(arm_b))
    if doc["differences"]:
        fields = ", ".join(f"{d['field']} ({short(d['a'])} vs {short(d['b'])})" for d in doc["differences"])
        if not options.force:
            raise BadInput(f"the cases are not the same cases: {fields}; --force attributes anyway", f"{options.a} vs {options.b}")
        stderr.print(f"[bold yellow]warning:[/] the cases differ ({fields}); attributing anyway (--force)")
    output.emit(
        output.as_written(doc), {"json": options.json_path, "markdown": options.markdown_path},
        terminal=None if options.quiet else output.STDOUT_ELSE_STDERR,
        options={"markdown": output.page(options.max_chars, options.json_path,
                                         "the attribution's JSON (`survey --compare A B --attribute --json PATH`)")},
    )
    return attribution_exit(doc, options.fail_on)
