"""Smoke: the streaming source hands out rows with their STARTs durable, and the ack sink ends them."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from kmq.config import KmqConfig
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import read_topic

pytestmark = pytest.mark.spark
MakeConfig = Callable[..., KmqConfig]


def test_batch_read(spark: SparkSession, make_config: MakeConfig) -> None:
    config = make_config(partitions=2)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"m{i}".encode(), None, [("h", b"x")], i % 2) for i in range(10))
    df = (
        spark.read.format("kmq")
        .option("bootstrap.servers", config.bootstrap_servers)
        .option("queue", config.queue_topic)
        .load()
    )
    rows = df.collect()
    assert sorted(r["value"] for r in rows) == sorted(f"m{i}".encode() for i in range(10))
    assert read_topic(config, config.markers_topic, 2) == []


def test_stream_and_ack(spark: SparkSession, make_config: MakeConfig, tmp_path) -> None:
    import kmq.spark
    from tests.helpers import committed_offsets, wait_for

    config = make_config(partitions=2)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"m{i}".encode(), None, None, i % 2) for i in range(100))
    options = {"bootstrap.servers": config.bootstrap_servers, "queue": config.queue_topic}
    seen = []

    def each(batch_df, batch_id):  # type: ignore[no-untyped-def]
        batch_df = batch_df.persist()
        rows = batch_df.collect()
        seen.extend(rows)
        from pyspark.sql import functions as F

        kmq.spark.ack(batch_df.withColumn("status", F.lit("ok")), **options)
        batch_df.unpersist()

    stream = spark.readStream.format("kmq").options(**options).load()
    query = stream.writeStream.foreachBatch(each).option("checkpointLocation", str(tmp_path / "cp")).start()
    try:
        wait_for(lambda: len(seen) >= 100, 60)
        wait_for(lambda: sum(committed_offsets(config, 2).values()) == 100, 30)
    finally:
        query.stop()
    markers = read_topic(config, config.markers_topic, 2)
    assert len(markers) == 200
