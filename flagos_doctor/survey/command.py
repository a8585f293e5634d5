"""``flagos-doctor survey``: run every overload of a route set on the device, judge it, keep it.

A short sequence of named steps (:func:`_survey`): plan (the route set, the selection, the
journal), start (the first worker, the provenance, :mod:`.provenance`; the tasks in order,
:mod:`.history`), run (the workers, :mod:`.pool`), confirm (:mod:`.confirm`), file (the
results file and its journal, :mod:`flagos_doctor.results.resultsfile`, and the store) and
render (every output through
:func:`flagos_doctor.output.emit`; the summary is :mod:`.progress`'s view). The results
document is :mod:`flagos_doctor.results.document`'s. Never imports torch.

Exit status: 0 when every selected overload got a verdict and no case crashed or timed out
(whatever the verdicts: a survey measures; ``--compare`` judges), 1 when a case crashed or
timed out (the stack's own failure: a worker killed by a signal, or a hang) or when the
survey could not complete (the stack would not start, workers kept dying at start, an
internal error), 2 for bad input (including a results file made with another setup),
130 when interrupted (the results file and journal are kept: run the same command again
to resume).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timezone

from flagos_doctor import checks, lock, stacks
from flagos_doctor.errors import EXIT_BAD_INPUT, EXIT_FINDING, EXIT_OK, BadInput
from flagos_doctor.options import SurveyOptions
from flagos_doctor import output  # progress and results register the survey's views
from flagos_doctor.store import Culprits, Store, safe_name
from flagos_doctor.results import comparable, document as results, model
from flagos_doctor.survey import confirm, forkserver, history, pool as pool_module, progress, provenance, replay, routes, sizing
from flagos_doctor.results.resultsfile import ResultsFile
from flagos_doctor.results.verdicts import verdict as verdict_of

ISOLATIONS = ("pooled", "per-overload")
TASK_SIZES = ("cases", "overloads")
BASELINES = ("native", "none")


def default_output(stack: str) -> str:
    """``./flagos-survey-<stack>.json``: one results file per stack in the current folder."""
    return f"flagos-survey-{safe_name(stack)}.json"


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _validate(options: SurveyOptions) -> None:
    stacks.get(options.stack)  # a built-in or a module name, else BadInput naming the built-ins
    if options.isolation not in ISOLATIONS:
        raise BadInput(f"--isolation must be one of {', '.join(ISOLATIONS)}, not {options.isolation!r}")
    if options.tasks not in TASK_SIZES:
        raise BadInput(f"--tasks must be one of {', '.join(TASK_SIZES)}, not {options.tasks!r}")
    if options.routes is not None and options.routes not in stacks.route_sources():
        raise BadInput(f"--routes must be one of {', '.join(stacks.route_sources())}, not {options.routes!r}")
    if options.routes and options.conf:
        raise BadInput("give --conf or --routes, not both")
    checks.seconds(options.timeout, "--timeout")
    checks.seconds(options.start_timeout, "--start-timeout")
    if options.baseline not in BASELINES:
        raise BadInput(f"--baseline must be one of {', '.join(BASELINES)}, not {options.baseline!r}")
    checks.repeats(options.repeats)
    asked = min(options.start_timeout, 60.0)  # a hanging --python is refused within --start-timeout
    checks.interpreter(options.python, "--python", asked)
    stacks.check(options.stack, options.python, timeout=asked)
    if options.hints is not None and not options.hints:
        raise BadInput("--hints needs a survey results file")
    # Every place the survey will write, tried now: not after an hour of cases.
    checks.writable_file(options.output if options.output is not None else default_output(options.stack), "--output")
    checks.writable_file(options.census_path, "--census")
    checks.writable_file(options.json_path, "--json")
    if not options.no_store:
        checks.writable_folder(Store(options.store).root, "--store")


def _load_spec(path: str | None):
    from flagos_doctor.survey.spec import load_spec

    return load_spec(path)  # BadInput naming the file: missing, special, malformed


def _listing_source(options: SurveyOptions, stack: stacks.Stack) -> str | None:
    """Where the route set comes from when no conf gives it: a stack that lists what it
    registers (``--routes``, :func:`flagos_doctor.stacks.route_sources`) or ``stack``.

    None when a conf gives it. Raises BadInput when neither can.
    """
    if options.conf:
        return None
    if options.routes:
        return options.routes
    if stack.default_conf():
        return None
    if stack.default_listing:
        return stack.default_listing
    raise BadInput(f"stack {options.stack!r}: say which overloads to survey with --conf PATH or --routes stack")


def _conf_route_set(options: SurveyOptions, stack: stacks.Stack) -> routes.RouteSet:
    return routes.from_conf(options.conf or stack.default_conf(), options.backend)


def _route_set(options: SurveyOptions, config: pool_module.WorkerConfig) -> routes.RouteSet:
    """The route set, listing it in a child of its own when a stack has to say it."""
    source = _listing_source(options, config.resolved)
    if source is None:
        return _conf_route_set(options, config.resolved)
    listing = dataclasses.replace(config, stack=options.stack if source == "stack" else source, purpose="listing")
    lister = pool_module.Pool(listing, 1)
    try:
        worker = lister.start_worker(0, list_only=True)
        overloads = worker.registered()
    except pool_module.StackFailed as exc:
        _stack_failed(exc, listing.stack)
    finally:
        lister.close()
    return routes.from_listing(source, overloads, options.backend)


def _start_first(workers: pool_module.Pool, stack: str) -> pool_module.WorkerProcess:
    try:
        return workers.start_worker(0)
    except pool_module.StackFailed as exc:
        _stack_failed(exc, stack)


def resolve_conf(options: SurveyOptions) -> None:
    """A bare ``--conf NAME`` (the README's ``backends_flaggems.conf``) that is not in the
    current folder: the stack's own ``configs/NAME`` (torch_fl's), said on stderr; where
    neither has it, BadInput naming both places."""
    conf = options.conf
    if not conf or os.sep in conf or os.path.lexists(conf):
        return
    folder = stacks.get(options.stack).configs_folder(options.python)
    if folder is None:
        return  # the conf reader says: no such file
    found = os.path.join(folder, conf)
    if not os.path.isfile(found):
        raise BadInput(f"no {conf} in the current folder nor in the {options.stack} stack's {folder}", "--conf")
    options.conf = found
    if not options.quiet:
        print(f"flagos-doctor: --conf {conf}: {found} (the {options.stack} stack's; none in the current folder)",
              file=sys.stderr)


def refuse_absent_device(options, device: dict) -> None:
    """BadInput when the stack's device reports no device here (torch_fl on a machine without
    its card): every case would fail, one by one, for minutes. ``--no-device-ok`` surveys anyway."""
    if options.no_device_ok or device.get("type") in (None, "cpu") or device.get("count") != 0:
        return
    raise BadInput(f"the {options.stack} stack's device {device.get('string')!r} reports none here "
                   f"(torch.{device['type']}.device_count() answers 0): every case would fail; "
                   "--device cpu self-checks the harness, --no-device-ok surveys anyway", "--stack")


def _stack_failed(exc: pool_module.StackFailed, stack: str):
    if exc.missing:
        raise stacks.not_importable(stack)
    if exc.bad_input:
        raise BadInput(exc.bad_input, exc.where)
    raise SurveyFailed(str(exc))


class SurveyFailed(Exception):
    """The survey could not run (exit 1)."""


def _interrupt_on_sigterm() -> None:
    """SIGTERM (``timeout``, a CI job cancelled) ends the survey as Ctrl-C does: workers
    stopped, the results file written with what was recorded, the journal kept to resume."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return

    def handler(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, handler)


def run(options: SurveyOptions) -> int:
    _interrupt_on_sigterm()
    try:
        return _run(options)
    except SurveyFailed as exc:
        print(f"flagos-doctor: survey failed: {exc}", file=sys.stderr)
        return EXIT_FINDING


def _run(options: SurveyOptions) -> int:
    _validate(options)
    resolve_conf(options)
    # The results file by what it is, not by the name given: through a symlink (dangling
    # too) the file written, locked and resumed is the one it points to, so two surveys
    # reaching one file by two names hold one lock.
    options = dataclasses.replace(options, output=os.path.realpath(options.output or default_output(options.stack)))
    # A results file whose case seconds order this run (:mod:`.history`): read and checked
    # before any work, a bad one is one line.
    given_hints = results.load(options.hints) if options.hints else None
    spec = _load_spec(options.spec)
    config = pool_module.WorkerConfig(
        python=options.python, stack=options.stack, device=options.device,
        spec=os.path.abspath(options.spec) if options.spec else None,
        conf=os.path.abspath(options.conf) if options.conf else None,
        backend=options.backend, timeout=options.timeout, keep_env=options.keep_env,
        devices=list(options.devices), startup_timeout=options.start_timeout,
        shared_autotune=options.shared_autotune, full_autotune=options.full_autotune,
        log=pool_module.WorkerLog(),
    )
    # Its workers forked from one import of what the stack allows first (survey/forkserver.py).
    config.forks = forkserver.ForkServers.for_stack(config.resolved)
    # One survey at a time writes a results file and its journal.
    with lock.hold(options.output or default_output(options.stack), "--output"):
        choice = sizing.choose(options.workers, sizing.Machine.here(), options.stack,
                               per_overload=options.isolation == "per-overload")
        workers = pool_module.Pool(config, choice.workers, per_overload=options.isolation == "per-overload")
        try:
            return _survey(Survey(options, spec, spec.to_dict(), config, workers, choice, given_hints))
        finally:
            workers.close()
            config.forks.close()  # after every worker: a forked one ends with its server


def _say_workers(options: SurveyOptions, choice: sizing.Choice) -> None:
    """The worker count picked, when the user left it to us; a cap or a lowering, always."""
    if choice.requested is None and not options.quiet:
        print(f"flagos-doctor: workers: {choice.why}", file=sys.stderr)
    else:
        for note in choice.notices:
            print(f"flagos-doctor: {note}", file=sys.stderr)


@dataclass
class Survey:
    """One survey run: what its steps share. Each step owns the fields it fills in."""

    options: SurveyOptions
    spec: object
    spec_dict: dict
    config: pool_module.WorkerConfig
    workers: pool_module.Pool
    choice: sizing.Choice
    given_hints: dict | None
    # plan
    route_set: routes.RouteSet | None = None
    selected: list[str] = field(default_factory=list)
    journal: ResultsFile | None = None  # the results file and its journal
    first: pool_module.WorkerProcess | None = None
    checks: stacks.Checks = field(default_factory=stacks.Checks)  # the stack's, started beside the workers
    # start
    started: str = ""
    clock: float = 0.0
    this_run: dict = field(default_factory=dict)
    provenance: dict = field(default_factory=dict)
    measured: dict = field(default_factory=dict)
    tasks: list = field(default_factory=list)
    slow: int = 0
    expected: list = field(default_factory=list)  # each task's seconds last time (None: not timed)
    # run
    confirmation: confirm.Confirmation | None = None  # the failures' repeats and baseline, streamed
    fatal: dict | None = None
    interrupted: bool = False
    already_complete: bool = False  # the results file has every selected overload: nothing to run
    # file
    done: bool = False
    doc: dict | None = None
    unwritten: BadInput | None = None  # the store could not be written (said after the summary)

    def document(self) -> dict:
        """The results document of what is recorded so far."""
        return self.journal.document()


def _survey(survey: Survey) -> int:
    """The survey's steps, in order; the workers are closed before the results are filed."""
    _plan(survey)
    if survey.already_complete:
        return _already_complete(survey)
    try:
        try:
            _start(survey)
            _run_tasks(survey)
        finally:
            survey.workers.close()
        if not survey.interrupted and not survey.fatal:
            survey.interrupted = _confirm(survey)
    finally:
        survey.checks.stop()
        if survey.confirmation is not None:
            survey.confirmation.stop()  # its workers end with the survey, whatever ended it
    _file(survey)
    return _render(survey)


def _plan(survey: Survey) -> None:
    """The route set, the overloads selected, and the journal of the results file, checked
    against this setup before any case runs. When the survey's own stack lists the routes,
    its first worker does, then works on."""
    options, workers = survey.options, survey.workers
    source = _listing_source(options, survey.config.resolved)
    if source is not None and (source == "stack" or options.stack == source):
        _start_checks(survey)
        workers.prestart(len(options.ops) if options.ops else survey.choice.workers)
        survey.first = _start_first(workers, options.stack)
        try:
            survey.route_set = routes.from_listing(source, survey.first.registered(), options.backend)
        except pool_module.StackFailed as exc:
            _stack_failed(exc, options.stack)
    else:
        survey.route_set = _route_set(options, survey.config)
    survey.selected = routes.select(survey.route_set, options.ops)
    output = options.output or default_output(options.stack)
    survey.journal = ResultsFile(output, provenance.setup_record(options, survey.route_set, survey.spec, survey.spec_dict),
                                 survey.route_set.overloads)
    survey.journal.load()  # refuses another setup before any case runs
    if survey.first is None and _nothing_to_run(options, survey.journal, survey.selected):
        survey.already_complete = True  # no worker is started at all
        return
    if survey.first is None:  # a slot for each overload that has work, at most
        _start_checks(survey)
        workers.prestart(len([name for name in survey.selected if options.rerun or name not in survey.journal.finished]))


def _start_checks(survey: Survey) -> None:
    survey.checks = survey.config.resolved.start_checks(survey.config.python, survey.config.env(0))


def _start(survey: Survey) -> None:
    """The first worker up, what it found checked and recorded, this run's provenance, and
    the tasks in the order they run."""
    options, journal, workers = survey.options, survey.journal, survey.workers
    survey.started, survey.clock = _now(), time.monotonic()
    if survey.first is None:
        survey.first = _start_first(workers, options.stack)
    found = provenance.check_stack(survey.checks, survey.first.ready["provenance"])
    refuse_absent_device(options, found.get("device") or {})
    lowered = sizing.after_first_worker(survey.choice, found.get("device") or {}, max(1, len(options.devices)))
    if lowered is not None:
        workers.lower_limit(lowered)
    _say_workers(options, survey.choice)  # said once the input is known good: a usage error stays one line
    found = provenance.stack_part(options, survey.config, found)
    journal.extend(provenance.found_record(found))
    if options.rerun:
        journal.drop(survey.selected)
    survey.measured = journal.measured = _measured(journal.previous)
    task_size = options.tasks if options.isolation == "pooled" else "overloads"  # per-overload: whole overloads
    survey.this_run = provenance.this_run(options, survey.choice, survey.config, workers, survey.started,
                                          len(survey.selected), task_size)
    survey.provenance = provenance.document_provenance(found, survey.route_set, survey.spec_dict, options,
                                                       survey.config, journal.previous, survey.this_run, survey.started)
    journal.provenance = survey.provenance
    tasks = plan_tasks([name for name in survey.selected if name not in journal.finished], journal,
                       [profile.name for profile in survey.spec.profiles], task_size)
    hints, sticky, sources = _timing_hints(options, journal, survey.given_hints)
    survey.tasks, survey.slow = history.slow_first(tasks, hints, sticky)
    survey.expected = [history.task_seconds(task, hints) if history.hinted(task, hints) else None
                       for task in survey.tasks]
    provenance.ordering(survey.this_run, sources, survey.slow, survey.tasks, hints)


def _run_tasks(survey: Survey) -> None:
    """Every task through the workers, each event recorded as it comes; Ctrl-C stops them."""
    journal, workers, first = survey.journal, survey.workers, survey.first
    outstanding = Counter(name for name, _ in survey.tasks)  # tasks left per overload
    journal.start()
    view = progress.LiveProgress(len(outstanding), quiet=survey.options.quiet)
    begun: set[str] = set()
    survey.confirmation = stream = _stream(survey)
    workers.spare = stream.spare  # a main worker with no task left takes repeats
    try:
        if survey.tasks:
            slots = workers.run(survey.tasks, first, unheld=survey.slow, expected=survey.expected)
        else:
            first.purpose = "main: the stack's provenance, no case left to run"
            first.close()
            workers.stop()  # prestarted workers have nothing to do
            slots = 0
        while slots:
            event = workers.events.get()
            if event.kind == "begin":
                if event.overload not in begun:
                    begun.add(event.overload)
                    view.begin(event.overload)
            elif event.kind == "profiles":
                journal.record_profiles(event.overload, event.data["profiles"])
            elif event.kind == "case":
                journal.record_case(event.overload, event.data)
                stream.consider(event.overload, event.data)  # a failure's repeats and baseline start now
            elif event.kind == "end":
                outstanding[event.overload] -= 1
                if outstanding[event.overload] == 0:  # its last task: the overload is finished
                    if not +outstanding:
                        workers.all_tasks_ended()
                    journal.record_end(event.overload)
                    survey.measured[event.overload] = survey.started
                    if journal.compact_due(len(survey.route_set.overloads)):
                        journal.compact()
                    view.end(event.overload, verdict_of(journal.finished[event.overload]))
            elif event.kind == "replaced":
                view.note(f"worker {event.data['slot']} replaced after {event.overload}: {event.data['why']}")
            elif event.kind == "fatal":
                survey.fatal = survey.fatal or event.data
                workers.stop()
            elif event.kind == "slot_end":
                slots -= 1
    except KeyboardInterrupt:
        survey.interrupted = True
        workers.stop()
    finally:
        view.stop()
        survey.this_run["main_phase_s"] = survey.config.log.seconds()


def _file(survey: Survey) -> None:
    """This run's end recorded, the results file closed, and a complete survey filed in the store."""
    options, journal = survey.options, survey.journal
    provenance.finish_run(survey.provenance, survey.this_run, _now(), survey.clock, survey.workers, journal)
    survey.done = all(name in journal.finished for name in survey.selected)
    doc = journal.close(survey.done)
    survey.doc = doc
    if survey.done and doc["complete"] and not options.no_store:
        doc_key = survey.provenance.get("store_key") or f"{options.stack}-unknown"
        try:
            filed = Store(options.store).file("survey", doc_key, comparable.fingerprint(journal.comparable),
                                              journal.output)
        except BadInput as exc:  # a full disk: the results file has the run; said after the summary
            survey.unwritten = BadInput(f"{exc}; the results file {journal.output} has the run: file it later",
                                        "--store")
        else:
            survey.provenance["store_path"] = filed


def _render(survey: Survey) -> int:
    """The outputs and the summary, then the exit code."""
    from flagos_doctor.console import output_console

    options, output_path = survey.options, survey.journal.output
    if not options.quiet and not survey.tasks and not survey.this_run.get("confirm", {}).get("ran"):
        output_console(stderr=True).print(
            f"complete: {len(survey.selected)} overloads from {output_path}, nothing run; --rerun to run them again",
            markup=False)
    # The results file holds the survey by now: a store or a copy that cannot be written
    # (a full disk) is one line after the summary, and nothing is lost.
    unwritten = survey.unwritten
    try:
        output.emit(survey.doc, {"census": options.census_path, "json": options.json_path},
                    terminal=None if options.quiet else output.STDOUT_ELSE_STDERR,
                    options={output.TERMINAL: {"output": output_path}}, view_despite_failure=True)
    except BadInput as exc:
        unwritten = unwritten or exc
    if not options.quiet and survey.provenance.get("store_path"):
        output_console(stderr=options.json_path == "-").print(f"filed in the store: {survey.provenance['store_path']}",
                                                                   markup=False)
    if survey.interrupted:
        raise KeyboardInterrupt
    if unwritten is not None:
        raise unwritten
    if survey.fatal:
        if survey.fatal.get("missing"):
            raise stacks.not_importable(options.stack)
        print(f"flagos-doctor: survey stopped: {survey.fatal['message']}", file=sys.stderr)
        return EXIT_FINDING
    return _exit_code(options, survey.doc, survey.selected) if survey.done else EXIT_FINDING


def crashed_or_timed_out(document: dict, selected) -> list[str]:
    """``overload/profile`` of every selected case whose last word is CRASH or TIMEOUT."""
    overloads = document.get("overloads") or {}
    return [f"{name}/{case.get('profile')}" for name in selected
            for case in (overloads.get(name) or {}).get("cases") or []
            if case.get("status") in (model.CRASH, model.TIMEOUT)]


def _exit_code(options: SurveyOptions, document: dict, selected) -> int:
    """0 when every selected overload got a verdict and no case crashed or timed out; 1
    when one did: a worker killed by a signal or a hang is the stack's failure, whatever
    verdict the overload's other cases give it (other verdicts are measured, not judged:
    ``--compare`` judges them)."""
    crashed = crashed_or_timed_out(document, selected)
    if not crashed:
        return EXIT_OK
    if not options.quiet:
        shown = ", ".join(crashed[:5]) + (f" and {len(crashed) - 5} more" if len(crashed) > 5 else "")
        print(f"flagos-doctor: {len(crashed)} case{'s' if len(crashed) != 1 else ''} crashed or timed out "
              f"({shown}): exit 1", file=sys.stderr)
    return EXIT_FINDING


def _nothing_to_run(options: SurveyOptions, journal: ResultsFile, selected) -> bool:
    """Whether the results file already holds every selected overload, confirmed: then no
    worker is started at all."""
    if options.rerun or not selected or journal.previous is None or journal.partial or os.path.exists(journal.path):
        return False  # a journal left by a killed run is compacted by a normal start
    if any(name not in journal.finished for name in selected):
        return False
    finished = {name: journal.finished[name] for name in selected}
    # The native path the run before found (None: the stack has none) is the one a worker would find.
    native = ((journal.previous.get("provenance") or {}).get("baseline")) if options.baseline == "native" else None
    return not confirm.to_repeat(finished, options.repeats) and not (native and confirm.to_baseline(finished))


def _already_complete(survey: Survey) -> int:
    """A results file that already has the survey: its outputs, its view, its exit code;
    no worker started, nothing rewritten."""
    from flagos_doctor.console import output_console

    options, journal = survey.options, survey.journal
    doc = journal.previous
    if not options.quiet:
        output_console(stderr=True).print(
            f"complete: {len(survey.selected)} overloads from {journal.output}, nothing run; --rerun to run them again",
            markup=False)
    output.emit(doc, {"census": options.census_path, "json": options.json_path},
                terminal=None if options.quiet else output.STDOUT_ELSE_STDERR,
                options={output.TERMINAL: {"output": journal.output, "ran": False}})
    return _exit_code(options, doc, survey.selected)


def _measured(previous: dict | None) -> dict[str, str]:
    """When each finished overload of an earlier run was measured (the start of its run)."""
    overloads = (previous or {}).get("overloads") or {}
    return {name: entry["measured"] for name, entry in overloads.items() if entry.get("measured")}


def _baseline_label(survey: Survey) -> str | None:
    return survey.first.ready.get("baseline") if survey.options.baseline == "native" else None


def _stream(survey: Survey) -> confirm.Confirmation:
    """The confirmation's lanes (no lane, no worker, when this run confirms nothing), given
    at once what the results file's finished cases still lack (a resumed run)."""
    options, journal = survey.options, survey.journal
    label = _baseline_label(survey)
    native = confirm.native_config(survey.config, survey.route_set.overloads, options.native_route) if label else None
    known = [] if options.no_store else Culprits(Store(options.store), options.stack).known()
    stream = confirm.Confirmation(survey.config, survey.this_run.get("workers") or survey.choice.workers,
                                  options.repeats, native, known)
    for name, cases in sorted(journal.finished.items()):
        for case in cases:
            stream.consider(name, case)
    return stream


def _confirm(survey: Survey) -> bool:
    """Repeat the failures and run them on the native path (:mod:`.confirm`); True if interrupted.

    The results file is written after each pass, so a survey stopped (or killed) while
    confirming resumes there.
    """
    options, journal, this_run = survey.options, survey.journal, survey.this_run
    label = _baseline_label(survey)
    survey.provenance["baseline"] = label
    pending = confirm.to_repeat(journal.finished, options.repeats) + (confirm.to_baseline(journal.finished) if label else [])
    pending += replay.suspects(journal.finished)  # a replay cut short by a stop runs on resume
    if not pending or survey.confirmation is None:
        return False

    def note(text: str) -> None:
        if not options.quiet:
            print(text, file=sys.stderr, flush=True)

    for name, _ in pending:  # their verdicts are judged again in this run
        survey.measured[name] = survey.started
    this_run["confirm"] = {"ran": True}
    journal.checkpoint()
    try:
        this_run["confirm"].update(confirm.confirm(
            survey.confirmation, journal, baseline_label=label, note=note,
            culprits=None if options.no_store else Culprits(Store(options.store), options.stack)))
    except KeyboardInterrupt:
        return True
    return False


def _timing_hints(options: SurveyOptions, journal: ResultsFile, given: dict | None) -> tuple[dict, set, list[dict]]:
    """How long each case took in earlier runs (:mod:`.history`), the cases that met or left
    a sticky device error there, and where from: a list of {"path", "from"} ("store": the
    same fingerprint; "store, same work": the same stack, route set and device under another
    harness, spec or torch; "--hints"; "results file": the one resumed or rerun), later
    ones winning."""
    hints: dict = {}
    sticky: set = set()
    sources: list[dict] = []
    if not options.no_store:
        found, stored_sticky, path, how = history.from_store(
            Store(options.store), comparable.fingerprint(journal.comparable), journal.comparable)
        if path:
            hints.update(found)
            sticky |= stored_sticky
            sources.append({"path": path, "from": "store" if how == "fingerprint" else "store, same work"})
    if given is not None:
        found = history.from_document(given)
        hints.update(found)
        sticky |= history.sticky_cases(given)
        sources.append({"path": os.path.abspath(options.hints), "from": "--hints", "cases": len(found)})
    if journal.previous:  # this results file, resumed or rerun: the same setup by construction
        own = history.from_document(journal.previous)
        if own:
            hints.update(own)
            sticky |= history.sticky_cases(journal.previous)
            sources.append({"path": journal.output, "from": "results file"})
    return hints, sticky, sources


def plan_tasks(names: list[str], journal: ResultsFile, profiles: list[str], size: str) -> list[tuple]:
    """The pool's tasks, in order: (overload, profiles to run or None for all).

    ``size`` "cases" (pooled, the default): every case is a task of its own, so one
    overload's cases run side by side in as many workers and a few slow cases (a kernel
    autotuning for a minute per dtype) no longer queue behind each other in one worker; the
    price is that workers may compile the same kernel at once. "overloads" (``--tasks
    overloads``, and per-overload isolation, one process per task): one task per overload.
    A partly done overload (resumed) runs only what it lacks.
    """
    tasks = []
    for name in names:
        remaining = journal.remaining_profiles(name)
        if size == "overloads":
            tasks.append((name, remaining))
            continue
        wanted = profiles if remaining is None else remaining
        if wanted:
            tasks.extend((name, [profile]) for profile in wanted)
        else:  # nothing left but the end: one empty task records it
            tasks.append((name, wanted))
    return tasks


__all__ = ["run", "default_output", "EXIT_BAD_INPUT"]
