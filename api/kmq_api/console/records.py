"""Reading records for the console without changing anything: a consumer with no group membership and no commits.

Blocking (librdkafka): the routes call these from a thread."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from kmq import headers as h
from kmq.config import KmqConfig
from kmq.errors import BrokerUnavailableError
from kmq.kafka import consumer_settings

POLL_S = 0.2
_END_FETCH_WAIT_MS = 10  # the end of a partition is reported after this (kmq.dlq.reader explains)


@dataclass(frozen=True, slots=True)
class Shown:
    """A record as the console shows it. Every text is shown escaped by the templates: payloads are untrusted."""

    partition: int
    offset: int
    timestamp_ms: int
    key: str | None
    headers: list[tuple[str, str]]
    redelivery_count: int
    original_offset: int | None
    value_text: str | None
    value_json: str | None  # pretty-printed, when the value is JSON
    value_hex: str | None

    @classmethod
    def of(cls, record: Message) -> Shown:
        raw = h.from_kafka(record.headers())
        value = record.value()
        return cls(
            partition=record.partition() or 0,
            offset=record.offset() or 0,
            timestamp_ms=record.timestamp()[1],
            key=_text(record.key()),
            headers=[(name, _header(name, data)) for name, data in raw],
            redelivery_count=h.redelivery_count(raw),
            original_offset=h.decode_int64(h.get(raw, h.ORIGINAL_OFFSET)),
            value_text=_text(value),
            value_json=_json(value),
            value_hex=value[:4096].hex(" ") if value is not None else None,
        )


def read_range(
    config: KmqConfig,
    topic: str,
    partition: int,
    offset: int,
    keep: Callable[[Message], bool],
    max_records: int,
    timeout_s: float = 20.0,
) -> tuple[list[Message], bool]:
    """Records of `topic`/`partition` from `offset` that `keep` accepts, reading at most `max_records`; and whether
    the scan stopped before the partition's end (cut short)."""
    settings = consumer_settings(
        config,
        f"kmq-console-{uuid.uuid4().hex[:8]}",  # never joined, never committed: assign() and no commit
        enable_partition_eof=True,
        fetch_wait_max_ms=_END_FETCH_WAIT_MS,
    )
    consumer = Consumer(settings)
    consumer.assign([TopicPartition(topic, partition, offset)])
    kept: list[Message] = []
    read = 0
    deadline = time.monotonic() + timeout_s
    try:
        while read < max_records:
            if time.monotonic() > deadline:
                raise BrokerUnavailableError(config.bootstrap_servers, f"reading {topic} took over {timeout_s:.0f}s")
            record = consumer.poll(POLL_S)
            if record is None:
                continue
            error = record.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    return kept, False
                if error.fatal():
                    raise KafkaException(error)
                continue
            read += 1
            if keep(record):
                kept.append(record)
    finally:
        consumer.close()
    return kept, True


def peek(config: KmqConfig, partition: int, offset: int, count: int) -> list[Shown]:
    """The next `count` messages of the queue's `partition` from `offset`: no START, no commit, no group."""
    found, _ = read_range(config, config.queue_topic, partition, offset, lambda _: True, count)
    return [Shown.of(record) for record in found]


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode(errors="replace")


def _json(data: bytes | None) -> str | None:
    try:
        return json.dumps(json.loads(data or b""), indent=2, ensure_ascii=False)
    except ValueError:
        return None


def _header(name: str, data: bytes | None) -> str:
    if data is None:
        return "(null)"
    if name == h.REDELIVERY_COUNT:
        return str(h.decode_count(data))
    if name == h.ORIGINAL_OFFSET:
        return str(h.decode_int64(data))
    if name == h.ORIGINAL_PARTITION and len(data) == 4:
        return str(int.from_bytes(data, "big", signed=True))
    return data.decode(errors="replace")
