"""The tracker's loop thread: read markers, hand due messages to the redelivery workers, settle, commit, report.

The loop never waits for the queue or for a copy's acknowledgement: each owned partition's due offsets go to the
`RedeliveryPool` as one pass, at most one pass per partition at a time (issue 15, item 3). A partition stuck on the
broker therefore keeps only its own pass waiting; the others go on being ingested and redelivered, and the loop keeps
turning (so `/healthz`, which asks whether it turns, judges the process, not one partition). A pass running long is
shown by `kmq_redelivery_pass_seconds` and logged.
"""

from __future__ import annotations

import logging
from collections.abc import Collection

from kmq.progress import ProgressWatch
from kmq_tracker._memory import release_free_memory
from kmq_tracker.alignment import AlignmentWatch
from kmq_tracker.config import TrackerConfig
from kmq_tracker.ingest import MarkersIngest, now_ms
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.pacing import TokenBucket
from kmq_tracker.partition import PartitionState
from kmq_tracker.settle import settle
from kmq_tracker.workers import Finished, RedeliveryPool

_log = logging.getLogger(__name__)
TRIM_AFTER_RECORDS = 10_000
TRIM_DURING_RECORDS = 100_000
# While a pass runs the loop polls the markers at least this often, to collect the pass soon after it ends (a
# consumer's poll cannot be woken from another thread); idle, it sleeps until the next deadline.
PASS_POLL_MS = 5
SLOW_PASS_MS = 5_000  # a pass that took longer is logged


class Loop:
    """One `turn()`: read markers until the next wake-up, settle finished passes, start due ones, commit, report."""

    def __init__(
        self,
        config: TrackerConfig,
        metrics: TrackerMetrics,
        ingest: MarkersIngest,
        pool: RedeliveryPool,
        progress: ProgressWatch | None = None,
    ) -> None:
        self._config = config
        # Work waits while a pass runs or a message is overdue; a pass that ends is progress, and so is reading
        # markers while no pass runs (catching up). A blocked pass therefore shows however many markers arrive.
        self._progress = progress if progress is not None else ProgressWatch("tracker", config.stall_timeout_ms)
        self._metrics = metrics
        self._ingest = ingest
        self._pool = pool
        self._bucket = TokenBucket(config.redelivery_rate_per_s, config.max_in_flight, now_ms())
        self._next_commit_ms = now_ms() + config.commit_interval_ms
        self._next_topic_check_ms = now_ms() + config.topic_check_interval_ms
        self._alignment = AlignmentWatch(config.kmq.queue_topic, config.kmq.markers_topic)
        self._read_since_trim = 0

    def turn(self) -> None:
        read = self._ingest.poll(self._wait_ms(now_ms()) / 1000)
        if read and not self._pool.running:
            self._progress.progressed()
        self._trim_after_backlog(read)
        self._settle(self._pool.completed())
        self._start_due()
        self._settle(self._pool.completed())  # a pass may end at once (nothing found, or a synchronous pool)
        now = now_ms()
        if now >= self._next_commit_ms:
            self._ingest.commit()
            self._next_commit_ms = now + self._config.commit_interval_ms
        if now >= self._next_topic_check_ms:
            self._check_topics()
            self._next_topic_check_ms = now_ms() + self._config.topic_check_interval_ms
        self._report(now)

    def release(self, partitions: Collection[int]) -> None:
        """Before `partitions` are given up (revocation): wait for their running passes and settle them, so what
        they copied is ENDed and no longer pending when the tail is committed."""
        self._settle(self._pool.wait_for(partitions))

    def drain(self) -> None:
        """At shutdown: wait for every running pass and settle it."""
        self._settle(self._pool.wait_for(list(self._pool.running)))

    def _check_topics(self) -> None:
        counts = self._ingest.partition_counts(self._config.read_timeout_ms / 1000)
        if counts is not None:
            self._metrics.misaligned.set(0 if self._alignment.observe(counts) else 1)

    def _trim_after_backlog(self, read: int) -> None:
        """Hand the memory that reading churned back to the OS: when the reading pauses, and during long reads."""
        self._read_since_trim += read
        pause = read == 0 and self._read_since_trim >= TRIM_AFTER_RECORDS
        if pause or self._read_since_trim >= TRIM_DURING_RECORDS:
            self._read_since_trim = 0
            release_free_memory()

    def _wait_ms(self, now: int) -> int:
        """Until the earliest wake-up of an idle owned partition (later if out of tokens), capped by the commit and
        max wait, and by `PASS_POLL_MS` while a pass runs."""
        wake = now + (PASS_POLL_MS if self._pool.running else self._config.max_wait_ms)
        if self._pool.can_take():
            wakes = [w for s in self._idle_states() if (w := s.next_wake_ms()) is not None]
            if wakes:
                wake = min(wake, max(min(wakes), self._bucket.next_token_ms(now)))
        return max(0, min(wake, self._next_commit_ms) - now)

    def _idle_states(self) -> list[PartitionState]:
        return [s for s in self._ingest.partitions.values() if not self._pool.busy(s.partition)]

    def _start_due(self) -> None:
        for state in sorted(self._idle_states(), key=_most_overdue_first):
            now = now_ms()
            budget = min(self._bucket.available(now), self._config.max_in_flight)
            if budget < 1 or not self._pool.can_take():
                return
            due = state.due(now, budget)
            if due:
                self._bucket.take(len(due), now)
                state.in_pass = frozenset(due)
                self._pool.submit(state, due)

    def _settle(self, finished: list[Finished]) -> None:
        if finished:
            self._progress.progressed()
        for done in finished:
            if done.error is not None:
                raise done.error  # a fatal producer error (or a defect): the replica stops and is restarted
            took_ms = done.finished_ms - done.job.started_ms
            if took_ms > SLOW_PASS_MS:
                _log.warning(
                    "redelivering %d messages of %s[%d] took %d ms (the broker is slow for that partition?)",
                    len(done.job.offsets),
                    self._config.kmq.queue_topic,
                    done.partition,
                    took_ms,
                )
            owned = self._ingest.partitions.get(done.partition)
            if owned is done.job.state:  # not for a partition lost meanwhile
                settle(self._config, self._metrics, done)
                owned.in_pass = frozenset()

    def _report(self, now: int) -> None:
        topic = self._config.kmq.markers_topic
        running = self._pool.running
        overdue = False
        for state in self._ingest.partitions.values():
            job = running.get(state.partition)
            pass_ms = 0 if job is None else max(0, now - job.started_ms)
            overdue_ms = state.overdue_ms(now)
            overdue = overdue or overdue_ms > 0
            self._metrics.set_partition(
                topic, state.partition, len(state.pending), overdue_ms, state.caught_up, pass_ms, state.take_settled()
            )
        self._progress.waiting(overdue or bool(running))


def _most_overdue_first(state: PartitionState) -> int:
    wake = state.next_wake_ms()
    return 2**63 if wake is None else wake
