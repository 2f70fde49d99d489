"""`kmq broker --backend kafka --nodes 3` as a user runs it: one Kafka JVM SIGKILLed, the command says which node died
and how, kmq traffic goes on through the two others (nothing lost), `--restart-dead-after` brings the node back, and
the command fails once fewer than a quorum of nodes is left."""

from __future__ import annotations

import json
import os
import queue
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient

from kmq.admin import ensure_topics
from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.errors import CommitError, MarkerWriteError
from tests.conftest import backend_under_test, external_cluster_requested
from tests.helpers import wait_for
from tests.integration.test_embedded_brokers import KMQ_CLI, gone, start_time

pytestmark = [pytest.mark.faults, pytest.mark.timeout(600)]
RESTART_AFTER_S = 3
MESSAGES = 300
# Starting three JVMs (and one again) on a busy 2-core machine: bounded, generous waits on printed lines.
START_WAIT_S = 300.0
EVENT_WAIT_S = 120.0


class Output:
    """The command's stdout and stderr, merged, read by a thread so that every wait on a line is bounded."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        self._queue: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._read, args=(process,), daemon=True)
        self._thread.start()

    def _read(self, process: subprocess.Popen[str]) -> None:
        assert process.stdout is not None
        for line in process.stdout:
            self._queue.put(line.rstrip("\n"))
        self._queue.put(None)

    def until(self, pattern: str, timeout_s: float) -> re.Match[str]:
        """The first new line matching `pattern` (re.search); fails after `timeout_s` or if the command ends."""
        deadline = time.monotonic() + timeout_s
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self._queue.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                raise AssertionError(f"no line matching {pattern!r} in {timeout_s}s:\n" + self.text()) from None
            if line is None:
                raise AssertionError(f"the command ended before a line matching {pattern!r}:\n" + self.text())
            self.lines.append(line)
            found = re.search(pattern, line)
            if found is not None:
                return found

    def text(self) -> str:
        return "\n".join(self.lines[-80:])


@pytest.fixture
def three_nodes() -> Iterator[tuple[subprocess.Popen[str], Output]]:
    if external_cluster_requested() or backend_under_test() != "kafka":
        pytest.skip("a 3-node cluster needs the embedded kafka backend (KMQ_TEST_BACKEND=kafka)")
    argv = [sys.executable, "-c", KMQ_CLI, "broker", "--backend", "kafka", "--nodes", "3"]
    argv += ["--restart-dead-after", str(RESTART_AFTER_S)]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as command:
        try:
            yield command, Output(command)
        finally:
            if command.poll() is None:
                command.send_signal(signal.SIGINT)
                try:
                    command.wait(60)
                except subprocess.TimeoutExpired:
                    command.kill()  # its JVMs die with it (PR_SET_PDEATHSIG)


def test_a_killed_node_is_reported_the_others_serve_kmq_and_it_comes_back(
    three_nodes: tuple[subprocess.Popen[str], Output],
) -> None:
    command, output = three_nodes
    # Given the cluster the command announces
    nodes = output.until(r"^nodes: 1 at (\S+) \(pid (\d+)\), 2 at (\S+) \(pid (\d+)\), 3 at (\S+) \(pid (\d+)\)$", 300)
    assert output.until(r"^serves while 2 of 3 nodes run; a dead node is started again after 3 s$", 5)
    bootstrap = output.until(r"^export KMQ_BOOTSTRAP_SERVERS=(\S+)$", 5)[1]
    consumer_settings = json.loads(shlex.split(output.until(r"^export KMQ_CONSUMER_KAFKA_CONFIG=(.+)$", 5)[1])[0])
    output.until(r"^press Ctrl-C", 5)
    config = KmqConfig(
        bootstrap_servers=bootstrap,
        queue_topic=f"t-cli-nodes-{uuid.uuid4().hex[:8]}",
        consumer_kafka_config=consumer_settings,
    )
    ensure_topics(config, 3)
    sent = [f"m{i}".encode() for i in range(MESSAGES)]
    _produce(config, sent[: MESSAGES // 2])
    with KmqClient(config) as client:
        received: set[bytes] = set()
        _receive(client, received, MESSAGES // 3)
        # When node 1's JVM (the first bootstrap address) is SIGKILLed
        victim_pid = int(nodes[2])
        victim_started = start_time(victim_pid)
        os.kill(victim_pid, signal.SIGKILL)
        # Then the command names the node, its address and the signal, shows its log and serves on
        died = output.until(r"^Kafka node (\d) \((\S+)\) died: (.+); 2 of 3 nodes serve on \(quorum 2\)", EVENT_WAIT_S)
        assert (died[1], died[2], died[3]) == ("1", nodes[1], "killed by SIGKILL")
        assert command.poll() is None
        # And kmq traffic goes through the two others: the rest of the messages sent, everything received
        _produce(config, sent[MESSAGES // 2 :])
        _receive(client, received, MESSAGES)
    assert received == set(sent), f"lost: {sorted(set(sent) - received)[:10]}"
    # And the node comes back on its data and ports, after the delay asked for
    output.until(r"^starting Kafka node 1 \(", EVENT_WAIT_S)
    back = output.until(r"^Kafka node 1 is back at (\S+) \(pid (\d+)\)$", START_WAIT_S)
    assert back[1] == nodes[1] and gone(victim_pid, victim_started)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    wait_for(lambda: len(admin.list_topics(timeout=10).brokers) == 3, EVENT_WAIT_S, 0.5, "3 brokers in metadata")
    # When two nodes of three die, then fewer than a quorum is left: the command says so, stops node 1 and fails
    for pid in (nodes[4], nodes[6]):
        os.kill(int(pid), signal.SIGKILL)
    output.until(r"^error: 1 of 3 Kafka nodes left, fewer than a quorum \(2\): nodes 2, 3 are down", EVENT_WAIT_S)
    assert command.wait(60) == 1, output.text()
    wait_for(lambda: start_time(int(back[2])) is None, 30, 0.1, "node 1's JVM gone")


def _produce(config: KmqConfig, values: list[bytes]) -> None:
    producer = Producer({**config.kafka_settings(), "acks": "all", "enable.idempotence": True})
    for value in values:
        producer.produce(config.queue_topic, value)
    assert producer.flush(EVENT_WAIT_S) == 0


def _receive(client: KmqClient, values: set[bytes], count: int) -> None:
    """Into `values` until it holds `count` distinct messages, each acked. A receive that fails while leaders move
    is tried again, as a worker does: the batch, and with pipelined STARTs the batches handed over after it, are
    then read again (duplicates, which do not count)."""
    deadline = time.monotonic() + EVENT_WAIT_S
    while len(values) < count:
        assert time.monotonic() < deadline, f"received {len(values)} of {count} in {EVENT_WAIT_S}s"
        try:
            batch = client.receive(100, 0.5)
        except (MarkerWriteError, CommitError):
            continue
        for msg in batch:
            client.processed(msg)
            values.add(msg.value or b"")
