"""A message's story: its markers, its redelivered copies and its dead letter, found by bounded scans that start at
the message's timestamp (nothing about it is older) and say when they stopped before a topic's end.

Blocking (librdkafka): call from a thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, Message, TopicPartition

from kmq import headers as h
from kmq.batch_markers import BatchEnd, decode_batch_marker, is_batch_value
from kmq.config import KmqConfig
from kmq.errors import MarkerDecodeError
from kmq.kafka import consumer_settings
from kmq.markers import EndMarker, MarkerKey, StartMarker, decode_marker
from kmq_api.console.records import Shown, read_range

MAX_SCANNED = 20_000  # records read per topic partition, at most


@dataclass(frozen=True, slots=True)
class Event:
    at_ms: int
    what: str  # START, START again (extend or nack), END, copy, dead letter
    where: str  # topic/partition/offset of the record that tells it
    detail: str = ""


@dataclass
class Story:
    message: Shown | None
    events: list[Event] = field(default_factory=list)
    cut_short: list[str] = field(default_factory=list)  # the topics whose scan stopped before their end


def story(config: KmqConfig, partition: int, offset: int) -> Story:
    found, _ = read_range(config, config.queue_topic, partition, offset, lambda _: True, 1)
    if not found or found[0].offset() != offset:
        return Story(None)
    told = Story(Shown.of(found[0]))
    since_ms = told.message.timestamp_ms if told.message is not None else 0
    _markers(config, partition, offset, since_ms, told)
    _copies(config, partition, offset, told)
    _dead_letters(config, partition, offset, since_ms, told)
    told.events.sort(key=lambda event: event.at_ms)
    return told


def _markers(config: KmqConfig, partition: int, offset: int, since_ms: int, told: Story) -> None:
    topic = config.markers_topic  # aligned: queue partition p has its markers in partition p (PROTOCOL.md)
    records = _scan(config, topic, partition, since_ms, lambda r: _marker_of(r, partition, offset) is not None, told)
    starts = 0
    for record in records:
        marker = _marker_of(record, partition, offset)
        if isinstance(marker, StartMarker):
            what = "START" if starts == 0 else "START again (extend or nack)"
            starts += 1
            told.events.append(
                Event(_ts(record), what, _where(record), f"redeliver after {marker.redeliver_after_ms} ms")
            )
        elif marker is not None:
            told.events.append(Event(_ts(record), "END", _where(record)))


def _copies(config: KmqConfig, partition: int, offset: int, told: Story) -> None:
    def is_copy(record: Message) -> bool:
        return h.decode_int64(h.get(h.from_kafka(record.headers()), h.ORIGINAL_OFFSET)) == offset

    records, cut = read_range(config, config.queue_topic, partition, offset + 1, is_copy, MAX_SCANNED)
    if cut:
        told.cut_short.append(config.queue_topic)
    for record in records:
        count = h.redelivery_count(h.from_kafka(record.headers()))
        told.events.append(Event(_ts(record), "redelivered copy", _where(record), f"redelivery count {count}"))


def _dead_letters(config: KmqConfig, partition: int, offset: int, since_ms: int, told: Story) -> None:
    def is_ours(record: Message) -> bool:
        raw = h.from_kafka(record.headers())
        origin = h.get(raw, h.ORIGINAL_PARTITION)
        return (
            h.decode_int64(h.get(raw, h.ORIGINAL_OFFSET)) == offset
            and origin is not None
            and int.from_bytes(origin, "big", signed=True) == partition
            and h.get(raw, h.ORIGINAL_TOPIC) == config.queue_topic.encode()
        )

    for dlq_partition in _partitions(config, config.dead_letter_topic):
        for record in _scan(config, config.dead_letter_topic, dlq_partition, since_ms, is_ours, told):
            reason = (h.get(h.from_kafka(record.headers()), h.DLQ_REASON) or b"").decode(errors="replace")
            told.events.append(Event(_ts(record), "dead letter", _where(record), reason))


def _scan(
    config: KmqConfig, topic: str, partition: int, since_ms: int, keep: Callable[[Message], bool], told: Story
) -> list[Message]:
    start = _offset_at(config, topic, partition, since_ms)
    if start is None:
        return []
    records, cut = read_range(config, topic, partition, start, keep, MAX_SCANNED)
    if cut and topic not in told.cut_short:
        told.cut_short.append(topic)
    return records


def _marker_of(record: Message, partition: int, offset: int) -> StartMarker | EndMarker | BatchEnd | None:
    try:
        key = MarkerKey.decode(record.key())
        if key.partition != partition:
            return None
        value = record.value()
        if is_batch_value(value):
            batch = decode_batch_marker(key.offset, value)
            if not any(start <= offset < start + length for start, length in batch.runs):
                return None
            return batch if isinstance(batch, BatchEnd) else StartMarker(batch.redeliver_after_ms)
        return decode_marker(value) if key.offset == offset else None
    except MarkerDecodeError:
        return None


def _offset_at(config: KmqConfig, topic: str, partition: int, since_ms: int) -> int | None:
    """The first offset of `topic`/`partition` at or after `since_ms`, or None when there is none."""
    consumer = Consumer(consumer_settings(config, "kmq-console-story"))
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, partition, since_ms)], timeout=10)
    finally:
        consumer.close()
    return found[0].offset if found and found[0].offset >= 0 else None


def _partitions(config: KmqConfig, topic: str) -> list[int]:
    consumer = Consumer(consumer_settings(config, "kmq-console-story"))
    try:
        metadata = consumer.list_topics(topic, timeout=10).topics.get(topic)
    finally:
        consumer.close()
    return sorted(metadata.partitions) if metadata is not None and metadata.error is None else []


def _ts(record: Message) -> int:
    return int(record.timestamp()[1])


def _where(record: Message) -> str:
    return f"{record.topic()}/{record.partition()}/{record.offset()}"
