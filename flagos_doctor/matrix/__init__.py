"""``flagos-doctor matrix``: one operator-support table from many survey runs.

:mod:`.sources` finds the runs (files, folders of them, store key prefixes, store queries),
:mod:`.build` turns their results documents into the matrix document (a pure function),
and :mod:`.markdown`, :mod:`.csv_format`, :mod:`.terminal` and :mod:`.html` (one
self-contained page: ``page.css``, ``page.js``) render that document (views of
:mod:`flagos_doctor.output`).
"""
