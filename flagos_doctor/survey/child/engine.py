"""The survey's case engine (child side: imports torch).

One case is one overload run with the inputs of one spec profile:

1. synthesise the inputs on the CPU from the ATen schema (:mod:`.synth`), seeded from the
   overload and profile names, so a fresh worker rebuilds the very same case;
2. run the CPU reference on a copy (or, for the few overloads with no CPU kernel, an
   independent reference from :mod:`.references`); a reference that rejects the input
   makes the case INVALID_CASE, never a failure;
3. move another copy to the device with ``.to(device)`` and run the overload there; an
   exception is ERROR (``ExcType: first line``), never raised to the caller;
4. bring the results back with ``.cpu()`` and judge them (:mod:`.judge`): returned values,
   ``out=`` buffers and in-place results; random ops on their properties only;
5. when that passed, run steps 3 and 4 once more in the same process on fresh copies: a
   kernel right on its first call only (one whose cached launch path is broken) fails the
   case, its detail opening with :data:`SECOND_CALL`, whatever ran in the worker before.

Contract with the worker::

    runner = CaseRunner(device="flagos", spec=load_spec(None))
    runner.profiles("add.Tensor") -> ["2d-f32", ...]     # NoSchema if torch lacks the overload
    runner.run_case("add.Tensor", "2d-f32") -> {"status": "PASS", "detail": ""}
"""

from __future__ import annotations

import hashlib
import time
import warnings

import torch

from flagos_doctor.results import model
from flagos_doctor.stacks import torch_fl_bindings as bindings
from flagos_doctor.survey.child import references
from flagos_doctor.survey.child.judge import Judge, flatten, random_range, undefined_results
from flagos_doctor.survey.child.synth import Case, Declined, adapt_on_device, build_case, clone_tree

#: Longest detail kept for a case (the first line of an exception, a judging reason).
DETAIL_LIMIT = 300
#: Opens the detail of a case whose first device call passed and whose second failed.
SECOND_CALL = "on its second call (the first passed): "


class NoSchema(LookupError):
    """The installed torch has no such overload."""

    def __init__(self, overload: str, reason: str = ""):
        super().__init__(f"torch {torch.__version__} has no overload aten::{overload}" + (f" ({reason})" if reason else ""))
        self.overload = overload


def resolve(overload: str):
    """The OpOverload for a conf name (``abs``, ``add.Tensor``, ``aten::abs.out``); NoSchema if none."""
    name = overload.split("::", 1)[-1]
    op, _, variant = name.partition(".")
    try:
        packet = getattr(torch.ops.aten, op)
        return getattr(packet, variant or "default")
    except (AttributeError, RuntimeError) as exc:
        raise NoSchema(overload, type(exc).__name__) from None


def case_seed(overload: str, profile: str) -> int:
    """The seed of a case: a digest of its overload and profile names."""
    digest = hashlib.sha256(f"{overload}\0{profile}".encode()).digest()
    return int.from_bytes(digest[:6], "big")


def describe(exc: BaseException) -> str:
    """``ExcType: first line of the message``, cut to DETAIL_LIMIT."""
    text = str(exc).strip()
    first = text.splitlines()[0] if text else ""
    return f"{type(exc).__name__}: {first}"[:DETAIL_LIMIT] if first else type(exc).__name__


def _result(status: str, detail: str = "") -> dict:
    return {"status": status, "detail": detail[:DETAIL_LIMIT]}


def _device_error(detail: str) -> dict:
    """ERROR, or MISSING_FUNCTION when the error says the binding's FlagGems function is not
    in the installed flag_gems (a version drift, not a kernel bug: see :mod:`flagos_doctor.stacks.torch_fl_bindings`)."""
    function = model.missing_from_detail(detail)
    if function:
        return _result(model.MISSING_FUNCTION, bindings.missing_detail(function, detail))
    return _result(model.ERROR, detail)


class CaseRunner:
    """Runs the cases of a survey spec on one device (``"flagos"``, ``"cuda:0"``, ``"cpu"``)."""

    def __init__(self, device: str, spec):
        self.device = torch.device(device)
        self.spec = spec
        self.judge = Judge(spec, self.device.type)
        self.device_seconds: float | None = None

    def profiles(self, overload: str) -> list:
        """The profile names to run for ``overload``; raises NoSchema if torch lacks it."""
        resolve(overload)
        return [profile.name for profile in self.spec.profiles]

    def run_case(self, overload: str, profile: str) -> dict:
        """Run one case; ``{"status", "detail"}``. Raises NoSchema or KeyError (unknown profile) only.

        Afterwards ``device_seconds`` holds how long the overload itself took on the device
        (the call and a synchronize: on a GPU, a first call's kernel compile or autotune
        shows here), or None when the case never reached the device (an exception there still counts).
        """
        self.device_seconds = None
        op = resolve(overload)
        prof = self.spec.profile(profile)
        seed = case_seed(overload, profile)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return self._run(op, overload, prof, seed)

    # -- the steps ----------------------------------------------------------------------
    def _run(self, op, overload: str, profile, seed: int) -> dict:
        try:
            case = build_case(op, overload, profile, seed)
        except Declined as exc:
            return _result(model.INVALID_CASE, f"synthesis: {exc}")
        except Exception as exc:  # a derived value the CPU rejects: same as the reference rejecting
            return _result(model.INVALID_CASE, f"synthesis: {describe(exc)}")
        names = [arg.name for arg in op._schema.arguments]
        pristine = _named(names, clone_case(case))
        reference_case = clone_case(case)

        alternative = references.ALTERNATIVES.get(overload)
        self._seed(seed)
        try:
            if alternative is not None:
                expected = alternative.run(_named(names, reference_case), reference_case)
            else:
                expected = op(*reference_case.args, **reference_case.kwargs)
        except references.Unverifiable as exc:
            return _result(model.UNVERIFIABLE, str(exc))
        except Exception as exc:
            return _result(model.INVALID_CASE, f"reference: {describe(exc)}")

        first = self._device_arm(op, overload, profile.name, case, seed, alternative, expected, reference_case,
                                 pristine)
        if first["status"] != model.PASS:
            return first
        # The same case once more in this process, on fresh copies: a kernel must be right on
        # every call, not only on its first (flag_gems 4.2.0 on Triton 3.6 launches a kernel
        # it has already compiled with too few arguments). Without this, such a case passes
        # or fails by whether another case in the same worker ran that kernel before, and two
        # runs of one stack disagree (the repeats called it FLAKY).
        first_seconds = self.device_seconds
        second = self._device_arm(op, overload, profile.name, case, seed, alternative, expected, reference_case,
                                  pristine)
        self.device_seconds = first_seconds  # the first call's: where a compile or an autotune shows
        if second["status"] != model.PASS:
            return _result(second["status"], SECOND_CALL + second["detail"])
        return first

    def _device_arm(self, op, overload: str, profile_name: str, case: Case, seed: int, alternative, expected,
                    reference_case: Case, pristine: dict) -> dict:
        """Run the overload on the device on a fresh copy of ``case``, and judge it: a result."""
        clock = None
        try:
            device_case = self._to_device(case)
            adapt_on_device(overload, op, device_case)
            self._seed(seed)
            clock = time.perf_counter()
            actual = op(*device_case.args, **device_case.kwargs)
            self._synchronize()
        except Exception as exc:
            if alternative is not None and self.device.type == "cpu" and isinstance(exc, NotImplementedError):
                return _result(model.UNVERIFIABLE,
                               f"no CPU kernel to run the device arm on (reference: {alternative.source})")
            return _device_error(describe(exc))
        finally:
            if clock is not None:
                self.device_seconds = time.perf_counter() - clock

        defined = self.spec.implementation_defined_reason(overload, profile_name)
        try:
            if defined is not None:
                problem = self._judge_placement(expected, actual, reference_case, device_case)
            else:
                problem = self._judge(overload, expected, actual, reference_case, device_case, pristine)
        except Exception as exc:  # reading results back from the device failed
            return _result(model.ERROR, f"reading results: {describe(exc)}")
        if problem:
            return _result(model.WRONG, problem)
        if defined is not None:
            return _result(model.PASS, f"implementation-defined values, not compared: {defined}")
        if self.spec.is_random(overload):
            return _result(model.PASS, "random op: device, dtype, shape, finiteness and range checked")
        _, _, why = undefined_results(overload, pristine)
        return _result(model.PASS, f"not compared: {why}" if why else "")

    def _judge(self, overload, expected, actual, reference_case: Case, device_case: Case, pristine: dict):
        judge = self.judge
        if self.spec.is_random(overload):
            problem = judge.random(expected, actual)
            for slot, name in reference_case.written:
                problem = problem or judge.random(reference_case.get(slot), device_case.get(slot))
            return problem or random_range(overload, pristine, actual)
        problem = judge.results(overload, expected, actual, pristine)
        if problem:
            return problem
        _, undefined, _ = undefined_results(overload, pristine)
        for slot, name in reference_case.written:
            if name in undefined:
                continue
            label = "out" if name == "out" else f"{name} (written)"
            problem = judge.tensor(reference_case.get(slot), device_case.get(slot), label)
            if problem:
                return problem
        return None

    def _judge_placement(self, expected, actual, reference_case: Case, device_case: Case):
        """Device, shape and dtype of every result: for cases whose values the spec declares
        implementation-defined."""
        pairs = list(zip(flatten(expected), flatten(actual)))
        if len(flatten(expected)) != len(flatten(actual)):
            return f"returned {len(flatten(actual))} values, the reference {len(flatten(expected))}"
        pairs += [(reference_case.get(slot), device_case.get(slot)) for slot, _ in reference_case.written]
        for index, (want, got) in enumerate(pairs):
            if isinstance(want, torch.Tensor):
                if not isinstance(got, torch.Tensor):
                    return f"result {index}: {type(got).__name__} where the reference has a tensor"
                problem = self.judge.placement(want, got, f"result {index}")
                if problem:
                    return problem
        return None

    def _to_device(self, case: Case) -> Case:
        fresh = clone_case(case)
        return Case([self._move(v) for v in fresh.args], {k: self._move(v) for k, v in fresh.kwargs.items()},
                    fresh.written)

    def _move(self, value):
        if isinstance(value, torch.Tensor):
            return value.to(self.device)
        if isinstance(value, torch.device):
            return self.device
        if isinstance(value, list):
            return [self._move(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._move(v) for v in value)
        return value

    def _seed(self, seed: int) -> None:
        # Only the CPU generator and CUDA's: torch.manual_seed would also call a custom
        # device module's manual_seed_all, which some stacks (the demo's) route back into
        # torch.manual_seed. Random ops are judged on properties, so their values need no seed.
        torch.random.default_generator.manual_seed(seed)
        if self.device.type == "cuda":
            torch.cuda.manual_seed_all(seed)

    def _synchronize(self) -> None:
        if self.device.type == "cpu":
            return
        module = getattr(torch, self.device.type, None)
        sync = getattr(module, "synchronize", None)
        if callable(sync):
            sync()


def clone_case(case: Case) -> Case:
    return Case([clone_tree(v) for v in case.args], {k: clone_tree(v) for k, v in case.kwargs.items()},
                case.written)


def _named(names: list, case: Case) -> dict:
    named = dict(zip(names, case.args))
    named.update(case.kwargs)
    return named
