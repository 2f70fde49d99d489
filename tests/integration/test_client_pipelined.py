"""Pipelined STARTs against the broker (PROTOCOL.md, "Client flow (one batch)", its four rules): the markers topic
and the group's commits are read back, with the STARTs made slow (held back before librdkafka gets them) so that a
client breaking a rule shows it, and with the markers topic made unwritable mid-stream."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kmq.batch_markers import decode_batch_marker, is_batch_value, offsets_in
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import MarkerWriteError
from kmq.markers import MarkerKey, StartMarker, decode_marker
from kmq.message import Message
from tests.helpers import Record, committed_offsets, read_topic, wait_for
from tests.integration.marker_formats import FORMATS
from tests.integration.test_client import pipeline_of, receive_all, send

MakeConfig = Callable[..., KmqConfig]
START_DELAY_S = 0.3
PARTITIONS = 4


def started_offsets(key: bytes | None, value: bytes | None) -> list[int]:
    """The queue offsets a START record (kmq or BATCH START) covers; [] for an END."""
    marker_key = MarkerKey.decode(key)
    if is_batch_value(value):
        marker = decode_batch_marker(marker_key.offset, value)
        return list(offsets_in(marker.runs)) if value is not None and value[0] == 2 else []
    return [marker_key.offset] if isinstance(decode_marker(value), StartMarker) else []


def ends_before_starts(records: list[Record]) -> list[tuple[int, int]]:
    """(partition, queue offset) of every END (or BATCH END offset) with no START for that offset before it."""
    started: set[tuple[int, int]] = set()
    early = []
    for record in sorted(records, key=lambda r: (r.partition, r.offset)):
        key = MarkerKey.decode(record.key)
        value = record.value or b""
        if is_batch_value(value):
            marker = decode_batch_marker(key.offset, value)
            offsets, is_start = list(offsets_in(marker.runs)), value[0] == 2
        else:
            offsets, is_start = [key.offset], isinstance(decode_marker(value), StartMarker)
        for offset in offsets:
            if is_start:
                started.add((record.partition, offset))
            elif (record.partition, offset) not in started:
                early.append((record.partition, offset))
    return early


class SlowStarts:
    """The START producer of a pipelined client, each `produce_batch` handed to librdkafka `delay_s` later (a slow
    acks=all round trip), noting which queue offsets' STARTs the broker acknowledged."""

    def __init__(self, real: Any, delay_s: float) -> None:
        self._real, self._delay_s = real, delay_s
        self.acked: set[tuple[int, int]] = set()
        self._held = 0
        self._lock = threading.Lock()
        self._timers: list[threading.Timer] = []

    def produce_batch(self, topic: str, records: list[dict[str, Any]], partition: int, on_delivery: Any) -> int:
        def later() -> None:
            for record in records:  # a record's own callback (a partition's last START) is watched too
                if "callback" in record:
                    record["callback"] = watched(record["callback"])
            queued = self._real.produce_batch(topic, records, partition=partition, on_delivery=watched(on_delivery))
            assert queued == len(records)
            with self._lock:
                self._held -= len(records)

        def watched(callback: Any) -> Any:
            def report(error: KafkaError | None, message: KafkaMessage) -> None:
                if error is None:
                    offsets = started_offsets(message.key(), message.value())
                    self.acked.update((message.partition() or 0, offset) for offset in offsets)
                callback(error, message)

            return report

        with self._lock:
            self._held += len(records)
        timer = threading.Timer(self._delay_s, later)
        self._timers.append(timer)
        timer.start()
        return len(records)

    def __len__(self) -> int:
        return len(self._real) + self._held

    def flush(self, timeout_s: float) -> int:
        for timer in self._timers:
            timer.join(timeout_s)
        return int(self._real.flush(timeout_s))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def slow_starts(client: KmqClient, delay_s: float = START_DELAY_S) -> SlowStarts:
    writer = pipeline_of(client)._writer
    slow = SlowStarts(writer.producer, delay_s)
    writer.producer = slow  # type: ignore[assignment]  # duck-typed
    return slow


class CommitWatch:
    """Delegates to the real consumer; at each commit, notes any committed offset with a received message below
    it whose START the broker has not acknowledged (PROTOCOL.md: "No commit before its STARTs")."""

    def __init__(self, consumer: Any, slow: SlowStarts) -> None:
        self._consumer, self._slow = consumer, slow
        self.commits = 0
        self.early: list[tuple[int, int]] = []

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        self.commits += 1
        for tp in kwargs["offsets"]:  # the queue's messages start at offset 0
            self.early += [(tp.partition, o) for o in range(tp.offset) if (tp.partition, o) not in self._slow.acked]
        return self._consumer.commit(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._consumer, name)


@pytest.mark.parametrize("marker_format", FORMATS)
def test_no_end_reaches_the_markers_topic_before_its_start(make_config: MakeConfig, marker_format: str) -> None:
    config = make_config(marker_format=marker_format, end_flush_ms=20, pipelined=True)
    send(config, 120)
    received: list[Message] = []
    with KmqClient(config) as client:
        slow_starts(client)
        while len(received) < 120:
            batch = client.receive(max_messages=30, timeout_s=0.5)
            for msg in batch:  # acknowledged at once, long before the slow STARTs are acknowledged
                if msg.offset % 3 == 0:
                    client.extend(msg, 60_000)
                client.processed(msg)
            received += batch
    records = read_topic(config, config.markers_topic, PARTITIONS)
    assert ends_before_starts(records) == []
    starts = {(r.partition, o) for r in records for o in started_offsets(r.key, r.value)}
    assert {(m.partition, m.offset) for m in received} <= starts
    # close() wrote every END held back: none was dropped.
    assert len([r for r in records if not started_offsets(r.key, r.value)]) >= (120 if marker_format == "kmq" else 1)


@pytest.mark.parametrize("marker_format", FORMATS)
def test_offsets_are_committed_only_once_every_start_below_them_is_acknowledged(
    make_config: MakeConfig, marker_format: str
) -> None:
    config = make_config(marker_format=marker_format, pipelined=True)
    send(config, 120)
    with KmqClient(config) as client:
        slow = slow_starts(client)
        pipeline = pipeline_of(client)
        watch = CommitWatch(pipeline._consumer, slow)
        pipeline._consumer = watch  # type: ignore[assignment]  # duck-typed
        client._consumer = watch  # type: ignore[assignment]
        receive_all(client, 120)  # handed over long before the slow STARTs are acknowledged
        wait_for(lambda: committed(config) == 120, 30, what="the asynchronous commits")
    assert watch.commits > 0
    assert watch.early == []


def test_a_client_that_stops_receiving_still_commits(make_config: MakeConfig) -> None:
    # given a pipelined client that received every message and then receives no more (a worker whose handlers are busy)
    config = make_config(pipelined=True)
    send(config, 120)
    with KmqClient(config) as client:
        receive_all(client, 120)
        # then the group's offsets move once the STARTs are acknowledged, without another receive()
        wait_for(lambda: committed(config) == 120, 30, what="the commits")


def committed(config: KmqConfig) -> int:
    return sum(max(0, offset) for offset in committed_offsets(config, PARTITIONS).values())


def writable(config: KmqConfig, topic: str, yes: bool) -> None:
    """No: the topic's `max.message.bytes` below the size of any record batch, so every write to it fails for good
    (MESSAGE_TOO_LARGE, not retried). Yes: back to the broker's default."""
    admin = AdminClient(config.kafka_settings())
    if yes:
        entry = ConfigEntry("max.message.bytes", None, incremental_operation=AlterConfigOpType.DELETE)
    else:
        entry = ConfigEntry("max.message.bytes", "16", incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def uncovered_commits(config: KmqConfig) -> list[tuple[int, int]]:
    """(partition, offset) of every queue offset below the group's commit with no START on the markers topic."""
    starts = {
        (r.partition, o)
        for r in read_topic(config, config.markers_topic, PARTITIONS)
        for o in started_offsets(r.key, r.value)
    }
    ends = committed_offsets(config, PARTITIONS)
    return [(p, o) for p, end in ends.items() for o in range(max(0, end)) if (p, o) not in starts]


@pytest.mark.parametrize("marker_format", FORMATS)
def test_a_start_failing_for_good_mid_stream_rewinds_and_loses_nothing(
    make_config: MakeConfig, marker_format: str
) -> None:
    config = make_config(marker_format=marker_format, pipelined=True)
    count = 400
    send(config, count)
    values: set[bytes] = set()
    failures: list[MarkerWriteError] = []
    with KmqClient(config) as client:
        values.update(m.value or b"" for m in receive_all(client, 60))  # STARTs acknowledged...
        client.flush()
        writable(config, config.markers_topic, False)  # ...then the markers topic refuses writes
        try:
            deadline = time.monotonic() + 60
            while not failures:
                assert time.monotonic() < deadline, "no START failure surfaced"
                try:
                    batch = client.receive(max_messages=30, timeout_s=0.2)
                except MarkerWriteError as e:
                    failures.append(e)
                    continue
                values.update(m.value or b"" for m in batch)
                client.processed_many(batch)
            # Nothing past the failed batch was committed: every offset below the commit has its START.
            assert uncovered_commits(config) == []
            assert committed_offsets(config, PARTITIONS)[failures[0].partition] <= failures[0].offset
        finally:
            writable(config, config.markers_topic, True)
        deadline = time.monotonic() + 90
        while committed(config) < count:  # the fault lifted: the rewound batches come again, and are committed
            assert time.monotonic() < deadline, f"{count - committed(config)} messages never committed"
            for _ in range(5):
                try:
                    batch = client.receive(max_messages=50, timeout_s=0.2)
                except MarkerWriteError as e:  # a batch handed over during the fault, reported after it
                    failures.append(e)
                    continue
                values.update(m.value or b"" for m in batch)
                client.processed_many(batch)
    assert values == {f"m{i}".encode() for i in range(count)}
    # Lost 0: every message has its START on the markers topic (the tracker redelivers it unless ENDed), and
    # nothing is committed without one.
    starts = {
        (r.partition, o)
        for r in read_topic(config, config.markers_topic, PARTITIONS)
        for o in started_offsets(r.key, r.value)
    }
    ends = committed_offsets(config, PARTITIONS)
    assert all((p, o) in starts for p, end in ends.items() for o in range(end))
    assert committed(config) == count
    assert ends_before_starts(read_topic(config, config.markers_topic, PARTITIONS)) == []
