"""The tracker on a real broker: redelivery, dead letters, nack and extend, probes, garbage on the markers topic."""

from __future__ import annotations

import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer

from kmq import headers as h
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq.errors import TopicMismatchError
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker import TrackerConfig, TrackerService
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.integration.marker_formats import with_marker_format

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]


@pytest.fixture(
    params=[("kafka", "kmq"), ("kafka_tansu", "kmq"), ("kafka_mock", "kmq"), ("kafka", "batch")],
    ids=lambda p: "-".join(p),
)
def backend(request: pytest.FixtureRequest) -> tuple[str, str]:
    """Every test here runs on every embedded backend (or once on an external cluster) with kmq markers, and on
    the first with batch markers too (the default format; once is enough to keep the suite short)."""
    backend: tuple[str, str] = request.param
    return backend


@pytest.fixture
def cluster(request: pytest.FixtureRequest, backend: tuple[str, str]) -> KafkaCluster:
    cluster: KafkaCluster = request.getfixturevalue(backend[0])
    return cluster


@pytest.fixture
def make_config(make_config: MakeConfig, backend: tuple[str, str]) -> MakeConfig:
    return with_marker_format(make_config, backend[1])


@contextmanager
def running_tracker(config: KmqConfig, **overrides: Any) -> Iterator[TrackerService]:
    settings: dict[str, Any] = {"http_port": 0, "http_host": "127.0.0.1", "commit_interval_ms": 200, **overrides}
    service = TrackerService(TrackerConfig(kmq=config, **settings)).run_in_thread()
    try:
        assert service.wait_ready(30), "tracker not ready within 30 s"
        yield service
    finally:
        service.stop()


def send(config: KmqConfig, count: int, partition: int | None = None) -> None:
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"m{i}".encode(), f"k{i}".encode(), [("trace", f"t{i}".encode())], partition)
            for i in range(count)
        )


def receive(client: KmqClient, count: int, timeout_s: float = 30.0, **options: Any) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} messages in {timeout_s}s"
        received += client.receive(max_messages=count - len(received), timeout_s=0.2, **options)
    return received


def pending(service: TrackerService) -> int:
    return sum(status.pending for status in service.partitions().values())


def metric(service: TrackerService, name: str) -> float:
    return service.metrics.value(name)


def test_every_message_is_processed_and_unacknowledged_ones_come_back_with_their_headers(
    make_config: MakeConfig,
) -> None:
    # given 2 000 messages and a worker that leaves 10% of its deliveries unacknowledged at random
    config = make_config(partitions=4, msg_timeout_ms=1500, max_redeliveries=20)
    send(config, 2000)
    rng = random.Random(20240611)
    deliveries: dict[bytes, list[Message]] = defaultdict(list)
    processed: set[bytes] = set()
    dropped = 0
    with running_tracker(config) as tracker, KmqClient(config) as client:
        # when it works until every message has been acknowledged once
        deadline = time.monotonic() + 90
        while len(processed) < 2000:
            assert time.monotonic() < deadline, f"only {len(processed)} of 2000 processed"
            for msg in client.receive(max_messages=500, timeout_s=0.2):
                assert msg.value is not None
                deliveries[msg.value].append(msg)
                if rng.random() < 0.1:
                    dropped += 1
                    continue
                client.processed(msg)
                processed.add(msg.value)
        client.flush()
        wait_for(lambda: tracker_settled(tracker), 30, what="every END consumed by the tracker")
        # then nothing was lost: each drop was redelivered once, nothing else was, nothing was dead-lettered
        assert metric(tracker, "kmq_redeliveries_total") == dropped
        assert metric(tracker, "kmq_dead_letters_total") == 0
    assert dropped > 150
    assert processed == {f"m{i}".encode() for i in range(2000)}
    for value, copies in deliveries.items():
        first = copies[0]
        assert first.redelivery_count == 0
        assert [c.redelivery_count for c in copies] == list(range(len(copies))), value
        for copy in copies[1:]:
            # the copy keeps key, partition, timestamp and the application's headers, and says where it came from
            assert (copy.key, copy.partition, copy.timestamp_ms) == (first.key, first.partition, first.timestamp_ms)
            assert tuple(h.without_kmq(copy.headers)) == first.headers
            assert h.original_offset(copy.headers, copy.offset) == first.offset


def test_dead_letter_after_max_redeliveries(make_config: MakeConfig) -> None:
    # given a message that no worker ever acknowledges, and max_redeliveries=2
    config = make_config(partitions=2, msg_timeout_ms=500, max_redeliveries=2)
    send(config, 1, partition=1)
    counts: list[int] = []
    with running_tracker(config) as tracker, KmqClient(config) as client:
        # when it is delivered, then redelivered twice
        first = receive(client, 1)[0]
        counts.append(first.redelivery_count)
        while len(counts) < 3:
            counts += [m.redelivery_count for m in receive(client, 1, timeout_s=10)]
        # then the third expiry sends it to the dead-letter topic, and the queue sees it no more
        wait_for(lambda: metric(tracker, "kmq_dead_letters_total") == 1, 10, what="the dead letter")
        assert client.receive(max_messages=10, timeout_s=1.0) == []
        assert metric(tracker, "kmq_redeliveries_total") == 2
        wait_for(lambda: tracker_settled(tracker), 10, what="the END of the last copy")
    assert counts == [0, 1, 2]
    [dead] = read_topic(config, config.dead_letter_topic, 2)
    assert (dead.key, dead.value) == (first.key, first.value)
    assert h.get(dead.headers, h.DLQ_REASON) == b"max-redeliveries"
    assert h.get(dead.headers, h.ORIGINAL_TOPIC) == config.queue_topic.encode()
    assert h.get(dead.headers, h.ORIGINAL_PARTITION) == (1).to_bytes(4, "big")
    assert h.decode_int64(h.get(dead.headers, h.ORIGINAL_OFFSET)) == first.offset
    assert h.redelivery_count(dead.headers) == 2
    assert h.get(dead.headers, "trace") == b"t0"


def test_nack_with_delay_and_extend_are_honoured(make_config: MakeConfig) -> None:
    config = make_config(partitions=1, msg_timeout_ms=600_000)
    send(config, 3, partition=0)
    with running_tracker(config), KmqClient(config) as client:
        soon, later, extended = receive(client, 3)
        # given: nack at once, nack after 1.5 s, and a 600 s timeout cut to 1 s by extend
        nacked_at_ms = time.time_ns() // 1_000_000  # marker timestamps are whole ms, never earlier than this
        client.nack(soon, delay_ms=0)
        client.nack(later, delay_ms=1500)
        client.extend(extended, 1000)
        client.flush()
        # when the copies come back, then each honours its own deadline
        back: dict[bytes | None, int] = {}
        deadline = time.monotonic() + 20
        while len(back) < 3:
            assert time.monotonic() < deadline, f"only {sorted(map(str, back))} came back"
            for msg in client.receive(max_messages=3, timeout_s=0.1):
                back[msg.value] = time.time_ns() // 1_000_000 - nacked_at_ms
                client.processed(msg)
    assert back[soon.value] < 1_000
    assert 1_500 <= back[later.value] < 6_000
    assert 1_000 <= back[extended.value] < 6_000


def test_probes_and_metrics_on_one_port(make_config: MakeConfig) -> None:
    config = make_config(partitions=2, msg_timeout_ms=500)
    send(config, 4)
    with running_tracker(config) as tracker:
        url = f"http://127.0.0.1:{tracker.http_port}"
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert httpx.get(f"{url}/readyz").status_code == 200
        with KmqClient(config) as client:
            receive(client, 4)  # never acknowledged: redelivered after 500 ms
            wait_for(lambda: metric(tracker, "kmq_redeliveries_total") == 4, 10, what="4 redeliveries")
        body = httpx.get(f"{url}/metrics").text
    for partition in (0, 1):
        assert f'kmq_partition_caught_up{{partition="{partition}",topic="{config.markers_topic}"}} 1.0' in body
        assert f'kmq_pending_messages{{partition="{partition}",topic="{config.markers_topic}"}}' in body
    assert "kmq_redeliveries_total 4.0" in body
    assert "kmq_redelivery_lateness_seconds_count 4.0" in body
    # after stop(): nothing answers any more
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{url}/healthz", timeout=1.0)


def test_garbage_on_the_markers_topic_is_counted_and_skipped(make_config: MakeConfig) -> None:
    # given records on the markers topic that are not markers, around a real START that is due at once
    config = make_config(partitions=2, msg_timeout_ms=600_000)
    send(config, 1, partition=1)
    garbage = [
        (None, b"\x00"),
        (MarkerKey(1, 0).encode(), None),
        (b"not-a-key", b"\x00"),
        (MarkerKey(1, 0).encode(), b"\x07"),
        (MarkerKey(0, 0).encode(), EndMarker().encode()),  # a marker for another partition
    ]
    producer = Producer(config.kafka_settings())
    try:
        for key, value in garbage:
            producer.produce(config.markers_topic, key=key, value=value, partition=1)
        producer.produce(config.markers_topic, key=MarkerKey(1, 0).encode(), value=StartMarker(0).encode(), partition=1)
        producer.produce(config.markers_topic, key=b"\xff" * 40, value=b"\xff" * 3, partition=1)
        assert producer.flush(10) == 0
    finally:
        producer.flush(10)
    # when the tracker reads them, then it counts them, keeps going and redelivers the real one
    with running_tracker(config) as tracker, KmqClient(config) as client:
        wait_for(lambda: metric(tracker, "kmq_undecodable_markers_total") == 6, 10, what="6 undecodable records")
        # the original (never consumed by the workers yet) and the tracker's copy
        delivered = receive(client, 2)
        assert sorted((m.value, m.redelivery_count) for m in delivered) == [(b"m0", 0), (b"m0", 1)]
        assert tracker.alive()
        assert tracker.partitions()[1].undecodable == 6


def test_start_up_refuses_mismatched_partition_counts(cluster: KafkaCluster, make_config: MakeConfig) -> None:
    config = make_config(partitions=2)
    mismatched = config.with_overrides(markers_topic=f"{config.queue_topic}__other_markers")
    cluster.create_topics({mismatched.markers_topic: 3})
    service = TrackerService(TrackerConfig(kmq=mismatched, http_enabled=False))
    with pytest.raises(TopicMismatchError, match=r"has 3 partitions but queue topic .* has 2"):
        service.run()


def test_a_transaction_marker_is_counted_as_no_record_and_ended(make_config: MakeConfig) -> None:
    # given a queue partition whose offset 2 is a transaction marker, never a message
    config = make_config(partitions=1, msg_timeout_ms=600_000)
    producer = Producer({**config.kafka_settings(), "transactional.id": f"{config.queue_topic}-tx"})
    producer.init_transactions(10)
    producer.begin_transaction()
    for value in (b"a", b"b"):
        producer.produce(config.queue_topic, value, partition=0)
    producer.commit_transaction(10)  # a, b at 0 and 1, the commit marker at 2
    assert producer.flush(10) == 0
    with KmqProducer(config) as plain:
        [after] = plain.send_batch([OutgoingMessage(b"c", partition=0)])
    assert after.offset == 3
    # and a START for that offset, due at once
    markers = Producer(config.kafka_settings())
    markers.produce(config.markers_topic, StartMarker(0).encode(), MarkerKey(0, 2).encode(), partition=0)
    assert markers.flush(10) == 0
    # when the tracker finds it due, then it counts it as an offset without record (not a missing message), ends
    # it, and redelivers nothing
    with running_tracker(config) as tracker:
        wait_for(lambda: metric(tracker, "kmq_no_record_offsets_total") == 1, 20, what="the offset without record")
        wait_for(lambda: tracker_settled(tracker), 10, what="its END read back")
        assert metric(tracker, "kmq_redeliveries_total") == metric(tracker, "kmq_missing_messages_total") == 0
    ends = [r for r in read_topic(config, config.markers_topic, 1) if r.value == EndMarker().encode()]
    assert [r.key for r in ends] == [MarkerKey(0, 2).encode()]


def test_transactional_mode_reads_committed_markers(make_config: MakeConfig) -> None:
    # given workers that write their STARTs and commit their offsets in one transaction
    config = make_config(partitions=2, msg_timeout_ms=500, transactional=True)
    send(config, 6)
    with running_tracker(config) as tracker, KmqClient(config) as client:
        first = receive(client, 6)
        # when they acknowledge none, then the tracker (read_committed) sees the STARTs and redelivers each once
        # (the copies get time to be acked: all six are collected first, and the first may come well before the last)
        copies = receive(client, 6, timeout_s=20, msg_timeout_ms=60_000)
        for msg in copies:
            client.processed(msg)
        client.flush()
        wait_for(lambda: tracker_settled(tracker), 10, what="the copies acknowledged")
        assert metric(tracker, "kmq_redeliveries_total") == 6
    assert sorted((c.partition, h.original_offset(c.headers, c.offset)) for c in copies) == sorted(
        (m.partition, m.offset) for m in first
    )
    assert {c.redelivery_count for c in copies} == {1}


def test_markers_written_before_a_new_tracker_group_are_tracked_whatever_the_workers_reset(
    make_config: MakeConfig,
) -> None:
    # given workers configured to start a new group at the end of the queue (consumer settings are shared) ...
    config = make_config(partitions=1, msg_timeout_ms=600_000, consumer_kafka_config={"auto.offset.reset": "latest"})
    send(config, 1, partition=0)
    # ... and a START, due at once, written before any tracker ever ran (its group has no committed offset)
    markers = Producer(config.kafka_settings())
    markers.produce(config.markers_topic, StartMarker(0).encode(), MarkerKey(0, 0).encode(), partition=0)
    assert markers.flush(10) == 0
    # when a tracker starts, then it reads the markers topic from its beginning and redelivers the message
    with running_tracker(config) as tracker:
        wait_for(lambda: metric(tracker, "kmq_redeliveries_total") == 1, 20, what="the redelivery")
        wait_for(lambda: tracker_settled(tracker), 10, what="its END read back")
