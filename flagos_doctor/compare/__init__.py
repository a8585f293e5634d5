"""``flagos-doctor survey --compare A B``: two survey runs, side by side, as asv compares.

* :mod:`.diff`: the comparison itself, a pure function of two results documents
  (schema ``flagos-doctor/survey/1``) returning a comparison document
  (schema ``flagos-doctor/compare/1``);
* :mod:`.arms`: finds each arm (a results file, or a commit prefix in the results store)
  and, with ``--repo``/``--build-cmd``, builds and surveys a commit missing from the store
  in a throw-away git worktree (:mod:`.build`);
* :mod:`.terminal`, :mod:`.markdown`: formats of the comparison document;
* :mod:`.command`: the CLI entry, ``run(CompareOptions) -> exit code``.

Nothing here imports torch.
"""
