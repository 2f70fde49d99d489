"""The tracker and REST-facade contenders: their packages' own benchmarks, run as child processes on our broker.

`kmq` never imports `kmq_tracker` or `kmq_api`; `python -m kmq_tracker.bench` and `python -m kmq_api.bench` print their
figures as JSON, and reach the broker through `KMQ_BOOTSTRAP_SERVERS` and the other connection variables given here.
"""

from __future__ import annotations

from typing import Any

from kmq.bench.children import run_module
from kmq.bench.display import Display
from kmq.bench.options import BenchOptions
from kmq.embedded import KafkaCluster
from kmq.embedded._external import CONNECTION_FIELDS
from kmq.settings import env_name

TIMEOUT_MS = 30 * 60_000
# Our names for python -m kmq_tracker.bench's figures: (its name, factor).
_TRACKER_FIGURES = {
    "markers_per_s": ("ingest_markers_per_s", 1),
    "offsets_per_s": ("ingest_offsets_per_s", 1),  # queue offsets the markers read carry (the tracker's rate)
    "rss_bytes": ("tracker_rss_mb", 2**20),
    "lateness_ms_p50": ("lateness_p50_ms", 1),
    "lateness_ms_p95": ("lateness_p95_ms", 1),
    "lateness_ms_p99": ("lateness_p99_ms", 1),
}
_CONNECTION_ENV = frozenset(env_name(name) for name in CONNECTION_FIELDS)


def run_tracker(cluster: KafkaCluster, options: BenchOptions, display: Display) -> dict[str, Any]:
    """1 M (`tracker_pending`) START markers ingested by a tracker replica; redelivery lateness of expiring messages."""
    display.phase(f"python -m kmq_tracker.bench ({options.tracker_pending:,} pending)")
    args = [
        f"--pending={options.tracker_pending}",
        f"--ended={options.tracker_pending // 4}",  # its default proportion (1 M pending, 250 k START+END pairs)
        f"--partitions={options.partitions}",
        f"--marker-format={options.marker_format}",
    ]
    figures = run_module("kmq_tracker.bench", args, _connection_env(cluster), TIMEOUT_MS)
    return {**figures, **{ours: _scaled(figures, theirs, scale) for ours, (theirs, scale) in _TRACKER_FIGURES.items()}}


def run_http(cluster: KafkaCluster, options: BenchOptions, display: Display) -> dict[str, Any]:
    """Receive + ack through the REST facade, in batches of `http_batch`."""
    display.phase(f"python -m kmq_api.bench ({options.http_messages:,} messages)")
    args = [
        f"--messages={options.http_messages}",
        f"--batch={options.http_batch}",
        f"--partitions={options.partitions}",
        f"--value-bytes={options.size}",
        f"--marker-format={options.marker_format}",
    ]
    return run_module("kmq_api.bench", args, _connection_env(cluster), TIMEOUT_MS)


def _connection_env(cluster: KafkaCluster) -> dict[str, str]:
    """How to reach the cluster, as `KMQ_*` variables (a child of ours sees no other `KMQ_*`)."""
    env = cluster.config("kmq-bench").to_env()
    return {name: value for name, value in env.items() if name in _CONNECTION_ENV}


def _scaled(figures: dict[str, Any], name: str, factor: float) -> float | None:
    value = figures.get(name)
    return value * factor if isinstance(value, int | float) else None
