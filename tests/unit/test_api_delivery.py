"""The REST facade's producer speaks through the `kmq.kafka` logger like every other kmq client."""

from __future__ import annotations

import logging

import pytest

from kmq.config import KmqConfig
from kmq_api.delivery import AsyncProducer
from tests.helpers import wait_for


def test_librdkafka_lines_of_the_facade_producer_go_to_the_kmq_kafka_logger(caplog: pytest.LogCaptureFixture) -> None:
    # Nothing listens on port 1: librdkafka reports the refused connection through the client's logger, and
    # without one it writes the line to stderr, where an operator's logging settings never see it.
    config = KmqConfig(bootstrap_servers="127.0.0.1:1", queue_topic="t-delivery-log", kafka_config={"debug": "broker"})
    caplog.set_level(logging.DEBUG, logger="kmq.kafka")
    producer = AsyncProducer(config, write_timeout_ms=1000, name="t-delivery-log")
    try:
        wait_for(
            lambda: any(r.name == "kmq.kafka" and "127.0.0.1:1" in r.getMessage() for r in caplog.records),
            10,
            what="a librdkafka line on the kmq.kafka logger",
        )
    finally:
        producer.close(1)
