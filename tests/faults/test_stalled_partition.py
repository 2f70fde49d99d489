"""Head-of-line blocking (issue 15, item 3), measured: how late one partition's redeliveries run while another
partition's redelivery writes are slow (each pass over it takes STALL_S, as with a broker slow for that partition).

Not fixed on this branch: redelivery, dead-letter writes and marker consumption share the tracker's one loop
thread, so the healthy partition waits behind every slow pass. The test prints the lateness of the healthy
partition without and with the stall (a measurement, not a timed assertion) and checks that nothing is lost.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.markers import MarkerKey
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import read_topic, wait_for
from tests.integration.test_tracker_e2e import pending, receive, running_tracker
from tracker.redeliverer import Redelivered, Redeliverer

pytestmark = [pytest.mark.faults, pytest.mark.integration]
MakeConfig = Callable[..., KmqConfig]
PER_PARTITION = 15
SPACING_MS = 150  # the healthy partition's messages come due this far apart
STALL_S = 1.0
STALLED, HEALTHY = 0, 1


def lateness_ms(make_config: MakeConfig, monkeypatch: Any, stall_s: float) -> list[int]:
    """Per message of the healthy partition: redelivered this long after its deadline."""
    config = make_config(partitions=2, msg_timeout_ms=600_000)
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(b"m", partition=p) for p in (STALLED, HEALTHY) for _ in range(PER_PARTITION)
        )
    done_ms: dict[int, int] = {}
    real = Redeliverer.redeliver

    def observed(self: Redeliverer, partition: int, offsets: Sequence[int]) -> Redelivered:
        if partition == STALLED:
            time.sleep(stall_s)  # the fault: this partition's writes take this long
        outcome = real(self, partition, offsets)
        if partition == HEALTHY:
            done_ms.update((offset, time.time_ns() // 1_000_000) for offset in outcome.copied)
        return outcome

    monkeypatch.setattr(Redeliverer, "redeliver", observed)
    with running_tracker(config) as tracker, KmqClient(config) as client:
        for message in receive(client, 2 * PER_PARTITION):
            client.nack(message, delay_ms=1000 + message.offset * SPACING_MS)  # due over the next ~2 s
        client.flush()
        wait_for(lambda: len(done_ms) == PER_PARTITION and pending(tracker) == 0, timeout_s=60, what="redeliveries")
    monkeypatch.undo()
    deadlines = {}
    for record in read_topic(config, config.markers_topic, 2):
        key = MarkerKey.decode(record.key)
        if key.partition == HEALTHY and record.value and record.value[0] == 1:
            deadlines[key.offset] = record.timestamp_ms + int.from_bytes(record.value[1:], "big", signed=True)
    return sorted(done_ms[offset] - deadline for offset, deadline in deadlines.items())


def test_lateness_of_a_healthy_partition_beside_a_stalled_one(make_config: MakeConfig, monkeypatch: Any) -> None:
    baseline = lateness_ms(make_config, monkeypatch, stall_s=0.0)
    stalled = lateness_ms(make_config, monkeypatch, stall_s=STALL_S)
    assert len(baseline) == len(stalled) == PER_PARTITION
    ratio = statistics.median(stalled) / max(1, statistics.median(baseline))
    print(
        f"\nhealthy partition's redelivery lateness, median / max: {statistics.median(baseline):.0f} / "
        f"{max(baseline)} ms alone; {statistics.median(stalled):.0f} / {max(stalled)} ms beside a partition whose "
        f"passes take {STALL_S:.1f} s ({ratio:.1f}x the median)"
    )
