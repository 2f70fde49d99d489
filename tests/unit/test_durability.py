"""kmq.durability: which replication settings keep an acknowledged marker through a broker's loss."""

from __future__ import annotations

import pytest

from kmq.durability import TopicReplication, default_replication_factor, min_insync_replicas


@pytest.mark.parametrize(("brokers", "expected"), [(0, 1), (1, 1), (2, 2), (3, 3), (7, 3)])
def test_default_replication_is_three_or_one_per_broker(brokers: int, expected: int) -> None:
    assert default_replication_factor(brokers) == expected


def test_min_isr_is_two_once_there_are_replicas() -> None:
    assert [min_insync_replicas(rf) for rf in (1, 2, 3, 5)] == [None, 2, 2, 2]


def test_safe_settings_carry_no_warning() -> None:
    assert TopicReplication("q", 3, 3, 2).warning() is None
    assert TopicReplication("q", 1, 1, 1).warning() is None  # one broker: nothing better exists


def test_one_replica_on_several_brokers_is_warned_about() -> None:
    warning = TopicReplication("q__markers", 3, 1, 1).warning()
    assert warning is not None and "q__markers has 1 replica on a 3-broker cluster" in warning


def test_min_isr_1_with_replicas_is_warned_about() -> None:
    warning = TopicReplication("q", 3, 3, 1).warning()
    assert warning is not None and "min.insync.replicas=1 with 3 replicas" in warning


def test_min_isr_above_the_replicas_is_warned_about() -> None:
    warning = TopicReplication("q", 3, 2, 3).warning()
    assert warning is not None and "every write is refused" in warning
