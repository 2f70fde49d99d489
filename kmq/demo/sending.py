"""`Sender`: sends the numbered messages 1..N from a background thread, so the display stays live."""

from __future__ import annotations

import logging
import threading

from kmq.config import KmqConfig
from kmq.demo.numbers import encode_number
from kmq.producer import KmqProducer, OutgoingMessage

_log = logging.getLogger(__name__)
CHUNK = 1_000


class Sender:
    """Sends the numbers `first` .. `first + count - 1`; `sent` counts acknowledged messages; `failure` holds what
    stopped the thread, if anything did."""

    def __init__(self, config: KmqConfig, count: int, first: int = 1) -> None:
        self.config = config
        self.count = count
        self.first = first
        self.sent = 0
        self.failure: Exception | None = None
        self._thread = threading.Thread(target=self._run, name="kmq-demo-sender", daemon=True)

    def start(self) -> Sender:
        self._thread.start()
        return self

    @property
    def done(self) -> bool:
        return not self._thread.is_alive()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            with KmqProducer(self.config, check=False) as producer:
                end = self.first + self.count
                for first in range(self.first, end, CHUNK):
                    numbers = range(first, min(first + CHUNK, end))
                    # Keyed by number: spread over every partition, and the same number always to the same one.
                    producer.send_batch(OutgoingMessage(encode_number(n), encode_number(n)) for n in numbers)
                    self.sent += len(numbers)
        except Exception as e:  # noqa: BLE001  # handed to the main thread, which reports it
            self.failure = e
            _log.exception("sending stopped after %d messages", self.sent)
