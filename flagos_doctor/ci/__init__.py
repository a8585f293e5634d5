"""``flagos-doctor ci-merge``: the one pull-request comment of a check run on many vendor boxes.

A composite command, as ``report`` is: it reads the comparison documents
(``flagos-doctor/compare/1``) that each vendor box's ``survey --compare`` wrote
(:mod:`flagos_doctor.compare.github`'s GitHub mode) and builds a merge document
(``flagos-doctor/ci-merge/1``, :mod:`.merge`) whose views say, for every vendor, whether
the PR is safe there. The workflow that runs it is ``docs/ci/torch-fl-pr-check.yml``.
"""
