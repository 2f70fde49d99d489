"""`python -m kmq_tracker.bench`: the tracker's figures, measured on a real broker with the real service.

One tracker replica runs as a child process (`python -m kmq_tracker`), so the memory measured is its own:
1. ingest — `pending` STARTs that stay pending and `ended` START+END pairs are written to the markers topic first;
   the rate is how fast the replica then reads them (from its assignment to its last marker: start-up and group join
   excluded); the memory is its resident size once caught up and idle (0.5 s later), holding `pending` pending
   messages, and its peak;
2. lateness — `expiring` real messages are received and left unacknowledged; each copy's lateness is the moment a
   plain consumer sees it minus its deadline, so it includes the broker round trip (an upper bound).

`run_benchmark()` returns the figures as a dict (`kmq bench` wraps it).
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Any

import typer

from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster
from kmq_tracker._bench_load import measure_lateness, write_batch_markers, write_markers
from kmq_tracker.config import TrackerConfig
from kmq_tracker.process import TrackerProcess

_log = logging.getLogger(__name__)
FAR_FUTURE_MS = 3_600_000  # the ingest phase's pending STARTs never fall due during a run
_SAMPLE_S = 0.05
_SETTLE_S = 0.5


def run_benchmark(
    cluster: KafkaCluster | None = None,
    *,
    pending: int = 1_000_000,
    ended: int = 250_000,
    expiring: int = 2_000,
    partitions: int = 4,
    msg_timeout_ms: int = 1_000,
    log_dir: Path | None = None,
    marker_format: str = "batch",
) -> dict[str, Any]:
    """The figures, on `cluster` (default: the one `KMQ_BOOTSTRAP_SERVERS` names, else an embedded broker)."""
    if cluster is None:
        if os.environ.get("KMQ_BOOTSTRAP_SERVERS"):
            cluster = ExternalKafka.from_env()
        else:
            with EmbeddedKafka() as embedded:
                return run_benchmark(
                    embedded, pending=pending, ended=ended, expiring=expiring, partitions=partitions,
                    msg_timeout_ms=msg_timeout_ms, log_dir=log_dir, marker_format=marker_format,
                )  # fmt: skip
    name = f"kmq-bench-{uuid.uuid4().hex[:8]}"
    config = cluster.config(name, msg_timeout_ms=msg_timeout_ms, marker_format=marker_format)
    cluster.ensure_topics(config, partitions)
    logs = log_dir if log_dir is not None else Path(tempfile.mkdtemp(prefix="kmq-tracker-bench-"))
    started = time.monotonic()
    write = write_batch_markers if marker_format == "batch" else write_markers
    markers = write(config, partitions, pending, ended, FAR_FUTURE_MS)
    figures: dict[str, Any] = {
        "backend": cluster.backend,
        "marker_format": marker_format,
        "partitions": partitions,
        "markers_written": markers,
        "markers_write_s": round(time.monotonic() - started, 2),
    }
    # Redelivery is not rate-limited here: the lateness phase measures the tracker, not a configured limit.
    tracker_config = TrackerConfig(kmq=config, redelivery_rate_per_s=1_000_000, max_in_flight=1_000)
    with TrackerProcess(tracker_config, logs / "tracker.log") as tracker:
        figures.update(_ingest(tracker, markers, pending))
        # Queue offsets carried by the markers read (a START per key, an END per ended key), whatever the format.
        figures["ingest_offsets_per_s"] = round(figures["ingest_markers_per_s"] * (pending + 2 * ended) / markers)
        figures.update(measure_lateness(config, expiring))
        figures["tracker_exit_code"] = tracker.stop()
    figures["tracker_log"] = str(logs / "tracker.log")
    return figures


def _ingest(tracker: TrackerProcess, markers: int, pending: int, timeout_s: float = 600.0) -> dict[str, Any]:
    """Sample the replica from its assignment (join excluded) to its last marker; then its memory, caught up."""
    deadline = time.monotonic() + timeout_s
    assigned: tuple[float, float] | None = None
    previous_at = time.monotonic()
    while True:
        samples, at = _samples(tracker), time.monotonic()
        consumed = samples.get("kmq_markers_consumed_total", 0.0)
        if assigned is None and any(k.startswith("kmq_partition_caught_up{") for k in samples):
            # Reading may have begun between two samples: then it began after the previous one (a small backlog can
            # be read entirely in between, which must not measure as 0 markers/s).
            assigned = (at, consumed) if consumed == 0 else (previous_at, 0.0)
        previous_at = at
        if assigned is not None and consumed >= markers:
            break
        if time.monotonic() > deadline or not tracker.running():
            raise RuntimeError(f"tracker read {consumed} of {markers} markers:\n{tracker.log_tail()}")
        time.sleep(_SAMPLE_S)  # the sampling interval
    tracker.wait_ready(60)
    time.sleep(_SETTLE_S)  # idle and caught up: the resident size a replica holding the backlog keeps
    held = sum(v for k, v in tracker.metrics().items() if k.startswith("kmq_pending_messages{"))
    elapsed = max(at - assigned[0], _SAMPLE_S)  # a backlog read within one sample counts as one sample long
    return {
        "ingest_markers_per_s": round((consumed - assigned[1]) / elapsed),
        "ingest_s": round(elapsed, 2),
        "pending_messages": int(held),
        "pending_expected": pending,
        "tracker_rss_mb": round(tracker.rss_bytes() / 2**20, 1),
        "tracker_peak_rss_mb": round(tracker.peak_rss_bytes() / 2**20, 1),
    }


def _samples(tracker: TrackerProcess) -> dict[str, float]:
    try:
        return tracker.metrics()
    except OSError:
        return {}  # not serving yet


def main(
    pending: Annotated[int, typer.Option(help="STARTs left pending during the ingest phase")] = 1_000_000,
    ended: Annotated[int, typer.Option(help="START+END pairs during the ingest phase")] = 250_000,
    expiring: Annotated[int, typer.Option(help="messages left to expire in the lateness phase")] = 2_000,
    partitions: Annotated[int, typer.Option(min=1, help="partitions of the queue and markers topics")] = 4,
    marker_format: Annotated[str, typer.Option(help="markers written and used by the client: kmq or batch")] = "batch",
) -> None:
    """Measure the tracker (an embedded broker unless KMQ_BOOTSTRAP_SERVERS is set); print JSON."""
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if marker_format not in ("kmq", "batch"):
        raise typer.BadParameter(f"{marker_format!r}: use kmq or batch", param_hint="--marker-format")
    figures = run_benchmark(
        pending=pending, ended=ended, expiring=expiring, partitions=partitions, marker_format=marker_format
    )
    typer.echo(json.dumps(figures, indent=2))


if __name__ == "__main__":
    typer.run(main)
