"""Why a failure happened: the probe read on its traceback that a redirect made answer wrong.

A pure, parent-side function of the events the probe records and one failure (no torch, no
files read). The probe calls it for every failed import and exercise
(:func:`flagos_doctor.probe.findings.judge`); ``flagos-doctor explain -- CMD`` calls it for
the command's failure. The one public function is :func:`find_causes`; :func:`no_cause`
says the plain sentence for a failure without one.

**Input.**

``events``: the probe's ``events`` list as recorded (``document["events"]``), in ``seq``
order. The engine uses:

* reads: ``{"seq", "kind": "read", "probe", "step", "where": {"file", "line", "function"},
  "saw": seq of the write it saw, "callers": [{"file", "line", "function"}, ...]}`` (the
  reader's callers, innermost first), and where the probe is a question (``is_available``,
  ``device_count``, ...) ``"answer"`` and ``"original_answer"``, each ``{"ok", "repr"}``:
  what the value read and the probe's original answered at that read;
* writes: ``{"seq", "kind": "write", "probe", "where", "writer_known", "value"}``, and a
  saved original's write has ``"saves": "<probe it saves>"``;
* Triton's driver creation: the read with ``"creates_driver": true`` and ``"is_active":
  {backend: answer}``.

``failure``: ``{"error": "AssertionError: Torch not compiled with CUDA enabled",
"traceback": [{"file", "line", "function"}, ...]`` (outermost first, as Python prints it),
and optionally (a ``"type"`` beside them is not read: the class is in ``error``)
``"what"`` (what failed, for the sentence: ``"torch.compile"``, ``"import torch_fl"``),
``"step"`` (only reads recorded in that step count; none: every read) and ``"causes"``
(chained exceptions, each ``{"error", "at": frame}``)}.

``decisions`` (optional): the probe's ``facts["decisions"]``, the branch each read took and
the lines it spans (``taken_lines``), read from the source in the child; without it the
branch is said in general words and every read on the traceback counts.

**Output.** A list of causes, the most direct first; empty when none is found. Each::

    {"probe": "torch.cuda.is_available",
     "read": 21, "reader": {"file", "line", "function"},      # the read event and its place
     "write": 11, "writer": {"file", "line", "function"} | None,
     "answer": "True", "original_answer": "False",
     "frame": {"file", "line", "function"},   # the traceback frame the read decided
     "how": "on-path" | "decided-call",       # the reader is on the traceback / called from it
     "branch": "took line 354: `...`",        # what the answer made the reader do
     "fix": "read the saved original ...",
     "message": "<what> failed: <error> in <file:line>; <reader file:line> asked <probe>(), "
                "which <writer file:line> redirected to answer True (the original answers "
                "False), and so <branch>; <fix>.",
     "events": [11, 21]}                       # the evidence, by seq

A read is a cause when it read a redirected probe whose original answers differently, and
its reader is a frame of the traceback (the read decided the branch that frame was in), or
was called straight from one and handed the answer back to it (Triton's ``is_active()``,
called from ``_create_driver``; a reader whose own ``if`` tested the answer, per
``decisions``, decided by itself and returned, and is not a cause). A reader on the traceback
whose ``if`` chose a branch that ran to its end before the frame failed elsewhere
(``taken_lines`` of its decision) is not one either. Of
those, only the reads that decided the deepest such frame are kept: an outer frame (the
compiler's entry point) calls many things that did not fail.
"""

from __future__ import annotations

import functools
import re

from flagos_doctor.probe.finding import skipped_words

__all__ = ["find_causes", "find_chains", "no_cause"]

#: Frames a reader's call passes through without deciding anything (comprehensions).
_PASS_THROUGH = ("<listcomp>", "<genexpr>", "<dictcomp>", "<setcomp>", "<lambda>")
#: Triton's backends decide the driver in ``triton/backends/<name>/driver.py:*.is_active``.
_TRITON_BACKENDS = "triton/backends/"


def _place(where: dict | None, function: bool = False) -> str:
    """``file:line``, with `` (function)`` when asked."""
    if not where or not where.get("file"):
        return "an unknown place"
    named = f" ({where['function']})" if function and where.get("function") else ""
    return f"{where['file']}:{where.get('line')}{named}"


def _name(function) -> str:
    """``preserve_global_state.<locals>._fn`` (an event's qualified name) -> ``_fn`` (a traceback's)."""
    return str(function or "").rsplit(".", 1)[-1]


def _same_function(a: dict, b: dict) -> bool:
    return bool(a.get("file")) and a.get("file") == b.get("file") and _name(a.get("function")) == _name(b.get("function"))


def _first_line(text: str | None, limit: int = 200) -> str:
    line = (text or "").strip().splitlines()[0] if (text or "").strip() else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _answers(read: dict, decisions: list[dict]) -> tuple[dict | None, dict | None]:
    """What the value read and the original answered: from the read, else from the decisions."""
    if read.get("answer") and read.get("original_answer"):
        return read["answer"], read["original_answer"]
    where = read.get("where") or {}
    for entry in decisions:
        if (entry.get("probe"), entry.get("file"), entry.get("line")) == (read["probe"], where.get("file"), where.get("line")):
            return entry.get("replaced_answer"), entry.get("original_answer")
    return None, None


def _decided_frame(read: dict, frames: list[tuple[int, dict]]) -> tuple[int, dict, str] | None:
    """The deepest traceback frame this read decided: (depth, frame, how), or None."""
    where = read.get("where") or {}
    best = None
    for depth, frame in frames:
        if _same_function(where, frame):
            best = (depth, frame, "on-path")
    if best is not None:
        return best
    # Called straight from a traceback frame: the reader's first caller that is not a comprehension.
    for caller in read.get("callers") or []:
        if _name(caller.get("function")) in _PASS_THROUGH:
            continue
        for depth, frame in frames:
            if _same_function(caller, frame):
                best = (depth, frame, "decided-call")
        break
    return best


def _tested_inside(read: dict, decisions: list[dict]) -> bool:
    """The read is the test of an ``if`` in the reader (``if not torch.cuda.is_available():
    return nullcontext()``): the reader decided by itself and returned. A reader that hands
    the answer back (``return torch.cuda.is_available() and ...``, Triton's ``is_active``)
    lets its caller decide."""
    where = read.get("where") or {}
    return any((entry.get("probe"), entry.get("file"), entry.get("line")) == (read["probe"], where.get("file"), where.get("line"))
               and (entry.get("decision") or {}).get("kind") == "branch"
               and not (entry.get("decision") or {}).get("through") for entry in decisions)


def _inside_taken_branch(read: dict, frame: dict, decisions: list[dict]) -> bool:
    """The frame failed inside the branch the read chose (``taken_lines`` of its decision);
    true where that is not known (no decision, or not an ``if``)."""
    where = read.get("where") or {}
    for entry in decisions:
        if (entry.get("probe"), entry.get("file"), entry.get("line")) != (read["probe"], where.get("file"), where.get("line")):
            continue
        lines = (entry.get("decision") or {}).get("taken_lines")
        if (entry.get("decision") or {}).get("through"):
            return True  # the branch is in the reader's caller, not in this frame
        if lines and frame.get("line") is not None:
            return lines[0] <= frame["line"] <= lines[1]
    return True


def _driver_event(events: list[dict], read: dict) -> dict | None:
    """The driver creation this Triton ``is_active()`` read belonged to (same step, just before it)."""
    found = None
    for event in events:
        if event["seq"] > read["seq"]:
            break
        if event.get("creates_driver") and event.get("step") == read.get("step"):
            found = event
    return found


def _triton_backend(where: dict) -> str | None:
    path = (where.get("file") or "").replace("\\", "/")
    if not path.startswith(_TRITON_BACKENDS) or not str(where.get("function", "")).endswith("is_active"):
        return None
    return path[len(_TRITON_BACKENDS):].split("/", 1)[0]


def _branch(read: dict, answer: dict, decisions: list[dict], driver: dict | None) -> str:
    backend = _triton_backend(read.get("where") or {})
    if backend is not None:
        chosen = (driver or {}).get("active_backends") or []
        took = f", and Triton chose its {backend} driver" if chosen == [backend] else ""
        return f"Triton's {backend} backend answered is_active() True{took}"
    where = read.get("where") or {}
    for entry in decisions:
        if (entry.get("probe"), entry.get("file"), entry.get("line")) != (read["probe"], where.get("file"), where.get("line")):
            continue
        decision = entry.get("decision") or {}
        if decision.get("kind") == "branch" and decision.get("now"):
            test = f"`{decision['statement']}` (line {decision['statement_line']})"
            if decision["now"].startswith("no branch"):
                return f"went on past {test}"
            return f"took the branch of {test} into {decision['now']}"
    if read["probe"].endswith(".is_available") and answer.get("repr") == "True":
        return "took the CUDA branch"
    return "took the branch that answer leads to"


def _package(where: dict | None) -> str:
    return ((where or {}).get("file") or "").replace("\\", "/").split("/", 1)[0]


def _fix(read: dict, write: dict | None, saved: str | None) -> str:
    probe = read["probe"]
    if write is not None and _package(read.get("where")) == _package(write.get("where")):
        if saved:
            return f"read the saved original {saved} there, or leave {probe} as it was"
        return f"save the original before redirecting {probe}, and read that there"
    keep = f" (the stack's own code can read the saved original {saved})" if saved else ""
    return (f"read the saved original, or leave {probe} answering the native question: "
            f"{_package(read.get('where')) or 'that code'} cannot know of the redirect{keep}")


def find_causes(events: list[dict], failure: dict, decisions: list[dict] | None = None) -> list[dict]:
    """The causes of ``failure`` among ``events`` (see the module docstring for the shapes):
    the direct ones first, then the chains (:func:`find_chains`); both where both hold."""
    return _direct_causes(events, failure, decisions) + find_chains(events, failure, decisions)


def _candidates(events: list[dict], frames: list, step: str | None, decisions: list[dict]) -> list[tuple]:
    """The reads that decided a frame of the traceback: (decided, read, answer, original, driver)."""
    candidates = []
    for read in events:
        if read.get("kind") != "read" or not read.get("saw") or (step and read.get("step") != step):
            continue
        answer, original = _answers(read, decisions)
        if not answer or not original or answer.get("repr") == original.get("repr"):
            continue
        decided = _decided_frame(read, frames)
        if decided is None:
            continue
        if decided[2] == "decided-call" and _tested_inside(read, decisions):
            continue  # the reader branched on the answer itself, then returned: not this path
        if decided[2] == "on-path" and not _inside_taken_branch(read, decided[1], decisions):
            continue  # the branch it chose had run to its end before the frame went on to fail
        driver = None
        backend = _triton_backend(read.get("where") or {})
        if backend is not None:
            driver = _driver_event(events, read)
            if driver is not None and (driver.get("is_active") or {}).get(backend) is not True:
                continue  # this backend said no in the end (HIP also needs torch.version.hip)
        candidates.append((decided, read, answer, original, driver))
    return candidates


def _direct_causes(events: list[dict], failure: dict, decisions: list[dict] | None = None) -> list[dict]:
    """Reads of a redirected probe on the failure's path (the module docstring's rule)."""
    decisions = decisions or []
    frames = [(depth, f) for depth, f in enumerate(failure.get("traceback") or [])]
    for cause in failure.get("causes") or []:
        if cause.get("at"):
            frames.append((len(frames), cause["at"]))
    if not frames:
        return []
    by_seq = {e["seq"]: e for e in events}
    saved = {e["saves"]: e["probe"] for e in events if e.get("saves")}
    step = failure.get("step")
    candidates = _candidates(events, frames, step, decisions)
    if not candidates:
        return []
    deepest = max(c[0][0] for c in candidates)
    innermost = frames[len(failure.get("traceback") or []) - 1][1] if failure.get("traceback") else frames[-1][1]
    what = failure.get("what") or _what(step)
    error = _first_line(failure.get("error"))
    out = []
    for (depth, frame, how), read, answer, original, driver in candidates:
        if depth != deepest:
            continue
        write = by_seq.get(read["saw"])
        writer = (write or {}).get("where") if (write or {}).get("writer_known", True) else None
        redirected = (f"which {_place(writer, True)} redirected" if writer and writer.get("file")
                      else "which an unknown writer redirected")
        branch = _branch(read, answer, decisions, driver)
        fix = _fix(read, write, saved.get(read["probe"]))
        message = (
            f"{what} failed: {error} in {_place(innermost, True)}; {_place(read.get('where'), True)} asked {read['probe']}(), "
            f"{redirected} to answer {answer['repr']} (the original answers {original['repr']}), "
            f"and so {branch}; {fix}."
        )
        evidence = [read["seq"]] + ([write["seq"]] if write else []) + ([driver["seq"]] if driver else [])
        out.append({
            "probe": read["probe"], "read": read["seq"], "reader": _frame(read["where"]),
            "write": write["seq"] if write else None, "writer": _frame(writer) if writer else None,
            "answer": answer.get("repr"), "original_answer": original.get("repr"),
            "frame": _frame(frame), "how": how, "branch": branch, "fix": fix,
            "message": message, "events": sorted(set(evidence)),
        })
    return out


def find_chains(events: list[dict], failure: dict, decisions: list[dict] | None = None) -> list[dict]:
    """Causes decided long before the failure: a guard read a redirected probe whose original
    answers differently, and its branch skipped code (a decision's ``skipped``); the failure's
    path then used what that code would have written (a frame running the stock function it
    would have replaced, or a frame's line naming it), or, where that code was the cuda alias,
    gave a tensor operation a ``cuda`` device (:func:`_alias_symptom`). One cause per guard, root first in its
    ``chain``: the redirect, the guard's read and branch, what was skipped, the symptom."""
    frames = list(failure.get("traceback") or []) + [c["at"] for c in failure.get("causes") or [] if c.get("at")]
    if not frames:
        return []
    by_seq = {e["seq"]: e for e in events}
    saved = {e["saves"]: e["probe"] for e in events if e.get("saves")}
    out = []
    for entry in decisions or []:
        decision = entry.get("decision") or {}
        skipped = decision.get("skipped") or {}
        if decision.get("kind") != "branch" or not skipped.get("writes") or \
                (entry.get("original_answer") or {}).get("repr") == (entry.get("replaced_answer") or {}).get("repr"):
            continue
        symptom = _symptom(frames, skipped["writes"]) or \
            _alias_symptom(entry, list(failure.get("traceback") or []), skipped["writes"])
        if symptom is None:
            continue
        read = next((e for e in events if e.get("kind") == "read" and e["probe"] == entry["probe"]
                     and e.get("saw") == entry.get("saw") and (e["where"].get("file"), e["where"].get("line"))
                     == (entry["file"], entry["line"])), None)
        if read is None:
            continue
        out.append(_chain_cause(read, by_seq.get(read["saw"]), entry, symptom, failure, saved))
    return out


def _uses(frame: dict, write: dict) -> str | None:
    """How ``frame`` used what ``write`` would have replaced: ran the stock function, or names it."""
    stock = write.get("stock")
    if stock and frame.get("file") == stock["file"] and _name(frame.get("function")) == stock["function"]:
        return f"ran stock {write['name']}"
    code = frame.get("code") or ""
    if code and _use_of(write["name"], bool(write.get("method"))).search(code):
        return f"used {write['name']} (`{code.strip()[:120]}`)"
    return None


@functools.lru_cache(maxsize=1024)
def _use_of(name: str, method: bool) -> "re.Pattern":
    """What a line that uses probe ``name`` says: ``.attr(`` for a method, else its last two
    parts as a name (cached: each failure's frames are matched against the same writes)."""
    parts = name.split(".")
    if method:
        return re.compile(rf"\.{re.escape(parts[-1])}\(")
    return re.compile(rf"\b{re.escape('.'.join(parts[-2:]))}\b")


def _symptom(frames: list[dict], writes: list[dict]) -> tuple[dict, dict, str, str] | None:
    """The innermost frame that used a skipped write: (frame, write, how, what the write would have done)."""
    for frame in reversed(frames):
        for write in writes:
            how = _uses(frame, write)
            if how:
                return frame, write, how, "which that code would have replaced"
    return None


#: What a cuda alias writes so that a ``cuda`` device means the stack's (torch_fl's
#: ``_alias_cuda_to_flagos``, the demo's): the constructor, and ``Tensor.cuda``.
ALIAS_WRITES = ("torch.device", "torch.Tensor.cuda")
#: Where torch starts its CUDA runtime: every tensor operation given a ``cuda`` device calls it
#: (from C++, so its caller on the traceback is the Python line that made the call).
_CUDA_INIT = ("torch/cuda/__init__.py", "_lazy_init")


def _alias_symptom(entry: dict, frames: list[dict], writes: list[dict]) -> tuple[dict, dict, str, str] | None:
    """A tensor operation reached torch's CUDA initialisation with a ``cuda`` device, where the
    guard (of ``torch.cuda.is_available``, whose original answers False: no CUDA runtime) skipped
    the alias that sends ``cuda`` to the stack's device: (the calling frame, the alias write, how, what
    the alias would have done).

    Whatever line made the device (a module constant, a default, a fixture, a library's
    ``to(device)``), its use ends in ``_lazy_init`` called from outside ``torch.cuda``; a
    ``torch.cuda`` function that reaches it (``torch.cuda.init()``) is one no alias redirects,
    and a stock one the alias replaces is :func:`_uses`' case. ``frames`` is the traceback
    proper: a chained exception's frame has no caller recorded beside it."""
    if not entry["probe"].endswith("cuda.is_available") or (entry.get("original_answer") or {}).get("repr") != "False":
        return None
    alias = next((w for name in ALIAS_WRITES for w in writes if w["name"] == name), None)
    if alias is None:
        return None
    for depth in range(len(frames) - 1, 0, -1):
        frame = frames[depth]
        if ((frame.get("file") or "").replace("\\", "/"), _name(frame.get("function"))) != _CUDA_INIT:
            continue
        caller = frames[depth - 1]
        if (caller.get("file") or "").replace("\\", "/").startswith("torch/cuda/"):
            return None
        code = (caller.get("code") or "").strip()[:120]
        shown = f" (`{code}`)" if code else ""
        how = f"gave a tensor operation a cuda device{shown}, which reached torch's CUDA initialisation ({_place(frame, True)})"
        return caller, alias, how, f"where the skipped alias ({alias['name']}) would have sent cuda to the stack's device"
    return None


def _chain_cause(read, write, entry, symptom, failure, saved) -> dict:
    decision = entry["decision"]
    frame, used, how, would = symptom
    writer = (write or {}).get("where") if (write or {}).get("writer_known", True) else None
    answer, original = entry["replaced_answer"].get("repr"), entry["original_answer"].get("repr")
    through = decision.get("through")
    took = f"took the branch of `{decision['statement']}` (line {decision['statement_line']})"
    took += f" and returned ({decision['now']})" if "`return" in (decision.get("now") or "") else f" into {decision.get('now')}"
    skipped = skipped_words(decision["skipped"])
    fix = _fix(read, write, saved.get(read["probe"]))
    what = failure.get("what") or _what(failure.get("step"))
    steps = [
        f"(1) {_place(writer, True) if writer else 'an unknown writer'} redirected {read['probe']} to answer "
        f"{answer} (the original answers {original})",
        f"(2) {_place(read.get('where'), True)} read it"
        + (" and handed the answer to its caller, which" if through else ", and") + f" {took}",
        f"(3) so {skipped}",
        f"(4) {_place(frame, True)} {how}, {would}",
    ]
    message = (f"{what} failed: {_first_line(failure.get('error'))}; a chain of causes, root first: "
               + "; ".join(steps) + f"; {fix}.")
    chain = [
        {"step": "redirect", "event": (write or {}).get("seq"), "where": _frame(writer) if writer else None,
         "answer": answer, "original_answer": original},
        {"step": "guard", "event": read["seq"], "where": _frame(read["where"]), "branch": took},
        {"step": "skipped", "lines": decision["skipped"]["lines"],
         "writes": [w["name"] for w in decision["skipped"]["writes"]]},
        {"step": "symptom", "frame": _frame(frame), "uses": used["name"], "how": how},
    ]
    return {
        "probe": read["probe"], "read": read["seq"], "reader": _frame(read["where"]),
        "write": (write or {}).get("seq"), "writer": _frame(writer) if writer else None,
        "answer": answer, "original_answer": original, "frame": _frame(frame), "how": "skipped-write",
        "branch": took, "fix": fix, "chain": chain, "message": message,
        "events": sorted({read["seq"]} | ({write["seq"]} if write else set())),
    }


def no_cause(failure: dict) -> str:
    """The plain sentence for a failure :func:`find_causes` found no cause of."""
    return ("No cause found among the probe's records: no frame of its traceback read a redirected "
            "probe whose original answers differently.")


def _what(step: str | None) -> str:
    if not step:
        return "the run"
    return step[len("exercise: "):] if step.startswith("exercise: ") else step


def _frame(where: dict) -> dict:
    return {"file": where.get("file"), "line": where.get("line"), "function": where.get("function")}
