"""Every START failure reaches the pipeline, though only a partition's last START of a batch moves the batch.

The markers topic takes records of up to `LIMIT` bytes; the first START of the batch is made larger, so the broker
refuses it for good (MESSAGE_TOO_LARGE) while the STARTs after it, each in a request of its own, are written. The
last START's report is a success: the batch must fail all the same (PROTOCOL.md rule 3), or its offsets would be
committed with a message that has no START."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from kmq.config import KmqConfig
from kmq.kafka import consumer_settings, producer_settings
from kmq.markers import MarkerKey
from kmq.start_pipeline import StartPipeline
from tests.helpers import committed_offsets, read_topic

MakeConfig = Callable[..., KmqConfig]
MESSAGES = 10
LIMIT = 1000


def limit_record_size(config: KmqConfig, topic: str, max_bytes: int) -> None:
    admin = AdminClient(config.kafka_settings())
    entry = ConfigEntry("max.message.bytes", str(max_bytes), incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic, incremental_configs=[entry])
    for future in admin.incremental_alter_configs([resource]).values():
        future.result(timeout=30)


def test_a_start_that_fails_before_its_partitions_last_fails_the_batch(make_config: MakeConfig) -> None:
    config = make_config(partitions=1, marker_format="kmq")  # a START per message
    limit_record_size(config, config.markers_topic, LIMIT)
    # One record per request: the oversized first START fails alone, the others are written.
    producer = Producer(producer_settings(config, linger_ms=0, batch_num_messages=1))
    consumer = Consumer(consumer_settings(config, config.group_id))
    pipeline = StartPipeline(config, consumer, producer)
    records = pipeline._writer.records

    def first_oversized(partition: int, offsets: Sequence[int], redeliver_after_ms: int) -> list[dict[str, Any]]:
        made = records(partition, offsets, redeliver_after_ms)
        made[0]["value"] = made[0]["value"] + b"\0" * (2 * LIMIT)
        return made

    pipeline._writer.records = first_oversized  # type: ignore[method-assign]  # the broker refuses that one
    try:
        pipeline.send({0: list(range(MESSAGES))}, redeliver_after_ms=30_000)
        assert pipeline.drain(timeout_s=60.0), "the batch's STARTs were never all reported"
        written = {MarkerKey.decode(r.key).offset for r in read_topic(config, config.markers_topic, 1) if r.key}
        assert MESSAGES - 1 in written and 0 not in written  # the last START succeeded, the first did not
        failure = pipeline.take_failure()
        assert failure is not None, "a failed START went unseen: the batch would be committed"
        error, rewind = failure
        assert error.partition == 0 and rewind == {0: [0]}
        pipeline.commit_now()
        assert committed_offsets(config, 1).get(0, -1) < 0  # nothing committed
    finally:
        pipeline.close(timeout_s=10.0)
        consumer.close()
