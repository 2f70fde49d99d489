"""The START writer's batching and failure accounting, against a stand-in for librdkafka's producer."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kmq.batch_markers import BatchStart
from kmq.config import KmqConfig
from kmq.delivery import Failures
from kmq.errors import DeliveryError
from kmq.marker_writer import MarkerWriter, StartWriter, first_of
from kmq.markers import MarkerKey, StartMarker

CONFIG = KmqConfig(bootstrap_servers="localhost:9", queue_topic="q", marker_format="kmq")
BATCH_CONFIG = CONFIG.with_overrides(marker_format="batch")


class FakeMessage:
    def __init__(self, partition: int) -> None:
        self._partition = partition

    def topic(self) -> str:
        return "q__markers"

    def partition(self) -> int:
        return self._partition


class FakeProducer:
    """Queues at most `room` records per produce_batch call (librdkafka's queue.buffering.max.messages)."""

    def __init__(self, room: int = 1_000, refuse_with: int | None = None, partitions_after_refresh: int = 0) -> None:
        self.room, self.refuse_with = room, refuse_with
        self.batches: list[tuple[str, int, list[dict[str, Any]]]] = []
        self.polls = 0
        self.refreshes: list[str] = []
        self._partitions_after_refresh = partitions_after_refresh

    def list_topics(self, topic: str, timeout: float) -> None:
        """A metadata refresh: from now on partitions below `partitions_after_refresh` are known."""
        self.refreshes.append(topic)
        if self.refuse_with == KafkaError._UNKNOWN_PARTITION and self._partitions_after_refresh:
            self.refuse_with = None

    def produce_batch(self, topic: str, records: list[dict[str, Any]], partition: int, on_delivery: Any) -> int:
        self.batches.append((topic, partition, [dict(r) for r in records]))
        for index, record in enumerate(records):
            if index >= self.room or self.refuse_with is not None:
                record["_error"] = KafkaError(self.refuse_with or KafkaError._QUEUE_FULL)
        return len([r for r in records if "_error" not in r])

    def poll(self, timeout: float) -> int:
        self.polls += 1
        return 0

    def flush(self, timeout: float) -> int:
        return 0

    def __len__(self) -> int:
        return 0


def test_one_produce_batch_per_partition_with_keys_and_the_start_value() -> None:
    producer = FakeProducer()
    StartWriter(CONFIG, producer).produce({2: [7, 8], 0: [3]}, 4321)  # type: ignore[arg-type]  # a stand-in
    value = StartMarker(4321).encode()
    assert producer.batches == [
        (
            "q__markers",
            2,
            [{"key": MarkerKey(2, 7).encode(), "value": value}, {"key": MarkerKey(2, 8).encode(), "value": value}],
        ),
        ("q__markers", 0, [{"key": MarkerKey(0, 3).encode(), "value": value}]),
    ]


def test_batch_format_writes_one_batch_start_per_partition() -> None:
    producer = FakeProducer()
    StartWriter(BATCH_CONFIG, producer).produce({2: [7, 8, 9], 0: [3, 5]}, 4321)  # type: ignore[arg-type]  # a stand-in
    assert producer.batches == [
        ("q__markers", 2, [{"key": MarkerKey(2, 7).encode(), "value": BatchStart(4321, ((7, 3),)).encode()}]),
        ("q__markers", 0, [{"key": MarkerKey(0, 3).encode(), "value": BatchStart(4321, ((3, 1), (5, 1))).encode()}]),
    ]


def test_records_refused_for_a_full_queue_are_offered_again_after_serving_reports() -> None:
    producer = FakeProducer(room=2)
    StartWriter(CONFIG, producer).produce({1: [10, 11, 12, 13, 14]}, 100)  # type: ignore[arg-type]  # a stand-in
    offered = [[MarkerKey.decode(r["key"]).offset for r in records] for _, _, records in producer.batches]
    assert offered == [[10, 11, 12, 13, 14], [12, 13, 14], [14]]
    assert producer.polls == 2
    assert all("_error" not in r for _, _, records in producer.batches for r in records)


def test_a_refused_record_is_offered_again_with_its_own_callback() -> None:
    # (the pipeline gives a partition's last START a callback of its own: the one that moves the batch)
    producer = FakeProducer(room=1)
    writer = StartWriter(CONFIG, producer)  # type: ignore[arg-type]  # a stand-in
    last = writer.records(1, [10, 11], 100)
    last[-1]["callback"] = print
    writer.produce_records(1, last, None)  # type: ignore[arg-type]  # no callback for the others
    assert [[r.get("callback") for r in records] for _, _, records in producer.batches] == [[None, print], [print]]


def test_any_other_refusal_is_a_delivery_error_naming_the_partition() -> None:
    producer = FakeProducer(refuse_with=KafkaError.MSG_SIZE_TOO_LARGE)
    with pytest.raises(DeliveryError, match=r"q__markers\[3\]"):
        StartWriter(CONFIG, producer).produce({3: [0]}, 100)  # type: ignore[arg-type]  # a stand-in
    assert producer.refreshes == []


def test_an_unknown_partition_refreshes_the_metadata_once_then_is_a_delivery_error() -> None:
    # a partition added since the producer read its metadata (kmq topics grow) is learnt, then written
    grown = FakeProducer(refuse_with=KafkaError._UNKNOWN_PARTITION, partitions_after_refresh=4)
    StartWriter(CONFIG, grown).produce({3: [0, 1]}, 100)  # type: ignore[arg-type]  # a stand-in
    assert grown.refreshes == ["q__markers"]
    assert [len(records) for _, _, records in grown.batches] == [2, 2]
    # a partition the topic does not have after a refresh either fails the batch, naming it
    missing = FakeProducer(refuse_with=KafkaError._UNKNOWN_PARTITION)
    with pytest.raises(DeliveryError, match=r"q__markers\[3\].*Unknown partition"):
        StartWriter(CONFIG, missing).produce({3: [0]}, 100)  # type: ignore[arg-type]  # a stand-in
    assert missing.refreshes == ["q__markers"]


def test_a_batch_fails_on_its_own_failures_only() -> None:
    writer = StartWriter(CONFIG, FakeProducer())  # type: ignore[arg-type]  # a stand-in
    earlier, current = writer.produce({0: [1]}, 100), writer.produce({0: [2]}, 100)
    earlier.report(KafkaError(KafkaError._MSG_TIMED_OUT), FakeMessage(0))  # type: ignore[arg-type]  # a stand-in
    writer.wait(current, 1.0)
    with pytest.raises(DeliveryError, match="timed out"):
        writer.wait(earlier, 1.0)


def test_failures_check_raises_the_first_failure_then_a_timeout() -> None:
    failures = Failures()
    failures.check(0, 1.0)
    with pytest.raises(DeliveryError, match=r"3 records not acknowledged within 1\.0s"):
        failures.check(3, 1.0)
    failures.report(None, FakeMessage(0))  # type: ignore[arg-type]  # a success reports nothing
    failures.report(KafkaError(KafkaError._MSG_TIMED_OUT), FakeMessage(2))  # type: ignore[arg-type]
    failures.report(KafkaError(KafkaError._UNKNOWN_PARTITION), FakeMessage(3))  # type: ignore[arg-type]
    with pytest.raises(DeliveryError, match=r"q__markers\[2\]"):
        failures.check(0, 1.0)


def test_first_of_names_the_first_message_of_a_batch() -> None:
    assert first_of({3: [40, 41], 1: [7]}) == (3, 40)


class RefusingProducer:
    """librdkafka refusing every record at once, as for a partition the markers topic does not have."""

    def __init__(self) -> None:
        self.refreshes = 0

    def produce(self, *args: Any, **kwargs: Any) -> None:
        raise KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION))

    def list_topics(self, topic: str, timeout: float) -> None:
        self.refreshes += 1


def test_a_fire_and_forget_marker_refused_at_once_is_counted_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    producer = RefusingProducer()
    writer = MarkerWriter(CONFIG, producer)  # type: ignore[arg-type]  # a stand-in
    writer.end_at(1, 5)
    writer.end(MarkerKey(1, 6))
    writer.start(MarkerKey(1, 7), 100)
    assert writer.failed_markers == 3
    assert producer.refreshes == 3  # each refusal first refreshed the metadata (a partition added since?)
    assert "marker for q[1] was not written" in caplog.text


def test_only_failed_deliveries_count() -> None:
    writer = MarkerWriter(CONFIG, RefusingProducer())  # type: ignore[arg-type]  # a stand-in
    writer._on_failure(None, FakeMessage(0))  # type: ignore[arg-type]  # a stand-in
    writer._on_failure(KafkaError(KafkaError._MSG_TIMED_OUT), FakeMessage(2))  # type: ignore[arg-type]
    assert writer.failed_markers == 1
