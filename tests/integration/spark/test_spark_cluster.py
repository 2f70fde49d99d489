"""The pipeline on a real standalone Spark cluster (`--master spark://...`): executors in their own JVMs with their
own Python workers, one executor SIGKILLed mid-stream, then the driver SIGKILLed and restarted from its checkpoint."""

from __future__ import annotations

import os
import signal
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import kmq.spark
from kmq.config import KmqConfig
from kmq.spark.report import AuditReport
from tests.helpers import wait_for
from tests.integration.spark.conftest import running_tracker, source_options
from tests.integration.spark.pipeline_support import dead_numbers, every_offset_ended, processed_numbers, send_numbers
from tests.integration.spark.standalone import StandaloneCluster
from tests.integration.spark.test_spark_faults import kill, pipeline_process

pytestmark = [pytest.mark.spark, pytest.mark.timeout(1200)]  # a cluster to start, two drivers, an audit
MakeConfig = Callable[..., KmqConfig]
MESSAGES, PARTITIONS, POISON_EVERY = 600, 2, 97


def test_on_a_standalone_cluster_an_executor_and_the_driver_killed_lose_nothing_and_the_audit_agrees(
    spark: SparkSession, spark_cluster: StandaloneCluster, make_config: MakeConfig, tmp_path: Path
) -> None:
    # given 600 numbers, a tracker, and the example pipeline on the cluster failing 10 % of deliveries (retried)
    # and rejecting every multiple of 97, 500 rows per micro-batch
    config = make_config(partitions=PARTITIONS, msg_timeout_ms=120_000, max_redeliveries=20)
    send_numbers(config, MESSAGES, PARTITIONS)
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    poison = {n for n in range(1, MESSAGES + 1) if n % POISON_EVERY == 0}
    verdicts = ("--fail-rate", "0.1", "--poison-every", str(POISON_EVERY), "--retry-delay-ms", "200",
                "--max-records-per-batch", "200")  # fmt: skip
    with running_tracker(config):
        with pipeline_process(config, output, checkpoint, spark_cluster.master_url, *verdicts) as first:
            # when one executor JVM is SIGKILLed while the stream runs (Spark retries its tasks elsewhere)
            executors = wait_for(lambda: len(spark_cluster.executors()) == 2 and spark_cluster.executors(), 180,
                                 interval_s=1, what="two executors")  # fmt: skip
            wait_for(lambda: len(processed_numbers(output)) >= 100, 240, interval_s=0.5, what="a first batch")
            os.kill(executors[0], signal.SIGKILL)
            wait_for(lambda: len(processed_numbers(output)) >= 250, 240, interval_s=0.5,
                     what="batches after the executor's death")  # fmt: skip
            # then no row was handled twice: the batch whose tasks were retried was written and acknowledged once
            assert [n for n, times in Counter(processed_numbers(output)).items() if times > 1] == []
            # and when the driver is SIGKILLed too
            kill(first)
        assert len(set(processed_numbers(output))) < MESSAGES, "the first driver finished: nothing was tested"
        # and a new driver restarts from the checkpoint on the cluster
        with pipeline_process(config, output, checkpoint, spark_cluster.master_url, *verdicts):
            everything = set(range(1, MESSAGES + 1))
            done = lambda: set(processed_numbers(output)) | set(dead_numbers(config, PARTITIONS)) >= everything  # noqa: E731
            wait_for(done, 300, interval_s=1, what="every number processed or dead-lettered")
            wait_for(lambda: every_offset_ended(config, PARTITIONS), 120, interval_s=1, what="every offset ENDed")
            report = wait_for(lambda: _settled(spark, source_options(config)), 60, interval_s=2,
                              what="the audit counting nothing pending")  # fmt: skip
    # then nothing was lost: every number processed (a replayed batch may repeat some: at least once) or, the
    # poison only, dead-lettered; and the audit finds nothing unaccounted
    dead = dead_numbers(config, PARTITIONS)
    assert set(dead) == poison
    assert set(processed_numbers(output)) | poison == set(range(1, MESSAGES + 1))
    assert report.total("unaccounted") == report.total("pending") == 0, report
    assert report.total("dead_lettered") == len(poison)
    assert report.total("redelivered_copies") > 0


def _settled(spark: SparkSession, options: dict[str, str]) -> AuditReport | None:
    report = kmq.spark.audit(spark, **options)
    return report if report.total("pending") == 0 and report.total("acked") > 0 else None
