"""The multi-node and secure embedded Kafka, without starting it: the nodes' configuration and the refusals."""

from __future__ import annotations

from pathlib import Path

import pytest

from kmq.embedded import EmbeddedKafka
from kmq.embedded._kafka import KafkaBroker
from kmq.embedded._kafka_config import Relayed, secure_listener, server_properties
from kmq.embedded._kafka_node import KafkaNode
from kmq.embedded._kafka_nodes import KafkaNodes
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


def test_a_relayed_node_advertises_its_relays_and_replicates_through_its_own_listener() -> None:
    # Node 2 of three: clients reach it on relay port 7002; node 1 replicates from it through FROM1 (port 9201 here,
    # 7201 told), node 3 through FROM3; its own FROM2 (its inter-broker listener) is direct. Node 1 reaches its
    # controller through CONTROLLER_FROM1 (9301 here, 7301 told), node 3 through CONTROLLER_FROM3.
    relayed = Relayed(
        7002,
        {1: (9201, 7201), 2: (9202, 9202), 3: (9203, 7203)},
        "1@127.0.0.1:7401,2@127.0.0.1:9002,3@127.0.0.1:7403",
        {1: (9301, 7301), 3: (9303, 7303)},
    )
    node = properties(server_properties(Path("/d"), 9102, 9002, "4.4.0", 2, "1@x:1,2@x:2,3@x:3", relayed=relayed))
    assert node["listeners"] == (
        "PLAINTEXT://127.0.0.1:9102,FROM1://127.0.0.1:9201,FROM2://127.0.0.1:9202,FROM3://127.0.0.1:9203,"
        "CONTROLLER_FROM1://127.0.0.1:9301,CONTROLLER_FROM2://127.0.0.1:9002,CONTROLLER_FROM3://127.0.0.1:9303"
    )
    # The controller listeners are advertised too: a leader tells the others these (each picks its own name's)
    assert node["advertised.listeners"] == (
        "PLAINTEXT://127.0.0.1:7002,FROM1://127.0.0.1:7201,FROM2://127.0.0.1:9202,FROM3://127.0.0.1:7203,"
        "CONTROLLER_FROM1://127.0.0.1:7301,CONTROLLER_FROM2://127.0.0.1:9002,CONTROLLER_FROM3://127.0.0.1:7303"
    )
    assert node["inter.broker.listener.name"] == "FROM2"
    assert node["controller.listener.names"] == "CONTROLLER_FROM2,CONTROLLER_FROM1,CONTROLLER_FROM3"
    assert node["controller.quorum.voters"] == "1@127.0.0.1:7401,2@127.0.0.1:9002,3@127.0.0.1:7403"
    assert node["listener.security.protocol.map"] == ",".join(
        f"{name}:PLAINTEXT"
        for name in ["PLAINTEXT", "FROM1", "FROM2", "FROM3", *(f"CONTROLLER_FROM{i}" for i in (1, 2, 3))]
    )


def test_every_address_a_relayed_node_can_learn_for_another_is_a_relay_of_that_pair() -> None:
    """Node i reaches node n's controller at the address KRaft gives it: node n's advertised controller listener
    (else its listener) of the name node i lists first in controller.listener.names (the leader sends them all in
    BeginQuorumEpoch), or its voter entry; it replicates from node n's FROM<i>. Each must be the relay of that
    pair, never node n's own port, or cutting a node's relays leaves it a direct line (it is never fenced); and each
    relay forwards to the listener it stands for."""
    relays: dict[int, str] = {}
    forwards: dict[str, int] = {}

    def relay(link: str, port: int) -> int:
        relays[30_000 + len(relays)] = link
        forwards[link] = port
        return 30_000 + len(relays) - 1

    broker = KafkaBroker(None, nodes=3, relay=relay)
    broker._nodes = [KafkaNode(n, Path(f"/d/{n}"), 9000 + n, 9100 + n, heap="") for n in (1, 2, 3)]
    broker._relayed = broker._relay_links(list(range(9200, 9200 + 3 * 5)))
    config = {n.node_id: properties(broker._node_properties(n, "")) for n in broker._nodes}

    def addresses(value: str) -> dict[str, int]:
        return {name: int(address.rsplit(":", 1)[1]) for name, address in (e.split("://") for e in value.split(","))}

    for i, mine in config.items():
        first = mine["controller.listener.names"].split(",")[0]
        voters = {int(v.split("@")[0]): int(v.rsplit(":", 1)[1]) for v in mine["controller.quorum.voters"].split(",")}
        for n, theirs in config.items():
            if n == i:
                continue
            learnt = {**addresses(theirs["listeners"]), **addresses(theirs["advertised.listeners"])}
            for what, port in [("leader", learnt[first]), ("voter", voters[n])]:
                assert relays.get(port) == f"controller-{n}-from-{i}", f"node {i} reaches node {n}'s {what} at {port}"
            assert relays.get(learnt[f"FROM{i}"]) == f"broker-{n}-from-{i}"
            listening = addresses(theirs["listeners"])
            assert forwards[f"controller-{n}-from-{i}"] == listening[first]
            assert forwards[f"broker-{n}-from-{i}"] == listening[f"FROM{i}"]
        assert relays.get(addresses(mine["advertised.listeners"])["PLAINTEXT"]) == f"client-{i}"
        assert forwards[f"client-{i}"] == addresses(mine["listeners"])["PLAINTEXT"]
        # and a node's address for clients (fault tests ask one node alone) is its relay too
        client_relay = addresses(mine["advertised.listeners"])["PLAINTEXT"]
        assert KafkaNodes(broker, 1_000, 1_000).address(i) == f"127.0.0.1:{client_relay}"
    assert len(forwards) == 3 + 2 * 3 * 2  # a client relay per node, a broker and a controller relay per pair


def test_a_relay_needs_a_kafka_cluster_of_several_nodes() -> None:
    with pytest.raises(EmbeddedBrokerError, match="several nodes runs behind relays"):
        EmbeddedKafka("kafka", relay=lambda link, port: port)
    with pytest.raises(EmbeddedBrokerError, match="choose relay or secure"):
        EmbeddedKafka("kafka", nodes=3, secure=True, relay=lambda link, port: port)


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
