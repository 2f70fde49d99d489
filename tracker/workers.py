"""`RedeliveryPool`: redelivery passes run on a few worker threads, so one partition's slow pass delays no other.

Issue 15, item 3 (head-of-line blocking): reading a due message back from the queue, producing its copy and waiting
for the acknowledgement can take seconds when the broker is slow for one partition. The loop thread (marker
ingest, scheduling, commits) hands each pass to the pool and never waits for one; the pool runs at most one pass per
partition at a time (so a partition's ENDs still follow its acknowledged copies, in order), and each worker owns a
`Redeliverer` of its own: its own queue reader, and a producer whose flush waits for that worker's writes only.

The pool is driven by the loop thread alone (`submit`, `completed`, `wait_for`); the workers only run passes.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from tracker.config import TrackerConfig
from tracker.ingest import now_ms
from tracker.partition import PartitionState
from tracker.redeliverer import Redelivered, Redeliverer

_log = logging.getLogger(__name__)
RedelivererFactory = Callable[[TrackerConfig], Redeliverer]


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass over a partition's due offsets, as the loop handed it out."""

    state: PartitionState  # the partition as owned when the pass began (a revoked one is not settled into a new one)
    offsets: Sequence[int]
    started_ms: int  # wall clock


@dataclass(frozen=True, slots=True)
class Finished:
    """A pass that ended: its outcome, or the error that stopped it (re-raised by the loop)."""

    job: Pass
    outcome: Redelivered | None
    error: BaseException | None
    finished_ms: int  # wall clock when its copies were acknowledged: the lateness of the pass

    @property
    def partition(self) -> int:
        return self.job.state.partition


class RedeliveryPool:
    """Up to `size` worker threads, started as the load needs them; at most one pass per partition at a time."""

    def __init__(self, config: TrackerConfig, size: int, factory: RedelivererFactory = Redeliverer) -> None:
        self._config = config
        self._size = size
        self._factory = factory
        self._jobs: queue.SimpleQueue[Pass | None] = queue.SimpleQueue()
        self._results: queue.SimpleQueue[Finished] = queue.SimpleQueue()
        self._workers: list[_Worker] = []
        self.running: dict[int, Pass] = {}  # by partition: the passes handed out and not yet collected

    def start(self) -> None:
        """Start one worker now, so that a bad setting fails at start rather than at the first due message."""
        if not self._workers:
            self._spawn()

    def can_take(self) -> bool:
        """A worker is (or can be started) free for one more pass."""
        return len(self.running) < self._size

    def busy(self, partition: int) -> bool:
        return partition in self.running

    def submit(self, state: PartitionState, offsets: Sequence[int]) -> None:
        if state.partition in self.running:
            raise RuntimeError(f"partition {state.partition} already has a redelivery pass running")
        job = Pass(state, offsets, now_ms())
        self.running[state.partition] = job
        if len(self.running) > len(self._workers):
            self._spawn()
        self._jobs.put(job)

    def completed(self) -> list[Finished]:
        """The passes finished since the last call (never waits)."""
        done: list[Finished] = []
        while True:
            try:
                done.append(self._collect(self._results.get_nowait()))
            except queue.Empty:
                return done

    def wait_for(self, partitions: Collection[int]) -> list[Finished]:
        """Wait until none of `partitions` has a pass running; returns every pass finished meanwhile. A pass ends
        on its own within the read and write timeouts, so this wait is bounded."""
        done = self.completed()
        while any(p in self.running for p in partitions):
            done.append(self._collect(self._results.get()))
        return done

    def alive(self) -> bool:
        """Every worker thread started is still running (they end only at `close`)."""
        return all(worker.thread.is_alive() for worker in self._workers)

    def close(self) -> None:
        """Stop the workers once their passes end, then close their clients (flushing what is still queued)."""
        for _ in self._workers:
            self._jobs.put(None)
        for worker in self._workers:
            worker.thread.join()
        errors: list[BaseException] = []
        for worker in self._workers:
            try:
                worker.redeliverer.close()
            except BaseException as e:  # noqa: BLE001  # close them all, then raise the first
                errors.append(e)
        if errors:
            raise errors[0]

    def _collect(self, finished: Finished) -> Finished:
        self.running.pop(finished.partition, None)
        return finished

    def _spawn(self) -> None:
        worker = _Worker(self._factory(self._config), self._jobs, self._results, len(self._workers))
        self._workers.append(worker)
        worker.thread.start()


class _Worker:
    """One thread and its `Redeliverer`: takes passes off the shared queue until it reads the stop sentinel."""

    def __init__(
        self,
        redeliverer: Redeliverer,
        jobs: queue.SimpleQueue[Pass | None],
        results: queue.SimpleQueue[Finished],
        index: int,
    ) -> None:
        self.redeliverer = redeliverer
        self._jobs = jobs
        self._results = results
        self.thread = threading.Thread(target=self._run, name=f"kmq-tracker-redeliver-{index}", daemon=True)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                outcome = self.redeliverer.redeliver(job.state.partition, job.offsets)
                self._results.put(Finished(job, outcome, None, now_ms()))
            except BaseException as e:  # noqa: BLE001  # handed to the loop thread, which raises it
                self._results.put(Finished(job, None, e, now_ms()))
