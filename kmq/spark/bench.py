"""`kmq bench --contenders spark-kafka,spark-kmq`: the same pipeline with and without kmq. Both read the queue with
Spark's own Kafka source (spark-sql-kafka-0-10 of the same Spark version) with the same options (read_committed,
headers, `ROWS_PER_BATCH` rows per micro-batch, tasks of at most `ROWS_PER_TASK` rows) into `foreachBatch` with the
same handler, `HANDLER`: every row of the micro-batch written to Spark's `noop` sink (the least work a handler can
do, so kmq's share shows whole). spark-kafka is that bare; spark-kmq is `kmq.spark.read_stream` +
`kmq.spark.foreach_batch` (the offset log's ranges, BATCH STARTs before the handler, BATCH ENDs and the group's
commit after).
One local Spark session; the contenders alternate, rounds A B A B..., and each ratio is the median of each round's
ratio (drift cancels out). Two ratios (bench_figures.py): end to end from `start()`, query start-up included, and
steady state over the micro-batches after the first; and per micro-batch, kmq's own cost in ms (reading the offset
log, writing the markers and committing)."""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from pyspark import __version__ as spark_version
from pyspark.sql import DataFrame, SparkSession

import kmq.spark
from kmq.admin import ensure_topics
from kmq.config import KmqConfig
from kmq.errors import BenchError
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.bench_figures import Kind, SparkRun, median_ratio, run_from_progress
from kmq.spark.standalone import EXECUTOR_MEMORY
from kmq.spark.stream import kafka_source_options, stream_options

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
    master: str = "local[2]", standalone_here: bool = False, timeout_s: float = 600.0,
) -> SparkBenchResult:  # fmt: skip
    """Preload `messages` into a fresh queue on `config`'s cluster and time each contender reading all of them.
    On a cluster's master the executors run PYSPARK_PYTHON, else this interpreter; on the standalone cluster started
    here (`standalone_here`) they take a memory its workers have, and reach the driver on 127.0.0.1."""
    ensure_topics(config, partitions)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(bytes(size), None, None, n % partitions) for n in range(messages))
    builder = SparkSession.builder.master(master)
    if not master.startswith("local"):
        builder = builder.config("spark.pyspark.python", os.environ.get("PYSPARK_PYTHON") or sys.executable)
    if standalone_here:
        builder = builder.config("spark.executor.memory", EXECUTOR_MEMORY).config("spark.driver.host", "127.0.0.1")
    spark = (
        builder.appName("kmq spark bench")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", str(partitions))
        .config("spark.sql.streaming.numRecentProgressUpdates", "10000")  # every micro-batch of a run
        .config("spark.jars.packages", f"org.apache.spark:spark-sql-kafka-0-10_2.13:{spark_version}")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    runs: dict[str, list[SparkRun]] = {name: [] for name in contenders}
    try:
        for _ in range(repeat):
            for name in contenders:
                runs[name].append(_measure(spark, config, name, messages, timeout_s))
                _log.info("%s: %s", name, runs[name][-1])
    finally:
        spark.stop()
    return SparkBenchResult(runs)


def handler(batch: DataFrame, batch_id: int) -> None:
    """`HANDLER`: read every row, keep nothing."""
    batch.write.format("noop").mode("append").save()


HANDLER = "batch_df.write.format('noop')"


def _measure(spark: SparkSession, config: KmqConfig, contender: str, messages: int, timeout_s: float) -> SparkRun:
    """From the query's start until its progress reports every row processed, its micro-batches, and kmq's cost."""
    checkpoint = f"/tmp/kmq-spark-bench-{uuid.uuid4().hex[:8]}"
    group = f"{config.queue_topic}__bench-{uuid.uuid4().hex[:8]}"  # a new group: from the first offsets
    options: dict[str, object] = {
        "bootstrap.servers": config.bootstrap_servers,
        "group": group,
        "max_rows_per_task": ROWS_PER_TASK,
        "max_records_per_batch": ROWS_PER_BATCH,
    }
    options.update({f"kafka.{k}": str(v) for k, v in config.kafka_config.items()})
    costs: list[tuple[int, int]] = []
    if contender == SPARK_KAFKA:
        parsed = stream_options(config.queue_topic, options)
        source = kafka_source_options(parsed, dict.fromkeys(range(_partitions(config)), 0))
        stream = spark.readStream.format("kafka").options(**source).load()
        batches: Callable[[DataFrame, int], None] = handler
    else:
        stream = kmq.spark.read_stream(spark, config.queue_topic, **options)
        marked = kmq.spark.foreach_batch(handler, config.queue_topic, **options)

        def batches(batch: DataFrame, batch_id: int) -> None:
            marked(batch, batch_id)
            costs.append((marked.last_offsets_ms, marked.last_marker_ms))

    started = time.monotonic()
    query = (
        stream.writeStream.foreachBatch(batches)
        .option("checkpointLocation", checkpoint)
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        while sum(p.get("numInputRows", 0) for p in query.recentProgress) < messages:
            if query.exception() is not None or time.monotonic() - started > timeout_s:
                raise BenchError(f"{contender} did not read {messages} rows in {timeout_s:.0f}s: {query.exception()}")
            time.sleep(0.05)
        elapsed_ms = round((time.monotonic() - started) * 1000)
        progress = list(query.recentProgress)
    finally:
        query.stop()
    run = run_from_progress(progress, elapsed_ms)
    return dataclasses.replace(run, offsets_ms=tuple(c[0] for c in costs), marker_ms=tuple(c[1] for c in costs))


def _partitions(config: KmqConfig) -> int:
    from kmq.admin import topic_partitions

    return topic_partitions(config, config.queue_topic)
