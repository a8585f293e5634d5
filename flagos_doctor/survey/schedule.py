"""The order in which a pooled survey hands its tasks to workers.

A task is (overload, profiles or None). Two workers that run two cases of one overload at
once both compile its kernels (Triton compiles per process, into one cache folder): on the
H200 the sum of case times doubled when every case was a task of its own and they ran side
by side. So an overload's first task (its *lead*) is handed out alone, and its other tasks
(its *followers*) wait until the lead has ended, when its kernels are in the cache.

Waiting is a preference, never a reason to idle: a worker that finds no other task takes
the earliest waiting follower anyway (compiling twice costs less than a worker doing
nothing), and the survey counts how often that happened. The order within each kind is the
order given, which :func:`flagos_doctor.survey.history.slow_first` has made longest first.

A case that was slow last time (:mod:`.history`: the first ``unheld`` tasks of the order)
is never held: it was slow after its overload's kernels were compiled, so it does work of
its own (FlagGems autotunes ``mm`` anew for each dtype), and holding it would only add its
lead's time to the overload's.

The order changes when a case runs, never what it does: the census is the same in any
order. Standard library only (the parent uses it).
"""

from __future__ import annotations

import heapq
import threading


class Schedule:
    """Tasks in order, each overload's followers held back until its lead has ended.

    Thread-safe: the pool's slots call :meth:`take` and :meth:`finished` from their threads.
    """

    def __init__(self, tasks: list[tuple] = (), hold_followers: bool = True):
        self._lock = threading.Lock()
        self._ready: list[tuple[int, tuple]] = []  # heap of (position in the order, task)
        self._held: dict[str, list[tuple[int, tuple]]] = {}  # overload -> its followers, in order
        self._seen: set[str] = set()
        self._count = 0
        self.hold_followers = hold_followers
        self.followers_early = 0  # followers taken before their lead ended (no other work)
        self.put_all(list(tasks))

    def put_all(self, tasks: list[tuple], unheld: int = 0) -> None:
        """Add ``tasks`` after those already given; an overload's first task is its lead.

        The first ``unheld`` of them (slow last time) are never held back.
        """
        with self._lock:
            for index, task in enumerate(tasks):
                name = task[0]
                entry = (self._count, task)
                self._count += 1
                if self.hold_followers and name in self._seen and index >= unheld:
                    self._held.setdefault(name, []).append(entry)
                else:
                    self._seen.add(name)
                    heapq.heappush(self._ready, entry)

    def take(self) -> tuple | None:
        """The next task, or None when none is left.

        A ready task (a lead, or a follower whose lead has ended) in the given order; when
        there is none, the earliest held follower.
        """
        with self._lock:
            if self._ready:
                return heapq.heappop(self._ready)[1]
            if not self._held:
                return None
            name = min(self._held, key=lambda n: self._held[n][0][0])
            entry = self._held[name].pop(0)
            if not self._held[name]:
                del self._held[name]
            self.followers_early += 1
            return entry[1]

    def finished(self, name: str) -> None:
        """A task of ``name`` has ended: its held followers are ready now."""
        with self._lock:
            for entry in self._held.pop(name, []):
                heapq.heappush(self._ready, entry)

    def empty(self) -> bool:
        with self._lock:
            return not self._ready and not self._held

    def figures(self) -> dict:
        """For the run's provenance: whether followers were held, and how many went early."""
        return {"hold_followers": self.hold_followers, "followers_early": self.followers_early}
