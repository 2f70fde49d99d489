"""kmq on Spark over SASL_SSL (SCRAM-SHA-512, TLS, ACLs enforced) on an embedded Apache Kafka: a stream (Spark's
Kafka source, the driver's markers) reads and acknowledges every row and the audit accounts for all of them, with the
password given either as a mounted file (`sasl_password_file`) or as `kafka.sasl.password`, and the password shows up
nowhere Spark keeps or shows the query."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession

import kmq.spark
from kmq.embedded import EmbeddedKafka
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import wait_for
from tests.integration.spark.pipeline_support import every_offset_ended, running
from tests.secure_kafka import APP_PASSWORD, grant_queue, new_queue

pytestmark = pytest.mark.spark
MESSAGES = 40
PARTITIONS = 2  # new_queue's


def test_a_stream_reads_acks_and_audits_over_sasl_ssl_and_the_password_shows_nowhere(
    spark: SparkSession, secure_kafka: EmbeddedKafka, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # given a queue the app user may use, holding 40 messages
    admin, app = new_queue(secure_kafka, tmp_path)
    grant_queue(secure_kafka, "app", app)
    with KmqProducer(admin) as producer:
        producer.send_batch(OutgoingMessage(f"m{i}".encode(), None, None, i % PARTITIONS) for i in range(MESSAGES))
    connection = {
        "bootstrap.servers": app.bootstrap_servers,
        "group": app.group_id,
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.username": "app",
        "kafka.ssl.ca.location": secure_kafka.ca_file,
    }
    from_file = {**connection, "sasl_password_file": app.sasl_password_file}
    inline = {**connection, "kafka.sasl.password": APP_PASSWORD}
    checkpoint = tmp_path / "checkpoint"
    # when read_stream reads with the password from a file and foreach_batch's markers get it as kafka.sasl.password
    handled: list[int] = []
    rows = kmq.spark.read_stream(spark, app.queue_topic, **from_file)
    handler = kmq.spark.foreach_batch(lambda batch, _: handled.append(batch.count()), app.queue_topic, **inline)
    query = (
        rows.writeStream.foreachBatch(handler)
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        wait_for(running(query, lambda: every_offset_ended(admin, PARTITIONS)), 120, interval_s=0.5,
                 what="every row acknowledged over SASL_SSL")  # fmt: skip
        progress = [str(p) for p in query.recentProgress]
        query.explain(extended=True)  # the plans Spark shows and logs of the query
        rows.explain(extended=True)  # and of the streaming DataFrame, its source's options included
        plan = capsys.readouterr().out
        assert "kafka" in plan.lower(), plan
    finally:
        query.stop()
        handler.close()
    # then the audit, over SASL_SSL too, finds every message acked and none unaccounted
    report = kmq.spark.audit(spark, **from_file, queue=app.queue_topic)
    assert report.total("messages") == MESSAGES
    assert report.total("acked") == MESSAGES
    assert report.total("unaccounted") == 0
    # and the password is in none of what Spark keeps or shows of the query
    kept = [path.read_bytes() for path in checkpoint.rglob("*") if path.is_file()]
    assert kept, "the checkpoint holds files"
    assert all(APP_PASSWORD.encode() not in content for content in kept)
    for shown in (*progress, plan, report.to_json()):
        assert APP_PASSWORD not in shown
