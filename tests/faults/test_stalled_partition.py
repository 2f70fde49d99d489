"""Head-of-line blocking (issue 15, item 3): one partition whose queue reads hang must not hold up the others.

The fault: every read of the STALLED partition's queue messages blocks until the test releases it (as when the broker
is stuck on that partition). While it lasts, the HEALTHY partition's messages, due after the stalled ones, must be
redelivered within a generous bound, and `/healthz` must keep answering 200 with a liveness timeout far shorter than
the stall (a liveness restart would only make the outage worse). Once released, the stalled partition's messages are
redelivered too. The healthy partition's lateness with and without the stall is printed (a measurement, not a timed
assertion).
"""

from __future__ import annotations

import statistics
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.markers import MarkerKey
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker.reader import QueueReader, ReadResult
from kmq_tracker.redeliverer import Redelivered, Redeliverer
from kmq_tracker.service import TrackerService
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.integration.test_tracker_e2e import pending, receive, running_tracker

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
PER_PARTITION = 10
SPACING_MS = 100  # the healthy partition's messages come due this far apart
STALLED, HEALTHY = 0, 1
LIVENESS_TIMEOUT_MS = 1_000  # far shorter than the stall: a loop blocked by it would fail /healthz
HEALTHY_BOUND_S = 20.0  # generous: on a busy machine a healthy redelivery takes well under a second


class Stall:
    """Blocks every queue read of the STALLED partition until `release()`; counts the reads it held."""

    def __init__(self, active: bool) -> None:
        self.held = threading.Event()
        self._released = threading.Event()
        if not active:
            self._released.set()

    def read(self, real: Callable[..., ReadResult]) -> Callable[..., ReadResult]:
        def stalled(reader: QueueReader, partition: int, offsets: Sequence[int]) -> ReadResult:
            if partition == STALLED and not self._released.is_set():
                self.held.set()
                assert self._released.wait(60), "the stall was never released"
            return real(reader, partition, offsets)

        return stalled

    def release(self) -> None:
        self._released.set()


@contextmanager
def observed(monkeypatch: Any, stall: Stall) -> Iterator[dict[int, int]]:
    """The moment each healthy-partition offset's copy was acknowledged (wall clock ms)."""
    done_ms: dict[int, int] = {}
    real_redeliver = Redeliverer.redeliver

    def redeliver(self: Redeliverer, partition: int, offsets: Sequence[int]) -> Redelivered:
        outcome = real_redeliver(self, partition, offsets)
        if partition == HEALTHY:
            done_ms.update((offset, time.time_ns() // 1_000_000) for offset in outcome.copied)
        return outcome

    with monkeypatch.context() as patch:
        patch.setattr(QueueReader, "read", stall.read(QueueReader.read))
        patch.setattr(Redeliverer, "redeliver", redeliver)
        try:
            yield done_ms
        finally:
            stall.release()


def healthz(tracker: TrackerService) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{tracker.http_port}/healthz", timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return e.code


def healthy_lateness_ms(make_config: MakeConfig, monkeypatch: Any, stalled: bool) -> list[int]:
    """Per message of the healthy partition: how long after its deadline its copy was acknowledged."""
    config = make_config(partitions=2, msg_timeout_ms=600_000)
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(b"m", partition=p) for p in (STALLED, HEALTHY) for _ in range(PER_PARTITION)
        )
    stall = Stall(active=stalled)
    settings = {"liveness_timeout_ms": LIVENESS_TIMEOUT_MS, "retry_backoff_ms": 50}
    with (
        observed(monkeypatch, stall) as done_ms,
        running_tracker(config, **settings) as tracker,
        KmqClient(config) as client,
    ):
        try:
            for message in receive(client, 2 * PER_PARTITION):
                # the stalled partition's messages come due first, the healthy ones after them, over ~1 s
                due_ms = 500 if message.partition == STALLED else 1000 + message.offset * SPACING_MS
                client.nack(message, delay_ms=due_ms)
            client.flush()
            if stalled:
                assert stall.held.wait(30), "the stalled partition was never read"

            def healthy_redelivered() -> bool:
                status = healthz(tracker)
                assert status == 200, f"/healthz answered {status} while one partition was stalled"
                return len(done_ms) == PER_PARTITION

            wait_for(healthy_redelivered, HEALTHY_BOUND_S, what="the healthy partition's redeliveries during the stall")
            if stalled:
                assert pending(tracker) >= PER_PARTITION  # the stalled partition is still waiting: the stall lasted
                labels = {"topic": config.markers_topic, "partition": str(STALLED)}
                # reported as a partition with a long pass, not as a dead process
                wait_for(lambda: tracker.metrics.value("kmq_redelivery_pass_seconds", labels) > 0, 10, what="gauge")
            stall.release()
            wait_for(lambda: tracker_settled(tracker), 60, what="every redelivery once the stall ended")
        finally:
            stall.release()  # before the tracker stops: its loop must not wait out a hung read
    return sorted(done_ms[offset] - deadline for offset, deadline in deadlines(config).items())


def deadlines(config: KmqConfig) -> dict[int, int]:
    """The healthy partition's START deadlines, from the markers topic."""
    found = {}
    for record in read_topic(config, config.markers_topic, 2):
        key = MarkerKey.decode(record.key)
        if key.partition == HEALTHY and record.value and record.value[0] == 1:
            found[key.offset] = record.timestamp_ms + int.from_bytes(record.value[1:], "big", signed=True)
    return found


def test_a_stalled_partition_holds_up_neither_the_others_nor_the_liveness_probe(
    make_config: MakeConfig, monkeypatch: Any
) -> None:
    baseline = healthy_lateness_ms(make_config, monkeypatch, stalled=False)
    stalled = healthy_lateness_ms(make_config, monkeypatch, stalled=True)
    assert len(baseline) == len(stalled) == PER_PARTITION

    def p99(values: list[int]) -> float:
        return statistics.quantiles(values, n=100, method="inclusive")[98]

    print(
        f"\nhealthy partition's redelivery lateness p50 / p99: {statistics.median(baseline):.0f} / "
        f"{p99(baseline):.0f} ms alone; {statistics.median(stalled):.0f} / {p99(stalled):.0f} ms while the other "
        f"partition's queue reads hang"
    )
