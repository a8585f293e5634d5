"""The ``flagos-doctor`` command line: parses options and wires the parts together.

No logic lives here, and nothing here imports torch: every command's work happens in
child processes started with the Python the user chose (``--python``). Errors the user can
cause arrive as :class:`~flagos_doctor.errors.BadInput` and leave as one line and exit 2.

Each command function imports its ``<area>.command`` module itself, when it runs: ``--help``
then loads none of them (start-up stays about half a second).
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional, Tuple

import typer

from flagos_doctor import __version__, checks, stacks
from flagos_doctor.errors import EXIT_BAD_INPUT, BadInput, one_line, one_line_errors
from flagos_doctor import options as opts
from flagos_doctor.markdown import DEFAULT_MAX_CHARS, GITHUB_MAX_CHARS, MIN_MAX_CHARS

app = typer.Typer(
    name="flagos-doctor",
    help=(
        "Diagnose a torch_fl / FlagGems / Triton stack.\n\n"
        "probe: who patched torch.cuda, torch.device and Triton's driver, in what order.\n\n"
        "survey: does every overload the backends conf routes to FlagGems still run, "
        "and still agree with CPU? --compare A B diffs two runs.\n\n"
        "report: a Markdown environment report for a bug issue.\n\n"
        "suite: compare two pytest runs on the same collected set.\n\n"
        "matrix: an operator-support table from many survey runs.\n\n"
        "explain: run your own failing program or pytest under the probe's watch; why each failure happened.\n\n"
        "ci-merge: a pull-request check on many vendor boxes: their comparisons in one comment."
    ),
    no_args_is_help=True,
    add_completion=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    pretty_exceptions_enable=False,
)

PYTHON_HELP = "Interpreter of the stack under inspection (default: this one)."
#: --stack, the same for every command: the registry's names (flagos_doctor/stacks).
STACK_HELP = f"{stacks.choices()}. Default: {stacks.DEFAULT_RULE}."
TORCH_FL_COMMIT_HELP = "torch_fl's commit, for a build that records none (said as given by you)."
MAX_CHARS_HELP = (f"Budget of the Markdown, in characters, {MIN_MAX_CHARS:,} to {GITHUB_MAX_CHARS:,} "
                  "(GitHub refuses an issue body over 65,536).")


def _no_flag_placeholder() -> None:
    """Show no ``<bool>`` type beside an on/off flag in ``--help``, and no ``<list[str]>``
    beside an argument that names its own metavar: with click 8.2 and later, Typer's rich
    help prints the parameter's type, which a flag never takes and which says less than
    the metavar (``RESULTS...``)."""
    from typer.core import TyperArgument, TyperOption

    # Older Typer (0.9 to 0.12, as on the H200 image) has no such method, nor the placeholder.
    shown = getattr(TyperOption, "display_type_rich", None)
    if shown is None or getattr(shown, "_flagos_doctor", False):
        return

    def display_type_rich(self, ctx):
        return None if self.is_flag else shown(self, ctx)

    display_type_rich._flagos_doctor = True
    TyperOption.display_type_rich = display_type_rich
    shown_argument = getattr(TyperArgument, "display_type_rich", None)
    if shown_argument is not None:
        def argument_type_rich(self, ctx):
            return None if self.metavar else shown_argument(self, ctx)

        TyperArgument.display_type_rich = argument_type_rich


_no_flag_placeholder()


def _seconds(value: float) -> float:
    # inf and nan parse as floats; a BadInput here leaves through main() as one line.
    return checks.seconds(value, "--timeout")


def _start_seconds(value: float) -> float:
    return checks.seconds(value, "--start-timeout")


def _repeats(value: int) -> int:
    return checks.repeats(value)


def _max_chars(value: int) -> int:
    if value < MIN_MAX_CHARS:
        raise BadInput(f"{value} is too small: a page needs {MIN_MAX_CHARS:,} characters for its heading, "
                       "summary and the line naming the full record", "--max-chars")
    if value > GITHUB_MAX_CHARS:
        raise BadInput(f"{value} is more than GitHub takes in an issue or comment body ({GITHUB_MAX_CHARS:,})",
                       "--max-chars")
    return value


def _cause_status(value: int) -> int:
    if not 1 <= value <= 125:
        raise BadInput(f"{value} is not 1-125 (0 is success; 126 and up are the shell's and signals')",
                       "--cause-status")
    return value


def _version(value: bool):
    if value:
        typer.echo(f"flagos-doctor {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version."),
):
    pass


@app.command(
    epilog=(
        "Examples:\n\n"
        "  flagos-doctor probe --stack demo\n\n"
        "  flagos-doctor probe --stack torch_fl --json probe.json --markdown probe.md\n\n"
        "  flagos-doctor probe --import torch --import flag_gems --watch torch.cuda.Stream\n\n"
        "  FLAGOS_DEMO_SEED_BUG=1 flagos-doctor probe --stack demo   # the seed bug, replayed"
    )
)
def probe(
    imports: List[str] = typer.Option([], "--import", metavar="MOD", help="Module to import, in order (repeatable)."),
    stack: Optional[str] = typer.Option(None, "--stack", metavar="STACK", show_default=False, help=STACK_HELP),
    python: str = typer.Option(sys.executable, "--python", metavar="PYTHON", help=PYTHON_HELP, show_default=False),
    watch: List[str] = typer.Option([], "--watch", metavar="DOTTED.NAME", help="Another probe to watch (repeatable)."),
    watch_file: Optional[str] = typer.Option(None, "--watch-file", metavar="YAML", help="YAML file listing more probes to watch."),
    exercise: bool = typer.Option(True, "--exercise/--no-exercise", help="Exercise the device after the imports."),
    timeout: float = typer.Option(120.0, "--timeout", callback=_seconds, metavar="SECONDS", help="Seconds before the child is killed."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH|-", help="Write the JSON document."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", metavar="PATH|-", help="Write a Markdown report."),
    max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", metavar="N", callback=_max_chars, help=MAX_CHARS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No terminal view."),
):
    """Import the stack in a fresh process and record every write of every watched probe."""
    options = opts.ProbeOptions(
        imports=list(imports), stack=stack, python=python, watch=list(watch), watch_file=watch_file,
        exercise=exercise, timeout=timeout, json_path=json_path, markdown_path=markdown_path,
        max_chars=max_chars, quiet=quiet,
    )
    with one_line_errors():
        from flagos_doctor.probe import command

        code = command.run(options)
    raise typer.Exit(code or 0)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  flagos-doctor survey --stack demo\n\n"
        "  flagos-doctor survey --stack torch_fl --conf torch_fl/configs/backends_flaggems.conf -o before.json\n\n"
        "  flagos-doctor survey --stack flag_gems --routes flag_gems --workers 4\n\n"
        "  flagos-doctor survey --device cpu --conf backends_flaggems.conf   # self-check of the harness\n\n"
        "  flagos-doctor survey --compare before.json after.json\n\n"
        "  flagos-doctor survey --compare torch_fl.json flag_gems.json --attribute\n\n"
        "  flagos-doctor survey --compare 1adbc97 5e0f2aa --repo ~/Torch-FL --build-cmd 'python setup.py build_ext --inplace'"
    )
)
def survey(
    ctx: typer.Context,
    conf: Optional[str] = typer.Option(None, "--conf", metavar="PATH", help="Backends conf whose routes to survey."),
    backend: str = typer.Option("flagos_python", "--backend", metavar="CLASS", help="Backend class to survey from the conf."),
    routes: Optional[str] = typer.Option(None, "--routes", metavar="NAME", help="'flag_gems': the overloads flag_gems registers; 'stack': those the --stack registers."),
    ops: Optional[str] = typer.Option(None, "--ops", metavar="A,B", help="Only these overloads."),
    stack: str = typer.Option(stacks.SURVEY_DEFAULT, "--stack", metavar="STACK", show_default=False, help=STACK_HELP),
    device: Optional[str] = typer.Option(None, "--device", metavar="DEVICE", help="Device override ('cpu' self-checks the harness)."),
    no_device_ok: bool = typer.Option(False, "--no-device-ok", help="Survey even where the stack's device reports none (every case then fails); default: stop at once, exit 2."),
    spec: Optional[str] = typer.Option(None, "--spec", metavar="YAML", help="Survey spec: profiles, tolerances, random ops."),
    python: str = typer.Option(sys.executable, "--python", metavar="PYTHON", help=PYTHON_HELP, show_default=False),
    workers: Optional[int] = typer.Option(None, "--workers", metavar="N", help="Worker processes (they may share a device); default: one per core, as many as memory and the device hold."),
    devices: Optional[str] = typer.Option(None, "--devices", metavar="0,1", help="Device indices to spread workers over."),
    isolation: str = typer.Option("pooled", "--isolation", metavar="pooled|per-overload", help="pooled | per-overload (upstream's cost model, for benchmarks)."),
    tasks: str = typer.Option("cases", "--tasks", metavar="cases|overloads", help="What a pooled worker takes at a time: cases (an overload's slow cases run side by side) | overloads (its kernels compile once, in one worker)."),
    timeout: float = typer.Option(120.0, "--timeout", callback=_seconds, metavar="SECONDS", help="Seconds per case before its worker is replaced."),
    start_timeout: float = typer.Option(600.0, "--start-timeout", callback=_start_seconds, metavar="SECONDS", help="Seconds for a worker to import the stack and start."),
    keep_env: bool = typer.Option(False, "--keep-env", help="Keep stray FLAGOS_OP_* variables."),
    no_shared_autotune: bool = typer.Option(False, "--no-shared-autotune", help="Each worker autotunes Triton kernels for itself (default: they share results through Triton's cache, TRITON_CACHE_AUTOTUNING=1)."),
    full_autotune: bool = typer.Option(False, "--full-autotune", help="Autotuners time each configuration for Triton's own 25+100 ms (default: 0+2 ms; every configuration is still compiled and run, the fastest still wins)."),
    output: Optional[str] = typer.Option(None, "--output", "-o", metavar="PATH", help="Results file (resumed if it exists)."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH|-", help="Also write the results JSON here."),
    census_path: Optional[str] = typer.Option(None, "--census", metavar="PATH", help="Write the case census."),
    rerun: bool = typer.Option(False, "--rerun", help="Re-run the selected overloads in an existing results file."),
    store: Optional[str] = typer.Option(None, "--store", metavar="DIR", help="Results store (default: $FLAGOS_DOCTOR_STORE, else results/ in ~/.local/share/flagos-doctor)."),
    no_store: bool = typer.Option(False, "--no-store", help="Leave the results store alone: do not file this run, nor take timing hints from earlier runs."),
    hints: Optional[str] = typer.Option(None, "--hints", metavar="RESULTS.json", help="A survey results file whose case times order this run (slow cases first); it changes no case."),
    compare: Optional[Tuple[str, str]] = typer.Option(None, "--compare", metavar="A B", help="Compare two runs: results files or commit prefixes."),
    force: bool = typer.Option(False, "--force", help="Compare even when the runs are not comparable."),
    fail_on: str = typer.Option("regression", "--fail-on", metavar="any|regression|never", help="any | regression | never (with --compare)."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", metavar="PATH|-", help="Markdown (with --compare)."),
    max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", metavar="N", callback=_max_chars, help=MAX_CHARS_HELP),
    show_all: bool = typer.Option(False, "--all", help="Terminal view of --compare: every transition and changed case, not only the summary and the largest groups."),
    repo: Optional[str] = typer.Option(None, "--repo", metavar="PATH", help="Git checkout to build missing arms from (with --compare)."),
    build_cmd: Optional[str] = typer.Option(None, "--build-cmd", metavar="CMD", help="Build command run in each arm's worktree."),
    attribute: bool = typer.Option(False, "--attribute", help="With --compare A B: whose is each failure of A (torch_fl) against B, the same cases through flag_gems alone."),
    github: Optional[bool] = typer.Option(None, "--github/--no-github", help="With --compare: GitHub Actions mode (default: on under GITHUB_ACTIONS=true): the Markdown into $GITHUB_STEP_SUMMARY, ::error/::warning annotations on the conf lines."),
    comment_file: Optional[str] = typer.Option(None, "--comment-file", metavar="PATH", help="GitHub mode: write a pull-request comment's body here (under 65,536 characters; its first line says whether the PR is safe)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No progress bar or summary."),
    repeats: int = typer.Option(2, "--repeats", metavar="N", callback=_repeats, help="Run each WRONG/ERROR/CRASH/TIMEOUT case this many more times, in fresh workers; differing outcomes make it FLAKY."),
    baseline: str = typer.Option("native", "--baseline", metavar="native|none", help="native | none: run failing cases on the stack's native path (stock torch for flag_gems); a failure it shares does not count."),
    native_route: Optional[str] = typer.Option(None, "--native-route", metavar="BACKEND", help="torch_fl/demo: the route the baseline forces with FLAGOS_OP_* (default: cuda for torch_fl, cpu for the demo)."),
    torch_fl_commit: Optional[str] = typer.Option(None, "--torch-fl-commit", metavar="SHA", help=TORCH_FL_COMMIT_HELP),
):
    """Run every overload the conf routes to FlagGems on the device and on CPU, and judge it."""
    if not compare:
        with one_line_errors():
            _refuse_compare_only(ctx)
    survey_options = opts.SurveyOptions(
        conf=conf, backend=backend, routes=routes,
        ops=checks.names(ops, "--ops"),
        stack=stack, device=device, no_device_ok=no_device_ok, spec=spec, python=python, workers=workers,
        devices=checks.devices(devices),
        isolation=isolation, tasks=tasks, timeout=timeout, start_timeout=start_timeout, keep_env=keep_env,
        shared_autotune=not no_shared_autotune, full_autotune=full_autotune, output=output, json_path=json_path,
        census_path=census_path, rerun=rerun, store=store, no_store=no_store, hints=hints, quiet=quiet,
        repeats=repeats, baseline=baseline, native_route=native_route,
        torch_fl_commit=torch_fl_commit,
    )
    if compare:
        compare_options = opts.CompareOptions(
            a=compare[0], b=compare[1], store=store, force=force, fail_on=fail_on, json_path=json_path,
            markdown_path=markdown_path, repo=repo, build_cmd=build_cmd, survey=survey_options,
            max_chars=max_chars, show_all=show_all, quiet=quiet, attribute=attribute,
            github=github, comment_file=comment_file,
        )
        with one_line_errors():
            from flagos_doctor.compare import command as compare_command

            code = compare_command.run(compare_options)
        raise typer.Exit(code or 0)
    with one_line_errors():
        from flagos_doctor.survey import command

        code = command.run(survey_options)
    raise typer.Exit(code or 0)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  flagos-doctor report > issue.md\n\n"
        "  flagos-doctor report --stack torch_fl --survey after.json --json bundle.json\n\n"
        "  flagos-doctor report --compare before.json after.json\n\n"
        "  flagos-doctor report --compare flag_gems-4.2.0 flag_gems-5.0.2 --force --max-chars 60000\n\n"
        "  flagos-doctor report --explain why.json   # with `explain --json why.json -- CMD`"
    )
)
def report(
    python: str = typer.Option(sys.executable, "--python", metavar="PYTHON", help=PYTHON_HELP, show_default=False),
    stack: Optional[str] = typer.Option(None, "--stack", metavar="STACK", show_default=False, help=f"Stack to describe and probe. {STACK_HELP}"),
    imports: List[str] = typer.Option([], "--import", metavar="MOD", help="Modules to probe, in order."),
    survey_path: Optional[str] = typer.Option(None, "--survey", metavar="FILE", help="Add a survey summary."),
    compare: Optional[Tuple[str, str]] = typer.Option(None, "--compare", metavar="A B", help="Add a survey comparison."),
    force: bool = typer.Option(False, "--force", help="Attach the comparison even when the runs are not comparable."),
    store: Optional[str] = typer.Option(None, "--store", metavar="DIR", help="Results store for --compare."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH|-", help="Write the JSON bundle."),
    markdown_path: Optional[str] = typer.Option("-", "--markdown", metavar="PATH|-", help="Markdown output (default: stdout)."),
    max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", metavar="N", callback=_max_chars, help=MAX_CHARS_HELP),
    timeout: float = typer.Option(120.0, "--timeout", callback=_seconds, metavar="SECONDS", help="Seconds for the probe child."),
    torch_fl_commit: Optional[str] = typer.Option(None, "--torch-fl-commit", metavar="SHA", help=TORCH_FL_COMMIT_HELP),
    explain: Optional[str] = typer.Option(None, "--explain", metavar="RESULT.json", help="Attach an `explain --json` document: why your program failed."),
):
    """Markdown for a GitHub bug issue: environment, runtime configuration, probe findings."""
    options = opts.ReportOptions(
        python=python, stack=stack, imports=list(imports), survey=survey_path, compare=compare,
        store=store, json_path=json_path, markdown_path=markdown_path, timeout=timeout,
        torch_fl_commit=torch_fl_commit, force=force,
        max_chars=max_chars, explain=explain,
    )
    with one_line_errors():
        from flagos_doctor.report import command

        code = command.run(options)
    raise typer.Exit(code or 0)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  flagos-doctor suite --compare before.xml after.xml\n\n"
        "  flagos-doctor suite --compare 1adbc97 5e0f2aa --repo ~/Torch-FL --build-cmd 'python setup.py build_ext --inplace' "
        "--test-cmd 'pytest tests/unit -q'"
    )
)
def suite(
    compare: Tuple[str, str] = typer.Option(..., "--compare", metavar="A B", help="JUnit XML files or commit prefixes."),
    store: Optional[str] = typer.Option(None, "--store", metavar="DIR", help="Results store."),
    repo: Optional[str] = typer.Option(None, "--repo", metavar="PATH", help="Git checkout to run missing arms from."),
    build_cmd: Optional[str] = typer.Option(None, "--build-cmd", metavar="CMD", help="Build command run in each worktree."),
    test_cmd: Optional[str] = typer.Option(None, "--test-cmd", metavar="CMD", help="Test command run in each worktree."),
    same_collection: bool = typer.Option(False, "--same-collection", help="Refuse (exit 2) when the collected sets differ."),
    flaky: Optional[str] = typer.Option(None, "--flaky", metavar="FILE", help="Tests known to be flaky, reported apart."),
    fail_on: str = typer.Option("regression", "--fail-on", metavar="any|regression|never", help="any | regression | never."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH|-", help="Write the JSON comparison."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", metavar="PATH|-", help="Write Markdown."),
    max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", metavar="N", callback=_max_chars, help=MAX_CHARS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No terminal view."),
):
    """Compare two pytest runs (JUnit XML), checking first that they collected the same tests."""
    options = opts.SuiteOptions(
        a=compare[0], b=compare[1], store=store, repo=repo, build_cmd=build_cmd, test_cmd=test_cmd,
        same_collection=same_collection, flaky=flaky, fail_on=fail_on, json_path=json_path,
        markdown_path=markdown_path, max_chars=max_chars, quiet=quiet,
    )
    with one_line_errors():
        from flagos_doctor.suite import command

        code = command.run(options)
    raise typer.Exit(code or 0)


@app.command(
    epilog=(
        "Examples:\n\n"
        "  flagos-doctor matrix surveys/results/flag_gems-4.2.0-h200.json surveys/results/flag_gems-5.0.2-h200-harness1.json\n\n"
        "  flagos-doctor matrix flag_gems- --markdown support.md --csv support.csv   # every run filed under flag_gems-*\n\n"
        "  flagos-doctor matrix 'stack=torch_fl,device=*MetaX*' --json matrix.json\n\n"
        "  flagos-doctor matrix surveys/results --html matrix.html   # a folder of results files, as one page"
    )
)
def matrix(
    results: List[str] = typer.Argument(..., metavar="RESULTS...", help="Results files, folders of results files, store key prefixes (a commit, flag_gems-5), or store queries FIELD=GLOB[,...] over key, stack, version, device, commit, fingerprint."),
    store: Optional[str] = typer.Option(None, "--store", metavar="DIR", help="Results store (default: $FLAGOS_DOCTOR_STORE, else results/ in ~/.local/share/flagos-doctor)."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH|-", help="Write the matrix JSON."),
    csv_path: Optional[str] = typer.Option(None, "--csv", metavar="PATH|-", help="Write the matrix as CSV."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", metavar="PATH|-", help="Write Markdown."),
    html_path: Optional[str] = typer.Option(None, "--html", metavar="PATH|-", help="Write one self-contained HTML page: a heat map with filters, no network at view time."),
    max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", metavar="N", callback=_max_chars, help=MAX_CHARS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No terminal view."),
):
    """An operator-support table: a row per overload, a column per survey run."""
    options = opts.MatrixOptions(
        results=list(results), store=store, json_path=json_path, csv_path=csv_path,
        markdown_path=markdown_path, html_path=html_path, max_chars=max_chars, quiet=quiet,
    )
    with one_line_errors():
        from flagos_doctor.matrix import command

        code = command.run(options)
    raise typer.Exit(code or 0)


@app.command(
    context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    epilog=(
        "Exit code: 10 (--cause-status) when a failure of the program has a cause (a read of a probe "
        "the stack redirected, on the failure's path, or a guard that skipped what it needed); "
        "otherwise the program's own (128+N after signal N); 2 for bad usage. The program's stdin, stdout, stderr pass through; the view goes to stderr.\n\n"
        "Examples:\n\n"
        "  flagos-doctor explain -- python repro.py\n\n"
        "  flagos-doctor explain --stack torch_fl --json why.json -- python -m pytest tests/test_compile.py -x\n\n"
        "  flagos-doctor explain --watch torch.cuda.Stream --markdown why.md -- pytest -k compile\n\n"
        "  flagos-doctor report --explain why.json > issue.md   # attach it to a bug report"
    ),
)
def explain(
    command: List[str] = typer.Argument(..., metavar="-- CMD [ARGS...]", help="The Python program to run: python repro.py, python -m pytest ..., or a console script of --python."),
    stack: Optional[str] = typer.Option(None, show_default=False, help=f"Whose code the phases name. {STACK_HELP}"),
    python: str = typer.Option(sys.executable, show_default=False, help="Interpreter that runs CMD's `python`; its folder holds CMD's console scripts (default: this one)."),
    watch: List[str] = typer.Option([], "--watch", metavar="DOTTED.NAME", help="Another probe to watch (repeatable)."),
    watch_file: Optional[str] = typer.Option(None, "--watch-file", metavar="YAML", help="YAML file listing more probes to watch."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH", help="Write the JSON document (schema flagos-doctor/explain/1)."),
    markdown_path: Optional[str] = typer.Option(None, "--markdown", metavar="PATH", help="Write Markdown for an issue."),
    max_chars: int = typer.Option(DEFAULT_MAX_CHARS, "--max-chars", metavar="N", callback=_max_chars, help=MAX_CHARS_HELP),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No terminal view."),
    cause_status: int = typer.Option(10, "--cause-status", metavar="N", callback=_cause_status,
                                     help="Exit status when a failure has a cause, 1-125 (10: apart from Python's 1 and pytest's 0-5)."),
):
    """Run your own failing Python program (or pytest) with the probe's watch installed from
    interpreter start; say which redirected probe each failure read on its way."""
    options = opts.ExplainOptions(
        command=list(command), stack=stack, python=python, watch=list(watch), watch_file=watch_file,
        json_path=json_path, markdown_path=markdown_path, max_chars=max_chars, quiet=quiet,
        cause_status=cause_status,
    )
    with one_line_errors():
        from flagos_doctor.explain import command as explain_command

        code = explain_command.run(options)
    raise typer.Exit(code)


class _HelpStream:
    """Standard output while ``--help`` prints outside a terminal: the help is drawn wide
    (no option cut with "...", no example broken at 80 columns) and each line's padding is
    dropped, so a file or a pipe gets the lines as they are meant."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        return self._stream.write("\n".join(line.rstrip() for line in text.split("\n")))

    def __getattr__(self, name):
        return getattr(self._stream, name)


#: The width of ``--help`` piped where no terminal says its own: what a pager shows unwrapped.
HELP_WIDTH = 100


@app.command(
    "ci-merge",
    epilog="Example:\n\n  flagos-doctor ci-merge artifacts/pr-check-* --comment-file comment.md",
)
def ci_merge(
    paths: List[str] = typer.Argument(..., metavar="DIR...", help="Each vendor box's artifact folder holding its comparison.json (the vendor: the folder's name less pr-check-)."),
    comment_file: Optional[str] = typer.Option(None, "--comment-file", metavar="PATH", help="Write the one PR comment here: its first line says whether the PR is safe, then a row per vendor."),
    json_path: Optional[str] = typer.Option(None, "--json", metavar="PATH|-", help="Write the merge document."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="No terminal view."),
):
    """A pull-request check on many vendor boxes: their comparisons in one comment."""
    options = opts.CiMergeOptions(paths=list(paths), comment_file=comment_file, json_path=json_path, quiet=quiet)
    with one_line_errors():
        from flagos_doctor.ci import command as ci_command

        code = ci_command.run(options)
    raise typer.Exit(code or 0)


def _help_outside_a_terminal(argv: list[str]) -> bool:
    wants_help = not argv or any(arg in ("--help", "-h") for arg in argv)
    return wants_help and not sys.stdout.isatty() and not (os.environ.get("TERMINAL_WIDTH") or os.environ.get("COLUMNS"))


def _help_width() -> int:
    """The terminal's width when stdout is piped (``--help | less``: stderr or stdin is still
    the terminal), else :data:`HELP_WIDTH`."""
    for stream in (sys.stderr, sys.stdin):
        try:
            if stream is not None and stream.isatty():
                return os.get_terminal_size(stream.fileno()).columns
        except (OSError, ValueError, AttributeError):
            continue
    return HELP_WIDTH


#: ``survey`` options that mean something only with ``--compare A B`` (refused without it, as
#: pip-audit refuses flags that do not apply, rather than ignored).
COMPARE_ONLY = ("force", "fail_on", "markdown_path", "max_chars", "show_all", "repo", "build_cmd", "attribute")


def _refuse_compare_only(ctx) -> None:
    """BadInput naming the first ``--compare``-only option given on the command line."""
    try:
        from typer._click.core import ParameterSource
    except ImportError:
        from click.core import ParameterSource

    for param in ctx.command.params:
        if param.name in COMPARE_ONLY and ctx.get_parameter_source(param.name) == ParameterSource.COMMANDLINE:
            raise BadInput("applies only with --compare A B", param.opts[0])


def _usage_line(exc) -> str:
    """A click usage error as one line: what is wrong, and where to read the usage."""
    names = []
    ctx = getattr(exc, "ctx", None)
    while ctx is not None and ctx.parent is not None:  # the root's name is how we were started
        names.insert(0, ctx.info_name)
        ctx = ctx.parent
    return f"flagos-doctor: error: {one_line(exc.format_message())} (see {' '.join(['flagos-doctor', *names])} --help)"


def main() -> None:
    """The entry point: every stream the CLI writes goes through the scrubber
    (:class:`flagos_doctor.redact.ScrubbingStream`), and every usage error, bad input or bug
    leaves as one line (exit 2, 2, 3)."""
    try:  # Typer 0.2x carries its own click; older Typer (the H200 image) uses click itself
        from typer._click import exceptions as click_errors
    except ImportError:
        from click import exceptions as click_errors

    from flagos_doctor import redact, workflow

    if _help_outside_a_terminal(sys.argv[1:]):
        from typer import rich_utils

        rich_utils.MAX_WIDTH = _help_width()
        sys.stdout = _HelpStream(sys.stdout)
    if workflow.on_runner(sys.argv[1:], os.environ):  # every line GitHub's runner reads: no command of a user's
        sys.stdout, sys.stderr = workflow.guarded(sys.stdout), workflow.guarded(sys.stderr)
    sys.stdout = redact.ScrubbingStream(sys.stdout)
    sys.stderr = redact.ScrubbingStream(sys.stderr)
    try:
        code = app(standalone_mode=False)
    except getattr(click_errors, "NoArgsIsHelpError", ()) as exc:  # no command: the help, as before
        typer.echo(exc.ctx.get_help())
        code = 0
    except click_errors.UsageError as exc:
        typer.echo(_usage_line(exc), err=True)
        code = EXIT_BAD_INPUT
    except (KeyboardInterrupt, getattr(click_errors, "Abort", KeyboardInterrupt)):
        typer.echo("flagos-doctor: interrupted", err=True)
        code = 130
    except BadInput as exc:  # raised while parsing, before a command ran
        typer.echo(f"flagos-doctor: error: {one_line(str(exc))}", err=True)
        code = EXIT_BAD_INPUT
    except click_errors.ClickException as exc:
        typer.echo(f"flagos-doctor: error: {one_line(exc.format_message())}", err=True)
        code = exc.exit_code
    sys.exit(code if isinstance(code, int) else 0)


if __name__ == "__main__":
    main()
