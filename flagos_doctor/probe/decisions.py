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
        out.append(entry)
    return out


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
    return decision


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
