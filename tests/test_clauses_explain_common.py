"""Each promise of flagos_doctor/explain/common.py's docstrings (the words explain's terminal
and Markdown views share), one test each, through its functions on documents of explain's
shape. scripts/mutation runs these first."""

from __future__ import annotations

from flagos_doctor.explain import common


def failure(number: int, causes=(), **fields) -> dict:
    return {"id": number, "kind": "exception", "error": f"E{number}: boom", "causes": list(causes), **fields}


def document(failures=(), **fields) -> dict:
    return {"program": {"command": ["python", "-c", "import x; x.run()"], "ended": "exited with status 1"},
            "failures": list(failures), "causes": [], **fields}


def test_the_command_reads_as_a_shell_would_take_it_back():
    assert common.command_text(document()) == "python -c 'import x; x.run()'"


def test_the_headline_names_command_stack_python_end_and_failures_with_a_cause():
    doc = document([failure(0, [0]), failure(1)], stack="torch_fl", python={"version": "3.11.7"})
    assert common.headline(doc) == ("python -c 'import x; x.run()' (stack torch_fl), Python 3.11.7: "
                                    "exited with status 1; 2 failures, 1 with a cause")
    one = document([failure(0)])
    assert common.headline(one) == "python -c 'import x; x.run()', Python ?: exited with status 1; 1 failure, 0 with a cause"
    assert common.headline(document()).endswith("exited with status 1; 0 failures")  # no "with a cause" of none


def test_a_failures_title_says_what_failed_its_phase_process_and_first_line():
    assert common.failure_title(failure(0, error="RuntimeError: x\n  more")) == "uncaught exception: RuntimeError: x"
    assert common.failure_title({"kind": "exit", "error": None}) == "exit: "
    test = {"kind": "test", "test": "t.py::a", "when": "call", "error": "AssertionError"}
    assert common.failure_title(test) == "test t.py::a: AssertionError"
    assert common.failure_title({**test, "when": "setup"}) == "test t.py::a (setup): AssertionError"
    assert common.failure_title({**test, "when": None}) == "test t.py::a: AssertionError"
    assert common.failure_title(failure(0, when="setup")) == "uncaught exception: E0: boom"  # a phase is a test's
    worker = {**test, "role": "xdist worker gw1", "process": 42}
    assert common.failure_title(worker) == "test t.py::a in xdist worker gw1 (pid 42): AssertionError"
    assert common.failure_title({"kind": "exit", "error": "x" * 400}) == "exit: " + "x" * 300


def test_where_a_failure_was_raised_is_its_last_frame():
    frames = [{"file": "a.py", "function": "f", "line": 1}, {"file": "b.py", "function": "g", "line": 9}]
    assert common.raised_at({"traceback": frames}) == "b.py:g, line 9"
    assert common.raised_at({"traceback": []}) is None and common.raised_at({}) is None


def test_the_tests_line_counts_each_outcome_and_says_when_none_ran():
    assert common.tests_text(document()) is None and common.tests_text(document(tests=None)) is None
    assert common.tests_text(document(tests={"counts": {"passed": 3, "failed": 1}})) == "1 failed, 3 passed"
    assert common.tests_text(document(tests={"counts": {}})) == "no tests ran"


def test_a_failure_without_a_cause_says_so_and_what_the_run_read_where_events_are_kept():
    plain = "no cause found: no read of a redirected or replaced probe on its path"
    assert common.no_cause_text(document()) == plain  # report keeps only the events' count
    assert common.no_cause_text(document(events=[{"kind": "read"}])).startswith(
        "no cause found: nothing wrote a watched probe in this run")
    differs = {"kind": "read", "answer": {"repr": "False"}, "original_answer": {"repr": "True"}}
    same = {"kind": "read", "answer": {"repr": "True"}, "original_answer": {"repr": "True"}}
    # only a read counts, and only one with both answers (a write's own answers do not)
    events = [{"kind": "write"}, differs, same, {"kind": "read", "answer": {"repr": "False"}},
              {"kind": "read", "answer": None, "original_answer": {"repr": "True"}}, {**differs, "kind": "write"}]
    assert common.no_cause_text(document(events=events)) == (
        f"{plain} (the run made 1 read of a probe answering otherwise than its original, none on this failure's path)")
    assert "made 2 reads" in common.no_cause_text(document(events=events + [differs]))
    assert "made 0 reads" in common.no_cause_text(document(events=[{"kind": "write"}]))


def test_a_view_lists_failures_with_a_cause_first_in_order_and_counts_the_rest():
    failures = [failure(0), failure(1, [5]), failure(2), failure(3, [6]), failure(4)]
    shown, rest = common.shown_failures(document(failures), limit=3)
    assert [f["id"] for f in shown] == [0, 1, 3]  # the two with a cause and the first without, by id
    assert rest == "2 more failures not listed (0 with a cause, 2 without): the JSON (`--json`) has every one"
    shown, rest = common.shown_failures(document(failures), limit=1)
    assert [f["id"] for f in shown] == [1] and rest.startswith("4 more failures not listed (1 with a cause, 3 without)")
    shown, rest = common.shown_failures(document(failures[:4]), limit=3)
    assert rest.startswith("1 more failure not listed (0 with a cause, 1 without)")
    assert common.shown_failures(document(failures), limit=5) == (failures, None)
    assert common.SHOWN_FAILURES == 25 and len(common.shown_failures(document([failure(n) for n in range(26)]))[0]) == 25


def test_a_cause_says_its_words_once_then_points_to_the_first_failure_with_it():
    causes = [
        {"id": 0, "failure": 0, "read": "r", "write": "w", "how": "skipped-write", "message": "the chain"},
        {"id": 1, "failure": 1, "read": "r", "write": "w", "how": "skipped-write", "message": "the chain",
         "frame": {"file": "t.py", "line": 4}},
        {"id": 2, "failure": 2, "read": "r", "write": "w2", "how": "redirect", "message": "another"},
        {"id": 3, "failure": 3, "read": "r", "write": "w2", "how": "redirect", "message": "another"},
    ]
    texts = common.cause_texts({"causes": causes})
    assert texts[0] == "the chain" and texts[2] == "another"
    assert texts[1] == "the same chain as failure #0 (here at t.py:4)"
    assert texts[3] == "the same cause as failure #2 (here at None:None)"


def test_errors_and_warnings_are_listed_and_the_rest_counted():
    found = [{"severity": "error"}, {"severity": "info"}, {"severity": "warning"}, {"severity": "info"}]
    assert common.listed_findings({"findings": found}) == (
        [found[0], found[2]], "2 more of severity info: the JSON has them")
    assert common.listed_findings({"findings": found[:1]}) == ([found[0]], None)
    assert common.listed_findings({}) == ([], None)


def test_the_written_probes_are_folded_to_the_first_eight_with_their_writes_and_reads():
    probes = [{"name": "a", "write_events": [1], "reads": [1, 2]}, {"name": "b", "write_events": [1, 2]},
              {"name": "c", "reads": [1]}]
    assert common.written_probes_text({}, probes) == "3 probes: a (1 write, 2 reads), b (2 writes), c (0 writes, 1 read)"
    many = [{"name": f"p{n}", "write_events": [1]} for n in range(10)]
    text = common.written_probes_text({}, many)
    assert text.startswith("10 probes: p0 (1 write)") and "p7 (1 write)" in text and "p8" not in text
    assert text.endswith(", and 2 more")
    assert common.written_probes_text({}, many[:1]) == "1 probe: p0 (1 write)"
    assert common.written_probes_text({}, many[:8]).endswith("p7 (1 write)")  # eight: none folded
