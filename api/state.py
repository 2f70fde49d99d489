"""`ApiState`: everything the app owns between start-up and shutdown (created and closed by the lifespan)."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from api.config import ApiConfig
from api.metrics import ApiMetrics
from api.receipts import ReceiptSigner
from api.served import ServedQueue

_log = logging.getLogger(__name__)
CLOSE_TIMEOUT_S = 10.0


@dataclass(eq=False)
class ApiState:
    config: ApiConfig
    metrics: ApiMetrics
    signer: ReceiptSigner
    queues: dict[str, ServedQueue] = field(default_factory=dict)
    closing: bool = False

    @classmethod
    def open(cls, config: ApiConfig, metrics: ApiMetrics) -> ApiState:
        """Connect to every queue (checking its topics); on any failure close what was opened and raise.
        Blocking: call from a thread."""
        state = cls(config, metrics, ReceiptSigner(config.receipt_secret.get_secret_value().encode()))
        try:
            for queue in config.queues:
                state.queues[queue.queue_topic] = ServedQueue(queue, config.write_timeout_ms)
        except BaseException:
            state.close()
            raise
        return state

    def close(self) -> None:
        """Flush every queue's markers and sends, then release the clients. Blocking: call from a thread."""
        self.closing = True
        for name, queue in self.queues.items():
            _log.info("closing queue %s", name)
            queue.close(CLOSE_TIMEOUT_S)
        self.queues.clear()
