"""KmqClient's poll: records pass through as consumed; consumer events among them are handled, not handed out."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.consumer_turns import FIRST_IDLE_SLICE_S, SLICE_S, ConsumerTurns


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


class _Librdkafka:
    """consume() as librdkafka serves it: it returns once it has `num_messages` records, or once `timeout` has passed
    (counted in `waited_s`) with what it has. `arrivals`: what the fetcher brings, one list per call
    made while none is ready. A wait is slept, as librdkafka would."""

    def __init__(self, ready: list[_Record], arrivals: list[list[_Record]] | None = None) -> None:
        self.ready, self.arrivals, self.waited_s = ready, arrivals or [], 0.0

    def consume(self, num_messages: int, timeout: float) -> list[_Record]:
        if not self.ready and self.arrivals and timeout > 0:
            self.ready = self.arrivals.pop(0)
        if len(self.ready) < num_messages and timeout > 0:
            self.waited_s += timeout
            time.sleep(timeout)  # what librdkafka does before returning a short batch
        taken, self.ready = self.ready[:num_messages], self.ready[num_messages:]
        return taken


def _client(records: list[_Record], consumer: Any = None) -> Any:
    client: Any = KmqClient.__new__(KmqClient)  # no Kafka clients: only the poll is under test
    client.config = KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs")
    client._consumer = consumer or _Consumer(records)
    client._turns = ConsumerTurns()
    client._slice_s = SLICE_S
    return client


def test_records_without_an_error_come_back_as_consumed() -> None:
    records = [_Record(offset) for offset in range(3)]
    assert _client(records)._poll(10, 0.1) == records


def test_records_already_fetched_come_back_without_waiting_for_a_full_batch() -> None:
    """Asked for 500 with 3 fetched, librdkafka would hold the 3 for the whole slice: the poll takes what is there."""
    consumer = _Librdkafka([_Record(offset) for offset in range(3)])
    assert [record.offset for record in _client([], consumer)._poll(500, 5.0)] == [0, 1, 2]
    assert consumer.waited_s == 0


def test_on_an_empty_queue_the_poll_waits_for_one_record_then_takes_what_came_with_it() -> None:
    consumer = _Librdkafka([], arrivals=[[_Record(offset) for offset in range(4)]])
    assert [record.offset for record in _client([], consumer)._poll(500, 5.0)] == [0, 1, 2, 3]
    assert consumer.waited_s == 0


def test_a_poll_that_finds_nothing_waits_its_timeout_in_slices() -> None:
    consumer = _Librdkafka([])
    assert _client([], consumer)._poll(500, 0.25) == []
    assert consumer.waited_s == pytest.approx(0.25, abs=0.05)


class _Slices:
    """A consumer that records each consume slice's timeout: records on the calls listed in `with_records`."""

    def __init__(self, with_records: set[int]) -> None:
        self.with_records, self.timeouts = with_records, []

    def consume(self, num_messages: int, timeout: float) -> list[_Record]:
        if timeout == 0:
            return []  # (`fetch` first takes what is there at once)
        self.timeouts.append(timeout)
        return [_Record(len(self.timeouts))] if len(self.timeouts) in self.with_records else []


def test_after_records_the_empty_slices_start_short_and_double_up_to_the_full_slice() -> None:
    """A flush or commit that comes as a burst ends waits a few ms for its turn, not a whole slice, and an idle
    consumer is back to full slices after a handful of them."""
    consumer = _Slices(with_records={1, 9})
    client = _client([], consumer)
    assert client._poll(500, 5.0) != []  # a burst (the first slice found records)
    assert client._poll(500, 5.0) != []  # then nothing for a while, then records again
    first = FIRST_IDLE_SLICE_S
    assert consumer.timeouts[:9] == [
        SLICE_S,
        first,
        2 * first,
        4 * first,
        8 * first,
        16 * first,
        SLICE_S,
        SLICE_S,
        SLICE_S,
    ]
    assert client._slice_s == first  # the next empty slice after those records is short again


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
