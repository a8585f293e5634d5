"""Finding the two arms of a comparison: a results file, or a run filed in the store.

An arm reference is a path to a results file, or a key prefix in the results store (a
torch_fl commit as git abbreviates it, or ``<stack>-<version>``). With ``--repo``, a
reference that is not in the store is resolved to a commit of that repository and built
and surveyed there (:mod:`flagos_doctor.compare.build`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from flagos_doctor.store import Store
from flagos_doctor.survey import results
from flagos_doctor.survey.model import RESULTS_SCHEMA

SURVEY_KIND = "survey"
SCHEMA_PREFIX = RESULTS_SCHEMA.rsplit("/", 1)[0] + "/"


@dataclass
class Arm:
    """One side of a comparison: where it came from and its results document."""

    ref: str  # what the user typed
    path: str  # the results file read
    document: dict
    source: str  # "file" | "store" | "built"
    commit: str | None = None  # for a built arm: the full commit

    def describe(self) -> dict:
        return {"ref": self.ref, "path": self.path, "source": self.source, "commit": self.commit}


def load_results(path: str) -> dict:
    """Read a survey results file (:func:`flagos_doctor.survey.results.load`: checked, its
    census digest recomputed); BadInput naming the file when it is unusable."""
    return results.load(path)


def find_in_store(store: Store, ref: str) -> str | None:
    """The results file for ``ref`` (a path or a key prefix), None when the store has none.

    An ambiguous prefix or an unreadable path still raises BadInput.
    """
    if os.path.exists(ref):
        return ref
    if not any(entry.key.startswith(ref) for entry in store.entries(SURVEY_KIND)):
        return None
    return store.lookup(SURVEY_KIND, ref)


def resolve(store: Store, ref: str) -> Arm:
    """The arm for ``ref`` without building anything; BadInput when it cannot be found."""
    path = find_in_store(store, ref)
    if path is None:
        # lookup gives the one-line message naming the store.
        path = store.lookup(SURVEY_KIND, ref)
    source = "file" if os.path.exists(ref) and os.path.samefile(path, ref) else "store"
    return Arm(ref=ref, path=path, document=load_results(path), source=source)
