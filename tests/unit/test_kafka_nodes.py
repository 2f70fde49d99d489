"""The multi-node and secure embedded Kafka, without starting it: the nodes' configuration and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.embedded import EmbeddedKafka
from kmq.embedded._kafka_config import secure_listener, server_properties
from kmq.errors import EmbeddedBrokerError
from tests.helpers import run_kmq_broker


def properties(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines())


def test_a_single_node_keeps_one_replica_everywhere() -> None:
    single = properties(server_properties(Path("/d"), 9092, 9093, "4.4.0"))
    assert single["controller.quorum.voters"] == "1@127.0.0.1:9093"
    assert single["offsets.topic.replication.factor"] == "1" and single["min.insync.replicas"] == "1"


def test_three_nodes_share_a_quorum_and_replicate_internal_topics() -> None:
    voters = "1@127.0.0.1:9001,2@127.0.0.1:9002,3@127.0.0.1:9003"
    node = properties(server_properties(Path("/d"), 9102, 9002, "4.4.0", node_id=2, voters=voters))
    assert node["node.id"] == "2" and node["controller.quorum.voters"] == voters
    assert node["listeners"] == "PLAINTEXT://127.0.0.1:9102,CONTROLLER://127.0.0.1:9002"
    assert node["default.replication.factor"] == "3" and node["min.insync.replicas"] == "2"
    assert node["offsets.topic.replication.factor"] == "3" and node["transaction.state.log.min.isr"] == "2"


def test_a_secure_node_adds_a_sasl_ssl_listener_with_acls() -> None:
    secure = secure_listener(9443, Path("/tls/broker.p12"), "store-pw", "admin")
    node = properties(server_properties(Path("/d"), 9092, 9093, "4.4.0", secure=secure))
    assert node["advertised.listeners"] == "PLAINTEXT://127.0.0.1:9092,SASL_SSL://127.0.0.1:9443"
    assert node["sasl.enabled.mechanisms"] == "SCRAM-SHA-512"
    assert node["authorizer.class.name"] == "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
    assert node["super.users"] == "User:ANONYMOUS;User:admin" and node["allow.everyone.if.no.acl.found"] == "false"
    assert "_port" not in node


@pytest.mark.parametrize("backend", ["tansu", "mock"])
def test_only_the_kafka_backend_runs_several_nodes_or_a_secure_listener(backend: str) -> None:
    with pytest.raises(EmbeddedBrokerError, match="only the kafka backend runs several nodes"):
        EmbeddedKafka(backend, nodes=3)
    with pytest.raises(EmbeddedBrokerError, match="only the kafka backend has a SASL_SSL listener"):
        EmbeddedKafka(backend, secure=True)


def test_node_control_needs_a_running_kafka_cluster() -> None:
    with pytest.raises(EmbeddedBrokerError, match="not running: call start"):
        _ = EmbeddedKafka("kafka", nodes=3).nodes


def test_kmq_broker_refuses_nodes_on_a_single_broker_backend() -> None:
    result = run_kmq_broker("--backend", "tansu", "--nodes", "3")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --nodes needs --backend kafka; tansu runs one broker"
