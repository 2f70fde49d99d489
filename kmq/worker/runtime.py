"""`Worker`: receives from a queue and runs a handler on each message — the loop users would otherwise write by hand
around `KmqClient` (receive, try, processed / nack / reject, extend long jobs, shut down cleanly).

Plain functions run on `concurrency` threads; `async def` handlers on an event loop with `AsyncKmqClient`.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import threading
import time
from typing import Any

from prometheus_client import CollectorRegistry

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import CommitError, MarkerWriteError, WorkerFailedError
from kmq.worker.async_path import AsyncPath
from kmq.worker.config import WorkerConfig
from kmq.worker.core import RETRY_NOW, WorkerCore, now_ms
from kmq.worker.leases import lease_keys
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordering import Ordering
from kmq.worker.outcome import FAILED, Handler
from kmq.worker.settle import settle
from kmq.worker.threads import LEAD_GAP_S, HandlerThreads, Led

_log = logging.getLogger(__name__)
TICK_S = 0.05  # longest sleep of the loop: lease extensions and the breaker's clock are checked this often
RECEIVE_RETRY_S = 0.5
NOTHING: Led = ([], 0, None, None, None)


class Worker:
    """Runs `handler(message)` for every message of `config.queue_topic` until `stop()`.

    Returning acknowledges the message; `raise kmq.Retry(delay_ms)` nacks it; `raise kmq.Reject(reason)`
    dead-letters it; any other exception retries it with the configured backoff (and is logged with the message's
    topic, partition and offset). Leases of messages whose handler still runs are extended; a circuit breaker
    stops receiving while most handlers fail. Metrics are on `metrics.registry`.

    `ordering="key"` runs the messages of one key one at a time in offset order (`"partition"`: of one partition);
    failures are then retried in place (docs/guides/ordering.md).
    """

    def __init__(
        self,
        handler: Handler,
        config: KmqConfig,
        concurrency: int | None = None,
        settings: WorkerConfig | None = None,
        registry: CollectorRegistry | None = None,
        ordering: Ordering | str | None = None,
    ) -> None:
        settings = settings or WorkerConfig()
        if concurrency is not None:
            settings = WorkerConfig(**{**settings.model_dump(), "concurrency": concurrency})
        if ordering is not None:
            settings = WorkerConfig(**{**settings.model_dump(), "ordering": Ordering(ordering)})
        self.handler = handler
        self.config = config
        self.settings = settings
        self.is_async = _is_async(handler)
        self.metrics = WorkerMetrics(config.queue_topic, registry)
        self.core = WorkerCore(config, settings, self.metrics)
        self._stop = threading.Event()
        self.client: KmqClient | None = None  # the thread path's client while it runs
        self.threads: HandlerThreads | None = None  # and its handler threads
        self.ready = threading.Event()  # set once the client is connected (the group is joined on first receive)
        # What stopped the worker other than `stop()`: the loop's own error, or a `WorkerFailedError` naming the
        # thread (lease tending, a handler thread, an async task) that died. Set before `run()` returns or raises.
        self.failure: BaseException | None = None
        self._failure_lock = threading.Lock()

    def run(self) -> None:
        """Work until `stop()`; then finish in-flight handlers (within the grace period), flush and close.

        An unexpected error in any of the worker's threads stops the worker as a whole (never half of it): the loop
        ends, unfinished messages are nacked, the consumer leaves its group, and `run()` raises the error (a
        `WorkerFailedError` when it was not the loop's own thread that died)."""
        try:
            if self.is_async:
                asyncio.run(AsyncPath(self).run())
            else:
                self._run_threads()
        except BaseException as e:
            self._remember(e)
            raise
        if self.failure is not None:
            raise self.failure

    def fail(self, thread: str, error: BaseException) -> None:
        """A thread of this worker died on `error`: log it and stop the whole worker (`run()` then raises it)."""
        _log.critical(
            "worker on %s: thread %s died, stopping the worker", self.config.queue_topic, thread, exc_info=error
        )
        failure = WorkerFailedError(self.config.queue_topic, thread, error)
        failure.__cause__ = error
        self._remember(failure)
        self.stop()

    def _remember(self, failure: BaseException) -> None:
        with self._failure_lock:
            if self.failure is None:
                self.failure = failure

    def stop(self) -> None:
        """Stop receiving and shut down gracefully (thread-safe, idempotent; e.g. from a signal handler)."""
        self._stop.set()
        self.core.notify()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def run_in_thread(self) -> threading.Thread:
        """`run()` in a thread; once it has ended, `failure` holds what stopped the worker (None after `stop()`)."""
        thread = threading.Thread(target=self._run_recording, name="kmq-worker", daemon=True)
        thread.start()
        return thread

    def _run_recording(self) -> None:
        try:
            self.run()
        except BaseException:  # noqa: BLE001  # kept in `failure` for the thread's owner
            _log.exception("worker on %s stopped by an error", self.config.queue_topic)

    def _run_threads(self) -> None:
        client = self.client = KmqClient(self.config)
        threads = self.threads = HandlerThreads(
            self.core, client, self.handler, self.settings.concurrency, self.fail, lambda own: self._lead(client, own)
        )
        if self.core.gate is not None:
            client.add_revoke_listener(self.core.gate.revoked)
        tending = threading.Event()
        # Leases are tended on a thread of their own: a slow receive (an acks=all flush, a commit) never delays an
        # extension. It alone writes the acknowledgements while the loop runs, so a slow receive never delays an END.
        tender = threading.Thread(target=self._tend_until, args=(client, threads, tending), name="kmq-leases")
        tender.start()
        self.ready.set()
        try:
            while not self._stop.is_set():
                if threads.handlers_lead():  # quick handlers: a handler thread receives (see HandlerThreads)
                    self._stop.wait(LEAD_GAP_S)
                    continue
                with threads.role:
                    # (a handler thread may have taken a turn while this one waited for the role: it steps back)
                    stepped_back = self._stop.is_set() or threads.led_recently()
                    led = NOTHING if stepped_back else self._turn(client, threads)
                if led is None:
                    self.core.wake.wait(TICK_S)  # no room: until a handler frees some (no turn held meanwhile)
                else:
                    threads.submit(*led[:4])
        finally:
            threads.stop_leading()
            self._shutdown(client, threads, tending, tender)

    def _lead(self, client: KmqClient, threads: HandlerThreads) -> Led | None:
        """A handler thread's receiving turn: what it received, for it to run (None: no room). An error ends the
        worker as the receiving loop's own would (`run()` raises it)."""
        if self._stop.is_set():
            threads.leading = False  # (with the role held) no more turns: else the thread would take empty ones
            return NOTHING
        try:
            return self._turn(client, threads, self.core.refill)
        except BaseException as e:  # noqa: BLE001  # the loop's error: run() raises it once the worker has stopped
            _log.error("worker on %s: receiving failed, stopping the worker: %s", self.config.queue_topic, e)
            self._remember(e)
            self.stop()
            return NOTHING

    def _turn(self, client: KmqClient, threads: HandlerThreads, most: int | None = None) -> Led | None:
        """One receiving turn (with `threads.role` held): what was received and may start, as `submit` takes it,
        and whether the handler thread whose turn it is runs it all itself; None when there is no room to receive, or
        a handler thread's run is under way (the caller waits for `core.wake`, not holding the role)."""
        core = self.core
        core.wake.clear()
        if most is None and not threads.take_over_stalled():
            return None  # a handler thread's run is under way: nothing is received beside it (until it is done)
        threads.nudge()
        if core.gate is not None:
            self._flow(client, threads)
        threads.submit(core.releasable())
        if most is not None and threads.queued():
            return NOTHING  # a handler thread's turn: it serves what waits first (retries due, released messages)
        budget = core.budget() if most is None else min(most, core.budget())
        if not budget:
            return None
        try:
            batch = client.receive(budget, self.settings.poll_timeout_ms / 1000)
        except (MarkerWriteError, CommitError) as e:
            _log.warning("receive failed, the batch will be read again: %s", e)
            self._stop.wait(RECEIVE_RETRY_S)
            return NOTHING
        if not batch:
            return NOTHING
        if core.gate is None:
            if most is not None:  # a handler thread runs it through, leased as a whole
                return batch, len(batch), None, None, core.admit_run(batch, now_ms())
            keys = lease_keys(batch)  # once, for the leases and for the handler threads' checks
            return core.admit(batch, now_ms(), keys), len(batch), None, keys, None
        # (a handler thread's turn runs the batch in order itself when it can: `WorkerCore.admit_ordered`)
        heads, mark, heads_keys, run_lease = core.admit_ordered(batch, now_ms(), in_order=most is not None)
        return heads, len(batch), mark, heads_keys, run_lease

    def _flow(self, client: KmqClient, threads: HandlerThreads) -> None:
        """Ordered: start the retries that are due; pause full partitions, resume those with room again."""
        assert self.core.gate is not None
        threads.submit(self.core.gate.retries_due(now_ms()))
        pause, resume = self.core.gate.flow(now_ms())
        if pause:
            client.pause(pause)
        if resume:
            client.resume(resume)

    def _tend_until(self, client: KmqClient, threads: HandlerThreads, done: threading.Event) -> None:
        try:
            while not done.wait(TICK_S):
                threads.nudge()
                threads.write_acks()
                self._tend(client)
        except BaseException as e:  # noqa: BLE001  # no lease tending, no ENDs: the whole worker stops
            self.fail(threading.current_thread().name, e)

    def _tend(self, client: KmqClient) -> None:
        """Extend leases near their deadline and fail those past the maximum processing time; publish metrics."""
        now = now_ms()
        with self.core.lock:  # extensions are produced before any END of the same message (see WorkerCore.due)
            due = self.core.due(now)
            for msg, timeout_ms in due.extend:
                client.extend(msg, timeout_ms)
            for msg in due.expired:
                settle(client, msg, FAILED)
        self.core.publish(now)

    def _shutdown(
        self, client: KmqClient, threads: HandlerThreads, tending: threading.Event, tender: threading.Thread
    ) -> None:
        """Nack what never started, give running handlers the grace period, nack the rest, flush and close."""
        deadline = time.monotonic() + self.settings.shutdown_grace_ms / 1000
        if self.core.gate is not None:
            self._drain_lanes(threads, deadline)
        threads.drain()
        for msg in self.core.held_out():
            settle(client, msg, RETRY_NOW)
        if self.core.gate is not None:
            for msg in self.core.gate.give_back():
                settle(client, msg, RETRY_NOW)
        while threads.running > 0 and time.monotonic() < deadline:
            time.sleep(TICK_S)  # polling the handlers' count against the grace deadline (leases still tended)
        tending.set()
        tender.join()
        threads.write_acks()
        abandoned = self.core.abandon()
        if abandoned:
            _log.warning("%d messages still in progress after the grace period: nacked", len(abandoned))
        for msg in abandoned:
            settle(client, msg, RETRY_NOW)
        threads.stop()
        threads.write_acks()  # a handler that finished meanwhile
        self.core.publish(now_ms())
        client.close()
        _log.info("worker on %s stopped", self.config.queue_topic)

    def _drain_lanes(self, threads: HandlerThreads, deadline: float) -> None:
        """Ordered: the messages held run on, in order, within the grace period (given back, they would come back
        behind later messages of their keys); what is left at its end is given back."""
        gate = self.core.gate
        assert gate is not None
        while gate.holding() and time.monotonic() < deadline and self.core.breaker.permits() is None:
            threads.submit(gate.retries_due(now_ms()))
            time.sleep(TICK_S)  # polling the lanes against the grace deadline (leases still tended)


def _is_async(handler: Any) -> bool:
    """A coroutine function, or an object whose `__call__` is one."""
    call = type(handler).__call__ if not inspect.isroutine(handler) else None
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(call)
