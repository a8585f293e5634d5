"""Reading pytest's JUnit XML (``pytest --junitxml``) into a :class:`~.model.SuiteRun`.

What pytest writes, and how it is read (checked against real pytest 7-9 output):

* root ``<testsuites>`` holding ``<testsuite>`` elements, or a bare ``<testsuite>``;
* one ``<testcase classname=... name=...>`` per test; ``classname`` is the node id's path
  with ``/`` turned into ``.`` and ``.py`` dropped, then the classes (``tests.unit.test_x.TestK``);
  the ``file`` attribute (``junit_family=xunit1``) is used when present;
* no child: passed (a non-strict XPASS is also written this way; JUnit cannot tell them apart);
* ``<failure>``: failed, unless its message starts with ``[XPASS(strict)]``: xpassed;
* ``<error>``: error (setup or teardown errors, and files that failed to collect, which
  pytest writes as a ``<testcase classname="" name="tests.unit.test_x">``);
* ``<skipped type="pytest.xfail">``: xfailed (older pytest: message ``expected test failure``);
  ``<skipped message="xfail-marked test passes unexpectedly">`` (pytest < 5): xpassed;
  any other ``<skipped>``: skipped;
* a test written twice (a teardown error after the call's own report) keeps the outcome
  first in :data:`~.model.PRECEDENCE` (failed, error, ...).

Malformed or truncated XML is a BadInput naming the file.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ET

from flagos_doctor.errors import BadInput
from flagos_doctor.files import load_json
from flagos_doctor.suite.model import (
    ERROR, FAILED, PASSED, PRECEDENCE, SKIPPED, XFAILED, XPASSED, SuiteRun, TestResult,
)

#: Schema of a run filed in the results store (a JSON conversion of the JUnit XML).
RUN_SCHEMA = "flagos-doctor/suite-run/1"

_MESSAGE_CHARS = 300
_CLASS_PART = re.compile(r"^[A-Z]")  # pytest's default python_classes is "Test*"


def load_run(path: str) -> SuiteRun:
    """Read a JUnit XML file or a stored run (JSON), by content. Raises BadInput naming ``path``."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(64).lstrip()
    except FileNotFoundError:
        raise BadInput("no such file", path)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}", path)
    if head.startswith(b"{"):
        return run_from_document(load_json(path, "flagos-doctor/suite-run/"), path)
    return parse_junit(path)


def parse_junit(path: str) -> SuiteRun:
    """Parse pytest's JUnit XML at ``path``. Raises BadInput naming the file."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise BadInput("no such file", path)
    except OSError as exc:
        raise BadInput(f"cannot read: {exc.strerror or exc}", path)
    if not data.strip():
        raise BadInput("empty file, expected JUnit XML", path)
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        line, column = exc.position
        # expat says "no element found" when the file ends inside the root element, and
        # "unclosed token" when it ends inside a tag.
        truncated = exc.code == 3 or (exc.code == 5 and not data.rstrip().endswith(b">"))
        reason = str(exc).split(":", 1)[0]
        kind = "truncated" if truncated else "malformed"
        raise BadInput(f"{kind} JUnit XML (line {line}, column {column + 1}): {reason}", path)
    if root.tag == "testsuites":
        suites = root.iter("testsuite")
    elif root.tag == "testsuite":
        suites = [root]
    else:
        raise BadInput(f"not JUnit XML: the root element is <{root.tag}>, expected <testsuites> or <testsuite>", path)
    run = SuiteRun(source=path)
    seen = 0
    for suite in suites:
        for case in suite.findall("testcase"):
            seen += 1
            result = _read_case(case, path, seen)
            earlier = run.tests.get(result.id)
            if earlier is None or PRECEDENCE.index(result.outcome) < PRECEDENCE.index(earlier.outcome):
                run.tests[result.id] = result
    return run


def _read_case(case: ET.Element, path: str, index: int) -> TestResult:
    name = case.get("name")
    if name is None:
        raise BadInput(f"<testcase> number {index} has no 'name' attribute", path)
    classname = case.get("classname") or ""
    outcome, message = _outcome(case)
    if not classname:
        # A file-level report: a collection error, or a module-level skip.
        file = _module_to_file(name)
        return TestResult(id=file, file=file, cls="", name="", outcome=outcome, message=message)
    file_attr = case.get("file")
    parts = classname.split(".")
    if file_attr:
        file = file_attr.replace(os.sep, "/")
        depth = len(file[:-3].split("/")) if file.endswith(".py") else len(parts)
        classes = parts[depth:] if classname.replace(".", "/").startswith(file[:-3]) else _classes(parts)
    else:
        classes = _classes(parts)
        module = parts[: len(parts) - len(classes)]
        file = _module_to_file(".".join(module))
    cls = "::".join(classes)
    node = "::".join([file, *classes, name])
    return TestResult(id=node, file=file, cls=cls, name=name, outcome=outcome, message=message)


def _classes(parts: list[str]) -> list[str]:
    """The trailing class names of a dotted classname (``Test*`` by pytest's default)."""
    count = 0
    for part in reversed(parts[1:]):  # the first part is always a module or folder
        if not _CLASS_PART.match(part):
            break
        count += 1
    return parts[len(parts) - count:] if count else []


def _module_to_file(dotted: str) -> str:
    return dotted.replace(".", "/") + ".py"


def _outcome(case: ET.Element) -> tuple[str, str]:
    failure = case.find("failure")
    error = case.find("error")
    skipped = case.find("skipped")
    if failure is not None:
        message = _message(failure)
        if message.startswith("[XPASS(strict)]"):
            return XPASSED, message
        return FAILED, message
    if error is not None:
        return ERROR, _message(error)
    if skipped is not None:
        message = _message(skipped)
        kind = skipped.get("type") or ""
        if message.startswith("xfail-marked test passes unexpectedly"):
            return XPASSED, message
        if kind == "pytest.xfail" or message.startswith("expected test failure"):
            return XFAILED, message
        return SKIPPED, message
    return PASSED, ""


def _message(element: ET.Element) -> str:
    text = element.get("message") or (element.text or "").strip()
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first[:_MESSAGE_CHARS]


def run_document(run: SuiteRun, **meta) -> dict:
    """The JSON conversion of ``run`` filed in the results store (schema :data:`RUN_SCHEMA`)."""
    return {
        "schema": RUN_SCHEMA,
        **meta,
        "tests": [
            {"id": t.id, "file": t.file, "class": t.cls, "name": t.name, "outcome": t.outcome, "message": t.message}
            for t in run.tests.values()
        ],
    }


def run_from_document(document: dict, path: str) -> SuiteRun:
    """A run from its stored JSON conversion. Raises BadInput naming ``path``."""
    tests = document.get("tests")
    if not isinstance(tests, list):
        raise BadInput("field 'tests' is missing or not a list", path)
    run = SuiteRun(source=path, commit=document.get("commit"),
                   meta={k: v for k, v in document.items() if k not in ("tests", "schema")})
    for index, item in enumerate(tests):
        try:
            result = TestResult(id=item["id"], file=item["file"], cls=item["class"], name=item["name"],
                                outcome=item["outcome"], message=item.get("message", ""))
        except (KeyError, TypeError):
            raise BadInput(f"field 'tests' item {index} is not a test result", path)
        if result.outcome not in PRECEDENCE:
            raise BadInput(f"field 'tests' item {index}: unknown outcome {result.outcome!r}", path)
        run.tests[result.id] = result
    return run
