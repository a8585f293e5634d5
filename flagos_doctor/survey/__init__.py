"""The per-overload operator survey.

Parent side (never imports torch): :mod:`.routes` (which overloads), :mod:`.pool` (worker
processes), :mod:`.journal` (results written as they come), :mod:`.verdicts` and
:mod:`.census` (pure functions of case records), :mod:`.command` (the CLI entry).

Child side (imports torch, in a worker): :mod:`.worker` (request loop, evidence capture
around each case; the stack itself comes from :mod:`flagos_doctor.stacks`), :mod:`.engine`
(synthesises the inputs of one case from the ATen schema, runs the CPU reference and the
device, judges the outcome).

The contract between the worker and the engine is :class:`flagos_doctor.survey.engine.CaseRunner`::

    runner = CaseRunner(device="flagos", spec=load_spec(path))
    runner.profiles(overload) -> list[str]        # raises NoSchema if torch lacks it
    runner.run_case(overload, profile) -> dict    # {"status", "detail"}; deterministic inputs

Vocabulary lives in :mod:`.model`.
"""
