"""Applying an `Outcome` with a client: processed, nack or reject (sync and async)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException

from kmq.client import KmqClient
from kmq.errors import KmqError
from kmq.message import Message
from kmq.worker.outcome import Outcome

if TYPE_CHECKING:
    from kmq.aio import AsyncKmqClient

_log = logging.getLogger(__name__)


def settle(client: KmqClient, msg: Message, outcome: Outcome) -> None:
    """Never raises: a marker that could not be written only means the message comes back."""
    try:
        if outcome.kind == "ok":
            client.processed(msg)
        elif outcome.kind == "reject":
            client.reject(msg, outcome.reason)
        else:
            client.nack(msg, outcome.delay_ms)
    except (KmqError, KafkaException) as e:
        _settle_failed(msg, outcome, e)


async def settle_async(client: AsyncKmqClient, msg: Message, outcome: Outcome) -> None:
    """`settle` through the asyncio client."""
    try:
        if outcome.kind == "ok":
            await client.processed(msg)
        elif outcome.kind == "reject":
            await client.reject(msg, outcome.reason)
        else:
            await client.nack(msg, outcome.delay_ms)
    except (KmqError, KafkaException) as e:
        _settle_failed(msg, outcome, e)


def _settle_failed(msg: Message, outcome: Outcome, error: Exception) -> None:
    _log.error(
        "could not settle %s[%d]@%d (%s): %s; it will be redelivered",
        msg.topic,
        msg.partition,
        msg.offset,
        outcome.kind,
        error,
    )
