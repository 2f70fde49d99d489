"""The embedded brokers for real: both backends start, carry records, make topics, stop, and die with their parent."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka import Message as KafkaMessage
from confluent_kafka.admin import AdminClient

from kmq.admin import topic_partitions
from kmq.config import KmqConfig
from kmq.embedded import BACKENDS, EmbeddedKafka, KafkaCluster
from kmq.embedded._ports import free_port, wait_until
from kmq.errors import EmbeddedBrokerError

MakeConfig = Callable[..., KmqConfig]
linux_only = pytest.mark.needs(sys.platform == "linux", "PR_SET_PDEATHSIG and /proc are Linux-only")
KMQ_CLI = "import sys; from kmq.cli import main; sys.argv[0] = 'kmq'; main()"
PARENT_SCRIPT = """
import sys
from kmq.embedded import EmbeddedKafka
kafka = EmbeddedKafka(sys.argv[1]).start()
print(kafka.pid, kafka.bootstrap_servers, flush=True)
sys.stdin.read()
"""


@pytest.fixture(params=["kafka", "kafka_tansu", "kafka_mock"])
def cluster(request: pytest.FixtureRequest) -> KafkaCluster:
    cluster: KafkaCluster = request.getfixturevalue(request.param)
    return cluster


def start_time(pid: int) -> str | None:
    """When the process started (its identity, as pids get reused); None once it is gone or a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else fields[19]


def gone(pid: int, started: str | None) -> bool:
    return start_time(pid) != started


def answers_metadata(bootstrap_servers: str) -> bool:
    metadata = AdminClient({"bootstrap.servers": bootstrap_servers}).list_topics(timeout=10)
    return len(metadata.brokers) == 1


def test_integration_tests_are_marked_as_such(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("integration") is not None


@linux_only
@pytest.mark.parametrize("backend", BACKENDS)
def test_stop_leaves_no_process(backend: str) -> None:
    with EmbeddedKafka(backend) as kafka:
        pid = kafka.pid
        assert pid is not None and kafka.running()
        started = start_time(pid)
        assert started is not None and answers_metadata(kafka.bootstrap_servers)
        with pytest.raises(EmbeddedBrokerError, match="running already"):
            kafka.start()
    assert gone(pid, started)
    assert kafka.pid is None and not kafka.running()
    kafka.stop()  # a second stop does nothing


def test_tansu_listens_on_the_port_asked_for_and_frees_it_when_stopped() -> None:
    port = free_port()
    for _ in range(2):
        with EmbeddedKafka("tansu", port=port) as kafka:
            assert kafka.bootstrap_servers == f"127.0.0.1:{port}"
            assert answers_metadata(kafka.bootstrap_servers)


def test_a_taken_port_fails_with_the_port_and_the_brokers_last_words() -> None:
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        with pytest.raises(EmbeddedBrokerError, match=rf"(?s)tansu .* on 127\.0\.0\.1:{port} exited.*Address in use"):
            EmbeddedKafka("tansu", port=port, start_timeout_ms=10_000).start()


def test_records_round_trip_with_keys_headers_and_committed_offsets(
    cluster: KafkaCluster, make_config: MakeConfig
) -> None:
    config = make_config(partitions=2)
    produce(config, 10)
    consumer = Consumer(consumer_settings(config))
    try:
        consumer.subscribe([config.queue_topic])
        received = poll(consumer, 10)
        consumer.commit(asynchronous=False)
        committed = consumer.committed([TopicPartition(config.queue_topic, p) for p in (0, 1)], timeout=10)
    finally:
        consumer.close()
    assert sorted((m.key(), m.value(), m.headers()) for m in received) == [
        (f"k{i}".encode(), f"v{i}".encode(), [("trace", f"t{i}".encode())]) for i in range(10)
    ]
    assert {tp.partition: tp.offset for tp in committed} == {0: 5, 1: 5}


def test_topics_get_the_partition_counts_asked_for_and_existing_ones_are_kept(cluster: KafkaCluster) -> None:
    prefix = f"t-counts-{uuid.uuid4().hex[:8]}"
    wanted = {f"{prefix}-{n}": n for n in (1, 3, 7)}
    cluster.create_topics(wanted)
    cluster.create_topics({f"{prefix}-1": 5})
    config = cluster.config(prefix)
    assert {name: topic_partitions(config, name) for name in wanted} == wanted


def test_make_config_creates_a_unique_queue_with_markers_and_dead_letters(
    cluster: KafkaCluster, make_config: MakeConfig
) -> None:
    config = make_config(partitions=3, msg_timeout_ms=1234)
    other = make_config(partitions=1)
    assert config.queue_topic.startswith("t-test_make_config_creates") and config.queue_topic != other.queue_topic
    topics = (config.queue_topic, config.markers_topic, config.dead_letter_topic)
    assert [topic_partitions(config, topic) for topic in topics] == [3, 3, 3]
    assert config.msg_timeout_ms == 1234 and config.bootstrap_servers == cluster.bootstrap_servers
    assert config.consumer_kafka_config == cluster.consumer_kafka_config


@linux_only
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_sigkilled_parent_takes_its_broker_with_it(backend: str) -> None:
    pid, started = 0, None
    with subprocess.Popen(
        [sys.executable, "-c", PARENT_SCRIPT, backend], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as parent:
        try:
            announced = parent.stdout.readline().split() if parent.stdout else []
            assert len(announced) == 2, f"the parent did not start a broker (exit code {parent.poll()})"
            pid, bootstrap_servers = int(announced[0]), announced[1]
            started = start_time(pid)
            assert started is not None and answers_metadata(bootstrap_servers)
            parent.send_signal(signal.SIGKILL)
            parent.wait(10)
            # Its pid, not its port, tells: a freed ephemeral port may be anybody's a moment later.
            assert wait_until(lambda: gone(pid, started), time.monotonic() + 10), "the broker outlived its parent"
        finally:
            kill_leftovers(parent, pid, started)


@linux_only
@pytest.mark.parametrize("backend", BACKENDS)
def test_a_broker_started_from_a_short_lived_thread_outlives_the_thread(backend: str) -> None:
    started: list[tuple[EmbeddedKafka, int]] = []
    thread = threading.Thread(
        target=lambda: started.append((EmbeddedKafka(backend).start(), threading.get_native_id()))
    )
    thread.start()
    thread.join()
    kafka, thread_id = started[0]
    try:
        # The kernel signals a child when the thread that forked it is gone: wait until this one really is.
        assert wait_until(lambda: not Path(f"/proc/self/task/{thread_id}").exists(), time.monotonic() + 10)
        assert answers_metadata(kafka.bootstrap_servers) and kafka.running()
    finally:
        kafka.stop()


@linux_only
@pytest.mark.parametrize("backend", BACKENDS)
def test_kmq_broker_prints_the_address_and_exits_0_on_ctrl_c(backend: str) -> None:
    argv = [sys.executable, "-c", KMQ_CLI, "broker", "--backend", backend]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as command:
        try:
            printed = list(lines_until(command, "press Ctrl-C"))
            kind = rf"{backend} \(Apache Kafka [0-9.]+\)" if backend == "kafka" else backend
            announced = re.fullmatch(rf"embedded {kind} broker \(pid (\d+)\) listening on (\S+)", printed[0])
            assert announced is not None, printed
            if backend == "kafka":
                assert any(line.startswith("its log: /") for line in printed), printed
            pid, started = int(announced[1]), start_time(int(announced[1]))
            assert f"export KMQ_BOOTSTRAP_SERVERS={announced[2]}" in printed
            assert answers_metadata(announced[2])
            command.send_signal(signal.SIGINT)
            assert command.wait(30) == 0, command.stderr.read() if command.stderr else ""
            assert gone(pid, started)
        finally:
            if command.poll() is None:
                command.kill()


def lines_until(process: subprocess.Popen[str], last: str) -> Iterator[str]:
    """Lines of its stdout up to the one starting with `last`; fails if it exits first."""
    assert process.stdout is not None
    for line in process.stdout:
        yield line.rstrip("\n")
        if line.startswith(last):
            return
    raise AssertionError(
        f"exited with {process.wait()} before printing {last!r}: {process.stderr and process.stderr.read()}"
    )


def produce(config: KmqConfig, count: int) -> None:
    producer = Producer({**config.kafka_settings(), "enable.idempotence": True})
    failures: list[KafkaError] = []

    def report(error: KafkaError | None, message: KafkaMessage) -> None:
        failures.extend([error] if error else [])

    for i in range(count):
        headers: list[tuple[str, str | bytes | None]] = [("trace", f"t{i}".encode())]
        key, value = f"k{i}".encode(), f"v{i}".encode()
        producer.produce(config.queue_topic, value, key, partition=i % 2, on_delivery=report, headers=headers)
    assert producer.flush(10) == 0 and not failures, failures


def consumer_settings(config: KmqConfig) -> dict[str, object]:
    return {
        **config.kafka_settings(),
        **config.consumer_kafka_config,
        "group.id": config.group_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }


def poll(consumer: Consumer, count: int, timeout_s: float = 30) -> list[KafkaMessage]:
    received: list[KafkaMessage] = []
    deadline = time.monotonic() + timeout_s
    while len(received) < count:
        assert time.monotonic() < deadline, f"received {len(received)} of {count} records in {timeout_s}s"
        message = consumer.poll(0.2)
        if message is not None:
            assert message.error() is None, message.error()
            received.append(message)
    return received


def kill_leftovers(parent: subprocess.Popen[str], broker_pid: int, broker_started: str | None) -> None:
    """Whatever a failed assertion left behind: never a stray broker."""
    if parent.poll() is None:
        parent.kill()
    if broker_pid and broker_started is not None and start_time(broker_pid) == broker_started:
        os.kill(broker_pid, signal.SIGKILL)


def test_the_mock_server_stops_when_its_stdin_closes_as_when_its_parent_dies() -> None:
    argv = [sys.executable, "-m", "kmq.embedded._mock_server", f"--parent-pid={os.getpid()}"]
    with subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True) as server:
        try:
            assert server.stdin is not None and server.stdout is not None
            ready = server.stdout.readline()
            assert ready.startswith("READY 127.0.0.1:"), ready
            server.stdin.write("CREATE t-eof 2\nCREATE t-eof 2\nHELLO\n")
            server.stdin.flush()
            answers = [server.stdout.readline().strip() for _ in range(3)]
            assert answers[0] == "OK" and "already exists" in answers[1] and answers[2].startswith("ERR unknown")
            server.stdin.close()
            assert server.wait(10) == 0
        finally:
            if server.poll() is None:
                server.kill()
