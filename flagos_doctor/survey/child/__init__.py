"""The survey's child side: what runs in a worker process, under ``--python``, with torch.

:mod:`.worker` is the process (``python -m flagos_doctor.survey.child.worker``, started by
:mod:`flagos_doctor.survey.pool`): its request loop sets up the stack
(:mod:`flagos_doctor.stacks`), captures the evidence around each case and streams the
records. :mod:`.engine` runs one case (:class:`~.engine.CaseRunner`): :mod:`.synth` makes
its inputs from the ATen schema, :mod:`.references` supplies a CPU reference where torch
has none, :mod:`.judge` compares; :mod:`.triton_timing` says where the time went inside
Triton.

These modules may import torch; nothing in the parent side (``flagos_doctor/survey/*.py``)
imports them: the parent names the worker module to start, and reads its records. They use
the parent side's torch-free shared modules (:mod:`..model`, :mod:`..spec`, :mod:`..bindings`).
"""
