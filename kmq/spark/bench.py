"""`kmq bench --contenders spark-kafka,spark-kmq`: rows/s of our `format("kmq")` source, with its START markers and
a `kmq-ack` sink acknowledging every row, ÷ Spark's own Kafka source (spark-sql-kafka-0-10 of the same Spark
version) reading the same topic into the `noop` sink. One local Spark session; the contenders alternate, rounds
A B A B..., and the ratio is the median of each round's ratio (drift cancels out).

Same work on both sides: the same topic and rows, every row available at the start (no admission limit on either),
the same trigger, and the same tasks — each partition's range cut into pieces of at most `ROWS_PER_TASK` rows
(`maxRecordsPerPartition` for Spark's source, `max_rows_per_task` for ours)."""

from __future__ import annotations

import logging
import os
import statistics
import sys
import time
import uuid
from dataclasses import dataclass

from pyspark import __version__ as spark_version
from pyspark.sql import SparkSession
from pyspark.sql import functions as F  # Spark's convention

import kmq.spark
from kmq.admin import ensure_topics
from kmq.config import KmqConfig
from kmq.errors import BenchError
from kmq.producer import KmqProducer, OutgoingMessage

SPARK_KAFKA, SPARK_KMQ = "spark-kafka", "spark-kmq"
SPARK_CONTENDERS = (SPARK_KAFKA, SPARK_KMQ)
ROWS_PER_TASK = 100_000
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SparkBenchResult:
    rates: dict[str, list[float]]  # contender -> rows/s of each round

    def median(self, contender: str) -> float:
        return statistics.median(self.rates[contender]) if self.rates.get(contender) else float("nan")

    @property
    def round_ratios(self) -> list[float]:
        """spark-kmq ÷ spark-kafka of each round."""
        pairs = zip(self.rates.get(SPARK_KMQ, []), self.rates.get(SPARK_KAFKA, []), strict=False)
        return [kmq_rate / kafka_rate for kmq_rate, kafka_rate in pairs if kafka_rate > 0]

    @property
    def ratio(self) -> float:
        """Median over rounds of spark-kmq ÷ spark-kafka in the same round; NaN unless both ran."""
        ratios = self.round_ratios
        return statistics.median(ratios) if ratios else float("nan")


def run_spark_bench(
    config: KmqConfig, contenders: tuple[str, ...], messages: int, partitions: int, size: int, repeat: int,
    master: str = "local[2]", timeout_s: float = 600.0,
) -> SparkBenchResult:  # fmt: skip
    """Preload `messages` into a fresh queue on `config`'s cluster and time each contender reading all of them."""
    ensure_topics(config, partitions)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(bytes(size), None, None, n % partitions) for n in range(messages))
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (
        SparkSession.builder.master(master)
        .appName("kmq spark bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kmq.spark.register(spark)
    rates: dict[str, list[float]] = {name: [] for name in contenders}
    try:
        for _ in range(repeat):
            for name in contenders:
                rates[name].append(_measure(spark, config, name, messages, timeout_s))
                _log.info("%s: %.0f rows/s", name, rates[name][-1])
    finally:
        spark.stop()
    return SparkBenchResult(rates)


def _measure(spark: SparkSession, config: KmqConfig, contender: str, messages: int, timeout_s: float) -> float:
    """Rows/s from the query's start until its progress reports every row processed."""
    checkpoint = f"/tmp/kmq-spark-bench-{uuid.uuid4().hex[:8]}"
    if contender == SPARK_KAFKA:
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config.bootstrap_servers)
            .option("subscribe", config.queue_topic)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerPartition", str(ROWS_PER_TASK))
            .load()
        )
        writer = stream.writeStream.format("noop")
    else:
        options = {"bootstrap.servers": config.bootstrap_servers, "queue": config.queue_topic,
                   "group": f"{config.queue_topic}__bench-{uuid.uuid4().hex[:8]}",
                   "max_rows_per_task": str(ROWS_PER_TASK)}  # fmt: skip
        options.update({f"kafka.{k}": str(v) for k, v in config.kafka_config.items()})
        stream = spark.readStream.format("kmq").options(**options).load()
        acks = stream.select("partition", "offset", F.lit("ok").alias("status"))
        writer = acks.writeStream.format("kmq-ack").options(**options)
    started = time.monotonic()
    query = writer.option("checkpointLocation", checkpoint).trigger(processingTime="100 milliseconds").start()
    try:
        while sum(p.get("numInputRows", 0) for p in query.recentProgress) < messages:
            if query.exception() is not None or time.monotonic() - started > timeout_s:
                raise BenchError(f"{contender} did not read {messages} rows in {timeout_s:.0f}s: {query.exception()}")
            time.sleep(0.05)
        elapsed = time.monotonic() - started
    finally:
        query.stop()
    return messages / elapsed
