"""The survey's words: case statuses, overload verdicts, routes. Pure standard library."""

from __future__ import annotations

import re

#: Bump when a change to synthesis, checks or verdict rules can change outcomes: results
#: files of another harness version are not comparable.
#: 4: every passing case is run a second time in its process (see child/engine.py, step 5).
#: 5: a case that failed in every run, in more than one way, is a failure, not FLAKY
#: (verdicts.settle).
#: 6: compiling and autotuning do not count toward --timeout (case_clock.py); a sticky
#: device error left by an earlier case of the worker is traced to it (replay.py): the
#: innocent case is what its fresh runs say, the culprit an ERROR; a timeout spent
#: compiling or an error another case left behind is never FLAKY.
HARNESS_VERSION = "flagos-doctor-survey/6"

RESULTS_SCHEMA = "flagos-doctor/survey/1"

# -- case statuses ---------------------------------------------------------------------
PASS = "PASS"  # device and CPU reference agree within the dtype's tolerance
WRONG = "WRONG"  # device ran, result differs from the reference
ERROR = "ERROR"  # device raised (detail holds the exception; "poison" marks a dead context)
#: the stack's binding calls a FlagGems function the installed flag_gems does not have
#: (torch_fl's generated bindings and flag_gems versions drift apart); detail names it.
MISSING_FUNCTION = "MISSING_FUNCTION"
INVALID_CASE = "INVALID_CASE"  # the CPU reference rejected the synthesised input
UNVERIFIABLE = "UNVERIFIABLE"  # no reference can judge it (reason in detail)
CRASH = "CRASH"  # the worker died on a signal while running this case
TIMEOUT = "TIMEOUT"  # the case ran past --timeout; its worker was replaced
NO_SCHEMA = "NO_SCHEMA"  # the installed torch has no such overload (overload-level)
#: run again under the same conditions, the case gave differing outcomes (they are in
#: "repeats"); never a timeout spent compiling nor an error another case left behind
FLAKY = "FLAKY"

CASE_STATUSES = (PASS, WRONG, ERROR, MISSING_FUNCTION, INVALID_CASE, UNVERIFIABLE, CRASH, TIMEOUT, FLAKY, NO_SCHEMA)
#: Statuses that do not count towards a verdict: upstream's two, and FLAKY (neither a pass
#: nor a failure: the stack gave both answers).
NOT_COUNTED = (INVALID_CASE, UNVERIFIABLE, FLAKY)
#: Failures that are run again (``--repeats``) and on the stack's native path (``--baseline``).
FAILURES = (WRONG, ERROR, CRASH, TIMEOUT)

# -- overload verdicts -----------------------------------------------------------------
STRICT = "STRICT"  # every counted case passed
BASIC_ONLY = "BASIC_ONLY"  # at least one counted case passed, not all
FAILED = "FAILED"  # counted cases, none passed
UNTESTED = "UNTESTED"  # no counted case (all INVALID_CASE / UNVERIFIABLE)
PENDING = "PENDING"  # not run yet (an interrupted survey)
VERDICTS = (STRICT, BASIC_ONLY, FAILED, UNTESTED, NO_SCHEMA, PENDING)

#: How good a verdict is, for "worse"/"better" in a comparison (NO_SCHEMA and PENDING are
#: not ranked: a change to or from them is a plain change).
VERDICT_RANK = {STRICT: 3, BASIC_ONLY: 2, FAILED: 1, UNTESTED: 0}

# -- routes: which implementation actually ran, when the stack can tell ------------------
ROUTE_KERNEL = "kernel"  # the routed kernel (FlagGems / demo kernel) ran
ROUTE_FALLBACK = "cpu_fallback"  # the stack fell back to CPU for this overload
ROUTE_UNKNOWN = "unknown"  # the stack gives no evidence
ROUTE_NONE = "-"  # nothing ran on the device (INVALID_CASE, NO_SCHEMA, ...)


def family(overload: str) -> str:
    """The family of an overload: its name before the first ``.`` (``mm.out`` -> ``mm``).
    The survey schedules a family's cases apart (they share kernels and autotuning keys);
    the matrix groups its rows by it."""
    return overload.split(".", 1)[0]


#: What GetFunc's last lookup raises, as a case's detail writes it: a
#: MISSING_FUNCTION case (``ExcType: first line``; torch_fl's binding lookup,
#: :mod:`flagos_doctor.stacks.torch_fl_bindings`).
_MISSING_RE = re.compile(r"\bAttributeError: module '(flag_gems(?:\.\w+)*)' has no attribute '(\w+)'")


def missing_from_detail(detail: str) -> str | None:
    """The function a case's error says flag_gems lacks (``flag_gems.ops.<function>``), or None."""
    found = _MISSING_RE.search(detail or "")
    if not found:
        return None
    return f"{found.group(1)}.{found.group(2)}"


def poisoned_by_text(culprit: dict) -> str:
    """The case a replay found behind another's sticky device error (a case's ``poisoned_by``,
    :mod:`flagos_doctor.survey.replay`), in words: ``frac [1d-f32]``, or ``3 earlier cases
    together`` when no single case brought the error back."""
    if culprit.get("overload"):
        return f"{culprit['overload']} [{culprit.get('profile')}]"
    return f"{culprit.get('cases')} earlier cases together"
