"""Helpers of the tests: reading topics back (what is really on the broker, not what the code under test believes),
waiting on conditions, and what a machine lacks: a failure unless the caller opts in to skipping (KMQ_ALLOW_SKIPS=1)."""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import pytest
import typer
from click.testing import Result
from confluent_kafka import Consumer, KafkaError, TopicPartition
from typer.testing import CliRunner

from kmq.config import KmqConfig
from kmq.headers import Headers, from_kafka
from kmq.kafka import fetch

if TYPE_CHECKING:
    from kmq_tracker import TrackerService


@dataclass(frozen=True)
class Record:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp_ms: int


def read_topic(
    config: KmqConfig, topic: str, partitions: int, timeout_s: float = 20.0, read_committed: bool = False
) -> list[Record]:
    """Every record of `topic` up to its current end (partition EOF on each partition)."""
    return list(each_record(config, topic, partitions, timeout_s, read_committed))


def each_record(
    config: KmqConfig, topic: str, partitions: int, timeout_s: float = 20.0, read_committed: bool = False
) -> Iterator[Record]:
    """`read_topic`, one record at a time (a topic too large to hold as records)."""
    settings: dict[str, Any] = {
        **config.kafka_settings(),
        **config.consumer_kafka_config,
        "group.id": f"test-reader-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "enable.partition.eof": True,
        "isolation.level": "read_committed" if read_committed else "read_uncommitted",
    }
    # Apache Kafka parks a fetch at a partition's end for fetch.wait.max.ms (500 ms by default) before the end can be
    # reported: each read paid that, ~0.5 s instead of ~25 ms. (With read_committed the end is the last stable
    # offset, which moves a moment after a producer's commit returned: wait with `read_committed_keys`.)
    settings["fetch.wait.max.ms"] = 10
    consumer = Consumer(settings)
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    at_end: set[int] = set()
    deadline = time.monotonic() + timeout_s
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"reading {topic} did not reach the end in {timeout_s}s"
            for msg in fetch(consumer, 1000, 0.2):  # not consume(1000, t): it would hold a short read for t
                error = msg.error()
                if error is not None:
                    assert error.code() == KafkaError._PARTITION_EOF, error.str()
                    at_end.add(msg.partition() or 0)
                    continue
                at_end.discard(msg.partition() or 0)
                yield Record(
                    msg.topic() or topic,
                    msg.partition() or 0,
                    msg.offset() or 0,
                    msg.key(),
                    msg.value(),
                    from_kafka(msg.headers()),
                    msg.timestamp()[1],
                )
    finally:
        consumer.close()


def committed_offsets(config: KmqConfig, partitions: int) -> dict[int, int]:
    """The offsets the workers' group has committed on the queue topic (negative: none)."""
    consumer = Consumer({**config.kafka_settings(), "group.id": config.group_id, "enable.auto.commit": False})
    try:
        found = consumer.committed([TopicPartition(config.queue_topic, p) for p in range(partitions)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


def wait_for(condition: Callable[[], Any], timeout_s: float = 20.0, interval_s: float = 0.05, what: str = "") -> Any:
    """Poll `condition` until it returns something truthy; fail with `what` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        assert time.monotonic() < deadline, f"timed out after {timeout_s}s waiting for {what or condition}"
        time.sleep(interval_s)


def tracker_settled(tracker: TrackerService) -> bool:
    """Nothing pending on any of the tracker's partitions and no redelivery pass left to settle: its metrics count
    every pass (a pass's own ENDs can be read back, emptying the pending set, a turn before the pass is settled)."""
    return all(s.pending == 0 and s.redelivering == 0 for s in tracker.partitions().values())


def read_committed_keys(
    config: KmqConfig, topic: str, partitions: int, expected: set[bytes | None], timeout_s: float = 30.0
) -> list[Record]:
    """The records a read_committed reader sees on `topic`, once their keys are `expected`. A transaction's records
    become visible only when the coordinator has written its commit markers to their partitions, which it does a
    moment after the producer's commit returned: a single read may come before that."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_topic(config, topic, partitions, read_committed=True)
        keys = {record.key for record in records}
        if keys == expected:
            return records
        assert time.monotonic() < deadline, (
            f"{topic} read_committed after {timeout_s}s: missing {sorted(k for k in expected - keys if k)[:5]}, "
            f"unexpected {sorted(k for k in keys - expected if k)[:5]}"
        )
        time.sleep(0.1)


ALLOW_SKIPS = "KMQ_ALLOW_SKIPS"


def skips_allowed() -> bool:
    """Whether the caller opted in to skipping what this machine lacks (KMQ_ALLOW_SKIPS=1); CI or not is no matter."""
    return os.environ.get(ALLOW_SKIPS) == "1"


def unavailable(reason: str) -> NoReturn:
    """A test this machine cannot run fails (scripts/test installs what such tests need), unless the caller opted in
    to skipping it with KMQ_ALLOW_SKIPS=1."""
    if not skips_allowed():
        pytest.fail(f"{reason} (set {ALLOW_SKIPS}=1 to skip instead)", pytrace=False)
    pytest.skip(reason)


def needs(available: bool, reason: str) -> None:
    """`unavailable(reason)` unless `available`."""
    if not available:
        unavailable(reason)


def run_kmq_broker(*args: str) -> Result:
    """`kmq broker ARGS` in-process (a typer group, so the command is called by name as under `kmq`)."""
    from kmq.cli.broker import register

    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    return CliRunner().invoke(app, ["broker", *args])
