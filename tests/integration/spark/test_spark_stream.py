"""`kmq.spark.read_stream` + `kmq.spark.foreach_batch`: the queue through Spark's own Kafka source, its markers
written by the driver per micro-batch."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewPartitions
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F  # Spark's convention

import kmq.spark
from kmq.batch_markers import BatchStart, decode_batch_marker, offsets_in
from kmq.config import KmqConfig
from kmq.kafka import admin_settings
from kmq.markers import MarkerKey
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.markers_source import decode as decode_marker_rows
from kmq.spark.offset_log import batch_ranges
from kmq.spark.positions import QueuePositions
from tests.helpers import committed_offsets, read_topic, wait_for
from tests.integration.spark.conftest import source_options, stream_options
from tests.integration.spark.pipeline_support import every_offset_ended, running

pytestmark = pytest.mark.spark
MakeConfig = Callable[..., KmqConfig]
Rows = dict[int, list[int]]  # partition -> offsets


def _starts(config: KmqConfig, partitions: int) -> list[tuple[int, list[int]]]:
    """Every BATCH START on the markers topic, in order per partition: (queue partition, its offsets)."""
    found = []
    for record in read_topic(config, config.markers_topic, partitions):
        key = MarkerKey.decode(record.key)
        marker = decode_batch_marker(key.offset, record.value)
        if isinstance(marker, BatchStart):
            found.append((key.partition, list(offsets_in(marker.runs))))
    return found


def _grow(config: KmqConfig, partitions: int) -> None:
    """`kmq topics grow` without its final check: right after adding partitions that check can read metadata not yet
    updated for the queue and fail (seen under load; reported, kmq/admin.py is not this test's subject)."""
    admin = AdminClient(admin_settings(config))
    for topic in (config.markers_topic, config.queue_topic):  # markers first, as grow_topics does
        admin.create_partitions([NewPartitions(topic, partitions)], request_timeout=30)[topic].result(timeout=30)

    def grown() -> bool:
        topics = admin.list_topics(timeout=10).topics
        return all(len(topics[t].partitions) == partitions for t in (config.markers_topic, config.queue_topic))

    wait_for(grown, 30, interval_s=0.2, what=f"both topics with {partitions} partitions")


def _ended(config: KmqConfig, partitions: int) -> set[tuple[int, int]]:
    """The (partition, offset) of every queue row whose newest marker is an END."""
    newest: dict[tuple[int, int], str] = {}
    for record in read_topic(config, config.markers_topic, partitions):
        for partition, offset, kind, _ in decode_marker_rows(record.partition, record.key, record.value):
            if partition is not None and offset is not None:
                newest[(partition, offset)] = kind
    return {key for key, kind in newest.items() if kind == "end"}


def _by_partition(batch: DataFrame) -> Rows:
    rows: Rows = {}
    for row in batch.select("partition", "offset").orderBy("partition", "offset").collect():
        rows.setdefault(row["partition"], []).append(row["offset"])
    return rows


def _send_with_gaps(config: KmqConfig, partitions: int) -> int:
    """Committed and aborted transactions (each leaves offsets that are no row to a read_committed reader) between
    plain sends; the number of rows a reader sees."""
    producer = Producer({"bootstrap.servers": config.bootstrap_servers, "transactional.id": uuid.uuid4().hex})
    producer.init_transactions(30)
    visible = 0
    for round_ in range(3):
        for commit in (True, False):
            producer.begin_transaction()
            for n in range(6):
                producer.produce(config.queue_topic, f"t{round_}-{n}".encode(), partition=n % partitions)
            if commit:
                producer.commit_transaction(30)
                visible += 6
            else:
                assert producer.flush(30) == 0  # on the log before the abort (an abort drops what is not sent yet)
                producer.abort_transaction(30)
        with KmqProducer(config) as plain:
            plain.send_batch(OutgoingMessage(f"p{round_}-{n}".encode(), None, None, n % partitions) for n in range(4))
        visible += 4
    return visible


def _logged_ranges(checkpoint: Path, batch_id: int, topic: str) -> dict[int, tuple[int, int]]:
    """Batch `batch_id`'s ranges as kmq parses them from the files the real query wrote in its checkpoint."""

    def read(relative: str) -> str | None:
        path = checkpoint / relative
        return path.read_text() if path.exists() else None

    return batch_ranges(read, batch_id, topic, lambda partition: 0)


def test_no_row_reaches_the_handler_before_its_start_is_durable_and_the_starts_are_the_offset_logs_ranges(
    spark: SparkSession, make_config: MakeConfig, tmp_path: Path
) -> None:
    # given a queue whose offsets have gaps (transaction markers, aborted records), read 20 offsets per micro-batch
    partitions = 2
    config = make_config(partitions=partitions, msg_timeout_ms=120_000)
    visible = _send_with_gaps(config, partitions)
    seen: dict[int, Rows] = {}
    durable_when_handed: list[bool] = []

    def handler(batch: DataFrame, batch_id: int) -> None:
        rows = _by_partition(batch)
        started = {(p, o) for p, offsets in _starts(config, partitions) for o in offsets}  # on the topic now
        durable_when_handed.append(all((p, o) in started for p, offsets in rows.items() for o in offsets))
        seen[batch_id] = rows

    options = stream_options(config, max_records_per_batch=20)
    stream = kmq.spark.read_stream(spark, config.queue_topic, **options)
    checkpoint = tmp_path / "checkpoint"
    # when the stream runs until every row was handled
    query = (
        stream.writeStream.foreachBatch(marked := kmq.spark.foreach_batch(handler, config.queue_topic, **options))
        .option("checkpointLocation", str(checkpoint))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        wait_for(running(query, lambda: sum(len(o) for rows in seen.values() for o in rows.values()) >= visible),
                 120, interval_s=0.2, what="every row handled")  # fmt: skip
        wait_for(lambda: every_offset_ended(config, partitions), 30, interval_s=0.2, what="every row ENDed")
    finally:
        query.stop()
        marked.close()
    # then each batch's STARTs were on the topic before the handler saw a row
    assert len(seen) >= 2 and all(durable_when_handed), durable_when_handed
    # and the BATCH STARTs are the [from, until) ranges of Spark's offset log, batch by batch (parsed from the files
    # this Spark wrote), each holding the rows the handler saw in that batch
    logged = {batch_id: _logged_ranges(checkpoint, batch_id, config.queue_topic) for batch_id in seen}
    expected = [(p, list(range(*logged[b][p]))) for b in sorted(seen) for p in sorted(logged[b])]
    assert sorted(_starts(config, partitions)) == sorted(expected)
    for batch_id, rows in seen.items():
        for p, offsets in rows.items():
            assert logged[batch_id][p][0] <= offsets[0] and offsets[-1] < logged[batch_id][p][1]
    # and together they cover every offset of the queue, the ones that are no row (a transaction marker, an aborted
    # record) included, and all of them were ENDed
    ends = _high_watermarks(config, partitions)
    covered = {(p, o) for p, offsets in expected for o in offsets}
    assert covered == {(p, o) for p in range(partitions) for o in range(ends[p])}
    rows_seen = {(p, o) for rows in seen.values() for p, offsets in rows.items() for o in offsets}
    assert len(rows_seen) == visible
    # per round, 2 commit markers, 6 aborted records and 2 abort markers (one marker per partition per transaction)
    assert len(covered - rows_seen) == 3 * (2 + 6 + 2), "every aborted record and transaction marker is in a range"
    assert covered <= _ended(config, partitions)
    # and the kmq group stands at the end of each partition
    assert committed_offsets(config, partitions) == ends
    # and the audit counts every row acked, and the offsets that hold no record apart: nothing unaccounted
    report = kmq.spark.audit(spark, **source_options(config))
    assert (report.total("acked"), report.total("no_record"), report.total("unaccounted")) == (visible, 30, 0)


def _high_watermarks(config: KmqConfig, partitions: int) -> dict[int, int]:
    positions = QueuePositions(config)
    try:
        return {p: positions.high(p) for p in range(partitions)}
    finally:
        positions.close()


def test_a_new_query_starts_where_the_kmq_group_stands_and_reads_partitions_added_while_it_runs(
    spark: SparkSession, make_config: MakeConfig, tmp_path: Path
) -> None:
    # given a queue of 2 partitions whose group has already committed past the first 3 messages of partition 0
    config = make_config(partitions=2, msg_timeout_ms=120_000)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"a{n}".encode(), None, None, n % 2) for n in range(10))
    kmq_positions = QueuePositions(config)
    try:
        kmq_positions.committed()  # waits for the new group's coordinator
        kmq_positions.commit({0: 3})
    finally:
        kmq_positions.close()
    assert committed_offsets(config, 2)[0] == 3
    values: list[bytes] = []

    def handler(batch: DataFrame, batch_id: int) -> None:
        values.extend(row["value"] for row in batch.select("value").collect())

    options = stream_options(config)
    stream = kmq.spark.read_stream(spark, config.queue_topic, **options)
    query = (
        stream.writeStream.foreachBatch(marked := kmq.spark.foreach_batch(handler, config.queue_topic, **options))
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(processingTime="100 milliseconds")
        .start()
    )
    try:
        # when it has read what the group had not, and the queue then grows to 4 partitions
        wait_for(running(query, lambda: len(values) >= 7), 60, interval_s=0.2, what="the first rows")
        _grow(config, 4)
        with KmqProducer(config) as producer:
            producer.send_batch(OutgoingMessage(f"b{n}".encode(), None, None, 2 + n % 2) for n in range(6))
        # then the rows of the new partitions are read too
        wait_for(running(query, lambda: len(values) >= 13), 90, interval_s=0.2, what="the new partitions' rows")
        final = {0: 5, 1: 5, 2: 3, 3: 3}
        wait_for(lambda: committed_offsets(config, 4) == final, 30, interval_s=0.2, what="the group at the ends")
    finally:
        query.stop()
        marked.close()
    assert sorted(values) == sorted([f"a{n}".encode() for n in range(10) if n not in (0, 2, 4)] +
                                    [f"b{n}".encode() for n in range(6)])  # fmt: skip
    # and every row read was ENDed (the 3 the group had passed before were never read: no marker)
    ended = _ended(config, 4)
    assert ended == {(0, o) for o in range(3, 5)} | {(1, o) for o in range(5)} | {
        (p, o) for p in (2, 3) for o in range(3)
    }


def test_the_redelivery_count_reads_both_header_encodings(spark: SparkSession) -> None:
    from kmq.spark.stream import redelivery_count

    headers = "headers array<struct<key string, value binary>>"
    count = "kmq-redelivery-count"
    rows = [([],), ([(count, bytes([5]))],), ([(count, (300).to_bytes(4, "big"))],),
            ([(count, bytes([1])), (count, bytes([2]))],), ([(count, (-1).to_bytes(4, "big", signed=True))],),
            ([("other", b"\x07")],), (None,), ([(count, bytes([3])), ("other", b"\x09")],), ([(count, None)],),
            ([(count, bytes([4])), (count, b"\x00\x00")],)]  # fmt: skip
    frame = spark.createDataFrame(rows, headers)
    counts = [row[0] for row in frame.select(redelivery_count(F.col("headers"))).collect()]
    assert counts == [0, 5, 300, 2, 0, 0, 0, 3, 0, 0]


def test_the_redelivery_count_is_compiled_with_the_projection(
    spark: SparkSession, make_config: MakeConfig, tmp_path: Path
) -> None:
    # given a message on the queue, read by read_stream into foreachBatch
    config = make_config(partitions=1)
    with KmqProducer(config) as producer:
        producer.send_batch([OutgoingMessage(b"v", None, None, 0)])
    stream = kmq.spark.read_stream(spark, config.queue_topic, **stream_options(config))
    # when a micro-batch runs
    query = (
        stream.writeStream.foreachBatch(lambda batch, batch_id: batch.write.format("noop").mode("append").save())
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(120), "the micro-batch did not end within 120 s"
    # then the projection that adds redelivery_count to the rows Spark's Kafka source reads is inside Spark's
    # whole-stage generated code ("*(n)"), not interpreted row by row beside it
    plan = str(query._jsq.streamingQuery().lastExecution().executedPlan().toString())  # py4j: as explain() prints
    project = next(line for line in plan.splitlines() if "redelivery_count" in line)
    assert project.lstrip("+- :").startswith("*("), plan
