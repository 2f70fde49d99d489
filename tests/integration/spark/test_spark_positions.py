"""The driver's positions of the kmq source (no Spark needed): where a group stands, where partitions end, commits
(asynchronous: a refused one is logged, and the next micro-batch's supersedes it).

The group's offsets are looked up before the consumer is parked at the ends (a parked consumer's fetch held each
look-up up); both answers must stay what they were."""

from __future__ import annotations

import logging

import pytest

from kmq.config import KmqConfig
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.positions import QueuePositions
from tests.conftest import MakeConfig
from tests.helpers import committed_offsets, wait_for
from tests.integration.spark.pipeline_support import group_member


def test_a_new_group_starts_at_the_first_offsets_and_sees_every_partitions_end(make_config: MakeConfig) -> None:
    config = make_config(partitions=3)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % 3) for n in range(30))
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
    config = make_config(partitions=2)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % 2) for n in range(8))
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


def test_commits_do_not_wait_and_reach_the_group_once_answered(make_config: MakeConfig) -> None:
    config = make_config(partitions=2)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % 2) for n in range(8))
    positions = QueuePositions(config)
    try:
        positions.committed()
        positions.commit({0: 1, 1: 1})
        positions.commit({0: 3, 1: 4})  # a later micro-batch's, sent before the first one is answered
        assert positions.wait_commits(10)
        assert committed_offsets(config, 2) == {0: 3, 1: 4}
        assert positions.failed_commits == 0
    finally:
        positions.close()


def test_a_refused_commit_is_logged_not_raised_and_a_later_one_supersedes_it(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # given a consumer of the kmq group that is a member of it: the coordinator refuses commits from outside the group
    config = make_config(partitions=1)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, 0) for _ in range(4))
    positions = QueuePositions(config)
    try:
        positions.committed()
        with group_member(config):
            # when the driver commits while the member is in the group
            with caplog.at_level(logging.WARNING, logger="kmq.spark.positions"):
                positions.commit({0: 2})
                wait_for(lambda: positions.wait_commits(0.1), 30, what="the commit's answer")
            # then nothing was raised, the refusal was logged, and the group's offset did not move
            assert positions.failed_commits == 1
            assert any("committing" in r.getMessage() and "failed" in r.getMessage() for r in caplog.records)
            assert committed_offsets(config, 1)[0] < 0
        # and once the member has left, the next micro-batch's commit reaches the group
        wait_for(lambda: _commit_lands(positions, config), 30, interval_s=0.2, what="a commit after the member left")
    finally:
        positions.close()


def _commit_lands(positions: QueuePositions, config: KmqConfig) -> bool:
    positions.commit({0: 4})
    positions.wait_commits(5)
    return committed_offsets(config, 1)[0] == 4
