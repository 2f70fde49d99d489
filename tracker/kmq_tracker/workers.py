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

from kmq_tracker.config import TrackerConfig
from kmq_tracker.ingest import now_ms
from kmq_tracker.partition import PartitionState
from kmq_tracker.redeliverer import EndProbed, Redelivered, Redeliverer

_log = logging.getLogger(__name__)
RedelivererFactory = Callable[[TrackerConfig], Redeliverer]
_CHECK_S = 0.5  # while waiting for a pass, how often the workers are checked


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass over a partition's due offsets, as the loop handed it out."""

    state: PartitionState  # the partition as owned when the pass began (a revoked one is not settled into a new one)
    offsets: Sequence[int]
    deadlines: Sequence[
        int | None
    ]  # of each offset, as the pass began (its ENDs may be read back before it is settled)
    started_ms: int  # wall clock
    # The markers read position when some deadline lay past every marker read: the partition's end is then
    # confirmed afresh before those are copied (PartitionState.end_to_confirm). None: no need.
    confirm_end: int | None = None
    vouched_ms: int = 0  # the partition was read through this time (broker clock) when the pass began


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
    """`size` worker threads (all started by `start`, else as passes need them); at most one pass per partition
    at a time."""

    def __init__(self, config: TrackerConfig, size: int, factory: RedelivererFactory = Redeliverer) -> None:
        self._config = config
        self._size = size
        self._factory = factory
        self._results: queue.SimpleQueue[Finished] = queue.SimpleQueue()
        self._workers: list[_Worker] = []
        self.running: dict[int, Pass] = {}  # by partition: the passes handed out and not yet collected
        self._serving: dict[int, _Worker] = {}  # by partition: the worker running its pass
        # by partition: the worker that served it last. A partition goes back to it when it is free, so its reader
        # knows the partition's end from its last read (a reader that does not must fetch it first: one more trip).
        self._affinity: dict[int, _Worker] = {}

    def start(self) -> None:
        """Start every worker now: a bad setting fails at start rather than at the first due message, and each
        worker connects its clients before the first deadline (measured on Kafka 4.4: a reader's first read takes
        100-300 ms, against ~20 ms once connected)."""
        try:
            while len(self._workers) < self._size:
                self._spawn()
        except BaseException:
            self.close()  # the workers already started, and their clients
            raise

    def can_take(self) -> bool:
        """A worker is (or can be started) free for one more pass."""
        return len(self.running) < self._size

    def busy(self, partition: int) -> bool:
        return partition in self.running

    def submit(self, state: PartitionState, offsets: Sequence[int]) -> None:
        if state.partition in self.running:
            raise RuntimeError(f"partition {state.partition} already has a redelivery pass running")
        deadlines = state.deadlines_of(offsets)
        job = Pass(state, offsets, deadlines, now_ms(), state.end_to_confirm(deadlines), state.read_through_ms)
        worker = self._free_worker(state.partition)
        self.running[state.partition] = job
        self._serving[state.partition] = worker
        self._affinity[state.partition] = worker
        worker.jobs.put(job)

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
        on its own within the read timeout (twice: a probe of the markers partition's end, then the reads) and the
        write timeout, so this wait is bounded."""
        done = self.completed()
        while any(p in self.running for p in partitions):
            try:
                done.append(self._collect(self._results.get(timeout=_CHECK_S)))
            except queue.Empty:
                if not self.alive():
                    raise RuntimeError("a redelivery worker thread died with a pass running") from None
        return done

    def alive(self) -> bool:
        """Every worker thread started is still running (they end only at `close`)."""
        return all(worker.thread.is_alive() for worker in self._workers)

    def close(self) -> None:
        """Stop the workers once their passes end, then close their clients (flushing what is still queued)."""
        for worker in self._workers:
            worker.jobs.put(None)
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
        self._serving.pop(finished.partition, None)
        return finished

    def _free_worker(self, partition: int) -> _Worker:
        """The partition's last worker if it is free, else another free one (started if need be)."""
        busy = {id(w) for w in self._serving.values()}
        last = self._affinity.get(partition)
        if last is not None and id(last) not in busy:
            return last
        free = [w for w in self._workers if id(w) not in busy]
        return free[0] if free else self._spawn()

    def _spawn(self) -> _Worker:
        worker = _Worker(self._factory(self._config), self._results, len(self._workers))
        self._workers.append(worker)
        worker.thread.start()
        return worker


class _Worker:
    """One thread and its `Redeliverer`: runs the passes given to it until it reads the stop sentinel."""

    def __init__(self, redeliverer: Redeliverer, results: queue.SimpleQueue[Finished], index: int) -> None:
        self.redeliverer = redeliverer
        self.jobs: queue.SimpleQueue[Pass | None] = queue.SimpleQueue()
        self._results = results
        self.thread = threading.Thread(target=self._run, name=f"kmq-tracker-redeliver-{index}", daemon=True)

    def _run(self) -> None:
        try:
            self.redeliverer.warm_up()
        except Exception:  # noqa: BLE001  # only a warm-up: logged, and the first pass connects instead
            _log.exception("warming up a redelivery worker failed")
        while (job := self.jobs.get()) is not None:
            try:
                outcome = self._redeliver(job)
                self._results.put(Finished(job, outcome, None, now_ms()))
            except BaseException as e:  # noqa: BLE001  # handed to the loop thread, which raises it
                self._results.put(Finished(job, None, e, now_ms()))

    def _redeliver(self, job: Pass) -> Redelivered:
        """Run a pass; one whose end must be confirmed (`Pass.confirm_end`) and is not copies only the offsets a
        marker read vouches for, and says so (`Redelivered.unconfirmed`)."""
        partition, position = job.state.partition, job.confirm_end
        if position is None:
            return self.redeliverer.redeliver(partition, job.offsets)
        sent_ms = now_ms()
        end = self.redeliverer.markers_end(partition, position)
        if end is not None and end <= position:
            return self.redeliverer.redeliver(partition, job.offsets)
        vouched = [o for o, d in zip(job.offsets, job.deadlines, strict=True) if d is not None and d <= job.vouched_ms]
        outcome = self.redeliverer.redeliver(partition, vouched) if vouched else Redelivered()
        outcome.unconfirmed = EndProbed(position, end, sent_ms, len(job.offsets) - len(vouched))
        return outcome
