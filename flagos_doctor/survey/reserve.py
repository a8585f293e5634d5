"""Fresh workers started before the pool or replay that will use them (parent side).

A worker's start is mostly the stack's import: about 14 s for torch_fl on an H200 (it
initialises the device at import, so no parent can import it once and fork). The
confirmation used to start its workers when it began, and a replay round its own when it
began: three to four such starts in a row on a torch_fl survey's critical path. A
:class:`Reserve` starts them earlier, on cores that are idle anyway (a main-phase slot that
has run out of tasks), and hands them out as they are asked for.

A reserved worker has run nothing: it is as fresh as one started at the moment of need,
which is what the confirmation's repeats and each replay require (never the process that
failed, nor one that ran anything before). What runs in it, and in what order, is exactly
what would have run in a worker started then.

Each worker is started by a thread of its own that lives until the reserve is closed: a
worker asks for a signal when the thread that started it ends (PR_SET_PDEATHSIG), so the
starting thread must outlive the worker's use. Workers never taken are closed with the
reserve.
"""

from __future__ import annotations

import dataclasses
import shutil
import threading

from flagos_doctor.survey import scratch
from flagos_doctor.survey.pool import StackFailed, WorkerConfig, WorkerProcess


#: The niceness of a worker started ahead (child/worker.py lowers itself to it).
NICE = 5


class Reserve:
    """Fresh workers of one :class:`WorkerConfig`, started ahead and handed out once each."""

    def __init__(self, config: WorkerConfig, label: str = ""):
        self.label = label
        self._folder = scratch.create()  # the reserved workers' capture files
        # started while the main phase still compiles: only the cycles it leaves idle
        self.config = dataclasses.replace(config, scratch=self._folder, nice=NICE)
        self._lock = threading.Condition()
        self._ready: list[WorkerProcess] = []
        self._starting = 0
        self._started = 0
        self._taken = 0
        self._closed = threading.Event()
        self._kept = 0  # ready + starting workers to keep (keep)
        #: the most workers :meth:`keep` keeps: each is a process holding the stack in memory
        self.most_kept = 0

    # -- filling -----------------------------------------------------------------------------
    def add(self, count: int = 1) -> None:
        """Start ``count`` more workers now (each on a thread of its own)."""
        for _ in range(max(0, count)):
            with self._lock:
                if self._closed.is_set():
                    return
                self._starting += 1
                slot = self._started
                self._started += 1
            threading.Thread(target=self._hold, args=(slot,), daemon=True, name="flagos-reserve").start()

    def keep(self, count: int) -> None:
        """From now on, start a worker whenever one is taken, so that ``count`` (at most
        :attr:`most_kept`) are ready or starting (a replay's next round finds its workers
        started while this one runs)."""
        with self._lock:
            self._kept = min(count, self.most_kept)
            short = self._kept - len(self._ready) - self._starting
        self.add(short)

    def _hold(self, slot: int) -> None:
        worker = None
        try:
            worker = WorkerProcess(self.config, slot)
        except StackFailed:
            pass  # whoever asks starts its own, and learns why
        with self._lock:
            self._starting -= 1
            late = self._closed.is_set()  # closed while it started: nobody will take it
            if worker is not None and not late:
                self._ready.append(worker)
            self._lock.notify_all()
        if late:
            if worker is not None:
                worker.close()
            with self._lock:
                last = not self._starting
            if last:
                shutil.rmtree(self._folder, ignore_errors=True)
            return
        self._closed.wait()  # the worker's starting thread outlives its use (module doc)

    # -- handing out ---------------------------------------------------------------------------
    def take(self) -> WorkerProcess | None:
        """A reserved worker, waiting for one still starting (it is further along than a new
        one would be); None when none is ready or starting."""
        with self._lock:
            while not self._ready and self._starting and not self._closed.is_set():
                self._lock.wait()
            if not self._ready:
                return None
            worker = self._ready.pop(0)
            self._taken += 1
            short = self._kept - len(self._ready) - self._starting
        self.add(short)
        return worker

    def figures(self) -> dict:
        """How many workers this reserve started and how many were used."""
        with self._lock:
            return {"started": self._started, "taken": self._taken}

    def close(self) -> None:
        """Close the workers never taken, and end the threads holding the others (call it
        once every worker taken is done with). A worker still starting is not waited for:
        its thread closes it when it is up, and the last one removes the capture folder."""
        with self._lock:
            self._closed.set()
            self._kept = 0
            self._lock.notify_all()
            left, self._ready = self._ready, []
            starting = self._starting
        for worker in left:
            worker.close()
        if not starting:
            shutil.rmtree(self._folder, ignore_errors=True)
