"""The START pipeline's batch counters have one writer at a time, against the broker.

Two threads serve the START producer's delivery reports: the pipeline's report thread, and the receiving thread
while the producer's local queue is full (`StartWriter._refused` polls to make room). The test forces the two into
`StartPipeline._report` at the same moment: the report thread, the first time it reads a batch's counter, waits there
(bounded) until the receiving thread is inside `_report` too. Only a partition's last START of a batch runs `_report`,
so the batch spans many partitions: its counters are per partition and the batch's count of open partitions. Without
the lock two threads read the same count and one decrement is lost: the batch stays open for ever and nothing is
committed."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer

from kmq import start_pipeline
from kmq.config import KmqConfig
from kmq.kafka import consumer_settings, producer_settings
from kmq.start_pipeline import StartPipeline
from tests.helpers import committed_offsets

MakeConfig = Callable[..., KmqConfig]
PARTITIONS = 8
MESSAGES = 25  # per partition
REPORT_THREAD = "kmq-start-reports"
MEET_TIMEOUT_S = 20.0  # bounded: the other thread gets a report within milliseconds once the first one waits


class _Meeting:
    """Holds the first reader of a batch counter until a second thread is inside `StartPipeline._report`."""

    def __init__(self) -> None:
        self.first: threading.Thread | None = None
        self.met = threading.Event()
        self.released = threading.Event()
        self.readers: set[str] = set()
        self._lock = threading.Lock()

    def read(self) -> None:
        me = threading.current_thread()
        with self._lock:
            self.readers.add(me.name)
            # The report thread is held: the receiving thread serves reports only while it produces the batch.
            first = self.first is None and me.name == REPORT_THREAD
            if first:
                self.first = me
            # Read while the first reader holds its value: both are in _report.
            elif self.first is not None and not self.released.is_set():
                self.met.set()
        if not first:
            return
        deadline = time.monotonic() + MEET_TIMEOUT_S
        while time.monotonic() < deadline and not self.met.is_set() and not self._other_in_report(me):
            time.sleep(0.001)  # polling the other thread's stack, bounded by the deadline
        self.released.set()

    def _other_in_report(self, me: threading.Thread) -> bool:
        for ident, frame in sys._current_frames().items():
            if ident == me.ident:
                continue
            walk = frame
            while walk is not None:
                if walk.f_code is StartPipeline._report.__code__:
                    self.met.set()
                    return True
                walk = walk.f_back
        return False


class _Counts(dict[int, int]):
    meeting = _Meeting()

    def __getitem__(self, partition: int) -> int:
        value = super().__getitem__(partition)
        self.meeting.read()
        return value


class _WatchedBatch(start_pipeline._Batch):
    def __init__(self, offsets: start_pipeline.Offsets) -> None:
        super().__init__(offsets)
        self.left = _Counts()


def test_reports_served_by_two_threads_at_once_lose_no_count(
    make_config: MakeConfig, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = make_config(partitions=PARTITIONS, marker_format="kmq")  # one `_report` per partition of the batch
    meeting = _Counts.meeting = _Meeting()
    monkeypatch.setattr(start_pipeline, "_Batch", _WatchedBatch)
    # Every record reported; a local queue of 20 records, one per request: the receiving thread polls for room
    # while the batch's other records are in flight, so reports reach it as well as the report thread.
    producer = Producer(producer_settings(config, linger_ms=0, queue_buffering_max_messages=20, batch_num_messages=1))
    consumer = Consumer(consumer_settings(config, config.group_id))
    pipeline = StartPipeline(config, consumer, producer)
    try:
        pipeline.send({p: list(range(MESSAGES)) for p in range(PARTITIONS)}, redeliver_after_ms=30_000)
        assert meeting.met.is_set(), f"the two threads never served reports at once (readers: {meeting.readers})"
        assert {REPORT_THREAD, threading.current_thread().name} <= meeting.readers
        assert pipeline.drain(timeout_s=30.0), "a batch is still open: a START report was lost"
        assert pipeline.first_in_flight() is None
        pipeline.commit_now()
        assert committed_offsets(config, PARTITIONS) == dict.fromkeys(range(PARTITIONS), MESSAGES)
    finally:
        pipeline.close(timeout_s=10.0)
        consumer.close()
