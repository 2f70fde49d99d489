"""The Spark tier: one local[2] SparkSession for the whole test session (Spark takes seconds to start)."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
from pyspark.sql import SparkSession

import kmq.spark


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    # Executors' Python workers run this interpreter, so they import the kmq under test.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2]")
        .appName("kmq-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "768m")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.default.parallelism", "4")
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.task.maxFailures", "4")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    kmq.spark.register(session)
    try:
        yield session
    finally:
        session.stop()
