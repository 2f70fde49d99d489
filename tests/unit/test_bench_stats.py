"""kmq bench's arithmetic: percentiles, medians, same-round ratios, table rows and the targets."""

from __future__ import annotations

import math

import pytest

from kmq.bench.options import HTTP, KMQ, KMQ_BATCH, PLAIN, SHARE, TRACKER
from kmq.bench.results import Run, figure, headline, ratio, rows
from kmq.bench.stats import median, percentile, percentiles
from kmq.bench.targets import targets


def consumer_run(contender: str, round_: int, rate: float, p95_ms: float = 1.0) -> Run:
    figures = {"msgs_per_s": rate, "overhead_ms_p50": 0.5, "overhead_ms_p95": p95_ms, "overhead_ms_p99": 2 * p95_ms}
    return Run(contender, round_, {**figures, "rss_bytes": 50_000_000})


def test_percentiles_interpolate_between_the_closest_ranks() -> None:
    values = [float(v) for v in range(1, 101)]  # 1..100
    assert percentile(values, 50) == pytest.approx(50.5)
    assert percentile(values, 95) == pytest.approx(95.05)
    assert percentile(values, 99) == pytest.approx(99.01)
    assert percentile([7.0], 99) == 7.0
    assert percentile(list(reversed(values)), 0) == 1.0
    assert math.isnan(percentile([], 50))
    assert percentiles([1.0, 2.0, 3.0], "x") == {
        "x_p50": 2.0,
        "x_p95": pytest.approx(2.9),
        "x_p99": pytest.approx(2.98),
    }


def test_median_ignores_what_was_not_measured() -> None:
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, math.nan, 1.0]) == 2.5
    assert math.isnan(median([math.nan]))
    assert math.isnan(median([]))


def test_a_ratio_pairs_the_runs_of_one_round_and_takes_the_median() -> None:
    # Round 1 ran on a slower machine moment: both contenders dropped, their ratio did not.
    runs = [
        consumer_run(PLAIN, 0, 1000),
        consumer_run(KMQ, 0, 900),
        consumer_run(PLAIN, 1, 100),
        consumer_run(KMQ, 1, 95),
        consumer_run(PLAIN, 2, 1000),
        consumer_run(KMQ, 2, 800),
    ]
    assert ratio(runs, KMQ, PLAIN) == pytest.approx(0.9)
    # A ratio of medians would have been 800 / 1000 here.
    assert figure([r for r in runs if r.contender == KMQ], "msgs_per_s") == 800


def test_a_ratio_skips_rounds_where_one_side_is_missing() -> None:
    runs = [consumer_run(KMQ, 0, 900), consumer_run(PLAIN, 1, 1000), consumer_run(KMQ, 1, 500)]
    assert ratio(runs, KMQ, PLAIN) == 0.5
    assert math.isnan(ratio(runs, KMQ, SHARE))


def test_rows_hold_medians_and_notes_of_skipped_contenders() -> None:
    runs = [
        consumer_run(PLAIN, 0, 1000),
        consumer_run(KMQ, 0, 300, p95_ms=4.0),
        Run(SHARE, 0, {}, skipped="no share groups here"),
        consumer_run(PLAIN, 1, 1200),
        consumer_run(KMQ, 1, 240, p95_ms=6.0),
        Run(SHARE, 1, {}, skipped="no share groups here"),
    ]
    plain, kmq, share = rows(runs, [PLAIN, KMQ, SHARE], {})

    assert (plain.runs, plain.rate, plain.ratio_to_plain) == (2, 1100, 1.0)
    assert (kmq.rate, kmq.p95_ms, kmq.p99_ms, kmq.rss_bytes) == (270, 5.0, 10.0, 50_000_000)
    assert kmq.ratio_to_plain == pytest.approx((0.3 + 0.2) / 2)
    assert (share.runs, share.note) == (0, "no share groups here")
    assert math.isnan(share.rate) and math.isnan(share.p95_ms)


def test_targets_are_met_missed_or_not_measured() -> None:
    runs = [
        consumer_run(PLAIN, 0, 1000),
        consumer_run(KMQ, 0, 450),
        consumer_run(KMQ_BATCH, 0, 950, p95_ms=12.0),
        Run(TRACKER, 0, {"offsets_per_s": 150_000, "rss_bytes": 90_000_000, "lateness_ms_p99": 300.0}),
    ]
    runs[0].figures["cpu_us_per_msg"], runs[2].figures["cpu_us_per_msg"] = 2.0, 2.8
    table = rows(runs, [PLAIN, KMQ, KMQ_BATCH, TRACKER, HTTP], {})
    status = {t.name: t.status for t in targets(runs, table, 1_000_000)}

    assert status["kmq-batch ÷ plain throughput"] == "met"
    assert status["kmq ÷ plain throughput"] == "missed"
    assert status["kmq-batch ÷ plain CPU per message"] == "missed"  # 1.4 x
    assert status["kmq-batch ÷ share-group throughput"] == "not measured"
    assert status["tracker queue offsets ingested"] == "met"
    assert status["tracker RSS, 1,000,000 pending"] == "met"
    assert status["tracker redelivery lateness p99"] == "missed"
    assert status["http receive+ack"] == "not measured"


def test_a_headline_names_the_run_and_its_main_figures() -> None:
    assert headline(consumer_run(KMQ, 1, 12_345.6, p95_ms=3.25)) == "kmq #2: 12,346 msgs/s, batch overhead p95 3.25 ms"
    assert headline(Run(SHARE, 0, {}, skipped="skipped: why")) == "share #1: skipped: why"
