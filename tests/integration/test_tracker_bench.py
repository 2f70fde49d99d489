"""The tracker benchmark runs end to end on small numbers (its figures are measured by `python -m tracker.bench`)."""

from __future__ import annotations

from pathlib import Path

from kmq.embedded import KafkaCluster
from tracker.bench import run_benchmark


def test_the_benchmark_reports_its_figures(kafka: KafkaCluster, tmp_path: Path) -> None:
    figures = run_benchmark(kafka, pending=3_000, ended=1_000, expiring=40, partitions=2, log_dir=tmp_path)
    assert figures["markers_written"] == 5_000
    assert figures["pending_messages"] == figures["pending_expected"] == 3_000
    assert figures["ingest_markers_per_s"] > 0
    assert 0 < figures["tracker_rss_mb"] <= figures["tracker_peak_rss_mb"]
    assert figures["lateness_messages"] == 40
    assert figures["lateness_not_redelivered"] == 0
    assert figures["lateness_min_ms"] >= 0
    assert figures["lateness_p50_ms"] <= figures["lateness_p95_ms"] <= figures["lateness_p99_ms"]
    assert figures["tracker_exit_code"] == 0
