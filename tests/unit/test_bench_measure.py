"""The worker's clock: throughput over the window, per-batch overhead percentiles, and the stall guard."""

from __future__ import annotations

import pytest

from kmq.bench.measure import BatchClock, rss_bytes
from kmq.errors import BenchError


def test_the_clock_counts_batches_and_reports_their_overhead() -> None:
    clock = BatchClock(target=1000)
    clock.start()
    for overhead_ms in (1.0, 2.0, 3.0, 4.0):
        clock.batch(250, overhead_ms / 1000)
    figures = clock.figures(extra=7)

    assert clock.done
    assert (figures["messages"], figures["batches"], figures["extra"]) == (1000, 4, 7)
    assert figures["overhead_ms_p50"] == pytest.approx(2.5)
    assert figures["overhead_ms_p99"] == pytest.approx(3.97)
    assert figures["msgs_per_s"] == pytest.approx(1000 / figures["elapsed_s"])
    assert figures["rss_bytes"] is None or figures["rss_bytes"] > 1_000_000


def test_a_contender_that_stops_receiving_is_reported_not_waited_for() -> None:
    clock = BatchClock(target=10)
    clock.start()
    clock.batch(3, 0.001)
    clock.check_stall(stall_s=60)  # fine: a batch just came
    with pytest.raises(BenchError, match="after 3 of 10"):
        clock.check_stall(stall_s=0)


def test_rss_of_a_process_that_does_not_exist_is_none() -> None:
    assert rss_bytes(2**22 + 12345) is None
