"""`TrackerService`: one tracker replica — read markers, redeliver what is due, commit the pending tail, serve probes.

The loop (`kmq_tracker.loop`) is timer-driven: each turn waits for markers only until the earliest deadline of an owned,
caught-up partition (or the next commit, or `max_wait_ms`), so a due message is redelivered within a few
milliseconds. The redelivery passes themselves run on `redelivery_workers` threads (`kmq_tracker.workers`).
"""

from __future__ import annotations

import logging
import threading
import time
from types import TracebackType

from kmq.admin import check_topics
from kmq.progress import ProgressWatch
from kmq.stop_watch import StopWatch
from kmq_tracker.config import TrackerConfig
from kmq_tracker.http import HealthServer
from kmq_tracker.ingest import MarkersIngest
from kmq_tracker.loop import Loop
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.partition import PartitionStatus
from kmq_tracker.workers import RedeliveryPool

_log = logging.getLogger(__name__)


class TrackerService:
    """Run with `run()` (blocking, e.g. `python -m kmq_tracker`) or `run_in_thread()`; end with `stop()`."""

    def __init__(
        self, config: TrackerConfig, metrics: TrackerMetrics | None = None, stop_watch: StopWatch | None = None
    ) -> None:
        """`stop_watch`: armed when the shutdown begins, it ends the process if the shutdown outlives its timeout
        (`kmq tracker` passes one; in-process users, who own their process, may not)."""
        self.config = config
        self._watch = stop_watch
        self.metrics = metrics if metrics is not None else TrackerMetrics()
        self._stopping = threading.Event()
        self._started = threading.Event()
        self._ready = threading.Event()
        self._last_turn = time.monotonic()
        self._thread: threading.Thread | None = None
        self._http: HealthServer | None = None
        self.failure: BaseException | None = None
        self._partitions: dict[int, PartitionStatus] = {}
        self._workers_alive = True
        self._kafka_problem: str | None = None  # written by the loop only
        self.progress = ProgressWatch(f"tracker of {config.kmq.queue_topic}", config.stall_timeout_ms)
        self.metrics.watch_progress(self.progress.last_progress_s)

    # -- lifecycle -----------------------------------------------------------------------------------------------

    def run(self) -> None:
        """Check the topics, then serve until `stop()`; flush, commit and leave the group on the way out."""
        partitions = check_topics(self.config.kmq)
        _log.info(
            "tracking %s (%d partitions) in group %s", self.config.kmq.queue_topic, partitions, self.config.group_id
        )
        ingest = MarkersIngest(self.config, self.metrics)
        pool = RedeliveryPool(self.config, self.config.redelivery_workers)
        try:
            pool.start()
        except BaseException:
            ingest.close()
            raise
        loop = Loop(self.config, self.metrics, ingest, pool, self.progress)
        try:
            self._serve(ingest, loop, pool)
        finally:
            self._shutdown(ingest, loop, pool)

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
        """The loop turned recently (at least every `max_wait_ms`: it never waits for a redelivery pass, so a
        partition the broker is slow for does not count as a dead process) and no redelivery worker died."""
        stale_s = self.config.liveness_timeout_ms / 1000
        turning = time.monotonic() - self._last_turn < stale_s
        alive = self._started.is_set() and not self._stopping.is_set() and turning and self._workers_alive
        return alive and self.problem() is None

    def problem(self) -> str | None:
        """Why the replica is not alive, when known: its consumer lost every broker (kmq.liveness), or it made no
        progress for `stall_timeout_ms` while work waited (kmq.progress)."""
        return self._kafka_problem or self.progress.problem()

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

    def _serve(self, ingest: MarkersIngest, loop: Loop, pool: RedeliveryPool) -> None:
        if self.config.http_enabled:
            self._http = HealthServer(self.config.http_host, self.config.http_port, self.metrics, self)
            self._http.start()
        ingest.before_revoke = loop.release
        ingest.subscribe()
        self._last_turn = time.monotonic()
        self._started.set()
        while not self._stopping.is_set():
            loop.turn()
            self._last_turn = time.monotonic()
            self._workers_alive = pool.alive()
            if not self._workers_alive:  # never half alive: the replica stops, and is restarted
                raise RuntimeError("a redelivery worker thread of the tracker died")
            self._kafka_problem = ingest.liveness.observe()  # /healthz fails once the consumer lost its brokers
            self._partitions = {p: state.status() for p, state in ingest.partitions.items()}
            self._set_ready(ingest.joined and all(s.caught_up for s in ingest.partitions.values()))

    def _set_ready(self, ready: bool) -> None:
        if ready != self._ready.is_set():
            (self._ready.set if ready else self._ready.clear)()

    def _shutdown(self, ingest: MarkersIngest, loop: Loop, pool: RedeliveryPool) -> None:
        self._stopping.set()
        self._set_ready(False)
        if self._watch is not None:
            self._watch.arm()
        try:
            try:
                self._step("waiting for the running redelivery passes")
                loop.drain()  # running passes end (their ENDs acknowledged) and are settled before the commit
            finally:
                self._step("flushing the redelivery workers' END markers")
                pool.close()
        finally:
            try:
                self._step("committing the pending tail and leaving the group")
                ingest.close()  # commit, then leave the group so the partitions move at once
            finally:
                if self._http is not None:
                    self._http.stop()
                if self._watch is not None:
                    self._watch.disarm()
                _log.info("tracker stopped")

    def _step(self, step: str) -> None:
        if self._watch is not None:
            self._watch.step = step
