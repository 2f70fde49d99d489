"""Interoperability with SoftwareMill's JVM kmq (tests/interop/pom.xml names the release), both directions.

Each test runs the JVM side as child processes (kmq.jvm) beside this project's client or tracker on one broker,
and judges the result from what the clients processed and what is on the topics.
"""

from __future__ import annotations

import logging
import struct
import time
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.embedded._child import ChildProcess
from kmq.errors import TrackerCompatibilityError
from kmq.jvm import JvmKmq, expect_line, stop
from kmq.markers import EndMarker, MarkerKey, StartMarker, decode_marker
from kmq.message import Message
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.interop.harness import (
    START_TIMEOUT_MS,
    Deliveries,
    jvm_client,
    jvm_send,
    jvm_tracker,
    python_client,
    python_tracker,
    send_numbers,
    wait_all_processed,
)

pytestmark = [pytest.mark.integration, pytest.mark.interop]
MakeConfig = Callable[..., KmqConfig]
MESSAGES = 100
TIMEOUT_MS = 2_000


def test_our_client_with_the_jvm_tracker_loses_nothing(make_config: MakeConfig, jvm_kmq: JvmKmq) -> None:
    # given our KmqClient (kmq markers) leaving 10 % of first deliveries unacknowledged, and the JVM tracker
    config = make_config(partitions=2, msg_timeout_ms=TIMEOUT_MS)
    deliveries = Deliveries()
    with jvm_tracker(jvm_kmq, config), python_client(config, deliveries, drop_every=10):
        # when 100 messages go through
        send_numbers(config, 0, MESSAGES)
        # then the JVM tracker redelivers every dropped one and each is processed: lost 0
        wait_all_processed(deliveries, set(range(MESSAGES)), timeout_s=90)
    assert sorted(d.value for d in deliveries.dropped()) == list(range(0, MESSAGES, 10))
    # and the queue holds exactly one copy of each dropped message
    on_queue = Counter(int(r.value or b"") for r in read_topic(config, config.queue_topic, 2))
    assert sorted(v for v, n in on_queue.items() if n == 2) == list(range(0, MESSAGES, 10))
    assert set(on_queue.values()) == {1, 2}


def test_jvm_client_with_our_tracker_loses_nothing(make_config: MakeConfig, jvm_kmq: JvmKmq) -> None:
    # given the JVM KmqClient leaving 10 % of first deliveries unacknowledged, and our tracker
    config = make_config(partitions=2, msg_timeout_ms=TIMEOUT_MS)
    deliveries = Deliveries()
    with python_tracker(config) as tracker, jvm_client(jvm_kmq, config, deliveries, drop_every=10):
        # when 100 messages go through
        send_numbers(config, 0, MESSAGES)
        # then our tracker redelivers the 10 dropped ones, counted in its metrics, and every message is processed
        wait_all_processed(deliveries, set(range(MESSAGES)), timeout_s=90)
        wait_for(lambda: tracker.metrics.value("kmq_redeliveries_total") >= 10, 30, what="10 redeliveries counted")
        wait_for(lambda: tracker_settled(tracker), 30, what="every END seen")
        assert tracker.metrics.value("kmq_redeliveries_total") == 10
        assert tracker.metrics.value("kmq_dead_letters_total") == 0
    dropped = deliveries.dropped()
    assert sorted(d.value for d in dropped) == list(range(0, MESSAGES, 10))
    # the JVM client reads our tracker's kmq-redelivery-count header on each copy
    copies = [d for d in deliveries.all() if d.value % 10 == 0 and d.processed]
    assert sorted((d.value, d.redelivery_count) for d in copies) == [(v, 1) for v in range(0, MESSAGES, 10)]


def test_jvm_and_python_clients_in_one_group_with_our_tracker_lose_nothing(
    make_config: MakeConfig, jvm_kmq: JvmKmq
) -> None:
    # given a JVM and a Python client in one consumer group, both dropping first deliveries, and our tracker
    config = make_config(partitions=4, msg_timeout_ms=TIMEOUT_MS, max_redeliveries=10)
    deliveries = Deliveries()
    sent = 0
    with (
        python_tracker(config) as tracker,
        jvm_client(jvm_kmq, config, deliveries, drop_every=10),
        python_client(config, deliveries, drop_every=10),
    ):
        # when messages keep coming until both clients have had some (the group rebalances as they join)
        deadline = time.monotonic() + 60
        while deliveries.sources() != {"jvm", "python"}:
            assert time.monotonic() < deadline, f"only {deliveries.sources()} received messages in 60 s"
            send_numbers(config, sent, 20)
            sent += 20
            wave = set(range(sent - 20, sent))
            wait_for(lambda wave=wave: wave <= deliveries.delivered(), 60, what="the last wave delivered")
        send_numbers(config, sent, MESSAGES)
        sent += MESSAGES
        # then every message is processed by one of them: lost 0
        wait_all_processed(deliveries, set(range(sent)), timeout_s=90)
        assert tracker.metrics.value("kmq_dead_letters_total") == 0
    assert deliveries.dropped(), "no client left anything unacknowledged: nothing was redelivered"


def test_markers_of_the_jvm_client_are_exactly_ours(make_config: MakeConfig, jvm_kmq: JvmKmq) -> None:
    # given the JVM client processing 20 messages (sent by a JVM producer) and leaving every 5th unacknowledged
    config = make_config(partitions=2, msg_timeout_ms=TIMEOUT_MS)
    deliveries = Deliveries()
    with jvm_client(jvm_kmq, config, deliveries, drop_every=5):
        jvm_send(jvm_kmq, config, 20)
        wait_for(lambda: len(deliveries.all()) == 20, 60, what="20 deliveries to the JVM client")
    # when its markers are read back from the topic
    markers = read_topic(config, config.markers_topic, 2)
    # then each decodes with our codec, and its bytes are what our client writes for the same message
    seen: dict[tuple[str, int, int], int] = {}
    for record in markers:
        key = MarkerKey.decode(record.key)
        marker = decode_marker(record.value)
        assert record.partition == key.partition, "markers go to the partition of their message"
        assert record.key == MarkerKey(key.partition, key.offset).encode()
        expected = StartMarker(TIMEOUT_MS) if isinstance(marker, StartMarker) else EndMarker()
        assert (marker, record.value) == (expected, expected.encode())
        kind = type(marker).__name__
        seen[(kind, key.partition, key.offset)] = seen.get((kind, key.partition, key.offset), 0) + 1
    every = {(d.partition, d.offset) for d in deliveries.all()}
    acknowledged = {(d.partition, d.offset) for d in deliveries.all() if d.processed}
    assert {(p, o) for kind, p, o in seen if kind == "StartMarker"} == every
    assert {(p, o) for kind, p, o in seen if kind == "EndMarker"} == acknowledged
    assert len(acknowledged) == 16
    assert set(seen.values()) == {1}


def test_jvm_kmq_decodes_our_markers_as_we_mean_them(make_config: MakeConfig, jvm_kmq: JvmKmq) -> None:
    # given our client acknowledging, nacking, extending and rejecting messages (no tracker running)
    config = make_config(partitions=2, msg_timeout_ms=TIMEOUT_MS)
    send_numbers(config, 0, 8)
    with KmqClient(config) as client:
        received = _receive(client, 8)
        for msg in received:
            action = int(msg.value or b"") % 4
            if action == 0:
                client.processed(msg)
            elif action == 1:
                client.nack(msg, 250)
            elif action == 2:
                client.extend(msg, 60_000)
            else:
                client.reject(msg, "bad input")
        client.flush()
    # and a BATCH START (PROTOCOL.md, format batch) for offsets 0-1 of partition 0, written by hand
    _write_batch_start(config, partition=0, base_offset=0, length=2, after_ms=TIMEOUT_MS)
    # when kmq's own deserializers read the markers topic
    child = jvm_kmq.start(
        "markers", {"bootstrap": config.bootstrap_servers, "markers": config.markers_topic, "partitions": 2}
    )
    try:
        jvm_view = _jvm_markers(child)
    finally:
        stop(child)
    # then each of our kmq markers means to JVM kmq exactly what it means to our codec
    ours = read_topic(config, config.markers_topic, 2)
    assert len(jvm_view) == len(ours) == 8 + 8 + 1
    for record in ours:
        kmq_view = jvm_view[(record.partition, record.offset)]
        if record.value is not None and record.value[0] == 0x02:
            # a BATCH START reads as an END of (p, base offset) to JVM kmq: a JVM tracker never redelivers it
            assert kmq_view == (0, 0, "END")
            continue
        key, marker = MarkerKey.decode(record.key), decode_marker(record.value)
        meaning = f"START {marker.redeliver_after_ms}" if isinstance(marker, StartMarker) else "END"
        assert kmq_view == (key.partition, key.offset, meaning)
    starts = sorted(m for *_, m in jvm_view.values() if m.startswith("START"))
    assert starts == [f"START {TIMEOUT_MS}"] * 8 + ["START 250"] * 2 + ["START 60000"] * 2


def test_the_jvm_tracker_ignores_extend_and_cuts_long_nacks_to_the_first_deadline(
    make_config: MakeConfig, jvm_kmq: JvmKmq
) -> None:
    # given our client extending one message by a minute and nacking another with a minute's delay
    config = make_config(partitions=1, msg_timeout_ms=TIMEOUT_MS)
    send_numbers(config, 0, 2)
    with jvm_tracker(jvm_kmq, config), KmqClient(config) as client:
        first, second = _receive(client, 2)
        client.extend(first, 60_000)
        client.nack(second, 60_000)
        # when the JVM tracker runs, then both come back after msg_timeout_ms, not after a minute: kmq's tracker
        # keeps every START of a key and redelivers at the earliest deadline (ours: the newest START wins)
        started = time.monotonic()
        copies = _receive(client, 2, timeout_s=30)
        assert time.monotonic() - started < 30
    assert sorted(int(c.value or b"") for c in copies) == [0, 1]
    # and its copies carry none of kmq's headers, nor the application's, nor the timestamp: key and value only
    for copy, original in zip(sorted(copies, key=_value), sorted([first, second], key=_value), strict=True):
        assert (copy.key, copy.value) == (original.key, original.value)
        assert original.headers == (("trace", b"t" + _value(original)),)
        assert copy.headers == ()
        assert copy.redelivery_count == 0
        assert copy.timestamp_ms > original.timestamp_ms


def test_the_jvm_tracker_neither_counts_redeliveries_nor_dead_letters(make_config: MakeConfig, jvm_kmq: JvmKmq) -> None:
    # given max_redeliveries=1 and a message nobody ever acknowledges, with the JVM tracker
    config = make_config(partitions=1, msg_timeout_ms=1_000, max_redeliveries=1)
    send_numbers(config, 0, 1)
    with jvm_tracker(jvm_kmq, config), KmqClient(config) as client:
        # when it expires twice, then it comes back each time, never counted
        deliveries = [_receive(client, 1, timeout_s=30)[0] for _ in range(3)]
    assert [d.value for d in deliveries] == [b"0"] * 3
    assert [d.redelivery_count for d in deliveries] == [0] * 3
    # and nothing reaches the dead-letter topic (ours would have dead-lettered it at the second expiry)
    assert read_topic(config, config.dead_letter_topic, 1) == []


def test_a_client_declared_for_a_jvm_tracker_refuses_extend_and_warns_of_long_nacks(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # given a client whose config declares a JVM kmq tracker (which the test above shows ignoring both)
    config = make_config(partitions=1, msg_timeout_ms=TIMEOUT_MS, redelivery_tracker="jvm")
    send_numbers(config, 0, 2)
    with KmqClient(config) as client:
        first, second = _receive(client, 2)
        # when it extends, then it is refused, with the reason and what to do instead
        with pytest.raises(TrackerCompatibilityError, match="raise msg_timeout_ms instead"):
            client.extend(first, 60_000)
        # when it nacks past msg_timeout_ms, then it warns once (the JVM tracker cuts the delay short)
        with caplog.at_level(logging.WARNING, logger="kmq.client"):
            client.nack(first, 60_000)
            client.nack(second, 60_000)
            client.nack(second, 100)
        warnings = [r.getMessage() for r in caplog.records if r.name == "kmq.client"]
        assert len(warnings) == 1
        assert "nack delay 60000 ms exceeds msg_timeout_ms 2000" in warnings[0]


def _value(msg: Message) -> bytes:
    return msg.value or b""


def _receive(client: KmqClient, count: int, timeout_s: float = 30.0) -> list[Message]:
    received: list[Message] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} in {timeout_s} s"
        received += client.receive(max_messages=count - len(received), timeout_s=0.2)
    return received


def _write_batch_start(config: KmqConfig, partition: int, base_offset: int, length: int, after_ms: int) -> None:
    """PROTOCOL.md's BATCH START, one run: 0x02, int64 redeliver_after_ms, int32 runs, (int32 gap, int32 length)."""
    value = struct.pack(">bqiii", 0x02, after_ms, 1, 0, length)
    producer = Producer(config.kafka_settings())
    producer.produce(config.markers_topic, value, MarkerKey(partition, base_offset).encode(), partition=partition)
    assert producer.flush(10) == 0


def _jvm_markers(child: ChildProcess) -> dict[tuple[int, int], tuple[int, int, str]]:
    """What `Interop.java markers` printed: (markers partition, offset) -> (key partition, key offset, meaning)."""
    view: dict[tuple[int, int], tuple[int, int, str]] = {}
    while (line := expect_line(child, "", START_TIMEOUT_MS)) != "end":
        _, partition, offset, key_partition, key_offset, meaning = line.split(" ", 5)
        view[(int(partition), int(offset))] = (int(key_partition), int(key_offset), meaning)
    return view
