"""The probe's child process: ``python -m flagos_doctor.probe.child CONFIG_JSON``.

Installs the tracer before anything of the stack is imported, then runs the steps (each
import, then the exercise steps), streaming records to the parent as they happen:

* ``hello``: interpreter and platform; ``notice``: a line for the user;
* ``imports``: the modules about to be imported; ``phase``: a step begins;
* ``event``: a write, read or delete of a probe (see :mod:`.tracer`); ``saved``: a saved original;
* ``outcome``: how a step ended (value or exception);
* ``final``: each probe's final state, and the facts the findings need; ``done``.

A child that crashes or hangs has already delivered every record before that moment.
Standard library only until the stack itself imports torch.
"""

from __future__ import annotations

import faulthandler
import importlib
import importlib.util
import json
import os
import platform
import sys
import time
import traceback

from flagos_doctor import stacks
from flagos_doctor.channel import ChildChannel
from flagos_doctor.probe import decisions
from flagos_doctor.probe import tracer as tracing
from flagos_doctor.probe import watch

_ALIAS_OFF = ("0", "off", "false")
_ALIAS_ON = ("1", "on", "true")


def package_dirs(module: str) -> list[str]:
    """Where a module's code lives: its package folder(s), or its file; [] if not found."""
    try:
        spec = importlib.util.find_spec(module)
    except Exception:
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:
        return [os.path.abspath(p) + os.sep for p in spec.submodule_search_locations]
    return [os.path.abspath(spec.origin)] if spec.origin and os.path.exists(spec.origin) else []


def modules_to_import(config: dict, channel: ChildChannel) -> list[str]:
    """The stack's modules (:attr:`flagos_doctor.stacks.base.Stack.probe_imports`), then the
    ``--import`` ones; with neither, the stack the default-stack rule finds here."""
    modules = list(stacks.get(config["stack"]).probe_imports) if config.get("stack") else []
    modules += [m for m in config.get("imports", []) if m not in modules]
    if modules:
        return modules
    detected = stacks.get(stacks.detect())
    if detected.name == stacks.DETECTED[-1]:
        channel.emit({"record": "notice", "text": f"{stacks.DETECTED[0]} is not installed for {sys.executable}; probing {detected.name} alone"})
    return list(detected.probe_imports)


def error_text(exc: BaseException) -> str:
    """``Type: message``, at most 2,000 characters; an exception whose ``str()`` raises is
    still one (as Python's own traceback says it), so its failure is never lost with it."""
    try:
        message = str(exc)
    except Exception:
        message = "<exception str() failed>"
    return f"{type(exc).__name__}: {message}"[:2000]


def _frames(tracer, tb) -> list[dict]:
    """A traceback's frames, without importlib's and the probe's own, last 32 (the cause
    engine looks for the frame a probe read decided; Triton's driver creation alone is 7)."""
    return [
        {"file": tracer.short(f.filename), "line": f.lineno, "function": f.name, "code": (f.line or "")[:200]}
        for f in traceback.extract_tb(tb)
        if not f.filename.startswith("<frozen") and not f.filename.startswith(os.path.dirname(tracing.__file__))
    ][-32:]


def cause_chain(tracer, exc: BaseException, limit: int = 5) -> list[dict]:
    """The exceptions behind ``exc``, outermost first: torch's autoload wraps a plugin's
    error in its own RuntimeError, and the root cause (a missing shared library) is below."""
    causes = []
    seen = {id(exc)}
    while len(causes) < limit:
        nxt = exc.__cause__ if exc.__cause__ is not None else (None if exc.__suppress_context__ else exc.__context__)
        if nxt is None or id(nxt) in seen:
            break
        seen.add(id(nxt))
        frames = _frames(tracer, nxt.__traceback__)
        causes.append({
            "error": error_text(nxt), "explicit": exc.__cause__ is nxt,
            "at": frames[-1] if frames else None,
        })
        exc = nxt
    return causes


def run_step(tracer, channel, name: str, dirs: list[str], action):
    """Run one step as a phase; emit its outcome; return (ok, value)."""
    tracer.begin_step(name, dirs)
    started = time.perf_counter()
    record = {"record": "outcome", "step": name}
    try:
        value = action()
        ok = True
        record["value"] = tracing.safe_repr(value, 300) if not isinstance(value, str) else value
    except BaseException as exc:  # a stack that raises SystemExit at import is still a failure
        ok, value = False, exc
        record["error"] = error_text(exc)
        record["traceback"] = _frames(tracer, exc.__traceback__)
        causes = cause_chain(tracer, exc)
        if causes:
            record["causes"] = causes
    record["ok"] = ok
    record["seconds"] = round(time.perf_counter() - started, 3)
    tracer.end_step()
    channel.emit(record)
    return ok, value


def exercise(tracer, channel, compile_: bool) -> None:
    """Use the device the way a user would, each use a phase, so lazy writers show up."""
    import torch

    name = torch._C._get_privateuse1_backend_name()
    device = name if name != "privateuseone" else "cuda"
    dirs = list(tracer.stack_dirs)
    module = getattr(torch, device, None)

    def current_device():
        if module is None:
            raise RuntimeError(f"torch.{device} does not exist")
        return module.current_device()

    run_step(tracer, channel, f"exercise: torch.{device}.current_device()", dirs, current_device)

    def tensor():
        t = torch.ones(4, device=device) * 2
        return t

    ok, tensor_value = run_step(tracer, channel, f"exercise: a tensor on {device}", dirs, tensor)
    run_step(tracer, channel, 'exercise: torch.device("cuda")', dirs, lambda: torch.device("cuda"))
    if not compile_:
        return

    def compiled():
        if not ok:
            raise RuntimeError(f"skipped: no tensor could be made on {device}")

        def double_plus_one(x):
            return (x * 2 + 1).relu()

        backends = torch._dynamo.list_backends(exclude_tags=())
        backend = name if name in backends else "inductor"
        got = torch.compile(double_plus_one, fullgraph=True, backend=backend)(tensor_value)
        same = torch.equal(got.cpu(), double_plus_one(tensor_value).cpu())
        return f"backend {backend!r}: {'matches eager' if same else 'DIFFERS from eager'}"

    run_step(tracer, channel, "exercise: torch.compile(fn, fullgraph=True)", dirs, compiled)


def _call(fn):
    try:
        return {"ok": True, "repr": tracing.safe_repr(fn())}
    except Exception as exc:
        return {"ok": False, "repr": error_text(exc)[:300]}


def final_state(tracer) -> dict:
    """Each probe's final value, whether it is the original, and cheap calls of both."""
    tracer.begin_step("final state", list(tracer.stack_dirs))
    probes = _final_probes(tracer)
    facts = _final_facts(tracer)
    tracer.end_step()
    # Last, and unheard: the decisions the other answer would have made (see decisions.py).
    busy = tracer.busy
    tracer.busy, tracer.emit = True, lambda record: None
    try:
        facts["decisions"] = decisions.collect(tracer)
    except Exception as exc:  # a counterfactual that fails must not cost the probe its result
        facts["decisions_error"] = error_text(exc)
    finally:
        tracer.busy = busy
        del tracer.emit
    return {"record": "final", "probes": probes, "facts": facts}


def _final_probes(tracer) -> list[dict]:
    """Each resolved probe's final value against its original, with the cheap calls
    (``is_available``...) of the final one and, where it was replaced, of the original."""
    probes = []
    for probe in list(tracer.probes.values()):
        if probe["kind"] == "state":
            continue
        final = tracing._static_get(probe["owner"], probe["attr"]) if probe["resolved"] else tracing._MISSING
        entry = {
            "name": probe["name"], "kind": probe["kind"], "resolved": probe["resolved"],
            "final": tracer.describe(final),
            "original": tracing.same_value(final, probe["original"]) if probe["resolved"] else None,
            "original_value": tracer.describe(probe["original"]),
        }
        if probe["attr"] in tracing._CHEAP_CALLS and probe["resolved"]:
            if callable(final):
                entry["call"] = _call(final)
            if callable(probe["original"]) and not tracing.same_value(final, probe["original"]):
                entry["original_call"] = _call(probe["original"])
        probes.append(entry)
    return probes


def _final_facts(tracer) -> dict:
    """What the process ended with: the PrivateUse1 name, the environment variables the
    stack read or wrote, torch's and triton's answers, the reads the probes saw."""
    state = tracer.probes[watch.PRIVATEUSE1_NAME]
    pu1 = state["last"] if state["last"] is not tracing._MISSING else None
    env = {}
    for key in sorted(set(tracer.env_last) | set(tracer.env_original)):
        env[key] = {"final": tracer.env_last.get(key), "original": tracer.env_original.get(key)}
    facts = {"privateuse1": pu1, "torch_imported": "torch" in sys.modules, "env": env}
    torch = sys.modules.get("torch")
    if torch is not None:
        native = tracer.probes.get("torch.cuda.is_available", {}).get("original", tracing._MISSING)
        if callable(native):
            facts["native_cuda_available"] = _call(native)
        facts["alias_turned_off"] = os.environ.get("FLAGOS_ALIAS_CUDA", "1").strip().lower() in _ALIAS_OFF
        facts["alias_declared"] = os.environ.get("FLAGOS_ALIAS_CUDA", "").strip().lower() in _ALIAS_ON
        facts["cuda_maps_to"] = _call(lambda: torch.device("cuda").type)
        device_module = getattr(torch, pu1, None) if pu1 and pu1 != "privateuseone" else None
        if device_module is not None and callable(getattr(device_module, "device_count", None)):
            facts["device_count"] = _call(device_module.device_count)
    driver_module = sys.modules.get("triton.runtime.driver")
    if driver_module is not None:
        driver = getattr(driver_module, "driver", None)
        facts["triton"] = {
            "imported": True,
            "default": tracer.describe(tracing._static_get(driver, "_default")),
            "active": tracer.describe(tracing._static_get(driver, "_active")),
        }
    facts["reads"] = [
        {"probe": k[0], "file": tracer.short(k[1]), "line": k[2], "saw": k[3], "count": n}
        for k, n in tracer.read_keys.items()
    ]
    facts["saved"] = tracer.saved
    torch_fl = decisions.torch_fl_vendor()
    if torch_fl is not None:
        facts["torch_fl"] = torch_fl
    return facts


def main() -> None:
    channel = ChildChannel.from_env()
    try:
        os.set_inheritable(channel._write_fd, False)  # compile workers must not hold our pipe
    except OSError:
        pass
    config = json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}
    if config.get("timeout"):
        # Just before the parent gives up on us, leave our stacks in the stderr tail.
        faulthandler.dump_traceback_later(max(0.5, config["timeout"] - min(2.0, config["timeout"] * 0.1)))
    probes = list(dict.fromkeys(watch.DEFAULT_PROBES + config.get("probes", [])))
    env = list(dict.fromkeys(watch.DEFAULT_ENV + config.get("env", [])))
    tracer = tracing.Tracer(channel.emit, probes, env)
    tracer.install()
    channel.emit({
        "record": "hello", "python": sys.version.split()[0], "executable": sys.executable,
        "platform": platform.platform(), "pid": os.getpid(), "dict_watchers": tracer.dict_watch is not None,
    })
    modules = modules_to_import(config, channel)
    channel.emit({"record": "imports", "modules": modules})
    failed = False
    for module in modules:
        ok, _ = run_step(tracer, channel, f"import {module}", package_dirs(module), lambda m=module: importlib.import_module(m) and "imported")
        if not ok:
            failed = True
            break
    if config.get("exercise", True) and not failed:
        try:
            exercise(tracer, channel, config.get("compile", True))
        except BaseException as exc:
            channel.emit({"record": "notice", "text": f"exercise stopped: {error_text(exc)}"})
    channel.emit(final_state(tracer))
    channel.emit({"record": "done"})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # no interpreter teardown: a stack's atexit handlers are not ours to run


if __name__ == "__main__":
    main()
