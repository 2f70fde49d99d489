"""The worker's clock: throughput over the window, per-batch overhead percentiles, and the stall guard."""

from __future__ import annotations

import gc
import time

import pytest

from kmq.bench.measure import BatchClock, rss_bytes
from kmq.errors import BenchError


def test_the_clock_counts_batches_and_reports_their_overhead() -> None:
    clock = BatchClock(target=1000)
    clock.start()
    first_arrived = time.perf_counter()
    for overhead_ms in (1.0, 2.0, 3.0, 4.0):
        clock.batch(250, overhead_ms / 1000, arrived=time.perf_counter())
    figures = clock.figures(extra=7)

    assert clock.done
    assert (figures["messages"], figures["batches"], figures["extra"]) == (1000, 4, 7)
    assert figures["overhead_ms_p50"] == pytest.approx(2.5)
    assert figures["overhead_ms_p99"] == pytest.approx(3.97)
    assert figures["msgs_per_s"] == pytest.approx(1000 / figures["elapsed_s"])
    assert figures["cpu_s"] >= 0 and figures["cpu_us_per_msg"] >= 0
    assert 0 <= figures["first_records_ms"] <= (first_arrived - clock.started) * 1000 + 50


def test_the_window_opens_when_the_first_records_arrive_not_at_go() -> None:
    clock = BatchClock(target=100)
    clock.start()
    clock.started -= 5.0  # GO came five seconds before the first records (a group join, say)
    clock.batch(100, 0.001, arrived=time.perf_counter())
    figures = clock.figures()

    assert figures["first_records_ms"] == pytest.approx(5000, abs=100)
    assert figures["elapsed_s"] < 1.0  # the five seconds before the first records are not in the window


def test_a_contender_that_stops_receiving_is_reported_not_waited_for() -> None:
    clock = BatchClock(target=10)
    clock.start()
    clock.batch(3, 0.001, arrived=time.perf_counter())
    clock.check_stall(stall_s=60)  # fine: a batch just came
    with pytest.raises(BenchError, match="after 3 of 10"):
        clock.check_stall(stall_s=0)


def test_rss_of_a_process_that_does_not_exist_is_none() -> None:
    assert rss_bytes(2**22 + 12345) is None


def test_the_clock_counts_the_collections_of_its_window_only() -> None:
    clock = BatchClock(target=1000)
    clock.start()
    gc.collect(0)
    gc.collect(2)
    clock.batch(1000, 0.001, arrived=time.perf_counter())
    figures = clock.figures()
    gc.collect()  # after the window: not counted

    assert figures["gc_collections_per_1k_msgs"][0] >= 1 and figures["gc_collections_per_1k_msgs"][2] >= 1
    assert figures["gc_us_per_msg"] > 0
    assert clock.gc_watch.collections == [round(n) for n in figures["gc_collections_per_1k_msgs"]]
