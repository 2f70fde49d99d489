"""The Spark tier: one local[2] SparkSession for the whole test session (Spark takes seconds to start)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from pyspark import __version__ as spark_version
from pyspark.sql import SparkSession

import kmq.spark
from kmq.config import KmqConfig
from kmq_tracker import TrackerConfig, TrackerService
from tests.integration.spark.standalone import StandaloneCluster, standalone_cluster


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Executors' Python workers run this interpreter, so they import the kmq under test.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,3]")  # 2 cores; a failed task is tried up to 3 times
        .appName("kmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.task.maxFailures", "4")
        # Spark's Kafka source (kmq.spark.read_stream), of this Spark's version, from Maven Central (cached by Ivy)
        .config("spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kmq.spark.register(session)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    """A standalone Spark master and two workers for the whole test session; every JVM it started is stopped."""
    with standalone_cluster(tmp_path_factory.mktemp("spark-cluster")) as cluster:
        yield cluster


@contextmanager
def running_tracker(config: KmqConfig) -> Iterator[TrackerService]:
    """A tracker in this process, as tests/integration/test_tracker_e2e.py runs one: it redelivers nacked rows."""
    settings = TrackerConfig(kmq=config, http_port=0, http_host="127.0.0.1", commit_interval_ms=200)
    service = TrackerService(settings).run_in_thread()
    try:
        assert service.wait_ready(30), "tracker not ready within 30 s"
        yield service
    finally:
        service.stop()


def source_options(config: KmqConfig, **extra: str) -> dict[str, str]:
    """The Spark options that point the kmq sources at this config's queue."""
    options = {
        "bootstrap.servers": config.bootstrap_servers,
        "queue": config.queue_topic,
        "group": config.group_id,
        "msg_timeout_ms": str(config.msg_timeout_ms),
    }
    options.update({f"kafka.{k}": str(v) for k, v in config.kafka_config.items()})
    return {**options, **extra}


def stream_options(config: KmqConfig, **extra: object) -> dict[str, object]:
    """The options of kmq.spark.read_stream and foreach_batch for this config's queue (given apart)."""
    options: dict[str, object] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group": config.group_id,
        "msg_timeout_ms": config.msg_timeout_ms,
    }
    options.update({f"kafka.{k}": str(v) for k, v in config.kafka_config.items()})
    return {**options, **extra}
