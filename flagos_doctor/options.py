"""The options of each command, as plain dataclasses.

The CLI (:mod:`flagos_doctor.cli`) only parses the command line into these and hands them
to the command's ``run(options) -> exit code``; nothing else reads ``sys.argv``.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field

from flagos_doctor.markdown import DEFAULT_MAX_CHARS
from flagos_doctor.stacks import SURVEY_DEFAULT


@dataclass
class ProbeOptions:
    imports: list[str] = field(default_factory=list)  # --import MOD, in order
    stack: str | None = None  # a name of flagos_doctor.stacks or a module; None: the default-stack rule
    python: str = sys.executable
    watch: list[str] = field(default_factory=list)  # extra dotted names
    watch_file: str | None = None  # YAML file with more watches
    exercise: bool = True
    timeout: float = 120.0
    json_path: str | None = None  # PATH or "-"
    markdown_path: str | None = None  # PATH or "-"
    max_chars: int = DEFAULT_MAX_CHARS  # the Markdown's budget
    quiet: bool = False


@dataclass
class SurveyOptions:
    conf: str | None = None
    backend: str = "flagos_python"
    routes: str | None = None  # "flag_gems": the overloads flag_gems registers
    ops: list[str] = field(default_factory=list)
    stack: str = SURVEY_DEFAULT  # a name of flagos_doctor.stacks or an importable module with setup()
    device: str | None = None
    no_device_ok: bool = False  # survey where the stack's device reports none (survey/command.py)
    spec: str | None = None
    python: str = sys.executable
    workers: int | None = None  # None: as many as the machine holds (survey/sizing.py)
    devices: list[str] = field(default_factory=list)
    isolation: str = "pooled"  # pooled | per-overload
    tasks: str = "cases"  # cases | overloads: what a pooled worker takes at a time
    timeout: float = 120.0
    start_timeout: float = 600.0  # seconds for a worker to import the stack and say it is ready
    keep_env: bool = False
    shared_autotune: bool = True  # workers share Triton's autotuning results (TRITON_CACHE_AUTOTUNING)
    full_autotune: bool = False  # Triton's own budget to time each configuration (default: a short one)
    output: str | None = None  # the results file (journal is kept beside it)
    json_path: str | None = None
    census_path: str | None = None
    rerun: bool = False
    store: str | None = None
    no_store: bool = False
    hints: str | None = None  # a results file whose case seconds order this run (survey/history.py)
    quiet: bool = False
    repeats: int = 2  # times each failing case runs again, in fresh workers
    baseline: str = "native"  # native | none: run failing cases on the stack's native path
    native_route: str | None = None  # torch_fl / demo: the route the baseline forces (default per stack)
    torch_fl_commit: str | None = None  # provenance for a torch_fl build that records none


@dataclass
class CompareOptions:
    a: str = ""
    b: str = ""
    store: str | None = None
    force: bool = False
    fail_on: str = "regression"  # any | regression | never
    json_path: str | None = None
    markdown_path: str | None = None
    repo: str | None = None
    build_cmd: str | None = None
    survey: SurveyOptions | None = None  # how to survey an arm built from --repo
    max_chars: int = DEFAULT_MAX_CHARS
    show_all: bool = False  # the terminal view lists every transition and changed case
    quiet: bool = False
    attribute: bool = False  # classify A's failures against B (flag_gems alone): compare/attribute.py
    github: bool | None = None  # GitHub mode (compare/github.py); None: on under GITHUB_ACTIONS=true
    comment_file: str | None = None  # GitHub mode: the PR comment's body goes here


@dataclass
class ReportOptions:
    python: str = sys.executable
    stack: str | None = None  # as ProbeOptions.stack
    imports: list[str] = field(default_factory=list)
    survey: str | None = None
    compare: tuple[str, str] | None = None
    store: str | None = None
    json_path: str | None = None
    markdown_path: str | None = "-"
    timeout: float = 120.0
    torch_fl_commit: str | None = None  # provenance for a torch_fl build that records none
    force: bool = False  # attach a comparison of runs that are not comparable
    max_chars: int = DEFAULT_MAX_CHARS
    explain: str | None = None  # an `explain --json` document to attach


@dataclass
class SuiteOptions:
    a: str = ""
    b: str = ""
    store: str | None = None
    repo: str | None = None
    build_cmd: str | None = None
    test_cmd: str | None = None
    same_collection: bool = False
    flaky: str | None = None
    fail_on: str = "regression"
    json_path: str | None = None
    markdown_path: str | None = None
    max_chars: int = DEFAULT_MAX_CHARS
    quiet: bool = False


@dataclass
class MatrixOptions:
    results: list[str] = field(default_factory=list)  # files, store key prefixes, store queries
    store: str | None = None
    json_path: str | None = None
    csv_path: str | None = None
    markdown_path: str | None = None
    html_path: str | None = None  # the self-contained HTML page (matrix/html.py)
    max_chars: int = DEFAULT_MAX_CHARS
    quiet: bool = False


def options_json(options: SurveyOptions) -> str:
    """Survey options as JSON, every option carried: how ``survey --compare`` hands the
    user's options to the survey of a built arm (:mod:`flagos_doctor.survey.arm`)."""
    return json.dumps(dataclasses.asdict(options))


def options_from_json(text: str) -> SurveyOptions:
    return SurveyOptions(**json.loads(text))


@dataclass
class ExplainOptions:
    command: list[str] = field(default_factory=list)  # CMD [ARGS...], after --
    stack: str | None = None  # names the stack's code (phases); None: the default-stack rule
    python: str = sys.executable  # runs CMD when it is `python ...`; its folder holds console scripts
    watch: list[str] = field(default_factory=list)
    watch_file: str | None = None
    json_path: str | None = None  # a PATH: stdout is the program's
    markdown_path: str | None = None
    max_chars: int = DEFAULT_MAX_CHARS
    quiet: bool = False
    cause_status: int = 10  # exit status when a failure has a cause (errors.EXIT_CAUSE)


@dataclass
class CiMergeOptions:
    paths: list[str] = field(default_factory=list)  # each vendor's artifact folder (or comparison file)
    comment_file: str | None = None
    json_path: str | None = None
    quiet: bool = False
