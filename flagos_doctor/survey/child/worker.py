"""The survey worker: a child process that imports the stack once and runs many cases.

Started by :mod:`flagos_doctor.survey.pool` as ``python -m flagos_doctor.survey.child.worker``;
requests and records travel over :mod:`flagos_doctor.channel`. After the stack is set up,
file descriptors 1 and 2 point at a capture file the parent opened (``capture_fd``, passed
down, its name already removed), so whatever a case
prints (torch_fl's dispatch and fallback lines, a CUDA error, a traceback before a crash)
is read back per case here and, after a crash, by the parent.

Requests and the records they produce::

    {"op": "init", "stack", "device", "spec", "capture_fd", "backend", "list_only", "baseline",
     "autotune_timing"}
        -> {"record": "ready", "device", "provenance", "baseline"} | {"record": "setup_error", "error", "missing"}
    {"op": "list"} -> {"record": "registered", "overloads"}
    {"op": "overload", "name", "profiles": [...] | null}
        -> {"record": "no_schema", "detail"} | {"record": "profiles", "profiles"},
           then per case {"record": "start", "profile"}, any {"record": "wait", "what",
           "begin", ("seconds")} (Triton compiling or autotuning: child/compile_wait.py),
           and {"record": "case", ...},
           then {"record": "done"}; after a poisoned case the worker exits instead.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import traceback

from flagos_doctor.channel import ChildChannel
from flagos_doctor.errors import BadInput
from flagos_doctor import stacks
from flagos_doctor.stacks import evidence
from flagos_doctor.survey.child import compile_pool
from flagos_doctor.results import case as case_record, model

#: Messages that say the device context is dead (as upstream harness v4, plus HIP's words):
#: every later result in this process is suspect, so the worker is replaced.
POISON_RE = re.compile(
    r"illegal memory access|device-side assert|unspecified launch failure|misaligned address|"
    r"vmfault|acceleratorerror|illegal instruction was encountered|hipErrorIllegalAddress",
    re.IGNORECASE,
)


def set_parent_death_signal() -> None:
    # A parent killed with SIGKILL must not leave workers behind (they run in their own
    # session so that a timeout can kill a whole group).
    try:
        import ctypes
        import signal

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


#: A worker started while the main phase runs (survey/confirm.py) runs at this niceness: its start
#: (the stack's import) takes only the cycles the main phase's compiles leave idle.
NICE_VAR = "FLAGOS_DOCTOR_NICE"


def _lower_priority() -> None:
    try:
        os.nice(int(os.environ.pop(NICE_VAR, "0") or 0))
    except (OSError, ValueError):
        pass


class Capture:
    """Descriptors 1 and 2 appended to one file (the parent's, without a name: it may hold
    raw secrets); read back what each case printed."""

    def __init__(self, fd: int):
        self.fd = fd
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(fd, 1)
        os.dup2(fd, 2)

    def mark(self) -> int:
        sys.stdout.flush()
        sys.stderr.flush()
        return os.fstat(2).st_size

    def since(self, offset: int) -> str:
        size = self.mark()
        return os.pread(self.fd, max(size - offset, 0), offset).decode("utf-8", "replace")


def _short(text: str, limit: int = 600) -> str:
    text = text.strip()
    return text if len(text) <= limit else text[: limit // 2] + " ... " + text[-limit // 2 :]


class Worker:
    def __init__(self, channel: ChildChannel):
        self.channel = channel
        self.stack = None
        self.runner = None
        self.capture = None
        self.backend = "flagos_python"
        self.triton_times = None  # compile and autotune figures per case, when the stack loaded Triton
        self.compile_wait = None  # announces compile / autotune waits, which --timeout does not count

    # -- init ---------------------------------------------------------------------------
    def init(self, request: dict) -> bool:
        self.backend = request.get("backend") or self.backend
        self.stack = stacks.get(request["stack"])
        try:
            # A baseline worker sets up the stack's native path instead (see flagos_doctor.stacks.base.Stack).
            device = self.stack.setup_baseline() if request.get("baseline") else self.stack.setup()
            if request.get("device"):
                device = request["device"]
                check_device(device)
            if not request.get("list_only"):
                from flagos_doctor.survey.child.engine import CaseRunner
                from flagos_doctor.survey.spec import load_spec

                self.runner = CaseRunner(device=device, spec=load_spec(request.get("spec")))
        except BaseException as exc:  # the stack cannot start: say why, then end
            missing = isinstance(exc, ModuleNotFoundError) and exc.name == request["stack"].split(".")[0]
            self.channel.emit(
                {
                    "record": "setup_error",
                    "error": f"{type(exc).__name__}: {getattr(exc, 'message', exc)}",
                    "traceback": traceback.format_exc()[-2000:],
                    "missing": missing,
                    "bad_input": isinstance(exc, (BadDevice, BadInput)),
                    "where": getattr(exc, "where", None) or "--device",  # the option at fault
                }
            )
            return False
        if request.get("capture_fd") is not None:
            self.capture = Capture(request["capture_fd"])
        from flagos_doctor.survey.child import autotune_timing
        from flagos_doctor.survey.child.triton_timing import TritonTimes

        timing = autotune_timing.install(request.get("autotune_timing") or "short")
        pooled = compile_pool.install()  # inside the autotune figures and waits wrapped below
        times = TritonTimes()
        self.triton_times = times if times.install() else None
        from flagos_doctor.survey.child.compile_lock import CompileLock
        from flagos_doctor.survey.child.compile_wait import CompileWait

        # The lock goes in first, so the wait for another worker's compilation is inside the
        # announced compile wait: --timeout does not count it either.
        lock = CompileLock.for_survey(times.lock_waited if self.triton_times else None)
        if lock is not None:
            lock.install()
        wait = CompileWait(self.channel.emit)
        self.compile_wait = wait if wait.install() else None
        found = provenance(self.stack, device)
        found["autotune_timing"] = timing
        found["compile_pool"] = pooled
        if self.triton_times is not None:  # how the cases' autotune figures were taken (triton_timing.py)
            found["triton_autotune_figures"] = times.autotune_source
        self.channel.emit({"record": "ready", "device": device, "provenance": found,
                           "baseline": self.stack.baseline_label()})
        return True

    # -- one overload -------------------------------------------------------------------
    def overload(self, request: dict) -> bool:
        """Run the cases of one overload; return False when the worker must end (poison)."""
        from flagos_doctor.survey.child.engine import NoSchema

        name = request["name"]
        try:
            profiles = self.runner.profiles(name)
        except NoSchema as exc:
            self.channel.emit({"record": "no_schema", "overload": name, "detail": _short(str(exc) or "no such overload")})
            self.channel.emit({"record": "done", "overload": name})
            return True
        self.channel.emit({"record": "profiles", "overload": name, "profiles": list(profiles)})
        wanted = request.get("profiles")
        for profile in profiles:
            if wanted is not None and profile not in wanted:
                continue
            offset = self.capture.mark() if self.capture else 0
            self.channel.emit({"record": "start", "overload": name, "profile": profile, "offset": offset})
            record = self.case(name, profile, offset)
            self.channel.emit(record)
            if record.get("poison"):
                return False
        self.channel.emit({"record": "done", "overload": name})
        return True

    def case(self, name: str, profile: str, offset: int) -> dict:
        clock = time.perf_counter()
        triton_before = self.triton_times.snapshot() if self.triton_times else None
        autotunings_before = compile_pool.mark()
        before = self.stack.begin_case()
        if self.compile_wait is not None:
            self.compile_wait.case(True)
        outcome: dict = {}
        try:
            outcome = self.runner.run_case(name, profile)
            status, detail = outcome["status"], outcome.get("detail", "")
        except Exception as exc:  # the contract says never; a bug of the engine is still a case
            status, detail = model.ERROR, f"harness: {type(exc).__name__}: {exc}"
        finally:
            if self.compile_wait is not None:
                self.compile_wait.case(False)
        captured = self.capture.since(offset) if self.capture else ""
        route, note = self.stack.evidence(name, before, captured, self.backend)
        if status in (model.INVALID_CASE, model.UNVERIFIABLE, model.NO_SCHEMA) and route == model.ROUTE_UNKNOWN:
            route = model.ROUTE_NONE
        record = {
            "record": "case",
            "overload": name,
            "profile": profile,
            "status": status,
            "route": route,
            "detail": detail if isinstance(detail, str) else json.dumps(detail, sort_keys=True, default=repr),
        }
        if note:
            record["evidence"] = note
        # Times are for finding slow kernels and for the benchmarks; the census leaves them out.
        record["seconds"] = round(time.perf_counter() - clock, 4)
        if self.runner.device_seconds is not None:
            record["device_seconds"] = round(self.runner.device_seconds, 4)
        if triton_before is not None:
            triton = self.triton_times.since(triton_before)
            if triton:
                record["triton"] = triton
        compile_ahead = compile_pool.since(autotunings_before)
        if compile_ahead:
            record["compile_ahead"] = compile_ahead
        poison = POISON_RE.search(f"{record['detail']}\n{evidence.strip_evidence(captured)}")
        if poison:
            if status != model.ERROR:
                record["detail"] = f"{status} but the context is poisoned: {record['detail']}"
            record["status"] = model.ERROR
            record["poison"] = poison.group(0)
            tail = evidence.strip_evidence(captured)
            if tail:
                record["stderr_tail"] = _short(tail, 1500)
        record.update(case_record.derived(record, outcome))  # the fields results/case.py derives
        return record

    # -- loop ---------------------------------------------------------------------------
    def serve(self) -> int:
        while True:
            request = self.channel.receive()
            if request is None:
                return 0
            op = request.get("op")
            if op == "init":
                if not self.init(request):
                    return 1
            elif op == "list":
                try:
                    overloads = self.stack.registered()
                    self.channel.emit({"record": "registered", "overloads": sorted(set(overloads))})
                except Exception as exc:
                    self.channel.emit({"record": "setup_error", "error": f"{type(exc).__name__}: {exc}", "missing": False})
            elif op == "overload":
                if not self.overload(request):
                    return 0
            else:
                self.channel.emit({"record": "setup_error", "error": f"unknown request {op!r}", "missing": False})


# -- provenance (child side: the versions of the interpreter the stack lives in) --------------


class BadDevice(ValueError):
    """``--device`` names no device torch knows here."""


def check_device(device: str) -> None:
    """Raise BadDevice, in a few words, when torch cannot parse ``device`` (torch's own
    message lists some twenty device types, hundreds of characters, none of them the one
    the user mistyped)."""
    import torch

    try:
        torch.device(device)
    except (RuntimeError, ValueError, TypeError):
        try:
            own = torch._C._get_privateuse1_backend_name()
        except Exception:  # an older torch: no PrivateUse1 name to offer
            own = "privateuseone"
        raise BadDevice(f"unknown device {device!r}: expected a type such as cpu, cuda or {own}, "
                        "with an optional :INDEX") from None


def device_info(device: str) -> dict:
    import torch

    info = {"string": device, "type": None, "name": None, "count": None}
    try:
        dev = torch.device(device)
        info["type"] = dev.type
        module = getattr(torch, dev.type, None)
        if module is not None and hasattr(module, "device_count"):
            info["count"] = int(module.device_count())
        if module is not None and hasattr(module, "mem_get_info") and dev.type != "cpu":
            try:  # how many workers the device holds (survey/sizing.py)
                free, total = module.mem_get_info(dev.index or 0)
                info["memory_free"], info["memory_total"] = int(free), int(total)
            except Exception:
                pass
        if module is not None and hasattr(module, "get_device_name"):
            info["name"] = str(module.get_device_name(dev.index or 0))
        elif dev.type == "cpu":
            import platform

            info["name"] = platform.processor() or platform.machine()
    except Exception as exc:  # a half-working device API is a finding, not a reason to stop
        info["error"] = f"{type(exc).__name__}: {exc}"[:300]
    return info


def provenance(stack, device: str) -> dict:
    import platform

    import torch

    own = stack.provenance()  # the stack's part: stack, store_key, torch_fl (stacks.base.Stack)
    return {
        "stack": own["stack"],
        "store_key": own["store_key"],
        "python": platform.python_version(),
        "python_executable": sys.executable,
        "torch": torch.__version__,
        "triton": stacks.dist_version("triton"),
        "flag_gems": stacks.dist_version("flag_gems"),
        "torch_fl": own.get("torch_fl"),
        "device": device_info(device),
        "visible_devices": {k: v for k, v in os.environ.items() if k.endswith("VISIBLE_DEVICES")},
        "triton_autotune_cache": triton_autotune_cache(),
        **own,
    }


def triton_autotune_cache() -> bool | None:
    """Whether Triton, as the stack imported it, keeps autotuning results in its cache
    folder for other processes (TRITON_CACHE_AUTOTUNING); None when Triton is not loaded."""
    triton = sys.modules.get("triton")
    if triton is None:
        return None
    try:
        return bool(triton.knobs.autotuning.cache)
    except AttributeError:  # a Triton before knobs: the autotuner reads the variable itself
        return os.environ.get("TRITON_CACHE_AUTOTUNING", "0").lower() in ("1", "true", "on", "yes")


def main() -> int:
    set_parent_death_signal()
    _lower_priority()
    return Worker(ChildChannel.from_env()).serve()


if __name__ == "__main__":
    sys.exit(main())
