"""`ServedQueue`: the Kafka clients the API holds for one queue, and the long poll over them."""

from __future__ import annotations

import asyncio
import logging
import time

import anyio.to_thread
from confluent_kafka import KafkaException

from api.backlog import BacklogProbe, PartitionLag
from api.delivery import AsyncProducer
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import KmqError
from kmq.message import Message

_log = logging.getLogger(__name__)
# One receive call waits at most this long, so concurrent long polls take turns and a first message is handed
# out soon after it arrives (librdkafka's batch consume waits for a full batch or its timeout).
RECEIVE_SLICE_S = 0.05


class ServedQueue:
    """One queue: a KmqClient for HTTP receivers (group `group_id`), a producer for sends and markers, a backlog
    probe. KmqClient is not thread-safe for receiving, so receives take turns under a lock."""

    def __init__(self, config: KmqConfig, write_timeout_ms: int) -> None:
        self.config = config
        self.name = config.queue_topic
        self.client = KmqClient(config)  # checks that Q and M exist with equal partition counts
        self.producer = AsyncProducer(config, write_timeout_ms, self.name)
        self.backlog_probe = BacklogProbe(config)
        self._receiving = asyncio.Lock()

    async def receive(self, max_messages: int, wait_ms: int, visibility_timeout_ms: int | None) -> list[Message]:
        """Long poll: the first non-empty batch, or an empty list once `wait_ms` has passed."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            remaining_s = max(0.0, deadline - time.monotonic())
            async with self._receiving:
                batch = await anyio.to_thread.run_sync(
                    self.client.receive, max_messages, min(remaining_s, RECEIVE_SLICE_S), visibility_timeout_ms
                )
            if batch or remaining_s <= 0:
                return batch

    async def backlog(self) -> list[PartitionLag]:
        return await anyio.to_thread.run_sync(self.backlog_probe.measure)

    def close(self, timeout_s: float) -> None:
        """Flush markers and sends, leave the consumer group. Blocking: call from a thread."""
        for step in (self.client.close, self.producer.close):
            try:
                step(timeout_s)
            except (KmqError, KafkaException):
                _log.exception("closing %s", self.name)
        self.backlog_probe.close()
