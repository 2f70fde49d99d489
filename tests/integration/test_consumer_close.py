"""A consumer's close has a deadline: with its brokers hung (SIGSTOP, connections open) librdkafka's close can block
far longer than the caller's timeout — a REST facade's shutdown once hung behind it — so `close_consumer` returns
at the deadline and leaves the close to finish in the background. With healthy brokers the close is not abandoned:
a client's revocation callback (its commit) runs on the closing thread."""

from __future__ import annotations

import logging
import time
import uuid

import pytest
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient

from kmq.client import KmqClient
from kmq.consumer_close import close_consumer
from kmq.embedded import EmbeddedKafka
from kmq.kafka import admin_settings, consumer_settings
from kmq.producer import KmqProducer, OutgoingMessage
from tests.conftest import MakeConfig
from tests.helpers import wait_for

pytestmark = [pytest.mark.faults, pytest.mark.integration]
DEADLINE_S = 2.0


def test_closing_a_consumer_whose_brokers_hang_returns_at_its_deadline(kafka_nodes: EmbeddedKafka) -> None:
    config = kafka_nodes.config(f"t-close-{uuid.uuid4().hex[:8]}")
    kafka_nodes.ensure_topics(config, 2)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % 2) for n in range(10))
    consumer = Consumer(consumer_settings(config, f"close-{uuid.uuid4().hex[:8]}"))
    consumer.subscribe([config.queue_topic])
    received: list[object] = []
    wait_for(lambda: received.extend(consumer.consume(10, timeout=0.5)) or len(received) >= 10, 60, what="records")
    brokers = sorted(AdminClient(admin_settings(config)).list_topics(timeout=10).brokers)
    nodes = kafka_nodes.nodes
    for node in brokers:
        nodes.pause(node)
    try:
        began = time.monotonic()
        closed = close_consumer(consumer, DEADLINE_S, "the test's consumer")
        took_s = time.monotonic() - began
    finally:
        for node in brokers:
            nodes.resume(node)
    print(f"\nclose_consumer returned {closed} after {took_s:.1f}s")
    # librdkafka's own close waits for the hung coordinator (leave group, the final commit): past the deadline
    assert not closed, "the consumer closed at once: this test no longer shows a hanging close"
    assert took_s < DEADLINE_S + 5, f"close_consumer took {took_s:.1f}s against a {DEADLINE_S}s deadline"


def test_a_client_holding_partitions_closes_its_consumer_instead_of_abandoning_it(
    make_config: MakeConfig, caplog: pytest.LogCaptureFixture
) -> None:
    # Pipelined STARTs (the default) commit from the revocation callback that librdkafka's close runs: the close's
    # thread must be the one holding the consumer's turn, or the commit waits for the deadline and the close is given up
    config = make_config(partitions=2)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(b"x", None, None, n % 2) for n in range(10))
    client = KmqClient(config)
    received: list[object] = []
    try:
        wait_for(lambda: received.extend(client.receive(10, timeout_s=0.5)) or len(received) >= 10, 60, what="all")
    finally:
        with caplog.at_level(logging.ERROR, logger="kmq.consumer_close"):
            client.close(timeout_s=10)
    abandoned = [r.getMessage() for r in caplog.records if r.name == "kmq.consumer_close"]
    assert not abandoned, f"the client's consumer close was abandoned: {abandoned}"
