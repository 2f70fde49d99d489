"""The driver's positions of the kmq source (no Spark needed): where a group stands, where partitions end, commits.

The group's offsets are looked up before the consumer is parked at the ends (a parked consumer's fetch held each
look-up up); both answers must stay what they were."""

from __future__ import annotations

import pytest

from kmq.config import KmqConfig
from kmq.errors import TopicMissingError
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.positions import QueuePositions
from tests.conftest import MakeConfig
from tests.helpers import committed_offsets, wait_for


def filled(make_config: MakeConfig, partitions: int, count: int) -> KmqConfig:
    """A queue of `partitions` with `count` messages sent round-robin over them."""
    config = make_config(partitions=partitions)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % partitions) for n in range(count))
    return config


def test_a_new_group_starts_at_the_first_offsets_and_sees_every_partitions_end(make_config: MakeConfig) -> None:
    config = filled(make_config, partitions=3, count=30)
    positions = QueuePositions(config)
    try:
        assert positions.committed() == {0: 0, 1: 0, 2: 0}
        assert positions.ends() == {0: 10, 1: 10, 2: 10}
        positions.commit({0: 4, 1: 10, 2: 0})
    finally:
        positions.close()
    committed = committed_offsets(config, 3)
    assert (committed[0], committed[1]) == (4, 10)
    assert committed[2] < 0  # offset 0: nothing to commit


def test_ends_asked_first_and_a_committed_group_are_both_answered(make_config: MakeConfig) -> None:
    config = filled(make_config, partitions=2, count=8)
    first = QueuePositions(config)
    try:
        assert first.ends() == {0: 4, 1: 4}  # parked on the first call when committed() was never asked
        first.commit({0: 3, 1: 1})
    finally:
        first.close()
    second = QueuePositions(config)
    try:
        assert second.committed() == {0: 3, 1: 1}
        assert second.ends() == {0: 4, 1: 4}
    finally:
        second.close()


def test_ends_are_right_whether_the_group_is_behind_or_at_the_end(make_config: MakeConfig) -> None:
    # the consumer is parked where the group stands: a backlog answers at once, a partition read to its end waits for
    # fetch.wait.max.ms; both must report the partition's end
    config = filled(make_config, partitions=3, count=30)
    first = QueuePositions(config)
    try:
        first.committed()
        first.commit({0: 10, 1: 2})  # partition 0 read to its end, 1 behind, 2 never committed
    finally:
        first.close()
    second = QueuePositions(config)
    try:
        assert second.committed() == {0: 10, 1: 2, 2: 0}
        assert second.ends() == {0: 10, 1: 10, 2: 10}
        with KmqProducer(config) as producer:
            producer.send_batch(OutgoingMessage(b"x", None, None, 0) for _ in range(5))
        wait_for(lambda: second.ends()[0] == 15, 10, what="the new end of partition 0")
        assert second.ends() == {0: 15, 1: 10, 2: 10}  # parked at the ends now: never going back
    finally:
        second.close()


def test_a_missing_queue_is_named(make_config: MakeConfig) -> None:
    config = make_config(partitions=1)
    missing = config.with_overrides(queue_topic=f"{config.queue_topic}-never-made")
    with pytest.raises(TopicMissingError, match=missing.queue_topic):
        QueuePositions(missing)
