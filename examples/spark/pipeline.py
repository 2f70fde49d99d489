"""A kmq queue through a Spark Structured Streaming pipeline, acknowledged row by row.

readStream format("kmq") → transform (a UDF that may fail) → foreachBatch: results to Parquet, then ok rows acked,
failed rows retried (the tracker redelivers them; they come back with redelivery_count ≥ 1), poison rows (values
that are not numbers, or multiples of --poison-every) rejected to the dead-letter topic.

    python examples/spark/pipeline.py -b localhost:9092 -q orders --output /tmp/out --checkpoint /tmp/cp
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType

import kmq.spark

RESULTS_SCHEMA = "partition int, offset long, number long, square long, redelivery_count int"


def verdict(value: bytes | None, partition: int, offset: int, fail_rate: float, poison_every: int) -> str:
    """The transformation's verdict on one delivery: ok, retry (a transient failure), reject (poison)."""
    if value is None or not value.isdigit() or (poison_every > 0 and int(value) % poison_every == 0):
        return "reject"
    # Seeded by the delivery: a re-evaluated row gets the same verdict, a redelivered copy a fresh one.
    return "retry" if random.Random(f"{partition}/{offset}").random() < fail_rate else "ok"


def process(batch: DataFrame, output: str, options: dict[str, str], args: argparse.Namespace) -> None:
    fail_rate, poison_every = args.fail_rate, args.poison_every
    classify = F.udf(lambda value, p, o: verdict(value, p, o, fail_rate, poison_every), StringType(), useArrow=False)
    # Every evaluation of `batch` re-reads the queue and re-writes STARTs: cache it, and acknowledge last.
    batch = batch.withColumn("status", classify("value", "partition", "offset")).persist()
    try:
        done = batch.where(F.col("status") == "ok")
        number = F.col("value").cast("string").cast("long")
        results = done.select("partition", "offset", number.alias("number"), (number * number).alias("square"),
                              "redelivery_count")  # fmt: skip
        results.write.mode("append").parquet(output)  # 1. the results are durable ...
        acks = batch.select(
            "partition", "offset", "status", "redelivery_count", "key", "value", "headers",
            F.when(F.col("status") == "retry", F.lit(args.retry_delay_ms)).alias("delay_ms"),
            F.when(F.col("status") == "reject", F.lit("poison")).alias("reason"),
        )  # fmt: skip
        kmq.spark.ack(acks, **options)  # 2. ... before their rows are acknowledged
    finally:
        batch.unpersist()


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
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(f"kmq pipeline {args.queue}")
    if args.master:
        builder = builder.master(args.master).config("spark.ui.enabled", str(not args.master.startswith("local")))
    spark = builder.getOrCreate()
    kmq.spark.register(spark)
    options = {"bootstrap.servers": args.bootstrap_servers, "queue": args.queue,
               "msg_timeout_ms": str(args.msg_timeout_ms)}  # fmt: skip
    kafka_config = json.loads(os.environ.get("KMQ_KAFKA_CONFIG") or "{}")  # e.g. SASL settings, as kmq reads them
    options.update({f"kafka.{key}": str(value) for key, value in kafka_config.items()})
    if os.environ.get("KMQ_SASL_PASSWORD_FILE"):  # a file every executor can read (a mounted Secret)
        options["sasl_password_file"] = os.environ["KMQ_SASL_PASSWORD_FILE"]
    stream = (
        spark.readStream.format("kmq")
        .options(**options)
        .option("max_records_per_batch", str(args.max_records_per_batch))
        .load()
    )
    query = (
        stream.writeStream.foreachBatch(lambda batch, _: process(batch, args.output, options, args))
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
