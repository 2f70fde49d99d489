"""Faults: the driver SIGKILLed mid-stream and restarted from its checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import kmq.spark
from kmq.config import KmqConfig
from kmq.spark.report import AuditReport
from tests.helpers import wait_for
from tests.integration.spark.conftest import running_tracker, source_options
from tests.integration.spark.pipeline_support import (
    EXAMPLE,
    every_offset_ended,
    processed_numbers,
    send_numbers,
)
from tests.integration.spark.standalone import EXECUTOR_MEMORY

pytestmark = pytest.mark.spark
MakeConfig = Callable[..., KmqConfig]


@contextmanager
def pipeline_process(config: KmqConfig, output: Path, checkpoint: Path, master: str = "local[2]",
                     *extra: str) -> Iterator[subprocess.Popen[bytes]]:  # fmt: skip
    """examples/spark/pipeline.py as its own driver process (its JVM in the same process group). On a local master
    it is started as a virtualenv's python is without activating it: no PYSPARK_PYTHON, and no `python3` of the
    virtualenv on the PATH (kmq.spark gives Spark's Python workers the driver's interpreter). On a cluster the
    deployment names the executors' Python (PYSPARK_PYTHON, this interpreter) and their memory."""
    args = ["-b", config.bootstrap_servers, "-q", config.queue_topic, "--output", str(output), "--checkpoint",
            str(checkpoint), "--master", master, "--max-records-per-batch", "500", "--poison-every", "0",
            "--fail-rate", "0", "--msg-timeout-ms", str(config.msg_timeout_ms), "--trigger-ms", "100",
            *extra]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON", "VIRTUAL_ENV")}
    if master.startswith("local"):
        venv_bin = str(Path(sys.executable).parent)
        env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if p != venv_bin)
    else:
        env.update(PYSPARK_PYTHON=sys.executable, SPARK_EXECUTOR_MEMORY=EXECUTOR_MEMORY, SPARK_LOCAL_IP="127.0.0.1")
    env["KMQ_KAFKA_CONFIG"] = json.dumps(config.kafka_config)
    process = subprocess.Popen([sys.executable, str(EXAMPLE), *args], env=env, start_new_session=True,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    try:
        yield process
    finally:
        kill(process)


def kill(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL the driver and its JVM: no shutdown hook, no last commit."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(30)


def test_a_driver_killed_mid_stream_and_restarted_from_its_checkpoint_loses_nothing(
    spark: SparkSession, make_config: MakeConfig, tmp_path: Path
) -> None:
    # given 1 000 messages, a tracker, and the example pipeline in its own process, 500 rows per micro-batch
    messages, partitions = 1_000, 2
    config = make_config(partitions=partitions, msg_timeout_ms=120_000, max_redeliveries=20)
    send_numbers(config, messages, partitions)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    with running_tracker(config):
        # when the driver is SIGKILLed once the first micro-batch is written (the second one then runs)
        with pipeline_process(config, output, checkpoint) as first:
            wait_for(lambda: len(processed_numbers(output)) >= 250, 120, interval_s=0.2, what="a first batch")
            kill(first)
        done_before = set(processed_numbers(output))
        assert len(done_before) < messages, "the first run finished before it was killed: nothing was tested"
        # and a new driver restarts from the checkpoint
        with pipeline_process(config, output, checkpoint):
            # (while it starts: what the killed driver left is started or acked, nothing unaccounted)
            midway = kmq.spark.audit(spark, **source_options(config))
            assert midway.total("unaccounted") == 0, midway
            wait_for(lambda: len(set(processed_numbers(output))) >= messages, 180, interval_s=0.5,
                     what="every number processed")  # fmt: skip
            # (a copy the tracker redelivered meanwhile must be read and acked too)
            wait_for(lambda: every_offset_ended(config, partitions), 120, interval_s=0.5, what="every offset ENDed")
            report = wait_for(lambda: _all_acked(spark, source_options(config), messages), 60, interval_s=1,
                              what="the audit counting every message acked")  # fmt: skip
    # then every number was processed (duplicates allowed: at-least-once), and the audit finds nothing unaccounted
    assert set(processed_numbers(output)) == set(range(1, messages + 1))
    assert report.total("unaccounted") == report.total("pending") == 0, report


def _all_acked(spark: SparkSession, options: dict[str, str], messages: int) -> AuditReport | None:
    """The audit once it counts every message acked (the last task's ENDs are flushed as the batch ends)."""
    report = kmq.spark.audit(spark, **options)
    return report if report.total("acked") == messages else None
