"""The batch sources and sinks: a DataFrame into a queue, reading topics back, and `kmq-ack` (what foreach_batch
writes a handler's not-ok rows with) writing markers and dead letters as KmqClient would."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from pyspark.sql import SparkSession

from kmq import headers as h
from kmq.batch_markers import BatchEnd
from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey
from tests.helpers import read_topic
from tests.integration.spark.conftest import source_options

pytestmark = pytest.mark.spark
MakeConfig = Callable[..., KmqConfig]


def test_a_dataframe_sent_to_a_queue_reads_back_with_its_columns(spark: SparkSession, make_config: MakeConfig) -> None:
    # given a DataFrame of values, keys, headers and partitions
    config = make_config(partitions=2)
    rows = [(f"v{i}".encode(), f"k{i}".encode(), [("trace", f"t{i}".encode())], i % 2) for i in range(20)]
    df = spark.createDataFrame(rows, "value binary, key binary, headers array<struct<key string, value binary>>, "
                                     "partition int")  # fmt: skip
    # when it is written with format("kmq")
    df.write.format("kmq").options(**source_options(config)).mode("append").save()
    # then the queue holds each row on its partition, and format("kmq") reads them back (no markers written)
    on_topic = read_topic(config, config.queue_topic, 2)
    assert sorted((r.value, r.key, r.partition) for r in on_topic) == sorted((v, k, p) for v, k, _, p in rows)
    back = spark.read.format("kmq").options(**source_options(config)).load().collect()
    assert sorted((r["value"], r["headers"][0]["value"], r["redelivery_count"]) for r in back) == sorted(
        (v, f"t{v.decode()[1:]}".encode(), 0) for v, *_ in rows
    )
    assert read_topic(config, config.markers_topic, 2) == []


@pytest.mark.parametrize("marker_format", ["kmq", "batch"])
def test_acks_write_end_nack_and_dead_letter_like_the_client(
    spark: SparkSession, make_config: MakeConfig, marker_format: str
) -> None:
    # given four messages on the queue
    config = make_config(partitions=1)
    options = source_options(config, marker_format=marker_format)
    values = spark.createDataFrame([(b"a",), (b"b",), (b"c",), (b"d",)], "value binary")
    values.coalesce(1).write.format("kmq").options(**options).mode("append").save()
    # when they are acked ok, retried after 5 s, rejected (without the message's columns: read back from Q), and ok
    acks = spark.createDataFrame(
        [(0, 0, "ok", None, None), (0, 1, "retry", 5_000, None), (0, 2, "reject", None, "bad input"),
         (0, 3, "ok", None, None)],
        "partition int, offset long, status string, delay_ms long, reason string",
    )  # fmt: skip
    acks.coalesce(1).write.format("kmq-ack").options(**options).mode("append").save()  # one task: one BATCH END
    # then the ok rows are ENDed (kmq: one END each; batch: one BATCH END of their offsets), the retry is a
    # START(5000) and the reject an END, and the rejected message is on D with kmq's headers
    markers = {MarkerKey.decode(r.key).offset: r.value for r in read_topic(config, config.markers_topic, 1)}
    assert markers[1] == bytes([1]) + (5_000).to_bytes(8, "big")
    assert markers[2] == EndMarker().encode()
    if marker_format == "kmq":
        assert markers[0] == markers[3] == EndMarker().encode()
    else:
        assert markers[0] == BatchEnd(((0, 1), (3, 1))).encode()
        assert 3 not in markers
    [dead] = read_topic(config, config.dead_letter_topic, 1)
    assert dead.value == b"c"
    assert h.get(dead.headers, h.DLQ_REASON) == b"rejected: bad input"
    assert h.decode_int64(h.get(dead.headers, h.ORIGINAL_OFFSET)) == 2
