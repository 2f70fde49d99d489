"""The driver's view of the kmq group (no Spark needed): where a new stream starts, and committing its progress."""

from __future__ import annotations

import pytest

from kmq.config import KmqConfig
from kmq.errors import TopicMissingError
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.positions import QueuePositions
from tests.conftest import MakeConfig
from tests.helpers import committed_offsets


def filled(make_config: MakeConfig, partitions: int, count: int) -> KmqConfig:
    """A queue of `partitions` with `count` messages sent round-robin over them."""
    config = make_config(partitions=partitions)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % partitions) for n in range(count))
    return config


def test_a_new_group_starts_at_the_first_offsets_and_a_commit_is_where_the_next_stream_starts(
    make_config: MakeConfig,
) -> None:
    config = filled(make_config, partitions=3, count=30)
    positions = QueuePositions(config)
    try:
        assert positions.committed() == {0: 0, 1: 0, 2: 0}
        positions.commit({0: 4, 1: 10, 2: 0})
    finally:
        positions.close()
    committed = committed_offsets(config, 3)
    assert (committed[0], committed[1]) == (4, 10)
    assert committed[2] < 0  # offset 0: nothing to commit
    again = QueuePositions(config)
    try:
        assert again.committed() == {0: 4, 1: 10, 2: 0}
    finally:
        again.close()


def test_a_missing_queue_is_named(make_config: MakeConfig) -> None:
    config = make_config(partitions=1)
    missing = config.with_overrides(queue_topic=f"{config.queue_topic}-never-made")
    with pytest.raises(TopicMissingError, match=missing.queue_topic):
        QueuePositions(missing)
