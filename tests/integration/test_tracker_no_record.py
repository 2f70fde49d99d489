"""Offsets that hold no record (PROTOCOL.md): a transaction marker, an aborted record. An expired START of one is
finished — counted, ENDed, never redelivered nor dead-lettered — and kept apart from an offset retention removed.
On Apache Kafka (deleting records moves a partition's log start), with both marker formats."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from confluent_kafka import Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from kmq.config import KmqConfig
from kmq.markers import EndMarker, MarkerKey, StartMarker
from kmq.producer import KmqProducer, OutgoingMessage
from tests.helpers import read_topic, tracker_settled, wait_for
from tests.integration.marker_formats import with_marker_format
from tests.integration.test_tracker_e2e import metric, running_tracker

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]


@pytest.fixture(params=["kmq", "batch"])
def make_config(make_config: MakeConfig, request: pytest.FixtureRequest) -> MakeConfig:
    return with_marker_format(make_config, request.param)


def test_offsets_that_hold_no_record_are_finished_and_those_retention_removed_are_missing(
    make_config: MakeConfig,
) -> None:
    # given a queue partition: a, b at 0 and 1 and their commit marker at 2; an aborted c at 3 and its abort marker at
    # 4; a plain d at 5; then retention removes offset 0 (the log starts at 1)
    config = make_config(partitions=1, msg_timeout_ms=600_000)
    producer = Producer({**config.kafka_settings(), "transactional.id": f"{config.queue_topic}-tx"})
    producer.init_transactions(10)
    producer.begin_transaction()
    for value in (b"a", b"b"):
        producer.produce(config.queue_topic, value, partition=0)
    producer.commit_transaction(10)
    producer.begin_transaction()
    producer.produce(config.queue_topic, b"c", partition=0)
    producer.flush(10)
    producer.abort_transaction(10)
    with KmqProducer(config) as plain:
        [after] = plain.send_batch([OutgoingMessage(b"d", partition=0)])
    assert after.offset == 5
    admin = AdminClient(config.kafka_settings())
    [deleted] = admin.delete_records([TopicPartition(config.queue_topic, 0, 1)]).values()
    assert deleted.result(timeout=15).low_watermark == 1
    # and STARTs, due at once, for the removed offset, the two transaction markers and the aborted record
    markers = Producer(config.kafka_settings())
    for offset in (0, 2, 3, 4):
        markers.produce(config.markers_topic, StartMarker(0).encode(), MarkerKey(0, offset).encode(), partition=0)
    assert markers.flush(10) == 0
    # when the tracker finds them due, then it counts the removed one as missing and the three that hold no record
    # apart, ends all four, and redelivers and dead-letters nothing
    with running_tracker(config) as tracker:
        wait_for(lambda: metric(tracker, "kmq_no_record_offsets_total") == 3, 20, what="the offsets without record")
        wait_for(lambda: metric(tracker, "kmq_missing_messages_total") == 1, 20, what="the removed message")
        wait_for(lambda: tracker_settled(tracker), 10, what="their ENDs read back")
        assert metric(tracker, "kmq_redeliveries_total") == metric(tracker, "kmq_dead_letters_total") == 0
    ends = [r for r in read_topic(config, config.markers_topic, 1) if r.value == EndMarker().encode()]
    assert sorted(r.key for r in ends) == sorted(MarkerKey(0, o).encode() for o in (0, 2, 3, 4))
    assert read_topic(config, config.dead_letter_topic, 1) == []
