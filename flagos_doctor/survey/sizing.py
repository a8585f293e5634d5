"""How many survey workers this machine holds: the default ``--workers``, and the cap on one given.

A worker is a whole interpreter with the stack imported (torch, Triton, FlagGems: a few
hundred MB on a CPU machine, more with a device runtime) and, on a GPU, a device context.
Compilation is CPU work that each worker does for itself; autotuning and the cases are
device work that the workers of one device take turns at. So:

* without ``--workers``, one worker per core this process may run on (affinity and a
  cgroup's CPU quota counted), no more than host memory holds, and, once the first worker
  has said what the device has, no more than the device's free memory holds;
* an explicit ``--workers`` above what the machine holds (host memory, or more than
  :data:`WORKERS_PER_CORE` per core) is capped, with a notice; one more than
  :data:`ABSURD_FACTOR` times that is refused as a usage error (exit 2) rather than
  silently turned into something else.

The choice, its limits and the reason are kept in the run's provenance. Standard library
only (the parent reads this before any worker starts; it never imports torch).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from flagos_doctor import stacks
from flagos_doctor.errors import BadInput

GIB = 1 << 30
#: Device memory a worker is expected to need: its context, the allocator's cache of a
#: survey's small tensors, and the buffers an autotuner benchmarks with.
WORKER_DEVICE_BYTES = 2 * GIB
#: More workers than this per core only queue for the CPU while each holds an interpreter.
WORKERS_PER_CORE = 4
#: An explicit --workers more than this many times what the machine holds is refused.
ABSURD_FACTOR = 10


@dataclass(frozen=True)
class Machine:
    """What the parent can see of the machine: usable cores and available host memory."""

    cores: int
    memory_bytes: int | None  # None: unknown on this platform

    @classmethod
    def here(cls) -> "Machine":
        return cls(cores=usable_cores(), memory_bytes=available_memory())


@dataclass
class Choice:
    """How many workers a survey runs, and why (``provenance()`` is what the results keep)."""

    workers: int
    requested: int | None  # --workers, or None for the default
    limits: dict = field(default_factory=dict)  # name -> workers that limit allows
    why: str = ""
    notices: list[str] = field(default_factory=list)
    devices_visible: int | None = None  # what the first worker's device API counts

    def provenance(self) -> dict:
        return {"workers": self.workers, "requested": self.requested, "limits": dict(self.limits), "why": self.why,
                "devices_visible": self.devices_visible}


def usable_cores() -> int:
    """The cores this process may run on: its affinity, lowered by a cgroup v2 CPU quota."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    try:
        with open("/sys/fs/cgroup/cpu.max", encoding="ascii") as handle:
            quota, period = handle.read().split()[:2]
        if quota != "max":
            cores = min(cores, max(1, int(int(quota) / int(period))))
    except (OSError, ValueError):
        pass
    return max(1, cores)


def available_memory() -> int | None:
    """Host memory available to new processes: MemAvailable, lowered by a cgroup v2 limit."""
    found = None
    try:
        with open("/proc/meminfo", encoding="ascii") as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    found = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError):
        pass
    if found is None:
        try:
            found = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        except (AttributeError, ValueError, OSError):
            found = None
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            limit = handle.read().strip()
        with open("/sys/fs/cgroup/memory.current", encoding="ascii") as handle:
            used = int(handle.read().strip())
        if limit != "max":
            room = max(0, int(limit) - used)
            found = room if found is None else min(found, room)
    except (OSError, ValueError):
        pass
    return found


def _memory_limit(machine: Machine, stack: str) -> int | None:
    if machine.memory_bytes is None:
        return None
    return max(1, machine.memory_bytes // stacks.get(stack).worker_host_bytes)


def choose(requested: int | None, machine: Machine, stack: str, per_overload: bool = False) -> Choice:
    """The worker count for a survey of ``stack`` on ``machine``.

    ``per_overload`` (``--isolation per-overload``, upstream's cost model: one process per
    overload, one after the other) defaults to one worker.

    Raises BadInput for ``requested`` below 1 or more than ABSURD_FACTOR times what the
    machine holds.
    """
    if requested is not None and requested < 1:
        raise BadInput("--workers must be at least 1")
    memory = _memory_limit(machine, stack)
    per_gib = stacks.get(stack).worker_host_bytes / GIB
    memory_words = (f"{machine.memory_bytes / GIB:.1f} GiB of memory available at {per_gib:g} GiB a worker"
                    if machine.memory_bytes is not None else "memory unknown")
    holds = min(WORKERS_PER_CORE * machine.cores, memory if memory is not None else WORKERS_PER_CORE * machine.cores)
    limits = {"cores": machine.cores}
    if memory is not None:
        limits["host_memory"] = memory
    if requested is None and per_overload:
        return Choice(1, None, limits, "1: --isolation per-overload runs one process at a time, as upstream's harness")
    if requested is None:
        workers = min(machine.cores, memory or machine.cores)
        why = (f"{workers}, one per core ({machine.cores} usable); {memory_words}"
               + (f" holds {memory}" if memory is not None else "")
               + (": memory decides" if workers < machine.cores else ""))
        return Choice(workers, None, limits, why)
    limits["holds"] = holds
    if requested > ABSURD_FACTOR * holds:
        raise BadInput(f"--workers {requested}: this machine holds about {holds} survey workers "
                       f"({machine.cores} cores, {memory_words}); give at most {holds}")
    if requested > holds:
        why = (f"--workers {requested} capped to {holds}: at most {WORKERS_PER_CORE} per core "
               f"({machine.cores} usable), {memory_words}")
        return Choice(holds, requested, limits, why, [why])
    return Choice(requested, requested, limits, f"--workers {requested}")


def device_limit(device: dict, devices: int) -> int | None:
    """Workers the devices hold, from the first worker's ``device`` record (``memory_free``
    in bytes, of one device) times ``devices`` used; None when the stack cannot tell."""
    free = device.get("memory_free") if isinstance(device, dict) else None
    if not isinstance(free, int) or free <= 0:
        return None
    return max(1, free // WORKER_DEVICE_BYTES) * max(1, devices)


def after_first_worker(choice: Choice, device: dict, devices: int) -> int | None:
    """Lower ``choice`` to what the device holds, once the first worker has said; the new
    count, or None when it stands. Adds the limit, and a notice when it lowers."""
    if isinstance(device, dict) and device.get("count") is not None:
        choice.devices_visible = device["count"]  # the workers use --devices, or the first
    limit = device_limit(device, devices)
    if limit is None:
        return None
    choice.limits["device_memory"] = limit
    if limit >= choice.workers:
        return None
    free = device["memory_free"] / GIB
    note = (f"{choice.workers} worker(s) lowered to {limit}: {free:.1f} GiB free on the device "
            f"at {WORKER_DEVICE_BYTES / GIB:g} GiB a worker" + (f", {devices} devices" if devices > 1 else ""))
    choice.workers = limit
    choice.why += f"; {note}"
    choice.notices.append(note)
    return limit
