"""Each promise of flagos_doctor/probe/decisions.py's docstrings, one test each, through its
documented functions on real source files written here (the branch a read decides, the code
it kept from running, Triton's backends asked again, torch_fl's vendor test, what a name
holds); ``collect``'s through the probe on ``tests/fixtures/probe_stacks/decisionstack`` (a second
each). The real runs (the seed bug, the real torch_fl) are in tests/test_explain_chains.py
and tests/test_torch_fl_real.py; scripts/mutation runs these first."""

from __future__ import annotations

import sys
import types

import pytest

from flagos_doctor.probe import decisions
from test_probe import line_of, probe

READ = "torch.cuda.is_available()"


def decide(tmp_path, source: str, answer: bool, marker: str = READ, attr: str = "is_available") -> dict:
    """``source_decision`` at the first line holding ``marker``, the file written as ``source``
    (a new file each time: the module reads each file once)."""
    path = tmp_path / f"stack{len(list(tmp_path.iterdir()))}.py"
    path.write_text(source)
    line = next(i for i, text in enumerate(source.splitlines(), 1) if marker in text)
    return decisions.source_decision(str(path), line, attr, answer)


def test_an_if_says_both_branches(tmp_path):
    source = "import torch\n\n\ndef pick():\n    if torch.cuda.is_available():\n        x = 'cuda'\n        y = 1\n    else:\n        x = 'cpu'\n    return x\n"
    decision = decide(tmp_path, source, False)
    assert decision == {"kind": "branch", "statement": "if torch.cuda.is_available():", "statement_line": 5,
                        "answer": False, "test_now": False, "test_other": True, "evaluated": True,
                        "now": "line 9: `x = 'cpu'`", "other": "line 6: `x = 'cuda'`", "taken_lines": [9, 9],
                        "skipped": {"lines": [6, 7], "ended_by": None, "writes": [], "calls": []}}
    assert decide(tmp_path, source, True)["taken_lines"] == [6, 7]


def test_an_if_without_else_goes_on_past_it(tmp_path):
    source = "import torch\nif torch.cuda.is_available():\n    torch.device = 'cuda'\nprint(1)\n"
    decision = decide(tmp_path, source, False)
    assert decision["now"] == "no branch: it goes on past the if" and decision["other"] == "line 3: `torch.device = 'cuda'`"
    assert "taken_lines" not in decision  # nothing ran inside the if
    assert decision["skipped"]["writes"] == [{"name": "torch.device", "line": 3}]


def test_a_while_and_a_conditional_expression_are_branches_too(tmp_path):
    loop = decide(tmp_path, "import torch\nwhile not torch.cuda.is_available():\n    wait()\n", True)
    assert loop["statement"] == "while not torch.cuda.is_available():" and loop["test_now"] is False
    assert loop["now"] == "no branch: it goes on past the if" and loop["other"] == "line 3: `wait()`"
    choice = decide(tmp_path, "import torch\ndevice = 'cuda' if torch.cuda.is_available() else 'cpu'\n", True)
    assert choice["statement"] == "... if torch.cuda.is_available() else ..."
    assert (choice["now"], choice["other"], choice["taken_lines"]) == ("'cuda'", "'cpu'", [2, 2])
    assert "skipped" not in choice  # an expression skips no statement


def test_the_innermost_if_whose_test_holds_the_read_at_that_line_decides(tmp_path):
    source = ("import torch\nif ready:\n    if (flag and\n            torch.cuda.is_available()):\n"
              "        go()\n")
    decision = decide(tmp_path, source, True)  # the read's line is the test's second line
    assert decision["statement"] == "if flag and torch.cuda.is_available():" and decision["statement_line"] == 3
    # On one line, the conditional expression inside the if's test is the inner one.
    inner = decide(tmp_path, "import torch\nif ('cuda' if torch.cuda.is_available() else 'cpu') == wanted:\n    go()\n", True)
    assert inner["statement"] == "... if torch.cuda.is_available() else ..."


def test_and_before_the_read_was_true_so_the_answer_decides_both_ways(tmp_path):
    decision = decide(tmp_path, "import torch\nif flag and torch.cuda.is_available():\n    go()\n", False)
    assert (decision["test_now"], decision["test_other"], decision["evaluated"]) == (False, True, True)


def test_or_before_the_read_was_false(tmp_path):
    decision = decide(tmp_path, "import torch\nif flag or torch.cuda.is_available():\n    go()\n", True)
    assert (decision["test_now"], decision["test_other"], decision["evaluated"]) == (True, False, True)


def test_when_the_rest_of_the_test_decides_the_other_answer_it_is_not_evaluated(tmp_path):
    decision = decide(tmp_path, "import torch\nif torch.cuda.is_available() and flag:\n    go()\n", False)
    assert decision["test_now"] is False and decision["test_other"] is None and decision["evaluated"] is False
    assert decision["why"] == "with the other answer the rest of the test decides (if torch.cuda.is_available() and flag:)"
    # ... and so is the answer now, where the rest decides it: the other branch still said.
    now_open = decide(tmp_path, "import torch\nif torch.cuda.is_available() and flag:\n    go()\n", True)
    assert now_open["test_now"] is None and now_open["test_other"] is False
    assert now_open["now"] is None and now_open["other"] == "no branch: it goes on past the if"
    assert "taken_lines" not in now_open and "skipped" not in now_open


def test_what_follows_the_read_is_unknown_unless_it_reads_too(tmp_path):
    # enabled() is another function, not the read; (enabled() or forced) reads nothing.
    decision = decide(tmp_path, "import torch\nif torch.cuda.is_available() and (enabled() or forced):\n    go()\n", True)
    assert (decision["test_now"], decision["test_other"]) == (None, False)


def test_only_not_turns_the_answer_round_and_another_operator_on_it_is_not_evaluated(tmp_path):
    decision = decide(tmp_path, "import torch\nif ~torch.cuda.is_available():\n    go()\n", True)  # -2 or -1: true both ways
    assert (decision["test_now"], decision["test_other"], decision["evaluated"]) == (None, None, False)


def test_a_negated_read_and_a_bare_imported_reader_are_the_read(tmp_path):
    negated = decide(tmp_path, "import torch\nif not torch.cuda.is_available():\n    cpu()\n", True)
    assert (negated["test_now"], negated["test_other"]) == (False, True)
    bare = decide(tmp_path, "from torch.cuda import is_available\nif is_available():\n    cuda()\n", True,
                  marker="if is_available()")
    assert bare["statement"] == "if is_available():" and bare["test_now"] is True


def test_a_line_that_tests_nothing_and_a_source_that_cannot_be_read_are_not_evaluated(tmp_path):
    plain = decide(tmp_path, "import torch\nok = torch.cuda.is_available()\nif ok:\n    go()\n", True)
    assert plain == {"evaluated": False,
                     "why": "line 2 does not test the answer in an if, while or conditional expression"}
    other_name = decide(tmp_path, "import torch\nif torch.cuda.device_count():\n    go()\n", True, marker="if")
    assert other_name["evaluated"] is False  # the test reads another probe
    # The conditional expression at line 2 tests something else; the if reading is on line 3.
    elsewhere = decide(tmp_path, "import torch\nok = torch.cuda.is_available() if probing else None\n"
                                 "if torch.cuda.is_available():\n    go()\n", True)
    assert elsewhere == plain
    missing = decisions.source_decision(str(tmp_path / "gone.py"), 1, "is_available", True)
    assert missing == {"evaluated": False, "why": "the source cannot be read (FileNotFoundError)"}
    (tmp_path / "broken.py").write_text("if torch.cuda.is_available(:\n")
    broken = decisions.source_decision(str(tmp_path / "broken.py"), 1, "is_available", True)
    assert broken == {"evaluated": False, "why": "the source cannot be read (SyntaxError)"}


RETURNING = '''import torch
from torch import Tensor
import torch.nn.functional as F


def helper():
    torch.backends.flag = 1
    deeper()


def deeper():
    setattr(torch.cuda, "current_device", None)


def install(a_long_argument_name_number_one, a_long_argument_name_number_two, a_long_argument_three):
    Tensor.cuda = None


def alias():
    if torch.cuda.is_available():
        return
    torch.device, F.relu = object, None
    torch.version.counter += 1
    local = object()
    local.attribute = 1
    def later():
        torch.never = 1
    helper()
    install(1111111111111111111, 2222222222222222222, 3333333333333333333)
    print("done")
'''


def test_a_branch_ending_in_return_skips_the_rest_of_its_function_with_what_it_would_have_written(tmp_path):
    decision = decide(tmp_path, RETURNING, True)
    skipped = decision["skipped"]
    assert skipped["lines"] == [22, 30] and skipped["ended_by"] == "return"
    # Tuples, augmented assignments and setattr are writes, resolved through the imports; a
    # local's attribute is not one, and a nested definition's body does not run where it stands.
    assert skipped["writes"] == [
        {"name": "torch.device", "line": 22}, {"name": "torch.nn.functional.relu", "line": 22},
        {"name": "torch.version.counter", "line": 23},
        {"name": "torch.backends.flag", "line": 28, "via": "helper"},
        {"name": "torch.cuda.current_device", "line": 28, "via": "helper"},
        {"name": "torch.Tensor.cuda", "line": 29, "via": "install"}]
    # A call's text is kept to 60 characters; a longer one is named by its function.
    assert skipped["calls"] == [
        {"call": "helper()", "line": 28, "writes": ["torch.backends.flag", "torch.cuda.current_device"]},
        {"call": "install(...)", "line": 29, "writes": ["torch.Tensor.cuda"]}]


def test_a_branch_ending_in_raise_says_so_and_the_other_answer_skips_only_the_branch(tmp_path):
    source = "import torch\n\n\ndef check():\n    if not torch.cuda.is_available():\n        raise RuntimeError('no')\n    torch.ok = 1\n"
    assert decide(tmp_path, source, False)["skipped"] == {
        "lines": [7, 7], "ended_by": "raise", "writes": [{"name": "torch.ok", "line": 7}], "calls": []}
    assert decide(tmp_path, source, True)["skipped"] == {"lines": [6, 6], "ended_by": None, "writes": [], "calls": []}


def test_the_lines_taken_and_skipped_end_where_their_last_statement_ends(tmp_path):
    source = "import torch\nif torch.cuda.is_available():\n    x = make(\n        'cuda')\nelse:\n    x = make(\n        'cpu')\n"
    decision = decide(tmp_path, source, True)
    assert decision["taken_lines"] == [3, 4] and decision["skipped"]["lines"] == [6, 7]
    choice = decide(tmp_path, "import torch\ndevice = (make('cuda',\n               'fast') if torch.cuda.is_available() else 'cpu')\n", True)
    assert choice["taken_lines"] == [2, 3]


def test_the_rest_of_the_function_is_the_rest_of_each_block_around_the_branch_and_stops_at_the_function(tmp_path):
    source = ("import torch\n\n\ndef check(items):\n    for item in items:\n        if not torch.cuda.is_available():\n"
              "            raise RuntimeError('no')\n        torch.seen = item\n    torch.ok = 1\n\n\ntorch.after = 1\n")
    skipped = decide(tmp_path, source, False)["skipped"]
    assert skipped["lines"] == [8, 9] and skipped["ended_by"] == "raise"
    assert skipped["writes"] == [{"name": "torch.seen", "line": 8}, {"name": "torch.ok", "line": 9}]


OWN_NAMES = '''import torch
from torch import cuda as tcuda

state = object()


class Settings:
    pass


def configure():
    if torch.cuda.is_available():
        return
    Settings.device = "cpu"
    state.ready = True
    configure.done = True
    tcuda.initialised = False
'''


def test_a_write_is_named_through_the_modules_own_globals_and_its_imports_aliases(tmp_path):
    assert decide(tmp_path, OWN_NAMES, True)["skipped"]["writes"] == [
        {"name": "Settings.device", "line": 14}, {"name": "state.ready", "line": 15},
        {"name": "configure.done", "line": 16}, {"name": "torch.cuda.initialised", "line": 17}]


UNNAMED = '''import torch
from .helpers import registry

mode = None


def configure(table):
    if torch.cuda.is_available():
        return
    mode = "cpu"
    table["cpu"].ready = True
    registry.cpu = True
    torch.cpu_only = True
'''


def test_a_name_rebound_and_an_attribute_with_no_dotted_name_are_no_writes(tmp_path):
    # A local (even one named like a global), an attribute of a subscript, a name from a
    # relative import (its package unknown here): nothing others see by a dotted name.
    assert decide(tmp_path, UNNAMED, True)["skipped"]["writes"] == [{"name": "torch.cpu_only", "line": 13}]


SETATTRS = '''import torch


def fall_back(name, value, pair):
    if torch.cuda.is_available():
        return
    torch.cuda.empty_cache()
    getattr(torch.cuda, "device_count")
    setattr(*pair)
    setattr(torch, name, 1)
    setattr(torch, b"raw", 1)
    setattr(torch.cuda, "device", value)
'''


def test_setattr_is_a_write_only_with_the_name_written_out_and_other_calls_are_not(tmp_path):
    skipped = decide(tmp_path, SETATTRS, True)["skipped"]
    assert skipped["writes"] == [{"name": "torch.cuda.device", "line": 12}] and skipped["calls"] == []


def test_a_calls_text_is_kept_up_to_60_characters(tmp_path):
    source = ("import torch\n\n\ndef helper(text):\n    torch.text = text\n\n\ndef go():\n"
              "    if torch.cuda.is_available():\n        return\n"
              f"    helper('{'x' * 50}')\n    helper('{'x' * 51}')\n")
    calls = decide(tmp_path, source, True)["skipped"]["calls"]
    assert [len(c["call"]) for c in calls] == [60, len("helper(...)")]


def test_nothing_skipped_is_none(tmp_path):
    source = "import torch\nif torch.cuda.is_available():\n    go()\n"
    assert "skipped" not in decide(tmp_path, source, True)  # no else, and the branch taken goes on
    assert decide(tmp_path, source, False)["skipped"]["lines"] == [3, 3]


def test_the_module_functions_a_skipped_call_reaches_are_followed_three_deep(tmp_path):
    chain = "".join(f"def f{i}():\n    torch.w{i} = 1\n    f{i + 1}()\n\n\n" for i in range(6))
    source = f"import torch\n\n\n{chain}def go():\n    if torch.cuda.is_available():\n        return\n    f0()\n"
    (call,) = decide(tmp_path, source, True)["skipped"]["calls"]
    assert call["writes"] == ["torch.w0", "torch.w1", "torch.w2", "torch.w3"]


def test_a_function_met_first_by_a_longer_path_is_still_followed_three_calls_deep(tmp_path):
    # go -> top -> a -> g -> h stops at h; top -> g -> h -> k is three calls: k's write counts.
    functions = {"top": "a()\n    g()", "a": "g()", "g": "h()", "h": "k()", "k": "torch.deep = 1"}
    chain = "".join(f"def {name}():\n    {body}\n\n\n" for name, body in functions.items())
    source = f"import torch\n\n\n{chain}def go():\n    if torch.cuda.is_available():\n        return\n    top()\n"
    (call,) = decide(tmp_path, source, True)["skipped"]["calls"]
    assert call == {"call": "top()", "line": 28, "writes": ["torch.deep"]}


def test_a_read_returned_as_it_is_goes_to_the_caller(tmp_path):
    path = tmp_path / "reader.py"
    path.write_text("import torch\n\n\ndef native():\n    return torch.cuda.is_available()\n\n\ndef other():\n"
                    "    x = torch.cuda.is_available()\n    return x\n\n\ndef negated():\n"
                    "    return not torch.cuda.is_available()\n")
    assert decisions._returns_the_read(str(path), 5, "is_available")
    assert not decisions._returns_the_read(str(path), 9, "is_available")
    assert not decisions._returns_the_read(str(path), 14, "is_available")  # an answer changed is not as it is
    assert not decisions._returns_the_read(str(tmp_path / "gone.py"), 5, "is_available")


def test_an_answer_keeps_true_or_false_and_an_exception_is_its_name_and_message_cut_at_300():
    assert decisions._answer(lambda: False) == {"ok": True, "repr": "False", "bool": False}
    assert decisions._answer(lambda: 1) == {"ok": True, "repr": "1", "bool": None}  # not a bool: no answer to branch on

    def failing():
        raise ValueError("x" * 400)
    failed = decisions._answer(failing)
    assert failed["ok"] is False and failed["repr"] == ("ValueError: " + "x" * 400)[:300]


def test_what_a_skipped_write_would_replace_is_named_by_its_file_and_function(tmp_path, monkeypatch):
    (tmp_path / "heldmodule.py").write_text("class Tensor:\n    def cuda(self):\n        pass\n\n\ndef device():\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import heldmodule

    try:
        short = lambda path: "short:" + path.rsplit("/", 1)[-1]  # noqa: E731
        assert decisions.what_it_holds("heldmodule.device", short) == {
            "method": False, "stock": {"file": "short:heldmodule.py", "function": "device"}}
        assert decisions.what_it_holds("heldmodule.Tensor.cuda", short) == {
            "method": True, "stock": {"file": "short:heldmodule.py", "function": "cuda"}}
        assert decisions.what_it_holds("heldmodule.Tensor.absent", short) == {}
        assert decisions.what_it_holds("never_imported_module.x", short) == {}
        assert heldmodule.__name__ in sys.modules
    finally:
        sys.modules.pop("heldmodule", None)


def test_tritons_backends_are_asked_again_with_the_other_answer_and_the_probe_put_back(monkeypatch):
    torch = pytest.importorskip("torch")
    pytest.importorskip("triton")
    from triton.backends import Backend, backends

    class Unloadable:  # a backend plugin whose driver cannot load its library here
        @staticmethod
        def is_active():
            raise OSError("libfoo.so: cannot open shared object file")
    monkeypatch.setitem(backends, "foo", Backend(compiler=None, driver=Unloadable))
    kept = torch.cuda.is_available
    probe = {"owner": torch.cuda, "attr": "is_available"}
    other = decisions.triton_choice(probe, True)
    assert other["evaluated"] and other["kind"] == "triton-driver" and other["answer"] is True
    assert other["is_active"]["nvidia"] is True and "nvidia" in other["active_backends"]
    assert decisions.triton_choice(probe, False)["is_active"]["nvidia"] is False
    assert other["is_active"]["foo"] == "raised OSError" and "foo" not in other["active_backends"]
    assert torch.cuda.is_available is kept


def test_where_tritons_backends_cannot_be_listed_nothing_is_evaluated(monkeypatch):
    monkeypatch.setitem(sys.modules, "triton.backends", None)  # as where Triton is not installed
    owner = types.ModuleType("torch.cuda")
    owner.is_available = lambda: False
    assert decisions.triton_choice({"owner": owner, "attr": "is_available"}, True) == {
        "evaluated": False, "why": "cannot list Triton's backends: ModuleNotFoundError"}


def test_torch_fls_vendor_test_is_read_from_the_modules_imported_and_nothing_is_imported(monkeypatch):
    assert decisions.torch_fl_vendor({}) is None
    compat = types.ModuleType("torch_fl.accelerator.cuda._cuda_compat")
    compat._load_libcuda = lambda: None

    def no_driver():
        raise OSError("libcuda.so.1: cannot open")
    compat.is_nvidia_cuda_available = no_driver
    root = types.ModuleType("torch_fl")
    root._build_accelerator = lambda: "cuda"
    found = decisions.torch_fl_vendor({"torch_fl": root, "torch_fl.accelerator.cuda._cuda_compat": compat})
    assert found == {"libcuda": {"ok": True, "repr": "False", "bool": False},
                     "is_nvidia_cuda_available": {"ok": False, "repr": "OSError: libcuda.so.1: cannot open"},
                     "build_accelerator": {"ok": True, "repr": "'cuda'", "bool": None}}
    assert decisions.torch_fl_vendor({"torch_fl": types.ModuleType("torch_fl")}) == {}
    monkeypatch.setitem(sys.modules, "torch_fl", root)  # by default: this process's modules
    monkeypatch.delitem(sys.modules, "torch_fl.accelerator.cuda._cuda_compat", raising=False)
    assert decisions.torch_fl_vendor() == {"build_accelerator": {"ok": True, "repr": "'cuda'", "bool": None}}


def collected(*cases: str, exercise: bool = False) -> list[dict]:
    """``collect``'s records of a probe run on decisionstack with these cases (its docstring)."""
    document = probe({"DECISIONSTACK": ",".join(cases)}, imports=["decisionstack"], exercise=exercise)
    return document["facts"]["decisions"]


GUARD = ("decisionstack/__init__.py", line_of("decisionstack", "elif torch.cuda.is_available():  # the guard"))


def test_collect_keeps_the_reads_of_a_replaced_question_probe_only():
    (entry,) = collected("other-probe")  # torch.cuda.device_count was replaced and read too: no question
    assert (entry["probe"], entry["file"], entry["line"]) == ("torch.cuda.is_available", *GUARD)
    assert entry["decision"]["evaluated"] is True and entry["decision"]["kind"] == "branch"


def test_collect_leaves_a_probe_put_back_or_replaced_by_no_function():
    assert collected("restored") == [] and collected("not-callable") == []


def test_collect_keeps_torchs_own_reads_only_where_the_two_answers_differ():
    assert [(e["file"], e["line"]) for e in collected("torch-reads")] == [GUARD]  # both answer alike
    guard, torch_read = collected("torch-reads", "flipped")  # the shim answers the other way
    assert (guard["file"], guard["line"]) == GUARD and torch_read["file"] == "torch/cuda/amp/common.py"


def test_collect_does_not_evaluate_a_replacement_that_answers_neither_true_nor_false():
    (entry,) = collected("not-bool")
    assert entry["replaced_answer"] == {"ok": True, "repr": "0", "bool": None}
    assert entry["decision"] == {"evaluated": False, "why": "the replacement does not answer True or False here"}


def test_collect_asks_tritons_backends_again_where_tritons_driver_read_the_answer():
    pytest.importorskip("triton")
    guard, driver = collected("triton-reads")
    other = not driver["replaced_answer"]["bool"]
    assert (guard["file"], guard["line"]) == GUARD and driver["file"] == "triton/backends/nvidia/driver.py"
    assert driver["decision"]["kind"] == "triton-driver" and driver["decision"]["answer"] is other
    assert driver["decision"]["is_active"]["nvidia"] is other


def test_collect_hands_only_a_read_returned_as_it_is_to_its_callers_test():
    guard, called, native = collected("called", "through")
    assert called["line"] == line_of("decisionstack", "# decides itself") and "through" not in called["decision"]
    caller = line_of("decisionstack", "# the caller's test")
    assert native["line"] == line_of("decisionstack", "# hands the answer to its caller")
    assert native["decision"]["statement_line"] == caller and native["decision"]["test_now"] is native["replaced_answer"]["bool"]
    assert native["decision"]["through"] == {"function": "_native", "file": "decisionstack/__init__.py", "line": caller}


def test_collect_hands_no_read_kept_in_a_name_or_deciding_itself_to_its_caller():
    guard, stored, one_line = collected("stored", "one-line")
    assert stored["line"] == line_of("decisionstack", "# kept in a name")
    assert stored["decision"]["evaluated"] is False and "through" not in stored["decision"]
    assert one_line["line"] == line_of("decisionstack", "(decides and returns)")
    assert one_line["decision"]["statement"] == "if torch.cuda.is_available():" and "through" not in one_line["decision"]
    assert one_line["decision"]["statement_line"] == one_line["line"]


def test_collect_keeps_a_returned_read_no_stack_code_called_as_its_own():
    # the probe's exercise calls the replaced current_device: above the reader, only the
    # doctor's own frames, so there is no caller's test to hand the answer to
    entries = collected("exercised", exercise=True)
    (reader,) = [e for e in entries if e["line"] == line_of("decisionstack", "# the exercise's call")]
    assert reader["decision"]["evaluated"] is False and "through" not in reader["decision"]


def test_collect_says_what_each_write_a_read_skipped_holds_now():
    (guard, choice) = collected("skips-write")
    (write,) = choice["decision"]["skipped"]["writes"]
    skipped = "synchronize" if choice["decision"]["test_now"] is False else "ipc_collect"
    assert write["name"] == f"torch.cuda.{skipped}"
    assert write["stock"] == {"file": "torch/cuda/__init__.py", "function": skipped} and write["method"] is False
