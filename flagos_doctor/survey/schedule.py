"""The order in which a pooled survey hands its tasks to workers.

A task is (overload, profiles or None). Two workers that run two cases of one overload at
once both compile its kernels (Triton compiles per process, into one cache folder): on the
H200 the sum of case times doubled when every case was a task of its own and they ran side
by side. So an overload's first task (its *lead*) is handed out alone, and its other tasks
(its *followers*) wait until the lead has ended, when its kernels are in the cache.

The same holds across the overloads of one *family*: those of one packet, the op name
before the first ``.`` (``mm`` / ``mm.out``, ``addmv`` / ``addmv.out``, ``conv2d`` /
``conv2d.padding``, ``bmm`` / ``bmm.out``). They call the same FlagGems kernels with the
same shapes and dtypes for a profile, so the same autotuning keys. On the H200's cold
full survey (``surveys/h200/survey-full-cold-6f42a96.json``) ``mm`` and ``mm.out`` ran their
``2d-f32`` cases at the same time and both autotuned: 122 s and 124 s, where the second
would have found the first's result in the shared autotuning cache
(TRITON_CACHE_AUTOTUNING, one cache folder for all workers; the warm run shows the results
are reused across processes once written). The cases there added up to 4,987 s over 16
workers, 312 s even if perfectly packed, so the target of 300 s needed less work, not only
better packing (``child/autotune_timing.py`` did that: 2,343 s, and with this rule
``mm.out`` ``2d-f32`` took 0.0 s after ``mm``'s 142 s, ``surveys/h200/survey-full-cold-bba6dee.json``).
So a task of a family member for profile P also waits while another task
of the same family and profile P is running, or is earlier in the order and not yet
finished. A task for every profile (None) is treated as being for each of them.

Waiting is a preference, never a reason to idle: a worker that finds no ready task takes
the earliest waiting one anyway (compiling twice costs less than a worker doing nothing),
and the survey counts how often that happened (``followers_early`` when it waited for its
overload's lead, else ``family_early``). The order within each kind is the order given,
which :func:`flagos_doctor.survey.history.slow_first` has made longest first.

A case that was slow last time (:mod:`.history`: the first ``unheld`` tasks of the order)
is never held for its overload's lead: it was slow after its overload's kernels were
compiled, so it does work of its own (FlagGems autotunes ``mm`` anew for each dtype), and
holding it would only add its lead's time to the overload's. It still waits for its
family: a sibling of the same profile autotunes the same keys.

Compiling the same kernel twice at once is never allowed, by contrast; that is settled
in the workers, per compilation (:mod:`flagos_doctor.survey.child.compile_lock`), not here
per case: the cases of a compile-heavy family and dtype share some kernels and not
others (``mm [4d-f32]`` reused 87 of ``mm [2d-f32]``'s 162, ``mm [1d-f32]`` none), so
holding whole cases apart held back cases that shared nothing. On a cold H200 that put
``mm [1d-f32]``'s 115 s after ``mm [2d-f32]``'s 128 s on one path (276 s in all).

The order changes when a case runs, never what it does: the census is the same in any
order. Standard library and the results model only (the parent uses it).
"""

from __future__ import annotations

import threading

from flagos_doctor.results.model import family

#: A task for every profile (profiles None) stands for each of them.
_ALL = None


class _Entry:
    __slots__ = ("position", "task", "name", "family", "profiles", "lead", "running")

    def __init__(self, position: int, task: tuple, lead: bool):
        self.position = position
        self.task = task
        self.name = task[0]
        self.family = family(task[0])
        self.profiles = None if task[1] is None else frozenset(task[1])
        self.lead = lead  # handed out without waiting for its overload's first task
        self.running = False

    def shares_profile(self, other: "_Entry") -> bool:
        if self.profiles is _ALL or other.profiles is _ALL:
            return bool(self.profiles is _ALL or self.profiles) and bool(other.profiles is _ALL or other.profiles)
        return not self.profiles.isdisjoint(other.profiles)


class Schedule:
    """Tasks in order; each overload's followers held back until its lead has ended, and
    each task held back while a family sibling of the same profile runs or comes first.

    Thread-safe: the pool's slots call :meth:`take` and :meth:`finished` from their threads.
    """

    def __init__(self, tasks: list[tuple] = (), hold_followers: bool = True, hold_family: bool = True):
        self._lock = threading.Lock()
        self._added = threading.Condition(self._lock)
        self._closed = False
        self._streaming = False  # tasks may still come (stream): take waits for them
        self._waiting: list[_Entry] = []  # in order
        self._families: dict[str, list[_Entry]] = {}  # family -> its entries not yet finished
        self._seen: set[str] = set()  # overloads with a task given
        self._ended: set[str] = set()  # overloads with a task finished: their followers are free
        self._count = 0
        self.hold_followers = hold_followers
        self.hold_family = hold_family
        self.followers_early = 0  # followers taken before their lead ended (no other work)
        self.family_early = 0  # tasks taken while a sibling of their profile ran or came first
        self.family_waits = 0  # tasks that had to wait for a sibling at least once
        self._waited: set[int] = set()
        self.put_all(list(tasks))

    def put_all(self, tasks: list[tuple], unheld: int = 0) -> None:
        """Add ``tasks`` after those already given; an overload's first task is its lead.

        The first ``unheld`` of them (slow last time) never wait for their overload's lead.
        """
        with self._lock:
            for index, task in enumerate(tasks):
                name = task[0]
                lead = not self.hold_followers or name not in self._seen or index < unheld
                self._seen.add(name)
                entry = _Entry(self._count, task, lead)
                self._count += 1
                self._waiting.append(entry)
                self._families.setdefault(entry.family, []).append(entry)
            self._added.notify_all()

    def stream(self, open_: bool) -> None:
        """While open, :meth:`take` waits for tasks still to come instead of returning None."""
        with self._lock:
            self._streaming = open_
            self._added.notify_all()

    def _overload_ready(self, entry: _Entry) -> bool:
        return entry.lead or entry.name in self._ended

    def _family_ready(self, entry: _Entry) -> bool:
        if not self.hold_family:
            return True
        for other in self._families.get(entry.family, ()):
            if other is entry or other.name == entry.name:
                continue  # its own overload's order is the lead rule's
            if (other.running or other.position < entry.position) and entry.shares_profile(other):
                return False
        return True

    def take(self, fits=None) -> tuple | None:
        """The next task, or None when none is left (or the schedule was closed): the first
        in the given order that waits for nothing, else the earliest (counted). ``fits(task)``:
        only such a task is taken (a worker lent by another pool: not the one that ran the
        case before), the others left for the pool's own workers."""
        with self._lock:
            while not self._fitting(fits) and self._streaming and not self._closed:
                self._added.wait()
            if not self._fitting(fits) or self._closed:
                return None
            if fits is not None:
                entry = self._waiting.pop(next(i for i, e in enumerate(self._waiting) if fits(e.task)))
                entry.running = True
                return entry.task
            chosen = None
            for index, entry in enumerate(self._waiting):
                if not self._overload_ready(entry):
                    continue
                if self._family_ready(entry):
                    chosen = index
                    break
                if entry.position not in self._waited:
                    self._waited.add(entry.position)
                    self.family_waits += 1
            if chosen is None:
                chosen = 0
                if not self._overload_ready(self._waiting[0]):
                    self.followers_early += 1
                else:
                    self.family_early += 1
            entry = self._waiting.pop(chosen)
            entry.running = True
            return entry.task

    def _fitting(self, fits) -> bool:
        return any(fits(entry.task) for entry in self._waiting) if fits is not None else bool(self._waiting)

    def finished(self, task: tuple) -> None:
        """``task`` (as :meth:`take` gave it) has ended: its overload's followers are ready
        now, and its family's tasks of the same profiles no longer wait for it."""
        name = task[0]
        with self._lock:
            self._ended.add(name)
            entries = self._families.get(family(name), [])
            for index, entry in enumerate(entries):
                if entry.running and entry.task == task:
                    del entries[index]
                    break

    def close(self) -> None:
        """Hand out nothing more: every later :meth:`take` returns None."""
        with self._lock:
            self._closed = True
            self._added.notify_all()

    def empty(self) -> bool:
        with self._lock:
            return not self._waiting

    def count(self) -> int:
        """Tasks not yet taken."""
        with self._lock:
            return len(self._waiting)

    def figures(self) -> dict:
        """For the run's provenance: what was held, and how many went early for want of work."""
        return {"hold_followers": self.hold_followers, "followers_early": self.followers_early,
                "hold_family": self.hold_family, "family_waits": self.family_waits,
                "family_early": self.family_early}
