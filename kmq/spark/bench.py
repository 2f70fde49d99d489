"""`kmq bench --contenders spark-kafka,spark-kmq`: rows/s of our `format("kmq")` source, with its START markers and
a `kmq-ack` sink acknowledging every row, ÷ Spark's own Kafka source (spark-sql-kafka-0-10 of the same Spark
version) reading the same topic into the `noop` sink. One local Spark session; the contenders alternate, rounds
A B A B..., and each ratio is the median of each round's ratio (drift cancels out). Two ratios (bench_figures.py):
end to end from `start()`, query start-up included, and steady state over the micro-batches after the first.

Same work on both sides: the same topic and rows, every row available at the start, the same trigger, the same
admission limit of `ROWS_PER_BATCH` rows per micro-batch (`maxOffsetsPerTrigger` for Spark's source,
`max_records_per_batch` for ours: without one the whole topic is one micro-batch and there is no steady state to
see), and the same tasks — each partition's share cut into pieces of at most `ROWS_PER_TASK` rows
(`maxRecordsPerPartition`, `max_rows_per_task`)."""

from __future__ import annotations

import logging
import os
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
from kmq.spark.bench_figures import Kind, SparkRun, median_ratio, run_from_progress

SPARK_KAFKA, SPARK_KMQ = "spark-kafka", "spark-kmq"
SPARK_CONTENDERS = (SPARK_KAFKA, SPARK_KMQ)
ROWS_PER_TASK = 100_000
ROWS_PER_BATCH = 200_000  # 2 000 000 rows: 10 micro-batches, 9 of them steady state
_log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SparkBenchResult:
    runs: dict[str, list[SparkRun]]  # contender -> its run of each round

    def rates(self, contender: str, kind: Kind) -> list[float]:
        return [run.rate(kind) for run in self.runs.get(contender, [])]

    def median(self, contender: str, kind: Kind) -> float:
        return median_ratio(self.rates(contender, kind))

    def round_ratios(self, kind: Kind) -> list[float]:
        """spark-kmq ÷ spark-kafka of each round (NaN where a side had no such rate)."""
        pairs = zip(self.rates(SPARK_KMQ, kind), self.rates(SPARK_KAFKA, kind), strict=False)
        return [kmq_rate / kafka_rate if kafka_rate > 0 else float("nan") for kmq_rate, kafka_rate in pairs]

    def ratio(self, kind: Kind) -> float:
        """Median over rounds of spark-kmq ÷ spark-kafka in the same round; NaN unless both ran."""
        return median_ratio(self.round_ratios(kind))


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
        .config("spark.sql.streaming.numRecentProgressUpdates", "10000")  # every micro-batch of a run
        .config("spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    kmq.spark.register(spark)
    runs: dict[str, list[SparkRun]] = {name: [] for name in contenders}
    try:
        for _ in range(repeat):
            for name in contenders:
                runs[name].append(_measure(spark, config, name, messages, timeout_s))
                _log.info("%s: %s", name, runs[name][-1])
    finally:
        spark.stop()
    return SparkBenchResult(runs)


def _measure(spark: SparkSession, config: KmqConfig, contender: str, messages: int, timeout_s: float) -> SparkRun:
    """From the query's start until its progress reports every row processed, and its micro-batches."""
    checkpoint = f"/tmp/kmq-spark-bench-{uuid.uuid4().hex[:8]}"
    if contender == SPARK_KAFKA:
        stream = (
            spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", config.bootstrap_servers)
            .option("subscribe", config.queue_topic)
            .option("startingOffsets", "earliest")
            .option("maxRecordsPerPartition", str(ROWS_PER_TASK))
            .option("maxOffsetsPerTrigger", str(ROWS_PER_BATCH))
            .load()
        )
        writer = stream.writeStream.format("noop")
    else:
        options = {"bootstrap.servers": config.bootstrap_servers, "queue": config.queue_topic,
                   "group": f"{config.queue_topic}__bench-{uuid.uuid4().hex[:8]}",
                   "max_rows_per_task": str(ROWS_PER_TASK), "max_records_per_batch": str(ROWS_PER_BATCH)}  # fmt: skip
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
        elapsed_ms = round((time.monotonic() - started) * 1000)
        progress = list(query.recentProgress)
    finally:
        query.stop()
    return run_from_progress(progress, elapsed_ms)
