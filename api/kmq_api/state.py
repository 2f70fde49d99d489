"""`ApiState`: everything the app owns between start-up and shutdown (created and closed by the lifespan)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from kmq_api.config import ApiConfig
from kmq_api.metrics import ApiMetrics
from kmq_api.receipts import ReceiptSigner
from kmq_api.served import ServedQueue

_log = logging.getLogger(__name__)
CLOSE_TIMEOUT_S = 10.0
IDLE_CHECK_INTERVAL_S = 0.25


@dataclass(eq=False)
class ApiState:
    config: ApiConfig
    metrics: ApiMetrics
    signer: ReceiptSigner
    queues: dict[str, ServedQueue] = field(default_factory=dict)
    closing: bool = False
    # Why this replica must be restarted: a background thread or task of it died on an unexpected error. /healthz
    # then answers 503, and `on_failure` (the server's stop, for `kmq api`) ends the process, which exits non-zero.
    failure: str | None = None
    on_failure: Callable[[], None] | None = None

    @classmethod
    def open(cls, config: ApiConfig, metrics: ApiMetrics, on_failure: Callable[[], None] | None = None) -> ApiState:
        """Connect to every queue (checking its topics); on any failure close what was opened and raise.
        Blocking: call from a thread."""
        state = cls(config, metrics, ReceiptSigner(config.receipt_secret.get_secret_value().encode()))
        state.on_failure = on_failure
        try:
            for queue in config.queues:
                served = ServedQueue(queue, config.write_timeout_ms, config.receiver_idle_ms, state.fail)
                state.queues[queue.queue_topic] = served
                metrics.remembered.labels(queue.queue_topic).set_function(served.settled.__len__)
        except BaseException:
            state.close()
            raise
        return state

    def fail(self, component: str, error: BaseException) -> None:
        """`component` (a thread or task of this replica) died on `error`: the replica stops as a whole. Safe from
        any thread."""
        _log.critical("%s died: this API replica stops", component, exc_info=error)
        if self.failure is None:
            self.failure = f"{component} died on {type(error).__name__}: {error}"
        if self.on_failure is not None:
            self.on_failure()

    def watch(self, task: asyncio.Task[None]) -> None:
        """A background task of the app: its death by an error stops the replica (`fail`)."""
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled() and (error := task.exception()) is not None:
            self.fail(f"task {task.get_name()}", error)

    async def leave_idle_groups(self) -> None:
        """Housekeeping, for the app's lifetime: idle receivers leave their worker groups."""
        while not self.closing:
            for queue in list(self.queues.values()):
                await queue.leave_if_idle()
            await asyncio.sleep(IDLE_CHECK_INTERVAL_S)

    def close(self) -> None:
        """Flush every queue's markers and sends, then release the clients. Blocking: call from a thread."""
        self.closing = True
        for name, queue in self.queues.items():
            _log.info("closing queue %s", name)
            queue.close(CLOSE_TIMEOUT_S)
        self.queues.clear()
