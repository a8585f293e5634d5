"""The per-overload operator survey: this folder is its parent side, :mod:`.child` its child side.

Parent side (never imports torch, nor anything of :mod:`.child`): :mod:`.command` (the CLI
entry), :mod:`.routes` (which overloads), :mod:`.pool` (worker processes),
:mod:`.schedule` (which task a free worker takes), :mod:`.confirm` (repeats and the native
baseline), the results file and its journal (:mod:`flagos_doctor.results.resultsfile`), :mod:`.history` (timing hints), :mod:`.sizing` (how many workers),
:mod:`.scratch`, :mod:`.verdicts`, :mod:`.census`, :mod:`.groups` and :mod:`.comparable`
(pure functions of case records), :mod:`.progress` (the terminal views). Torch-free and
shared with the child side: :mod:`.model`, :mod:`.spec`, :mod:`.bindings`.

Child side (imports torch, in a worker): :mod:`.child.worker` (request loop, evidence
capture around each case; the stack itself comes from :mod:`flagos_doctor.stacks`),
:mod:`.child.engine` (synthesises the inputs of one case from the ATen schema, runs the CPU
reference and the device, judges the outcome).

The contract between the worker and the engine is :class:`flagos_doctor.survey.child.engine.CaseRunner`::

    runner = CaseRunner(device="flagos", spec=load_spec(path))
    runner.profiles(overload) -> list[str]        # raises NoSchema if torch lacks it
    runner.run_case(overload, profile) -> dict    # {"status", "detail"}; deterministic inputs

Vocabulary lives in :mod:`.model`.
"""
