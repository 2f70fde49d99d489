"""`kmq bench --contenders ...,jvm-kmq`, small: the JVM KmqClient is measured beside ours on one broker, in one run."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kmq.embedded import KafkaCluster
from kmq.jvm import JvmKmq

pytestmark = [pytest.mark.integration, pytest.mark.interop]
KMQ_CLI = "import sys; from kmq.cli import main; sys.argv[0] = 'kmq'; main()"


def test_jvm_kmq_alternates_with_ours_and_both_are_in_the_table(
    tmp_path: Path, interop_kafka: KafkaCluster, jvm_kmq: JvmKmq
) -> None:
    report = tmp_path / "bench.json"
    # the interop tests' broker; on tansu the bench starts its own (it tunes its clients to tansu's group timing)
    broker = ["--bootstrap-servers", interop_kafka.bootstrap_servers]
    if interop_kafka.backend == "tansu":
        broker = ["--backend", "tansu"]
    args = ["bench", *broker, "--contenders", "kmq,jvm-kmq"]
    result = subprocess.run(
        [sys.executable, "-c", KMQ_CLI, *args, "--messages", "2000", "--repeat", "1", "--json", str(report)],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    data = json.loads(report.read_text())
    figures = {run["contender"]: run["figures"] for run in data["runs"]}
    jvm = figures["jvm-kmq"]
    assert jvm["messages"] == 2000 and jvm["msgs_per_s"] > 0 and jvm["batches"] >= 4
    # every END durable in the window, and none missed its deadline: our tracker redelivered nothing
    assert (jvm["failed_markers"], jvm["redeliveries"]) == (0, 0)
    # Both rows of the table have their median rate (a reference beside ours; no target compares them any more).
    rates = {row["contender"]: row["rate"] for row in data["contenders"]}
    assert rates["kmq"] > 0 and rates["jvm-kmq"] > 0
    assert "jvm-kmq" in result.stdout
