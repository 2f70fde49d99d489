"""No silent stall: a client whose broker answers Metadata with no brokers (a broker in controlled shutdown,
docs/guides/operating.md) is stranded — librdkafka knows no broker any more while the bootstrap address accepts
connections. A TCP proxy in front of the broker (tests/metadata_proxy.py) makes that state deterministic; kmq must
turn it into an error (`KmqClient.receive()`) or a failing `/healthz` (tracker, REST facade), and a fresh client
recovers."""

from __future__ import annotations

import re
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from fastapi.testclient import TestClient

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster
from kmq.errors import KafkaUnavailableError
from kmq_api import ApiConfig, create_app
from kmq_tracker.config import TrackerConfig
from kmq_tracker.service import TrackerService
from tests.conftest import external_cluster_requested, unique_topic
from tests.metadata_proxy import MetadataProxy

UNAVAILABLE_AFTER_MS = 3_000
WAIT_S = 60.0  # every wait here is bounded by this, far above the 3 s the client is given


@pytest.fixture
def proxy(cluster: KafkaCluster) -> Iterator[MetadataProxy]:
    if external_cluster_requested():
        pytest.skip("the proxy fronts one broker: it needs the embedded one-node cluster")
    proxy = MetadataProxy(cluster.bootstrap_servers.split(",")[0])
    try:
        yield proxy
    finally:
        proxy.close()


def _configs(cluster: KafkaCluster, proxy: MetadataProxy, name: str) -> tuple[KmqConfig, KmqConfig]:
    """The queue's config on the broker itself, and the same through the proxy."""
    direct = cluster.config(unique_topic(name), kafka_unavailable_after_ms=UNAVAILABLE_AFTER_MS)
    cluster.ensure_topics(direct, 1)
    return direct, KmqConfig(**{**direct.model_dump(), "bootstrap_servers": proxy.address})


def _produce(config: KmqConfig, values: list[bytes]) -> None:
    producer = Producer(config.kafka_settings())
    for value in values:
        producer.produce(config.queue_topic, value)
    assert producer.flush(WAIT_S) == 0


def _receive(client: KmqClient, count: int) -> list[bytes]:
    values: list[bytes] = []
    deadline = time.monotonic() + WAIT_S
    while len(values) < count:
        assert time.monotonic() < deadline, f"received {len(values)} of {count} in {WAIT_S}s"
        for msg in client.receive(100, 0.2):
            client.processed(msg)
            values.append(msg.value or b"")
    return values


def test_a_stranded_client_raises_kafka_unavailable_and_a_new_client_goes_on(
    cluster: KafkaCluster, proxy: MetadataProxy
) -> None:
    direct, proxied = _configs(cluster, proxy, "stranded-client")
    _produce(direct, [b"before-0", b"before-1"])
    client = KmqClient(proxied)
    try:
        # Given a client that receives through the proxy
        assert sorted(_receive(client, 2)) == [b"before-0", b"before-1"]
        client.flush()
        # When every Metadata answer names no broker, then receive raises within the configured time
        proxy.strand()
        stranded_at = time.monotonic()
        with pytest.raises(KafkaUnavailableError, match="no Kafka broker has answered") as raised:
            while time.monotonic() - stranded_at < WAIT_S:
                assert client.receive(100, 0.2) == []
        assert proxy.stranded > 0 and raised.value.bootstrap_servers == proxy.address
        silent = re.search(r"for (\d+) ms", str(raised.value))  # counted from the last records received
        assert silent is not None and int(silent[1]) >= UNAVAILABLE_AFTER_MS
    finally:
        client.close(5)
    # When the broker is named again, then a new client (what a restarted process makes) receives new messages
    proxy.heal()
    _produce(direct, [b"after-0", b"after-1"])
    with KmqClient(proxied) as fresh:
        assert sorted(_receive(fresh, 2)) == [b"after-0", b"after-1"]


def test_a_stranded_tracker_fails_healthz(cluster: KafkaCluster, proxy: MetadataProxy) -> None:
    _, proxied = _configs(cluster, proxy, "stranded-tracker")
    tracker = TrackerService(TrackerConfig(kmq=proxied, http_port=0)).run_in_thread()
    try:
        url = f"http://127.0.0.1:{tracker.http_port}/healthz"
        assert _status(url) == (200, "loop alive\n")
        proxy.strand()
        deadline = time.monotonic() + WAIT_S
        while (answer := _status(url))[0] == 200:
            assert time.monotonic() < deadline, "/healthz kept answering 200 for a stranded tracker"
            time.sleep(0.2)
        assert answer[0] == 503 and "no Kafka broker has answered" in answer[1], answer
        proxy.heal()
    finally:
        tracker.stop()


def test_a_stranded_facade_fails_healthz_and_receives_again_through_a_new_client(
    cluster: KafkaCluster, proxy: MetadataProxy
) -> None:
    direct, proxied = _configs(cluster, proxy, "stranded-api")
    config = ApiConfig(queues=(proxied,), receipt_secret="stranded-api-secret-0123456789abcdef", allow_anonymous=True)
    path = f"/v1/queues/{proxied.queue_topic}/receive"
    with TestClient(create_app(config)) as http:
        # Given a facade that receives through the proxy
        _produce(direct, [b"before"])
        assert len(_api_receive(http, path)) == 1
        assert http.get("/healthz").status_code == 200
        # When every Metadata answer names no broker, then a receive answers 503 and /healthz fails, naming why
        proxy.strand()
        deadline = time.monotonic() + WAIT_S
        while (answer := http.post(path, json={"wait_ms": 500})).status_code == 200:
            assert answer.json()["messages"] == [] and time.monotonic() < deadline, "the facade never noticed"
        assert answer.status_code == 503 and "no Kafka broker has answered" in answer.json()["detail"]
        health = http.get("/healthz")
        assert health.status_code == 503 and "lost its brokers" in health.json()["detail"]
        # When the broker is named again, then the next receive goes through a new client, and /healthz is fine
        proxy.heal()
        _produce(direct, [b"after"])
        assert len(_api_receive(http, path)) == 1
        assert http.get("/healthz").status_code == 200


def _api_receive(http: TestClient, path: str) -> list[object]:
    deadline = time.monotonic() + WAIT_S
    while not (messages := http.post(path, json={"wait_ms": 1000}).json().get("messages")):
        assert time.monotonic() < deadline, f"no message through {path} in {WAIT_S}s"
    return list(messages)


def _status(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()
