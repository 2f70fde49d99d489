"""A kmq queue through a Spark Structured Streaming pipeline, acknowledged row by row.

kmq.spark.read_stream → foreachBatch(kmq.spark.foreach_batch(process, ...)): a transformation (a UDF that may fail)
whose results go to Parquet; the rows it failed are returned to be retried (the tracker redelivers them; they come
back with redelivery_count ≥ 1), poison rows (values that are not numbers, or multiples of --poison-every) to be
rejected to the dead-letter topic; every other row is acknowledged once `process` returns.

    python examples/spark/pipeline.py -b localhost:9092 -q orders --output /tmp/out --checkpoint /tmp/cp
"""

from __future__ import annotations

import argparse
import json
import os
import random

import pyspark
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

import kmq.spark

# Spark's Kafka source, of the running Spark's version (spark-submit --packages gives it as well)
KAFKA_SOURCE = f"org.apache.spark:spark-sql-kafka-0-10_2.13:{pyspark.__version__}"
RESULTS_SCHEMA = "partition int, offset long, number long, square long, redelivery_count int"
NOT_OK_SCHEMA = "partition int, offset long, status string, delay_ms int, reason string"


def verdict(value: bytes | None, partition: int, offset: int, fail_rate: float, poison_every: int) -> str:
    """The transformation's verdict on one delivery: ok, retry (a transient failure), reject (poison)."""
    if value is None or not value.isdigit() or (poison_every > 0 and int(value) % poison_every == 0):
        return "reject"
    # Seeded by the delivery: a re-evaluated row gets the same verdict, a redelivered copy a fresh one.
    return "retry" if random.Random(f"{partition}/{offset}").random() < fail_rate else "ok"


def process(batch: DataFrame, output: str, args: argparse.Namespace) -> DataFrame:
    """One micro-batch (its STARTs are durable already): the results of the good rows, durable in Parquet before
    this returns; the rows that are not ok returned (retry, reject); foreach_batch acknowledges every other row."""
    fail_rate, poison_every = args.fail_rate, args.poison_every
    classify = F.udf(lambda value, p, o: verdict(value, p, o, fail_rate, poison_every), StringType(), useArrow=False)
    # Read twice (the results, then the rows that are not ok): persisted so the queue is read and the UDF run once
    # (kmq neither persists nor caches the batch).
    judged = batch.withColumn("status", classify("value", "partition", "offset")).persist()
    try:
        number = F.col("value").cast("string").cast("long")
        results = judged.where(F.col("status") == "ok").select(
            "partition", "offset", number.alias("number"), (number * number).alias("square"), "redelivery_count"
        )
        results.write.mode("append").parquet(output)
        not_ok = judged.where(F.col("status") != "ok").select(
            "partition", "offset", "status",
            F.when(F.col("status") == "retry", F.lit(args.retry_delay_ms)).alias("delay_ms"),
            F.when(F.col("status") == "reject", F.lit("poison")).alias("reason"),
        )  # fmt: skip
        # A few rows: collected before the batch is freed, so foreach_batch reads them without a new pass.
        return batch.sparkSession.createDataFrame(not_ok.collect(), NOT_OK_SCHEMA)
    finally:
        judged.unpersist()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--bootstrap-servers", default=os.environ.get("KMQ_BOOTSTRAP_SERVERS"))
    parser.add_argument("-q", "--queue", default=os.environ.get("KMQ_QUEUE_TOPIC"))
    parser.add_argument("--output", required=True, help="Parquet directory of the results")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory (restart from it)")
    parser.add_argument("--master", default=None, help="Spark master (default: spark-submit's, else local[2])")
    parser.add_argument("--fail-rate", type=float, default=0.1, help="fraction of rows the transform fails")
    parser.add_argument("--poison-every", type=int, default=97, help="reject multiples of this number (0: none)")
    parser.add_argument("--retry-delay-ms", type=int, default=500)
    parser.add_argument("--max-records-per-batch", type=int, default=2_000)
    parser.add_argument("--msg-timeout-ms", type=int, default=30_000, help="time a micro-batch has before redelivery")
    parser.add_argument("--trigger-ms", type=int, default=500, help="micro-batch trigger interval")
    args = parser.parse_args(argv)
    if not args.bootstrap_servers or not args.queue:
        parser.error("give --bootstrap-servers and --queue (or KMQ_BOOTSTRAP_SERVERS and KMQ_QUEUE_TOPIC)")
    return args


def main() -> None:
    args = parse_args()
    builder = SparkSession.builder.appName(f"kmq pipeline {args.queue}").config("spark.jars.packages", KAFKA_SOURCE)
    if args.master:
        builder = builder.master(args.master).config("spark.ui.enabled", str(not args.master.startswith("local")))
    spark = builder.getOrCreate()
    options: dict[str, object] = {"bootstrap.servers": args.bootstrap_servers, "msg_timeout_ms": args.msg_timeout_ms,
                                  "max_records_per_batch": args.max_records_per_batch}  # fmt: skip
    kafka_config = json.loads(os.environ.get("KMQ_KAFKA_CONFIG") or "{}")  # e.g. SASL settings, as kmq reads them
    options.update({f"kafka.{key}": str(value) for key, value in kafka_config.items()})
    if os.environ.get("KMQ_SASL_PASSWORD_FILE"):  # a file every executor can read (a mounted Secret)
        options["sasl_password_file"] = os.environ["KMQ_SASL_PASSWORD_FILE"]
    stream = kmq.spark.read_stream(spark, args.queue, **options)
    handler = kmq.spark.foreach_batch(lambda batch, _: process(batch, args.output, args), args.queue, **options)
    query = (
        stream.writeStream.foreachBatch(handler)
        .option("checkpointLocation", args.checkpoint)
        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
        .start()
    )
    try:
        query.awaitTermination()
    finally:
        query.stop()
        spark.stop()


if __name__ == "__main__":
    main()
