"""`TrackerService`: one tracker replica — read markers, redeliver what is due, commit the pending tail, serve probes.

The loop is timer-driven: each turn waits for markers only until the earliest deadline of an owned, caught-up
partition (or the next commit, or `max_wait_ms`), so a due message is redelivered within a few milliseconds.
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType

from kmq.admin import check_topics
from tracker._memory import release_free_memory
from tracker.alignment import AlignmentWatch
from tracker.config import TrackerConfig
from tracker.http import HealthServer
from tracker.ingest import MarkersIngest, now_ms
from tracker.metrics import TrackerMetrics
from tracker.pacing import TokenBucket
from tracker.partition import PartitionState, PartitionStatus
from tracker.redeliverer import Redelivered, Redeliverer

_log = logging.getLogger(__name__)
TRIM_AFTER_RECORDS = 10_000
TRIM_DURING_RECORDS = 100_000


class TrackerService:
    """Run with `run()` (blocking, e.g. `python -m tracker`) or `run_in_thread()`; end with `stop()`."""

    def __init__(self, config: TrackerConfig, metrics: TrackerMetrics | None = None) -> None:
        self.config = config
        self.metrics = metrics if metrics is not None else TrackerMetrics()
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._ready = threading.Event()
        self._last_turn = time.monotonic()
        self._thread: threading.Thread | None = None
        self._http: HealthServer | None = None
        self.failure: BaseException | None = None
        self._partitions: dict[int, PartitionStatus] = {}

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Check the topics, then serve until `stop()`; flush, commit and leave the group on the way out."""
        partitions = check_topics(self.config.kmq)
        _log.info(
            "tracking %s (%d partitions) in group %s", self.config.kmq.queue_topic, partitions, self.config.group_id
        )
        ingest = MarkersIngest(self.config, self.metrics)
        try:
            redeliverer = Redeliverer(self.config)
        except BaseException:
            ingest.close()
            raise
        try:
            self._serve(ingest, redeliverer)
        finally:
            self._shutdown(ingest, redeliverer)

    def run_in_thread(self) -> TrackerService:
        """Start `run()` in a thread; returns once it serves, or raises what stopped it from starting."""
        self._thread = threading.Thread(target=self._run_catching, name="kmq-tracker", daemon=True)
        self._thread.start()
        while not self._started.wait(0.05):
            if not self._thread.is_alive():
                break
        if self.failure is not None and not self._started.is_set():
            raise self.failure
        return self

    def request_stop(self) -> None:
        """Ask the loop to stop after its current turn (safe from a signal handler)."""
        self._stopping.set()

    def stop(self, timeout_s: float = 60.0) -> None:
        """Stop and wait for the shutdown; re-raises an error that ended the loop."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():
                raise TimeoutError(f"tracker did not stop within {timeout_s}s")
        if self.failure is not None:
            raise self.failure

    def __enter__(self) -> TrackerService:
        return self.run_in_thread()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    # -- status ----------------------------------------------------------------------------------------------------

    @property
    def http_port(self) -> int | None:
        """The bound port of the probes server (useful with `http_port=0`), None when not serving."""
        return None if self._http is None else self._http.port

    def alive(self) -> bool:
        """The loop turned recently (it turns at least every `max_wait_ms`, and after each redelivery pass)."""
        stale_s = self.config.liveness_timeout_ms / 1000
        return self._started.is_set() and not self._stopping.is_set() and time.monotonic() - self._last_turn < stale_s

    def ready(self) -> bool:
        """Assigned by the group, and every owned partition read up to its end at assignment."""
        return self._ready.is_set() and self.alive()

    def partitions(self) -> dict[int, PartitionStatus]:
        """The owned markers partitions as of the last turn of the loop."""
        return self._partitions

    def wait_ready(self, timeout_s: float) -> bool:
        return self._ready.wait(timeout_s)

    # -- the loop --------------------------------------------------------------------------------------------------

    def _run_catching(self) -> None:
        try:
            self.run()
        except BaseException as e:  # noqa: BLE001  # kept for stop() to re-raise in the caller's thread
            self.failure = e
            _log.exception("tracker stopped by an error")

    def _serve(self, ingest: MarkersIngest, redeliverer: Redeliverer) -> None:
        if self.config.http_enabled:
            self._http = HealthServer(self.config.http_host, self.config.http_port, self.metrics, self)
            self._http.start()
        ingest.before_revoke = redeliverer.flush
        ingest.subscribe()
        loop = _Loop(self.config, self.metrics, ingest, redeliverer)
        self._last_turn = time.monotonic()
        self._started.set()
        while not self._stopping.is_set():
            loop.turn()
            self._last_turn = time.monotonic()
            self._partitions = {p: state.status() for p, state in ingest.partitions.items()}
            self._set_ready(ingest.joined and all(s.caught_up for s in ingest.partitions.values()))

    def _set_ready(self, ready: bool) -> None:
        if ready != self._ready.is_set():
            (self._ready.set if ready else self._ready.clear)()

    def _shutdown(self, ingest: MarkersIngest, redeliverer: Redeliverer) -> None:
        self._stopping.set()
        self._set_ready(False)
        try:
            redeliverer.close()  # flush: ENDs still queued are written before their STARTs' offsets are committed
        finally:
            try:
                ingest.close()  # commit, then leave the group so the partitions move at once
            finally:
                if self._http is not None:
                    self._http.stop()
                _log.info("tracker stopped")


class _Loop:
    """One turn: read markers until the next wake-up, redeliver what is due, commit on schedule, report."""

    def __init__(
        self, config: TrackerConfig, metrics: TrackerMetrics, ingest: MarkersIngest, redeliverer: Redeliverer
    ) -> None:
        self._config = config
        self._metrics = metrics
        self._ingest = ingest
        self._redeliverer = redeliverer
        self._bucket = TokenBucket(config.redelivery_rate_per_s, config.max_in_flight, now_ms())
        self._next_commit_ms = now_ms() + config.commit_interval_ms
        self._next_topic_check_ms = now_ms() + config.topic_check_interval_ms
        self._alignment = AlignmentWatch(config.kmq.queue_topic, config.kmq.markers_topic)
        self._read_since_trim = 0

    def turn(self) -> None:
        read = self._ingest.poll(self._wait_ms(now_ms()) / 1000)
        self._trim_after_backlog(read)
        self._redeliver_due()
        now = now_ms()
        if now >= self._next_commit_ms:
            self._ingest.commit()
            self._next_commit_ms = now + self._config.commit_interval_ms
        if now >= self._next_topic_check_ms:
            self._check_topics()
            self._next_topic_check_ms = now_ms() + self._config.topic_check_interval_ms
        self._report(now)

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
        """Until the earliest wake-up of an owned partition (later if out of tokens), capped by commit and max wait."""
        wakes = [w for s in self._ingest.partitions.values() if (w := s.next_wake_ms()) is not None]
        wake = now + self._config.max_wait_ms
        if wakes:
            wake = min(wake, max(min(wakes), self._bucket.next_token_ms(now)))
        return max(0, min(wake, self._next_commit_ms) - now)

    def _redeliver_due(self) -> None:
        states = sorted(self._ingest.partitions.values(), key=_most_overdue_first)
        for state in states:
            now = now_ms()
            budget = min(self._bucket.available(now), self._config.max_in_flight)
            if budget < 1:
                return
            due = state.due(now, budget)
            if due:
                self._bucket.take(len(due), now)
                self._settle(state, self._redeliverer.redeliver(state.partition, due))

    def _settle(self, state: PartitionState, outcome: Redelivered) -> None:
        done_ms = now_ms()
        for offset in outcome.copied + outcome.dead_lettered:
            deadline = state.done(offset)
            if deadline is not None:
                self._metrics.lateness.observe(max(0, done_ms - deadline) / 1000)
        for offset in outcome.missing + outcome.unwritable:
            state.done(offset)
        self._metrics.redeliveries.inc(len(outcome.copied))
        self._metrics.dead_letters.inc(len(outcome.dead_lettered))
        self._metrics.missing.inc(len(outcome.missing))
        self._metrics.undeliverable_truncated.inc(len(outcome.truncated))
        self._metrics.undeliverable_unwritable.inc(len(outcome.unwritable))
        if outcome.dead_lettered:
            _log.info(
                "dead-lettered %s[%d] offsets %s", self._config.kmq.queue_topic, state.partition, outcome.dead_lettered
            )
        if outcome.failed:
            retry_at = state.backoff.failed(done_ms)
            self._metrics.redelivery_errors.inc()
            _log.warning(
                "redelivery of %d messages of %s[%d] failed, retrying in %d ms: %s",
                len(outcome.failed),
                self._config.kmq.queue_topic,
                state.partition,
                retry_at - done_ms,
                "; ".join(outcome.errors) or "not reached in time",
            )
        else:
            state.backoff.succeeded()

    def _report(self, now: int) -> None:
        for failure in self._redeliverer.poll():
            self._metrics.redelivery_errors.inc()
            _log.warning("%s (the key may be redelivered again)", failure)
        topic = self._config.kmq.markers_topic
        for state in self._ingest.partitions.values():
            self._metrics.set_partition(
                topic, state.partition, len(state.pending), state.overdue_ms(now), state.caught_up
            )


def _most_overdue_first(state: PartitionState) -> int:
    wake = state.next_wake_ms()
    return 2**63 if wake is None else wake
