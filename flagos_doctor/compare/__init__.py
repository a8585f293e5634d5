"""``flagos-doctor survey --compare A B``: two survey runs, side by side, as asv compares.

* :mod:`.diff`: the comparison itself, a pure function of two results documents
  (schema ``flagos-doctor/survey/1``) returning a comparison document
  (schema ``flagos-doctor/compare/1``);
* :mod:`.build`: what a survey arm is for :mod:`flagos_doctor.arms` (which finds each arm:
  a results file, or a commit prefix in the results store) and, with ``--repo``/``--build-cmd``,
  how it surveys a commit missing from the store, built in a throw-away git worktree;
* :mod:`.attribute`: ``--attribute``, A's failing cases held against B (a pure function);
* :mod:`.terminal`, :mod:`.markdown`, :mod:`.attribute_views`: the views of those documents,
  registered with :mod:`flagos_doctor.output`;
* :mod:`.command`: the CLI entry, ``run(CompareOptions) -> exit code``.

Nothing here imports torch.
"""
