"""The vocabulary of a suite comparison: a test's outcome, a test result, a run, totals."""

from __future__ import annotations

from dataclasses import dataclass, field

#: Outcomes, each test has exactly one (pytest's words, as its summary line prints them).
PASSED = "passed"
FAILED = "failed"
ERROR = "error"
SKIPPED = "skipped"
XFAILED = "xfailed"
XPASSED = "xpassed"  # a strict XPASS, the only kind JUnit XML can show (see docs/suite.md)
OUTCOMES = (PASSED, FAILED, ERROR, SKIPPED, XFAILED, XPASSED)

#: Outcomes that make a run fail. A strict XPASS also fails the run, but it means a test
#: marked as failing now passes: reported as a change, never as a regression.
BAD = frozenset({FAILED, ERROR})

#: Keys of the totals, in the order they are printed (``errors`` as pytest's summary says it).
TOTAL_KEYS = ("collected", "passed", "failed", "errors", "skipped", "xfailed", "xpassed")
_TOTAL_OF = {PASSED: "passed", FAILED: "failed", ERROR: "errors", SKIPPED: "skipped",
             XFAILED: "xfailed", XPASSED: "xpassed"}

#: Precedence when one test appears several times in a JUnit file (a teardown error is
#: written as a second <testcase> after the call's own): the first listed wins.
PRECEDENCE = (FAILED, ERROR, XPASSED, XFAILED, SKIPPED, PASSED)


@dataclass(frozen=True)
class TestResult:
    """One collected test (or one file that failed to collect) and how it ended."""

    __test__ = False  # not a pytest test class, despite the name

    id: str  # pytest's node id, rebuilt: ``tests/unit/test_x.py::TestK::test_n[0.5]``
    file: str  # ``tests/unit/test_x.py``
    cls: str  # ``TestK`` or ``""``
    name: str  # ``test_n[0.5]``; ``""`` for a file-level entry (a collection error)
    outcome: str
    message: str = ""  # first line of the failure / error / skip message

    @property
    def base(self) -> str:
        """The function name without its parametrisation suffix."""
        return self.name.split("[", 1)[0]

    @property
    def params(self) -> str:
        """The parametrisation suffix, ``[0.5]``, or ``""``."""
        cut = self.name.find("[")
        return self.name[cut:] if cut >= 0 else ""


@dataclass
class SuiteRun:
    """The results of one pytest run, whatever it was read from."""

    source: str  # the file it was read from
    tests: dict[str, TestResult] = field(default_factory=dict)  # by id, in file order
    commit: str | None = None  # when the run came from the store or a worktree
    meta: dict = field(default_factory=dict)  # test_cmd, build_cmd, created... (store runs)


def totals(tests) -> dict[str, int]:
    """Counts of ``tests`` (an iterable of TestResult) under :data:`TOTAL_KEYS`."""
    counts = dict.fromkeys(TOTAL_KEYS, 0)
    for test in tests:
        counts["collected"] += 1
        counts[_TOTAL_OF[test.outcome]] += 1
    return counts
