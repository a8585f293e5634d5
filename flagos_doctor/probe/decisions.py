"""Child side: what the stack decided from a replaced probe, and what it would have decided.

A stack that replaces ``torch.cuda.is_available`` and later reads it (its own cuda-alias
guard, Triton's driver choice) decides from the replacement's answer. Where the original
answers the same, nothing goes wrong on this machine; on a machine where they differ (a
box with a flagos device and no CUDA, or the other way round) the same read decides the
other way. For each such read this module records both answers and, where it can be
evaluated, the decision the other answer would have made:

* Triton's ``is_active()`` of each backend is called again with the probe answering the
  other way (nothing else changes; the tracer hears none of it);
* a read in the test of an ``if`` (``while``, conditional expression) is evaluated from the
  source: the test's value when only this answer changes, when the rest of the test does
  not decide it, and the first statement of the branch it would take.

Anything else is recorded as not evaluated, with the reason. Runs once, at the end of the
probe's final state, after every event has been sent.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import types

from flagos_doctor.probe import tracer as tracing

#: Probes whose answer code branches on: a replaced one read later is a latent hazard.
QUESTIONS = ("is_available",)
_TRITON_DRIVER = os.sep + os.path.join("triton", "backends") + os.sep


def _answer(fn) -> dict:
    try:
        value = fn()
    except Exception as exc:
        return {"ok": False, "repr": f"{type(exc).__name__}: {exc}"[:300]}
    return {"ok": True, "repr": tracing.safe_repr(value), "bool": bool(value) if isinstance(value, bool) else None}


def collect(tracer) -> list[dict]:
    """One record per (probe, reading line) of a replaced question probe read by stack code."""
    out = []
    for (name, path, line, saw), count in list(tracer.read_keys.items()):
        probe = tracer.probes.get(name)
        if not probe or probe["kind"] != "attr" or probe["attr"] not in QUESTIONS or not probe["resolved"]:
            continue
        current = tracing._static_get(probe["owner"], probe["attr"])
        original = probe["original"]
        if not callable(current) or not callable(original) or current is original:
            continue
        entry = {"probe": name, "file": tracer.short(path), "line": line, "saw": saw, "count": count,
                 "original_answer": _answer(original), "replaced_answer": _answer(current)}
        if tracer.code_kind(path) in ("torch", "stdlib") and \
                entry["original_answer"].get("repr") == entry["replaced_answer"].get("repr"):
            continue  # torch's own reads matter where the answers differ: a failure's cause
        answer = entry["replaced_answer"].get("bool")
        if answer is None:
            entry["decision"] = {"evaluated": False, "why": "the replacement does not answer True or False here"}
        elif _TRITON_DRIVER in path:
            entry["decision"] = triton_choice(probe, not answer)
        else:
            entry["decision"] = source_decision(path, line, probe["attr"], answer)
            caller = tracer.read_callers_of.get((name, path, line, saw))
            if not entry["decision"].get("evaluated") and caller is not None and _returns_the_read(path, line, probe["attr"]):
                # ``return torch.cuda.is_available()``: the reader's caller decides on its answer.
                through = source_decision(caller[0], caller[1], caller[2], answer)
                if through.get("kind") == "branch":
                    through["through"] = {"function": caller[2], "file": tracer.short(caller[0]), "line": caller[1]}
                    entry["decision"] = through
        for write in (entry["decision"].get("skipped") or {}).get("writes", []):
            write.update(what_it_holds(write["name"], tracer.short))
        out.append(entry)
    return out


def what_it_holds(name: str, short) -> dict:
    """What ``name`` holds now, where a write skipped would have replaced it: ``stock`` (the
    function's file and name, so a traceback frame running it is known) and ``method`` (an
    attribute of a class, called as ``x.cuda()``)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        owner = module
        try:
            for part in parts[cut:-1]:
                owner = getattr(owner, part)
            value = getattr(owner, parts[-1])
        except Exception:
            return {}
        code = getattr(getattr(value, "__func__", value), "__code__", None)
        held = {"method": isinstance(owner, type)}
        if code is not None:
            held["stock"] = {"file": short(code.co_filename), "function": code.co_name}
        return held
    return {}


def triton_choice(probe, other: bool) -> dict:
    """Each Triton backend's ``is_active()`` with the probe answering ``other``."""
    try:
        from triton.backends import backends
    except Exception as exc:
        return {"evaluated": False, "why": f"cannot list Triton's backends: {type(exc).__name__}"}
    owner, attr = probe["owner"], probe["attr"]
    kept = tracing._static_get(owner, attr)
    answers = {}
    # Straight into the module's dict: the tracer records writes through the module's
    # class; this one is ours, and is undone before anything else runs.
    vars(owner)[attr] = lambda *a, **k: other
    try:
        for name, backend in backends.items():
            try:
                answers[name] = bool(backend.driver.is_active())
            except Exception as exc:
                answers[name] = f"raised {type(exc).__name__}"
    finally:
        vars(owner)[attr] = kept
    active = [k for k, v in answers.items() if v is True]
    return {"evaluated": True, "kind": "triton-driver", "answer": other, "is_active": answers, "active_backends": active}


def _first_line(source: str, node) -> str:
    text = ast.get_source_segment(source, node) or ""
    return text.strip().splitlines()[0] if text.strip() else ""


def _is_the_read(node, attr: str) -> bool:
    """A call of the probe (``torch.cuda.is_available()``) or of a reader that returns its
    answer (``_native_cuda_available()``)."""
    if not isinstance(node, ast.Call):
        return False
    func = node.func
    return (isinstance(func, ast.Attribute) and func.attr == attr) or (isinstance(func, ast.Name) and func.id == attr)


def _returns_the_read(path: str, line: int, attr: str) -> bool:
    """The statement at ``line`` is ``return <the read>``: the answer goes to the caller as it is."""
    try:
        _, tree = _parsed(path)
    except (OSError, SyntaxError, ValueError):
        return False
    return any(isinstance(node, ast.Return) and node.lineno == line and node.value is not None
               and _is_the_read(node.value, attr) for node in ast.walk(tree))


def _value(expr, attr: str, answer: bool):
    """The truth of ``expr`` when the read answers ``answer``; None when the rest decides it."""
    if _is_the_read(expr, attr):
        return answer
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        inner = _value(expr.operand, attr, answer)
        return None if inner is None else not inner
    if isinstance(expr, ast.BoolOp):
        stop = isinstance(expr.op, ast.Or)  # or: one True decides it; and: one False
        reading = next((i for i, v in enumerate(expr.values) if any(_is_the_read(n, attr) for n in ast.walk(v))), None)
        # The read happened, so every operand before it was evaluated and did not decide
        # (and: all true; or: all false); the ones after it are unknown unless they read too.
        values = [(not stop) if reading is not None and i < reading else _value(v, attr, answer)
                  for i, v in enumerate(expr.values)]
        if stop in values:
            return stop
        return (not stop) if all(v is not None for v in values) else None
    return None


@functools.lru_cache(maxsize=64)
def _parsed(path: str):
    """A file's source and syntax tree, once per file (torch's are large, read at many lines)."""
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    return source, ast.parse(source)


def source_decision(path: str, line: int, attr: str, answer: bool) -> dict:
    """The branch an ``if`` (or ``while``, conditional expression) at ``line`` takes with the
    answer it got and with the other one, read from the source."""
    try:
        source, tree = _parsed(path)
    except (OSError, SyntaxError, ValueError) as exc:
        return {"evaluated": False, "why": f"the source cannot be read ({type(exc).__name__})"}
    best = None
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp)):
            test = node.test
            if test.lineno <= line <= (test.end_lineno or test.lineno) and any(_is_the_read(n, attr) for n in ast.walk(test)):
                if best is None or node.lineno >= best.lineno:
                    best = node
    if best is None:
        return {"evaluated": False, "why": f"line {line} does not test the answer in an if, while or conditional expression"}
    test = ast.get_source_segment(source, best.test) or "?"
    test = " ".join(test.split())
    statement = f"while {test}:" if isinstance(best, ast.While) else (
        f"... if {test} else ..." if isinstance(best, ast.IfExp) else f"if {test}:")
    got, other = _value(best.test, attr, answer), _value(best.test, attr, not answer)
    decision = {"kind": "branch", "statement": statement, "statement_line": best.lineno, "answer": answer,
                "test_now": got, "test_other": other}
    if other is None:
        decision.update(evaluated=False, why=f"with the other answer the rest of the test decides ({statement})")
        return decision

    def branch(taken: bool) -> str:
        if isinstance(best, ast.IfExp):
            return _first_line(source, best.body if taken else best.orelse)
        body = best.body if taken else best.orelse
        if not body:
            return "no branch: it goes on past the if"
        return f"line {body[0].lineno}: `{_first_line(source, body[0])}`"

    decision.update(evaluated=True, now=branch(bool(got)) if got is not None else None, other=branch(other))
    if got is not None:
        taken = (best.body if got else best.orelse)
        if isinstance(best, ast.IfExp):
            decision["taken_lines"] = [taken.lineno, taken.end_lineno or taken.lineno]
        elif taken:
            # Where the branch taken runs: a failure inside it is on the path the read chose.
            decision["taken_lines"] = [taken[0].lineno, taken[-1].end_lineno or taken[-1].lineno]
        if isinstance(best, ast.If):
            skipped = skipped_code(tree, best, bool(got))
            if skipped:
                decision["skipped"] = skipped
    return decision


#: Statements that end a block: what follows them in the function never runs.
_ENDS = (ast.Return, ast.Raise)
#: Definitions whose bodies do not run where they stand.
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def skipped_code(tree, node: ast.If, taken_now: bool) -> dict | None:
    """What the branch ``node`` took kept from running: the branch not taken and, where the
    taken one ends in ``return`` or ``raise``, the rest of the enclosing function; with the
    attributes those statements (and the same module's functions they call) would have written.

    ``{"lines": [first, last], "ended_by": "return" | "raise" | None, "writes": [{"name",
    "line", "via"?}], "calls": [{"call", "line", "writes": [names]}]}``; None when nothing was skipped."""
    taken = node.body if taken_now else node.orelse
    statements = list(node.orelse if taken_now else node.body)
    ended_by = None
    if taken and isinstance(taken[-1], _ENDS):
        ended_by = "return" if isinstance(taken[-1], ast.Return) else "raise"
        statements += _rest_of_function(tree, node)
    if not statements:
        return None
    functions = {n.name: n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    names = _import_names(tree)
    writes, calls = [], []
    for statement in statements:
        for name, line in _writes_in([statement], names):
            writes.append({"name": name, "line": line})
        for call in _own_calls([statement], functions):
            found = _writes_of_function(functions[call.func.id], functions, names, {})
            if found:
                calls.append({"call": _call_text(call), "line": call.lineno, "writes": found})
                writes += [{"name": name, "line": call.lineno, "via": call.func.id} for name in found]
    return {"lines": [statements[0].lineno, statements[-1].end_lineno or statements[-1].lineno],
            "ended_by": ended_by, "writes": writes, "calls": calls}


def _parents(tree) -> dict:
    return {child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)}


def _rest_of_function(tree, node) -> list:
    """The statements after ``node`` up to the end of its function, in the order they would run."""
    parents = _parents(tree)
    rest, current = [], node
    while current in parents:
        parent = parents[current]
        for field in ("body", "orelse", "finalbody"):
            block = getattr(parent, field, None)
            if isinstance(block, list) and current in block:
                rest += block[block.index(current) + 1:]
        if isinstance(parent, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Module)):
            break
        current = parent
    return rest


def _import_names(tree) -> dict[str, str]:
    """Each imported name -> the dotted name it stands for (``Tensor`` -> ``torch.Tensor``); the
    module's own globals stand for themselves."""
    names = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names[node.name] = node.name
        elif isinstance(node, ast.Assign):
            names.update((t.id, t.id) for t in node.targets if isinstance(t, ast.Name))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return names


def _dotted(node, names: dict[str, str]) -> str | None:
    """``torch.Tensor.cuda`` for an attribute target, its first name resolved through the imports."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or not parts or node.id not in names:
        return None  # an attribute of a local (``cuda.__wrapped__``) is no write others see
    return ".".join([names.get(node.id, node.id), *reversed(parts)])


def _walk_running(statements):
    """The nodes of ``statements`` that run with them (not the bodies of nested definitions)."""
    stack = list(reversed(statements))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, _DEFINITIONS):
            stack.extend(reversed(list(ast.iter_child_nodes(node))))


def _writes_in(statements, names) -> list[tuple[str, int]]:
    """Attributes assigned (``torch.device = ...``, ``setattr(torch, "device", ...)``) by ``statements``."""
    out = []
    for node in _walk_running(statements):
        targets = []
        if isinstance(node, ast.Assign):
            targets = [t for target in node.targets for t in (target.elts if isinstance(target, ast.Tuple) else [target])]
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for target in targets:
            name = _dotted(target, names)
            if name:
                out.append((name, node.lineno))
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr"
                and len(node.args) >= 2 and isinstance(node.args[1], ast.Constant) and isinstance(node.args[1].value, str)):
            owner = node.args[0]
            owner_name = _dotted(owner, names) if isinstance(owner, ast.Attribute) else (
                names.get(owner.id, owner.id) if isinstance(owner, ast.Name) else None)
            if owner_name:
                out.append((f"{owner_name}.{node.args[1].value}", node.lineno))
    return out


def _own_calls(statements, functions) -> list:
    return [n for n in _walk_running(statements)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in functions]


def _writes_of_function(function, functions, names, seen: dict, depth: int = 3) -> list[str]:
    """What a module function writes, through the module functions it calls (``depth`` deep).
    ``seen``: each function followed -> the depth left below it; one met again with more left
    (by a shorter path) is followed again."""
    found = [name for name, _ in _writes_in(function.body, names)]
    if depth > 0:
        for call in _own_calls(function.body, functions):
            if seen.get(call.func.id, -1) < depth - 1:
                seen[call.func.id] = depth - 1
                found += _writes_of_function(functions[call.func.id], functions, names, seen, depth - 1)
    return list(dict.fromkeys(found))


def _call_text(call) -> str:
    text = ast.unparse(call)
    return text if len(text) <= 60 else f"{call.func.id}(...)"


def torch_fl_vendor(modules=None) -> dict | None:
    """Why torch_fl took the vendor branch it took: what its NVIDIA test answers here.

    Only looks at modules the stack already imported; imports nothing.
    """
    modules = modules if modules is not None else sys.modules
    if "torch_fl" not in modules:
        return None
    found: dict = {}
    compat = modules.get("torch_fl.accelerator.cuda._cuda_compat")
    if isinstance(compat, types.ModuleType):
        loader = getattr(compat, "_load_libcuda", None)
        if callable(loader):
            found["libcuda"] = _answer(lambda: loader() is not None)
        test = getattr(compat, "is_nvidia_cuda_available", None)
        if callable(test):
            found["is_nvidia_cuda_available"] = _answer(test)
    build = getattr(modules["torch_fl"], "_build_accelerator", None)
    if callable(build):
        found["build_accelerator"] = _answer(build)
    return found
