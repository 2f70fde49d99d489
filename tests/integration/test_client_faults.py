"""The client when a commit fails: timed-out, failed and fatal transactions, per-partition commit errors (issue 15,
items 7 and 8). Faults are injected around the real clients; the broker is real."""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import CommitError, KmqError, TransactionalSetupError, TransactionError
from kmq.message import Message
from kmq.starts import SyncStarts
from tests.helpers import committed_offsets, read_committed_keys
from tests.integration.test_client import pipeline_of, receive_all, send, transactions_of

MakeConfig = Callable[..., KmqConfig]
COUNT = 6


@pytest.fixture
def transactional(kafka: Any, make_config: MakeConfig) -> KmqConfig:
    if kafka.backend == "mock":
        pytest.skip("librdkafka's mock cluster neither stores transactional offset commits nor hides aborted records")
    return make_config(partitions=2, transactional=True, marker_format="kmq")  # one START key per message


class FailingOnce:
    """Delegates to a real client; the named calls raise `error` the first time (after doing nothing)."""

    def __init__(self, real: Any, error: KafkaError, *names: str) -> None:
        self._real, self._error, self._failing = real, error, set(names)

    def __len__(self) -> int:
        return len(self._real)

    def __getattr__(self, name: str) -> Any:
        if name in self._failing:
            self._failing.discard(name)

            def fail(*args: Any, **kwargs: Any) -> Any:
                raise KafkaException(self._error)

            return fail
        return getattr(self._real, name)


def inject(client: KmqClient, error: KafkaError, *names: str) -> None:
    writer = transactions_of(client)._writer
    writer.producer = FailingOnce(writer.producer, error, *names)  # type: ignore[assignment]  # duck-typed


def offsets_of(messages: list[Message]) -> list[tuple[int, int]]:
    return sorted((m.partition, m.offset) for m in messages)


def test_a_timed_out_commit_whose_abort_fails_too_is_recovered_on_the_next_receive(transactional: KmqConfig) -> None:
    send(transactional, COUNT)
    with KmqClient(transactional, marker_timeout_s=10) as client:
        timed_out = KafkaError(KafkaError._TIMED_OUT, "commit timed out", retriable=True)
        inject(client, timed_out, "commit_transaction", "abort_transaction")
        with pytest.raises(TransactionError, match=r"commit timed out.*aborting it failed too") as raised:
            client.receive(max_messages=COUNT, timeout_s=5)
        assert isinstance(raised.value, KmqError) and not raised.value.aborted
        received = receive_all(client, COUNT)  # aborts the old transaction first, then reads the batch again
    assert len(received) == COUNT
    read_committed_keys(transactional, transactional.markers_topic, 2, {m.marker_key.encode() for m in received})
    assert sum(committed_offsets(transactional, 2).values()) == COUNT


def test_a_fatal_commit_error_replaces_the_producer_and_the_batch_comes_again(transactional: KmqConfig) -> None:
    send(transactional, COUNT)
    with KmqClient(transactional, marker_timeout_s=10) as client:
        fenced = KafkaError(KafkaError._FENCED, "fenced by a newer instance", fatal=True)
        inject(client, fenced, "commit_transaction")
        with pytest.raises(TransactionError, match="it was aborted: nothing was committed"):
            client.receive(max_messages=COUNT, timeout_s=5)
        assert client.fatal_error is None
        received = receive_all(client, COUNT)
    assert len(received) == COUNT
    assert sum(committed_offsets(transactional, 2).values()) == COUNT


def test_a_producer_that_cannot_be_replaced_is_reported(transactional: KmqConfig, monkeypatch: Any) -> None:
    send(transactional, COUNT)
    with KmqClient(transactional, marker_timeout_s=10) as client:
        inject(client, KafkaError(KafkaError._FENCED, "fenced", fatal=True), "commit_transaction")
        unreachable = TransactionalSetupError("t-id", "no broker")
        monkeypatch.setattr(transactions_of(client), "_new_producer", lambda timeout_s: _raise(unreachable))
        with pytest.raises(TransactionError):
            client.receive(max_messages=COUNT, timeout_s=5)
        assert client.fatal_error == "no broker"
        with pytest.raises(TransactionError, match="cannot be replaced: no broker"):
            receive_all(client, COUNT)
        monkeypatch.undo()  # the cluster is back: the next receive replaces the producer and reads the batch
        assert len(receive_all(client, COUNT)) == COUNT
        assert client.fatal_error is None


def _raise(error: Exception) -> Any:
    raise error


class PartitionErrors:
    """Delegates to the real consumer; its first commit reports an error for the first partition committed."""

    def __init__(self, real: Any) -> None:
        self._real, self.failed = real, False

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        result = self._real.commit(*args, **kwargs)
        if self.failed:
            return result
        self.failed = True
        error = KafkaError(KafkaError.REBALANCE_IN_PROGRESS, "Broker: Group rebalance in progress")
        first = result[0]
        return [SimpleNamespace(topic=first.topic, partition=first.partition, offset=first.offset, error=error)]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_per_partition_commit_error_is_a_failed_commit_and_the_batch_comes_again(make_config: MakeConfig) -> None:
    config = make_config(partitions=1, pipelined=False)  # the commit waited for in receive()
    send(config, COUNT)
    with KmqClient(config, marker_timeout_s=10) as client:
        starts = client._starts
        assert isinstance(starts, SyncStarts)
        starts._consumer = PartitionErrors(starts._consumer)  # type: ignore[assignment]  # duck-typed
        with pytest.raises(CommitError, match=r"partition 0 .*rebalance in progress"):
            client.receive(max_messages=COUNT, timeout_s=5)
        received = receive_all(client, COUNT)
    assert offsets_of(received) == [(0, offset) for offset in range(COUNT)]


class CommitsRefused:
    """Delegates to the real consumer; every commit is refused before it goes out."""

    def __init__(self, real: Any) -> None:
        self._real, self.refused = real, 0

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        self.refused += 1
        raise KafkaException(KafkaError(KafkaError.REBALANCE_IN_PROGRESS, "Broker: Group rebalance in progress"))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_a_pipelined_commit_that_fails_is_counted_and_its_batches_come_again(make_config: MakeConfig) -> None:
    config = make_config(partitions=1, pipelined=True)
    send(config, COUNT)
    with KmqClient(config, marker_timeout_s=10) as client:
        pipeline = pipeline_of(client)
        refusing = CommitsRefused(pipeline._consumer)
        pipeline._consumer = refusing  # type: ignore[assignment]  # duck-typed
        first = receive_all(client, COUNT)  # handed over: a failed commit is never raised, only counted
        client.flush()  # waits for the STARTs, then commits synchronously: refused too
        assert refusing.refused >= 1 and client.failed_commits >= 1
        pipeline._consumer = refusing._real  # type: ignore[assignment]  # (close() commits nothing new)
        pipeline.forget([0])
    assert committed_offsets(config, 1)[0] < 0
    with KmqClient(config) as again:  # the next owner reads them again: duplicates, never a loss
        assert offsets_of(receive_all(again, COUNT)) == offsets_of(first)
