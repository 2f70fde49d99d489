"""The redeliverer's producer: a fatal error ends the tracker instead of failing every redelivery forever."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer

from kmq.config import KmqConfig
from kmq_tracker import redeliverer as module
from kmq_tracker.config import TrackerConfig
from kmq_tracker.reader import QueueReader
from kmq_tracker.redeliverer import Redeliverer

CONFIG = TrackerConfig(kmq=KmqConfig(bootstrap_servers="127.0.0.1:1", queue_topic="q"), write_timeout_ms=100)


@pytest.fixture
def producer_settings(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The settings the redeliverer gives its (real) producer, among them the error callback librdkafka calls."""
    captured: dict[str, Any] = {}

    def recording_producer(settings: dict[str, Any]) -> Producer:
        captured.update(settings)
        return Producer(settings)

    monkeypatch.setattr(module, "Producer", recording_producer)
    return captured


def test_a_fatal_producer_error_stops_the_tracker(producer_settings: dict[str, Any]) -> None:
    # given a redeliverer whose idempotent producer hit a fatal error (librdkafka reports it to error_cb once)
    redeliverer = Redeliverer(CONFIG)
    try:
        producer_settings["error_cb"](KafkaError(KafkaError._FATAL, "out of order sequence", fatal=True))
        # then the loop's next poll raises it (the service then stops, /healthz fails, the replica is restarted) ...
        with pytest.raises(KafkaException, match="out of order sequence"):
            redeliverer.poll()
        # ... and no redelivery is attempted with a producer that can no longer write anything
        with pytest.raises(KafkaException, match="out of order sequence"):
            redeliverer.redeliver(0, [1])
    finally:
        redeliverer.close()


def test_a_transient_producer_error_is_only_reported(producer_settings: dict[str, Any]) -> None:
    redeliverer = Redeliverer(CONFIG)
    try:
        producer_settings["error_cb"](KafkaError(KafkaError._TRANSPORT, "broker down"))
        assert redeliverer.poll() == []
    finally:
        redeliverer.close()


def test_a_reader_that_reached_nothing_in_time_is_replaced(monkeypatch: pytest.MonkeyPatch) -> None:
    # given a redeliverer whose queue reader gets no answer (nothing listens there)
    made: list[QueueReader] = []

    def counted(config: TrackerConfig) -> QueueReader:
        made.append(QueueReader(config))
        return made[-1]

    monkeypatch.setattr(module, "QueueReader", counted)
    redeliverer = Redeliverer(CONFIG.model_copy(update={"read_timeout_ms": 200}))
    try:
        # when a pass reads nothing in time
        outcome = redeliverer.redeliver(0, [1])
        # then its offsets are left for a later pass, which reads with a new consumer (librdkafka may keep the
        # partition's fetching behind a request to a leader that stopped answering, for minutes)
        assert outcome.failed == [1] and len(made) == 2
    finally:
        redeliverer.close()
