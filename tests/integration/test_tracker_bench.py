"""The tracker benchmark runs end to end on small numbers (`python -m kmq_tracker.bench` measures its figures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.embedded import KafkaCluster
from kmq_tracker.bench import run_benchmark

# kmq: a START per key and an END per ended key; batch: per partition a BATCH START per 500 offsets (4 x 2), and a
# BATCH END for those with ended offsets (the evenly spread ones all fall on partition 1: 4).
MARKERS = {"kmq": 5_000, "batch": 12}


@pytest.mark.parametrize("marker_format", ["kmq", "batch"])
def test_the_benchmark_reports_its_figures(kafka: KafkaCluster, tmp_path: Path, marker_format: str) -> None:
    figures = run_benchmark(
        kafka, pending=3_000, ended=1_000, expiring=40, partitions=2, log_dir=tmp_path, marker_format=marker_format
    )
    assert figures["markers_written"] == MARKERS[marker_format]
    assert figures["ingest_offsets_per_s"] > 0
    assert figures["pending_messages"] == figures["pending_expected"] == 3_000
    assert figures["ingest_markers_per_s"] > 0
    assert 0 < figures["tracker_rss_mb"] <= figures["tracker_peak_rss_mb"]
    assert figures["lateness_messages"] == 40
    assert figures["lateness_not_redelivered"] == 0
    assert figures["lateness_min_ms"] >= 0
    assert figures["lateness_p50_ms"] <= figures["lateness_p95_ms"] <= figures["lateness_p99_ms"]
    assert figures["tracker_exit_code"] == 0
