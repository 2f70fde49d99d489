"""The client's asynchronous offset commit (`async_commit`, the default; PROTOCOL.md "Client flow", step 3): sent
after the STARTs are durable, it reaches the group, survives `close()` and a rebalance, and a failed one costs
re-reads at most, never a message. Against the real embedded broker."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.message import Message
from tests.helpers import committed_offsets, wait_for
from tests.integration.test_client import receive_all, send

MakeConfig = Callable[..., KmqConfig]
PARTITIONS = 2


def next_offsets(messages: list[Message]) -> dict[int, int]:
    """Per partition, one past the highest offset received (what the group must have committed)."""
    found: dict[int, int] = {}
    for m in messages:
        found[m.partition] = max(found.get(m.partition, 0), m.offset + 1)
    return found


def committed(config: KmqConfig) -> dict[int, int]:
    return {p: offset for p, offset in committed_offsets(config, PARTITIONS).items() if offset >= 0}


class DroppedCommits:
    """Delegates to the real consumer; its asynchronous commits never go out (refused at once) while `dropping`."""

    def __init__(self, real: Any) -> None:
        self._real, self.dropping, self.dropped = real, True, 0

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        if self.dropping and kwargs.get("asynchronous"):
            self.dropped += 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT, "connection to the coordinator lost"))
        return self._real.commit(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_the_offsets_reach_the_group_while_the_client_runs(make_config: MakeConfig) -> None:
    config = make_config(partitions=PARTITIONS)
    assert config.async_commit
    send(config, 30)
    with KmqClient(config) as client:
        received = receive_all(client, 30)
        expected = next_offsets(received)
        wait_for(lambda: committed(config) == expected, timeout_s=15, what=f"committed offsets {expected}")
        client.receive(max_messages=1, timeout_s=0.2)  # serves the commits' reports
        assert client.failed_commits == 0
        assert client._commits is not None and client._commits.unconfirmed == {}


def test_close_leaves_every_received_batch_committed(make_config: MakeConfig) -> None:
    config = make_config(partitions=PARTITIONS)
    send(config, 40)
    client = KmqClient(config)
    received = receive_all(client, 40)
    client.close()  # at once: the last commit may still be in flight
    assert committed(config) == next_offsets(received)
    assert client.failed_commits == 0


def test_a_failed_commit_is_counted_not_raised_and_sent_again_with_the_next(make_config: MakeConfig) -> None:
    config = make_config(partitions=1)
    send(config, 10, partition=0)
    with KmqClient(config) as client:
        spy = DroppedCommits(client._consumer)
        client._consumer = spy  # type: ignore[assignment]  # duck-typed
        first = receive_all(client, 4)  # the batch is handed over: its STARTs are durable
        assert client.failed_commits == spy.dropped >= 1
        assert committed(config) == {}
        spy.dropping = False
        rest = receive_all(client, 6)  # its commit carries the first batch's offsets too
        wait_for(lambda: committed(config) == {0: 10}, timeout_s=15, what="offset 10 committed")
    assert sorted(m.offset for m in first + rest) == list(range(10))  # read once each: no rewind, no duplicate


def test_close_commits_what_was_never_confirmed(make_config: MakeConfig) -> None:
    config = make_config(partitions=1)
    send(config, 8, partition=0)
    client = KmqClient(config)
    client._consumer = DroppedCommits(client._consumer)  # type: ignore[assignment]  # duck-typed
    received = receive_all(client, 8)
    assert committed(config) == {}
    client.close()
    assert committed(config) == {0: 8} == next_offsets(received)


def test_a_rebalance_commits_what_was_not_confirmed_before_the_partitions_move(make_config: MakeConfig) -> None:
    config = make_config(partitions=PARTITIONS)
    send(config, 20)
    first = KmqClient(config)
    try:
        first._consumer = DroppedCommits(first._consumer)  # type: ignore[assignment]  # duck-typed
        received = receive_all(first, 20)
        assert committed(config) == {}
        with KmqClient(config) as second:
            got: list[Message] = []

            def rebalanced() -> bool:  # `first` gives a partition up inside its own receive()
                received.extend(first.receive(max_messages=10, timeout_s=0.1))
                got.extend(second.receive(max_messages=10, timeout_s=0.1))
                return bool(second._consumer.assignment()) and len(first._consumer.assignment()) < PARTITIONS

            wait_for(rebalanced, timeout_s=30, what="a partition moved to the second client")
            moved = second._consumer.assignment()[0].partition
            send(config, 4, partition=moved)
            got += receive_all(second, 4 - len(got))
        assert sorted(m.offset for m in got) == list(
            range(next_offsets(received)[moved], next_offsets(received)[moved] + 4)
        )
    finally:
        first.close()
