"""KmqClient's poll: records pass through as consumed; consumer events among them are handled, not handed out."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.consumer_turns import ConsumerTurns


class _Record:
    def __init__(self, offset: int, error: KafkaError | None = None) -> None:
        self.offset, self._error = offset, error

    def error(self) -> KafkaError | None:
        return self._error


class _Consumer:
    def __init__(self, records: list[_Record]) -> None:
        self.records = records

    def consume(self, num_messages: int, timeout: float) -> list[_Record]:
        return self.records[:num_messages]


def _client(records: list[_Record]) -> Any:
    client: Any = KmqClient.__new__(KmqClient)  # no Kafka clients: only the poll is under test
    client.config = KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs")
    client._consumer = _Consumer(records)
    client._turns = ConsumerTurns()
    return client


def test_records_without_an_error_come_back_as_consumed() -> None:
    records = [_Record(offset) for offset in range(3)]
    assert _client(records)._poll(10, 0.1) == records


def test_an_end_of_partition_event_is_dropped_and_other_errors_are_logged(caplog: pytest.LogCaptureFixture) -> None:
    eof, transient = KafkaError(KafkaError._PARTITION_EOF), KafkaError(KafkaError._TRANSPORT, "link down")
    records = [_Record(0), _Record(-1, eof), _Record(1), _Record(-1, transient)]
    polled = _client(records)._poll(10, 0.1)
    assert [record.offset for record in polled] == [0, 1]
    assert "link down" in caplog.text


def test_a_fatal_error_raises() -> None:
    fatal = KafkaError(KafkaError._FENCED, "fenced", fatal=True)
    with pytest.raises(KafkaException):
        _client([_Record(0), _Record(-1, fatal)])._poll(10, 0.1)


def test_a_call_from_another_thread_goes_between_two_consume_slices() -> None:
    """confluent-kafka makes a call wait while another thread is inside consume(): the receiving loop consumes in
    slices and lets a waiting call (a commit, a flush) go first, instead of starving it."""
    turns = ConsumerTurns()
    order: list[str] = []
    inside, called = threading.Event(), threading.Event()

    def commit() -> None:
        inside.wait(5)
        with turns.call():
            order.append("commit")
        called.set()

    committer = threading.Thread(target=commit)
    committer.start()
    with turns.consume():
        inside.set()
        wait_until(lambda: turns._waiting == 1)
        order.append("slice 1")
    with turns.consume():  # waits for the commit's turn
        order.append("slice 2")
    committer.join(5)
    assert called.is_set() and order == ["slice 1", "commit", "slice 2"]


def test_a_call_from_inside_the_receiving_threads_own_slice_runs_at_once() -> None:
    turns = ConsumerTurns()
    with turns.consume(), turns.call():  # a rebalance callback's commit, inside consume()
        pass


def wait_until(condition: Any) -> None:
    deadline = time.monotonic() + 5
    while not condition():
        assert time.monotonic() < deadline, "not reached in 5 s"
        time.sleep(0.001)  # polling a condition against a deadline
