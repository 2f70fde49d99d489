"""`ServedQueue`: the Kafka clients the API holds for one queue, and the long poll over them."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TypeVar

import anyio.to_thread
from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kmq.admin import check_topics
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import KafkaUnavailableError, KmqError
from kmq.kafka import admin_settings
from kmq.message import Message
from kmq.retention import RetentionLimit
from kmq_api.backlog import BacklogProbe, PartitionLag
from kmq_api.delivery import AsyncProducer
from kmq_api.settle_view import NOTE_MARGIN_MS, SettleView
from kmq_api.settlements import Delivery

_log = logging.getLogger(__name__)
Answer = TypeVar("Answer")
# One receive call waits at most this long, so concurrent long polls take turns and a first message is handed
# out soon after it arrives (librdkafka's batch consume waits for a full batch or its timeout).
RECEIVE_SLICE_S = 0.05
STRANDED_CLOSE_S = 5.0  # a receiver that lost its brokers has little to flush


class ServedQueue:
    """One queue: a producer for sends and markers, a backlog probe, and — while HTTP receivers use this replica —
    a KmqClient in the queue's worker group.

    The KmqClient joins the group on the first receive and leaves it once no receive came for `receiver_idle_ms`:
    a replica that only sends or settles must not sit on partitions no one polls through it. KmqClient is not
    thread-safe for receiving, so receives take turns under a lock.
    """

    def __init__(
        self,
        config: KmqConfig,
        write_timeout_ms: int,
        receiver_idle_ms: int,
        on_death: Callable[[str, BaseException], None] | None = None,
    ) -> None:
        """`on_death(thread, error)`: a background thread of this queue died on an unexpected error."""
        self.config = config
        self.name = config.queue_topic
        # Refuse to serve a queue whose markers topic does not line up (PROTOCOL.md).
        partitions = check_topics(config)
        self.producer = AsyncProducer(config, write_timeout_ms, self.name, on_death)
        # A settle's notes must outlive it: it may wait out the producer's timeout three times (reading the markers
        # up to their end, writing its markers, reading them back) between its first look and its verdict.
        margin_ms = NOTE_MARGIN_MS + int(3 * self.producer.timeout_s * 1000)
        self.settled = SettleView(config, partitions, on_death, margin_ms=margin_ms)
        self.retention = RetentionLimit(config)
        self.admin = AdminClient(admin_settings(config))  # for /readyz: one client, not one per probe
        self.settling: set[Delivery] = set()  # deliveries a request of this replica is settling right now
        self.backlog_probe = BacklogProbe(config, timeout_s=write_timeout_ms / 1000)
        self._receiver: KmqClient | None = None
        # Why the last receive failed for good (its client lost every broker: kmq.liveness), until one succeeds:
        # /healthz reports it, and the next receive makes a new client.
        self.unavailable: str | None = None
        self._receiving = asyncio.Lock()
        self._idle_s = receiver_idle_ms / 1000
        self._last_receive = time.monotonic()

    async def receive(
        self,
        max_messages: int,
        wait_ms: int,
        visibility_timeout_ms: int | None,
        answer: Callable[[list[Message]], Answer],
    ) -> Answer:
        """Long poll: `answer` of the first non-empty batch, or of an empty list once `wait_ms` has passed.

        `answer(batch)` runs on the event loop while the batch's STARTs are on their way to the broker, and is
        returned once they are acknowledged (PROTOCOL.md, "No END before its START"): the receipts are signed and
        the answer encoded within the STARTs' round trip, not after it."""
        deadline = time.monotonic() + wait_ms / 1000
        while True:
            remaining_s = max(0.0, deadline - time.monotonic())
            async with self._receiving:
                receiver = await self._joined()
                try:
                    slice_s = min(remaining_s, RECEIVE_SLICE_S)
                    answered = await _received(receiver, max_messages, slice_s, visibility_timeout_ms, answer)
                except KafkaUnavailableError as e:
                    self.unavailable, self._receiver = str(e), None
                    await anyio.to_thread.run_sync(_close, receiver, self.name, STRANDED_CLOSE_S)
                    raise
                self.unavailable = None
                self._last_receive = time.monotonic()
            if answered is not None:
                return answered
            if remaining_s <= 0:
                return answer([])

    async def leave_if_idle(self) -> None:
        """Leave the worker group when no receive came for `receiver_idle_ms` (its partitions go to others)."""
        if self._receiver is None or self._receiving.locked() or time.monotonic() - self._last_receive < self._idle_s:
            return
        async with self._receiving:
            receiver, self._receiver = self._receiver, None
        if receiver is not None:
            _log.info("no receive on %s for %.0fs: leaving group %s", self.name, self._idle_s, self.config.group_id)
            await anyio.to_thread.run_sync(_close, receiver, self.name)

    @property
    def receiver_failure(self) -> str | None:
        """Why this replica's receiver cannot receive any more (it keeps trying on each receive), or None."""
        return self._receiver.fatal_error if self._receiver is not None else None

    async def backlog(self) -> list[PartitionLag]:
        return await anyio.to_thread.run_sync(self.backlog_probe.measure)

    def close(self, timeout_s: float) -> None:
        """Flush markers and sends, leave the consumer group. Blocking: call from a thread."""
        if self._receiver is not None:
            _close(self._receiver, self.name, timeout_s)
            self._receiver = None
        try:
            self.producer.close(timeout_s)
        finally:
            self.backlog_probe.close()
            self.settled.close()

    async def _joined(self) -> KmqClient:
        if self._receiver is None:
            self._receiver = await anyio.to_thread.run_sync(lambda: KmqClient(self.config, check=False))
        return self._receiver


async def _received(
    receiver: KmqClient,
    max_messages: int,
    timeout_s: float,
    visibility_timeout_ms: int | None,
    answer: Callable[[list[Message]], Answer],
) -> Answer | None:
    """`answer` of one batch (None when none came), returned once the batch's STARTs are acknowledged: a receipt
    may be settled on any replica, whose END no START of this client's pipeline could hold back. The commit stays
    asynchronous.

    One worker thread receives, hands the batch to the event loop, and waits there for the STARTs' acknowledgement,
    while the loop builds `answer(batch)`: the two overlap, with no more thread hops than a receive alone."""
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[Answer] = loop.create_future()

    def build(batch: list[Message]) -> None:  # on the event loop
        try:
            answered.set_result(answer(batch))
        except Exception as e:  # noqa: BLE001  # handed to the request, which raises it
            answered.set_exception(e)

    def receive_then_wait_started() -> bool:  # in the worker thread
        batch = receiver.receive(max_messages, timeout_s, visibility_timeout_ms)
        if batch:
            loop.call_soon_threadsafe(build, batch)
            receiver.wait_started()
        return bool(batch)

    try:
        if not await anyio.to_thread.run_sync(receive_then_wait_started):
            return None
    except BaseException:
        # The receive's or the STARTs' failure is what the request raises; an error of `answer` as well is logged.
        if answered.done() and (also := answered.exception()) is not None:
            _log.error("building the answer of a receive that failed: %s", also, exc_info=also)
        raise
    return await answered


def _close(receiver: KmqClient, name: str, timeout_s: float = 10.0) -> None:
    try:
        receiver.close(timeout_s)
    except (KmqError, KafkaException):
        _log.exception("closing the receiver of %s", name)
