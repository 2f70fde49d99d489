"""Garbage on the markers topic (issue 15, fault tests): random bytes, wrong lengths, foreign keys, keys naming other
partitions, negative and far-past-the-end offsets — every record counted, none stalls a partition: the real
messages around them are redelivered, each once.

Batch marker records (issue 12) are not on this branch; their malformed forms belong here once they are.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable

import pytest
from confluent_kafka import Producer

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.integration.test_tracker_e2e import receive, running_tracker

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
PARTITIONS = 4
PER_PARTITION = 10
RANDOM_RECORDS = 50
Record = tuple[bytes | None, bytes | None]


def not_markers(partition: int, chance: random.Random) -> list[Record]:
    """Records of markers partition `partition` that are not markers (PROTOCOL.md: counted and skipped)."""
    start = StartMarker(0).encode()
    records: list[Record] = [
        (_random_bytes(chance, avoid=12), _random_bytes(chance, avoid=-1)) for _ in range(RANDOM_RECORDS)
    ]
    key = MarkerKey(partition, 0).encode()
    records += [(key, start[:8]), (key, start + b"\x00"), (key, b"\x00\x00"), (key, None)]  # wrong lengths, null
    records += [(b"foreign-key", EndMarker().encode()), (None, start)]  # not a kmq key
    records += [(MarkerKey((partition + 1) % PARTITIONS, 0).encode(), start)]  # names another partition
    return records


def nonexistent(partition: int) -> list[Record]:
    """STARTs, due at once, naming offsets no message has: counted as missing and ENDed."""
    offsets = [-1, -(2**63), 10**12, 2**63 - 1]
    return [(MarkerKey(partition, offset).encode(), StartMarker(0).encode()) for offset in offsets]


def _random_bytes(chance: random.Random, avoid: int) -> bytes | None:
    length = chance.choice([n for n in range(0, 41) if n != avoid] + [-1])
    return None if length < 0 else chance.randbytes(length)


def test_garbage_on_the_markers_topic_is_counted_and_stalls_nothing(make_config: MakeConfig) -> None:
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=600_000)
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"m{p}-{i}".encode(), partition=p) for p in range(PARTITIONS) for i in range(PER_PARTITION)
        )
    chance = random.Random(1515)
    garbage = {p: not_markers(p, chance) for p in range(PARTITIONS)}
    producer = Producer(config.kafka_settings())
    try:
        for p in range(PARTITIONS):
            for key, value in [*garbage[p], *nonexistent(p)]:
                producer.produce(config.markers_topic, key=key, value=value, partition=p)
        assert producer.flush(10) == 0
    finally:
        producer.flush(10)
    total = PARTITIONS * PER_PARTITION
    with KmqClient(config) as client:
        receive(client, total, msg_timeout_ms=300)  # STARTs after the garbage, never acknowledged: due soon
    with running_tracker(config) as tracker:
        wait_for(lambda: _copies(config) == total, timeout_s=30, what="every real message redelivered")
        wait_for(lambda: tracker_settled(tracker), what="nothing pending")
        undecodable = tracker.metrics.value("kmq_undecodable_markers_total")
        missing = tracker.metrics.value("kmq_missing_messages_total")
        per_partition = {p: s.undecodable for p, s in tracker.partitions().items()}
        lateness = tracker.metrics.value("kmq_redelivery_lateness_seconds_sum") / total
    print(f"\n{undecodable:.0f} records that are not markers, {missing:.0f} missing; mean lateness {lateness:.3f} s")
    assert per_partition == {p: len(garbage[p]) for p in range(PARTITIONS)}
    assert undecodable == sum(len(g) for g in garbage.values())
    assert missing == PARTITIONS * len(nonexistent(0))
    copies = Counter(r.value for r in read_topic(config, config.queue_topic, PARTITIONS))
    assert set(copies.values()) == {2}  # the original and one copy each
    ends = [r.key for r in read_topic(config, config.markers_topic, PARTITIONS) if r.value == EndMarker().encode()]
    assert {key for p in range(PARTITIONS) for key, _ in nonexistent(p)} <= set(ends)


def _copies(config: KmqConfig) -> int:
    return sum(1 for r in read_topic(config, config.queue_topic, PARTITIONS) if r.headers)
