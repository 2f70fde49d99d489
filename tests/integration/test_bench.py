"""`kmq bench`, small: every contender produces its figures, the JSON file and the plot (not how fast they are).

The bench starts its own embedded broker (or uses the cluster `KMQ_BOOTSTRAP_SERVERS` names, like every tool).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kmq.bench.measure import BatchClock
from kmq.bench.preload import preload
from kmq.bench.worker_contender import WorkerContender
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from tests.conftest import backend_under_test

KMQ_CLI = "import sys; from kmq.cli import main; sys.argv[0] = 'kmq'; main()"
CONSUMER_FIGURES = ("msgs_per_s", "elapsed_s", "overhead_ms_p50", "overhead_ms_p95", "overhead_ms_p99", "rss_bytes")


def bench(tmp_path: Path, *args: str) -> tuple[dict[str, Any], str]:
    """Run `kmq bench ... --json`; its JSON report and its standard output."""
    report = tmp_path / "bench.json"
    result = subprocess.run(
        [sys.executable, "-c", KMQ_CLI, "bench", *args, "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data: dict[str, Any] = json.loads(report.read_text())
    return data, result.stdout


def external() -> bool:
    return bool(os.environ.get("KMQ_BOOTSTRAP_SERVERS"))


def test_plain_kmq_and_share_alternate_and_each_run_is_measured(tmp_path: Path, kafka: KafkaCluster) -> None:
    """On Apache Kafka (the real share groups of KIP-932) unless the tests run on a stand-in: the session's broker,
    a JVM start less (the other tests here run the bench on an embedded broker of its own)."""
    if backend_under_test() == "kafka":
        broker = ("--bootstrap-servers", kafka.bootstrap_servers)
    else:
        broker = ("--backend", "mock")
    data, out = bench(tmp_path, *broker, "--contenders", "plain,kmq,share", "--messages", "2000", "--repeat", "2")

    runs = data["runs"]
    one_round = ["plain", "kmq", "share"]  # every other round in reverse order
    expected = [(0, c) for c in one_round] + [(1, c) for c in reversed(one_round)]
    assert [(r["round"], r["contender"]) for r in runs] == expected
    for run in runs:
        if run["contender"] == "share" and external() and run["skipped"]:
            continue  # a cluster without share groups: the row says why
        figures = run["figures"]
        assert figures["messages"] == 2000, run
        assert figures["batches"] >= 4, run  # batches of at most 500
        assert all(figures[name] > 0 for name in CONSUMER_FIGURES), run
    for run in (r for r in runs if r["contender"] == "kmq"):
        # Every message was acknowledged within its timeout: the tracker (it ran) redelivered nothing.
        assert (run["figures"]["failed_markers"], run["figures"]["redeliveries"]) == (0, 0), run
        assert run["figures"]["tracker_rss_bytes"] > 0
        assert run["figures"]["tracker_cpu_us_per_msg"] > 0  # it read every START and END of the window
    rows = {row["contender"]: row for row in data["contenders"]}
    assert rows["plain"]["ratio_to_plain"] == 1.0
    assert rows["kmq"]["ratio_to_plain"] > 0
    assert rows["kmq"]["tracker_cpu_us_per_msg"] > 0 and rows["plain"]["tracker_cpu_us_per_msg"] is None
    assert "tracker CPU µs/msg" in out
    assert "kmq ÷ plain throughput" in out and "batch overhead" in out
    assert data["options"]["warm_up"] and "after one warm-up round (not counted)" in out  # the default


def test_tracker_and_rest_facade_benchmarks_run_beside_the_plain_consumer_and_the_plot_is_drawn(
    tmp_path: Path,
) -> None:
    plot = tmp_path / "bench.png"
    data, out = bench(
        tmp_path,
        *("--backend", "tansu", "--contenders", "plain,share,tracker,http", "--repeat", "1", "--messages", "1000"),
        "--no-warm-up",
        *("--tracker-pending", "20000", "--http-messages", "400", "--plot", str(plot)),
    )

    figures = {run["contender"]: run["figures"] for run in data["runs"]}
    assert figures["tracker"]["markers_per_s"] > 0
    assert figures["tracker"]["pending_messages"] == 20_000
    assert figures["tracker"]["rss_bytes"] > 0
    assert figures["tracker"]["lateness_ms_p99"] >= figures["tracker"]["lateness_ms_p50"] >= 0
    assert figures["http"]["receive_ack_msgs_per_s"] > 0 and figures["http"]["acks_not_ok"] == 0
    assert figures["http"]["ack_ms_p99"] > 0
    if not external():
        share = next(row for row in data["contenders"] if row["contender"] == "share")
        assert "share groups" in share["note"] and share["rate"] is None
    assert {t["name"]: t["status"] for t in data["targets"]}["kmq ÷ plain throughput"] == "not measured"
    assert "redelivery lateness" in out and "ack latency" in out
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_worker_contender_is_measured_against_the_bare_client_in_the_same_rounds(tmp_path: Path) -> None:
    # `--contenders worker` alone: the bare client with the same (batch) markers is measured beside it, so the ratio
    # compares like with like
    data, out = bench(
        tmp_path, "--backend", "mock", "--contenders", "worker", "--messages", "2000", "--repeat", "1", "--no-warm-up"
    )
    assert [r["contender"] for r in data["runs"]] == ["kmq-batch", "worker"]
    worker = data["runs"][1]["figures"]
    assert worker["messages"] == 2000 and worker["msgs_per_s"] > 0
    assert (worker["failed_markers"], worker["redeliveries"]) == (0, 0), worker
    target = next(t for t in data["targets"] if t["name"] == "worker ÷ kmq-batch throughput")
    assert target["measured"] > 0
    assert "worker ÷ kmq-batch throughput" in out


def test_each_consumer_contender_runs_at_each_work_value_in_the_same_rounds(
    tmp_path: Path, kafka: KafkaCluster
) -> None:
    """`--work-us 0,20`: the plain consumers burn the handler's work too, and the goal with 20 µs handlers is the ratio
    of the two 20 µs runs of a round. plain-async ends its window with a synchronous commit, which librdkafka refuses
    when the asynchronous ones already committed everything (likelier when handlers work): that is no error."""
    if backend_under_test() == "kafka":
        broker = ("--bootstrap-servers", kafka.bootstrap_servers)
    else:
        broker = ("--backend", "mock")
    messages = 5000
    data, out = bench(
        tmp_path,
        *broker,
        *("--contenders", "plain,plain-async,kmq-batch", "--messages", str(messages), "--repeat", "1", "--no-warm-up"),
        *("--work-us", "0,20"),
    )

    names = ["plain", "plain-async", "kmq-batch"]
    assert [r["contender"] for r in data["runs"]] == [*names, *(f"{name}@20us" for name in names)]
    elapsed = {run["contender"]: run["figures"]["elapsed_s"] for run in data["runs"]}
    # Each handler spun 20 µs per message, one message after the other: the window cannot be shorter.
    assert elapsed["plain@20us"] >= messages * 20e-6 and elapsed["kmq-batch@20us"] >= messages * 20e-6, elapsed
    rows = {row["contender"]: row for row in data["contenders"]}
    assert rows["plain@20us"]["ratio_to_plain"] == 1.0  # ÷ the plain consumer with the same work
    work_goal = next(t for t in data["targets"] if "handlers burning 20 µs/msg" in t["name"])
    assert work_goal["measured"] == rows["kmq-batch@20us"]["ratio_to_plain"] > 0
    assert "plain@20us" in out


def test_the_worker_contender_joins_before_go_and_handles_nothing_until_then(
    make_config: Callable[..., KmqConfig],
) -> None:
    """Like for like with the bare client: the worker makes its client and joins its group in `prepare`, its
    partitions paused, so the messages preloaded after that wait for GO and the window opens after it."""
    config = make_config(partitions=2)
    contender = WorkerContender(config, batch=100, messages=200)
    try:
        contender.prepare(time.monotonic() + 60)
        assert contender._paused == {0, 1}
        preload(config, 200, 100, 2)
        clock = BatchClock(200)
        clock.start()
        figures = contender.run(clock, lambda done: None, 60)
    finally:
        contender.close()
    assert figures["messages"] == 200 and clock.opened >= clock.started
