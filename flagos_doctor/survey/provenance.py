"""The provenance of a survey, built in one place: every field of the results document's
``provenance`` and ``comparable`` records says here where it comes from.

* the setup (:func:`setup_record`), what the journal checks before any case runs, and what
  the first worker found (:func:`found_record`): together the ``comparable`` record, each
  field used as :data:`flagos_doctor.results.comparable.FIELDS` says;
* the stack's part: the worker's (:meth:`flagos_doctor.stacks.base.Stack.provenance`, in
  the child: ``stack``, ``store_key``, ``torch_fl``) and the parent's (:func:`stack_part`:
  :meth:`~flagos_doctor.stacks.base.Stack.start_checks`,
  :meth:`~flagos_doctor.stacks.base.Stack.given_commit`);
* this run's record (:func:`this_run`, :func:`finish_run`) and the document's
  ``provenance`` (:func:`document_provenance`), which lists every run of the results file.

Parent side; never imports torch.
"""

from __future__ import annotations

import time

from flagos_doctor.results import document as results, model
from flagos_doctor.survey import history


def setup_record(options, route_set, spec, spec_dict: dict) -> dict:
    """The setup's comparable fields, known before any worker starts."""
    return {
        "harness_version": model.HARNESS_VERSION,
        "route_set_sha256": route_set.sha256,
        "spec_sha256": getattr(spec, "sha256", None) or results.spec_sha256(spec_dict),
        "stack": options.stack,
        "backend": route_set.backend,
        "device": options.device,
    }


def found_record(found: dict) -> dict:
    """The comparable fields the first worker found (``found``: its provenance)."""
    return {
        "device_type": (found.get("device") or {}).get("type"),
        "torch": found.get("torch"),
        "store_key": found.get("store_key"),
    }


def check_stack(checks, found: dict) -> dict:
    """``found`` with the stack's checks run before any case (``checks``, started with the
    workers: :meth:`~flagos_doctor.stacks.base.Stack.start_checks`)."""
    return {**found, **checks.result(found)}


def stack_part(options, config, found: dict) -> dict:
    """``found`` with what the user said of the stack (``--torch-fl-commit``)."""
    if not options.torch_fl_commit:
        return found
    return config.resolved.given_commit(found, options.torch_fl_commit)


def this_run(options, choice, config, workers, started: str, selected: int, task_size: str) -> dict:
    """This run's record, as it starts (:func:`finish_run` adds its end)."""
    run = {
        "started": started, "ended": None, "selected": selected, "isolation": options.isolation,
        "tasks": task_size,
        "workers": choice.workers, "workers_choice": choice.provenance(),
        "devices": list(options.devices), "rerun": options.rerun,
        "shared_autotune": dict(zip(("TRITON_CACHE_AUTOTUNING", "set_by"), config.autotune_setting())),
        "autotune_timing": config.autotune_timing(),
        "repeats": options.repeats, "baseline": options.baseline,
    }
    if any(workers.leftovers.values()):  # what surveys killed before had left behind
        run["leftovers_cleaned"] = dict(workers.leftovers)
    return run


def ordering(run: dict, sources: list[dict], slow: int, tasks: list[tuple], hints: dict) -> None:
    """Record in ``run`` where the case times that order its tasks came from, and the slow
    first (``predicted``: how many of them went first on their family's cold cost alone)."""
    if sources:
        run["hints"] = sources
    if slow:
        run["slow_first"] = {
            "hints": [source["path"] for source in sources], "tasks": slow,
            "first": [name + ("/" + ",".join(profiles) if profiles else "") for name, profiles in tasks[:min(slow, 10)]],
            "predicted": history.predicted_count(tasks[:slow], hints),
        }


def document_provenance(found: dict, route_set, spec_dict: dict, options, config, previous: dict | None,
                        run: dict, started: str) -> dict:
    """The results document's ``provenance``: what the first worker found, the route set,
    the spec, and every run of the results file (``previous``: the one resumed) with this one."""
    runs = list(((previous or {}).get("provenance") or {}).get("runs", []))
    return {
        **found,
        "routes": route_set.provenance(),
        "harness_version": model.HARNESS_VERSION,
        "spec": spec_dict,
        "spec_path": config.spec,
        "timeout": options.timeout,
        "started": runs[0]["started"] if runs else started,
        "ended": None,
        "runs": runs + [run],
    }


def finish_run(provenance: dict, run: dict, ended: str, clock: float, workers, journal) -> None:
    """This run's end: when, how long, and the figures of its workers and journal."""
    run["ended"] = ended
    run["seconds"] = round(time.monotonic() - clock, 3)
    run["worker_starts"] = workers.start_figures()
    if workers.config.forks is not None:
        run["worker_births"] = workers.config.forks.figures()
    if workers.config.log is not None:
        run["worker_log"] = workers.config.log.records()
    run["compactions"] = journal.compactions
    run["schedule"] = workers.schedule_figures()
    provenance["ended"] = ended
