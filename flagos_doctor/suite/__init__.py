"""``flagos-doctor suite --compare A B``: two pytest runs compared on the same collected set.

The parts, each a plain function of the one before:

* :mod:`.junit` reads pytest's JUnit XML (or a run filed in the store) into a :class:`.model.SuiteRun`;
* :mod:`.arms` turns each ``A``/``B`` argument into a run: a file, a commit prefix in the
  results store, or a commit built and tested in a temporary git worktree (the resolver is
  :mod:`flagos_doctor.arms`'s, the worktree :mod:`flagos_doctor.arms.worktree`);
* :mod:`.compare` checks the collected sets first, matches renamed tests, and lists the
  per-test transitions, as one JSON document (schema ``flagos-doctor/suite-compare/1``);
* :mod:`.terminal` and :mod:`.markdown` render that document (views of :mod:`flagos_doctor.output`).

Nothing here imports torch.
"""
