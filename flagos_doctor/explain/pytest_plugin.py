"""Child side of ``explain`` when the program is pytest: each test a phase, each failed test a failure.

Loaded only for an ``explain`` run, through pytest's own plugin mechanism (the parent adds
this module to ``PYTEST_PLUGINS``). It does nothing unless :mod:`.startup` installed the
watch in this process; pytest-xdist's workers have one each, and their records name the
worker (``gw0``...).
Records: ``failure`` (``kind: test``) and ``test``, as :mod:`.startup` lists them. A test's
failure starts at its own code (the test, or the fixture that raised): the frames that ran it,
pytest's, pluggy's and a ``unittest.TestCase``'s (modules marked ``__unittest``), are left out,
as pytest's own report leaves them; frames of theirs inside the test (``pytest.fail``,
``assertEqual``) stay.
"""

from __future__ import annotations

import os

import _pytest
import pluggy
import pytest

from flagos_doctor.explain import startup

#: Where pytest's runner and pluggy's hook calls live: the outer frames of every test's traceback.
RUNNER_DIRS = tuple(os.path.dirname(os.path.abspath(module.__file__)) + os.sep for module in (_pytest, pluggy))


def _runs_tests(frame) -> bool:
    """A frame of pytest's or pluggy's code, or of unittest's (its modules set ``__unittest``,
    the mark unittest and pytest both read to leave a frame out)."""
    return "__unittest" in frame.f_globals or os.path.abspath(frame.f_code.co_filename).startswith(RUNNER_DIRS)


def from_the_tests_code(tb):
    """``tb`` from its first frame outside the runners' code (``tb`` when every frame is theirs)."""
    first = tb
    while first is not None and _runs_tests(first.tb_frame):
        first = first.tb_next
    return first or tb


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The test's reads and writes carry its node id as their step."""
    watch = startup.WATCH
    if watch is not None:
        watch.tracer.begin_step(f"test {item.nodeid}", watch.dirs)
    try:
        yield
    finally:
        if watch is not None:  # back to the run between tests, without a phase of its own each time
            watch.tracer.end_step()
            watch.tracer.step = "program"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed phase is a failure (one that raised nothing, a strict xfail's pass, says pytest's
    words), and each test's outcome a ``test`` record: each sent on its own, so a failure of
    ours in one (an exception whose ``str()`` raises) never costs the other. The watch must
    never cost the program a test result: nothing of ours raises here."""
    outcome = yield
    watch = startup.WATCH
    if watch is None:
        return
    try:
        report = outcome.get_result()
        # Under pytest-xdist the test runs in a worker: its name (gw0...) says which process.
        worker = {"worker": os.environ["PYTEST_XDIST_WORKER"]} if "PYTEST_XDIST_WORKER" in os.environ else {}
    except Exception:
        return
    if report.failed:
        try:
            if call.excinfo is not None:
                watch.failure("test", call.excinfo.value, from_the_tests_code(call.excinfo.tb), test=item.nodeid, when=report.when, **worker)
            else:  # failed without raising (a strict xfail's pass): pytest's words ("" when none)
                said = report.longreprtext.strip().splitlines()
                watch.failure("test", None, None, said[0] if said else "failed", test=item.nodeid,
                              when=report.when, **worker)
        except Exception:
            pass
    if report.when == "call" or not report.passed:
        try:
            outcome = report.outcome
            if hasattr(report, "wasxfail"):  # as pytest counts them: an xfail is no skip
                outcome = {"skipped": "xfailed", "passed": "xpassed"}.get(outcome, outcome)
            watch.tracer.emit({"record": "test", "nodeid": item.nodeid, "when": report.when,
                               "outcome": outcome, **worker})
        except Exception:
            pass
