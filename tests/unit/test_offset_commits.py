"""`AsyncCommits` bookkeeping: which offsets stay unconfirmed, what is sent again, what a failure counts."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from confluent_kafka import KafkaError, TopicPartition

from kmq.offset_commits import AsyncCommits

TOPIC = "q"


class Consumer:
    """Records commits; `assignment()` answers the partitions given."""

    def __init__(self, assigned: tuple[int, ...] = ()) -> None:
        self.commits: list[tuple[dict[int, int], bool]] = []
        self._assigned = assigned

    def commit(self, offsets: list[TopicPartition], asynchronous: bool) -> Any:
        self.commits.append(({tp.partition: tp.offset for tp in offsets}, asynchronous))
        return None if asynchronous else offsets

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(TOPIC, p) for p in self._assigned]


def result(partition: int, offset: int, error: KafkaError | None = None) -> Any:
    """A commit's answer for one partition (confluent-kafka's TopicPartition.error is read-only)."""
    return SimpleNamespace(topic=TOPIC, partition=partition, offset=offset, error=error)


def test_a_confirmed_commit_is_forgotten_but_not_over_a_newer_batch() -> None:
    commits, consumer = AsyncCommits(TOPIC), Consumer()
    commits.commit(consumer, {0: 10, 1: 5})  # type: ignore[arg-type]  # duck-typed consumer
    commits.commit(consumer, {0: 20})  # type: ignore[arg-type]
    commits.on_commit(None, [result(0, 10), result(1, 5)])  # the first commit's answer, after the second was sent
    assert commits.unconfirmed == {0: 20}
    assert consumer.commits == [({0: 10, 1: 5}, True), ({0: 20, 1: 5}, True)]  # unconfirmed ones sent again
    assert commits.failed == 0


def test_a_partition_refused_is_counted_and_sent_with_the_next_commit() -> None:
    commits, consumer = AsyncCommits(TOPIC), Consumer()
    commits.commit(consumer, {0: 10, 1: 5})  # type: ignore[arg-type]
    rebalancing = KafkaError(KafkaError.REBALANCE_IN_PROGRESS)
    commits.on_commit(None, [result(0, 10), result(1, 5, rebalancing)])
    assert (commits.failed, commits.unconfirmed) == (1, {1: 5})
    commits.commit(consumer, {0: 11})  # type: ignore[arg-type]
    assert consumer.commits[-1] == ({0: 11, 1: 5}, True)


def test_a_whole_commit_failing_is_counted_and_no_offset_is_not_a_failure() -> None:
    commits = AsyncCommits(TOPIC)
    commits.on_commit(KafkaError(KafkaError._NO_OFFSET), [])
    commits.on_commit(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE), [])
    assert commits.failed == 1


def test_revoked_partitions_are_committed_and_waited_for_then_forgotten() -> None:
    commits, consumer = AsyncCommits(TOPIC), Consumer()
    commits.commit(consumer, {0: 10, 1: 5})  # type: ignore[arg-type]
    commits.on_revoke(consumer, [TopicPartition(TOPIC, 1)])  # type: ignore[arg-type]
    assert consumer.commits[-1] == ({1: 5}, False)
    assert commits.unconfirmed == {0: 10}


def test_close_commits_what_is_unconfirmed_of_the_assigned_partitions_only() -> None:
    commits, consumer = AsyncCommits(TOPIC), Consumer(assigned=(0,))
    commits.commit(consumer, {0: 10, 1: 5})  # type: ignore[arg-type]
    commits.close(consumer)  # type: ignore[arg-type]
    assert consumer.commits[-1] == ({0: 10}, False)
    assert commits.unconfirmed == {}
