"""Fetching a batch from a consumer without waiting for the batch to fill.

`Consumer.consume(n, timeout)` waits until it has `n` messages or the timeout passes, so a timer-driven loop would
sleep through a deadline. `poll` returns at the first message; what else is already buffered is then drained.
"""

from __future__ import annotations

from confluent_kafka import Consumer
from confluent_kafka import Message as KafkaMessage


def fetch(consumer: Consumer, max_messages: int, timeout_s: float) -> list[KafkaMessage]:
    """Up to `max_messages` messages or events; waits at most `timeout_s` for the first, never for the rest."""
    first = consumer.poll(max(0.0, timeout_s))
    if first is None:
        return []
    if max_messages <= 1:
        return [first]
    return [first, *consumer.consume(max_messages - 1, 0)]
