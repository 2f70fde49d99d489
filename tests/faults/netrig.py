"""A 3-node Apache Kafka whose every link goes through toxiproxy, and a queue served by every kind of client.

Clients reach node n through the proxy `client-<n>`; node i replicates from node n through `broker-<n>-from-<i>` and
reaches node n's controller through `controller-<n>-from-<i>` (`EmbeddedKafka(relay=...)`). On it one queue whose
partitions node 1 leads and whose markers node 2 leads (explicit replica assignments), served by history-recording
worker processes, a tracker process, and the REST facade with an HTTP client thread; a sender thread sends numbered
messages and records each confirmed send (acks=all). Everything records into `History` files under one folder.
"""

from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from confluent_kafka import KafkaError, Message, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kmq.admin import ensure_topics
from kmq.config import KmqConfig
from kmq.demo.numbers import decode_number, encode_number
from kmq.demo.processes import Child, Children
from kmq.demo.services import Api, Service, free_port, wait_ready
from kmq.embedded import EmbeddedKafka
from kmq.kafka import admin_settings, producer_settings
from tests.faults.history import History, Recorder
from tests.faults.toxiproxy import Toxiproxy

_log = logging.getLogger(__name__)
REPO = Path(__file__).resolve().parents[2]
QUEUE_LEADER, MARKERS_LEADER = 1, 2
PARTITIONS = 4
MSG_TIMEOUT_MS = 10_000
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
HTTP_TIMEOUT_S = 30.0
UNKNOWN_RETRY_S = 120.0
Taken = tuple[int, str, float]  # a hand-out over HTTP: number, receipt, deadline


@dataclass(frozen=True)
class FacadeKeys:
    """What the REST facade's replicas share: the callers' API key and the receipts' secret."""

    api_key: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    receipt_secret: str = field(default_factory=lambda: secrets.token_hex(32))


def start_facade(children: Children, config: KmqConfig, name: str, port: int, keys: FacadeKeys) -> Api:
    """A REST facade replica (`python -m kmq_api`) serving `config`'s queue on `port` (a port the kernel picked:
    not a well-known one another process on the machine may take)."""
    env = {
        **config.to_env(),
        "KMQ_API_QUEUES": config.queue_topic,
        "KMQ_API_KEYS": keys.api_key,
        "KMQ_API_RECEIPT_SECRET": keys.receipt_secret,
        "KMQ_API_HOST": "127.0.0.1",
        "KMQ_API_PORT": str(port),
    }
    child = children.spawn(name, ["-m", "kmq_api"], env)
    return Api(Service(child, f"http://127.0.0.1:{port}"), keys.api_key)


def client_links(ids: list[int]) -> list[str]:
    return [f"client-{n}" for n in ids]


def isolation_links(node: int, ids: list[int]) -> list[str]:
    """Every link between `node` and the other nodes, both ways (replication and controllers)."""
    others = [n for n in ids if n != node]
    return [
        f"{kind}-{a}-from-{b}" for kind in ("broker", "controller") for o in others for a, b in ((node, o), (o, node))
    ]


@dataclass
class Sender:
    """Sends numbers `first`, `first + 1`, ... at `rate` per second until stopped; records each confirmed send."""

    config: KmqConfig
    history: Recorder
    first: int
    rate: float
    sent_upto: int = 0
    failed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    failure: BaseException | None = None

    def start(self) -> Sender:
        self._thread = threading.Thread(target=self._guarded, name="history-sender", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> range:
        """Stop sending, wait for the last delivery reports; the numbers sent (confirmed or not)."""
        self._stop.set()
        assert self._thread is not None
        self._thread.join(120.0)
        assert not self._thread.is_alive(), "the sender did not finish its deliveries within 120 s"
        self.history.close()
        assert self.failure is None, f"the sender died: {self.failure!r}"
        return range(self.first, self.first + self.sent_upto)

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        n = decode_number(message.value())
        if n is None:
            return
        if error is None:
            self.history.record("send", n, partition=message.partition(), offset=message.offset())
        else:
            self.failed += 1  # unknown outcome: not counted as sent (a copy may still be handled once)

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as e:  # `stop` raises it: a dead sender is never silent
            self.failure = e
            raise

    def _run(self) -> None:
        producer = Producer(producer_settings(self.config, **{"message.timeout.ms": 60_000}))
        started = time.monotonic()
        while not self._stop.is_set():
            due = int((time.monotonic() - started) * self.rate)
            while self.sent_upto < due:
                n = self.first + self.sent_upto
                producer.produce(
                    self.config.queue_topic, encode_number(n), encode_number(n), on_delivery=self._on_delivery
                )
                self.sent_upto += 1
            producer.poll(0.05)
        remaining = producer.flush(90.0)
        if remaining:
            _log.warning("%d sends unconfirmed at the end", remaining)


@dataclass
class HttpClient:
    """Receives from the REST facade and acknowledges; an ack is confirmed when the facade answers it `ok` or
    `expired` (both mean the END is written)."""

    api: Api
    queue: str
    history: Recorder
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    failure: BaseException | None = None
    _unknown: list[tuple[Taken, float]] = field(default_factory=list)  # acks of unknown outcome, since when

    def start(self) -> HttpClient:
        self._thread = threading.Thread(target=self._run, name="history-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(HTTP_TIMEOUT_S * 2)
            assert not self._thread.is_alive(), f"the HTTP client did not stop within {HTTP_TIMEOUT_S * 2:.0f} s"
        self.history.close()

    def _run(self) -> None:
        headers = {"Authorization": f"Bearer {self.api.api_key}"}
        base = f"{self.api.service.url}/v1/queues/{self.queue}"
        try:
            with httpx.Client(base_url=base, headers=headers, timeout=HTTP_TIMEOUT_S) as http:
                while not self._stop.is_set():
                    self._round(http)
        except BaseException as e:  # the test checks `failure`: a dead client is never silent
            self.failure = e
            raise

    def _round(self, http: httpx.Client) -> None:
        self._settle_unknown(http)
        try:
            answer = http.post("/receive", json={"max_messages": 50, "wait_ms": 500})
        except httpx.TransportError as e:
            _log.warning("receive: %s", e)
            self._stop.wait(0.5)  # the facade is busy or restarting: try again shortly
            return
        if answer.status_code != 200:
            self._stop.wait(0.5)
            return
        taken: list[Taken] = []
        for m in answer.json()["messages"]:
            n = decode_number((m["value"] or "").encode())
            if n is None:
                continue
            deadline = m["deadline_ms"] / 1000
            self.history.record("handout", n, partition=m["partition"], offset=m["offset"], deadline=deadline)
            self.history.record("run", n)
            taken.append((n, m["receipt"], deadline))
        self._ack(http, taken)

    def _ack(self, http: httpx.Client, taken: list[Taken]) -> None:
        if not taken:
            return
        try:
            acked = http.post("/ack", json={"receipts": [receipt for _, receipt, _ in taken]})
        except httpx.TransportError as e:
            _log.warning("ack: %s", e)
            self._unknown.extend((item, time.monotonic()) for item in taken)
            return
        if acked.status_code != 200:
            # 503 (no delivery report in time) and the like: the END may still be written, so the outcome is
            # unknown. A client that must know asks again with the same receipt (`_settle_unknown`).
            self._unknown.extend((item, time.monotonic()) for item in taken)
            return
        for (n, _, deadline), result in zip(taken, acked.json()["results"], strict=True):
            # expired: the deadline had passed, but the END is written all the same (a copy made before may come).
            if result["status"] in ("ok", "expired"):
                self.history.record("ack", n, deadline=deadline)

    def _settle_unknown(self, http: httpx.Client) -> None:
        """Ack again, one receipt at a time, what an earlier ack left unknown: `ok`/`expired` is a confirmed ack, and
        so is 409 (the delivery was settled already: by the earlier ack, the only other use of this receipt)."""
        waiting, self._unknown = self._unknown, []
        for index, ((n, receipt, deadline), _) in enumerate(waiting):
            try:
                answer = http.post("/ack", json={"receipts": [receipt]})
            except httpx.TransportError:
                answer = None
            if answer is not None and answer.status_code == 409:
                self.history.record("ack", n, deadline=deadline)
            elif answer is not None and answer.status_code == 200:
                if answer.json()["results"][0]["status"] in ("ok", "expired"):
                    self.history.record("ack", n, deadline=deadline)
            else:  # still no answer: the rest waits for a later round (given up after UNKNOWN_RETRY_S)
                self._unknown = [(item, t) for item, t in waiting[index:] if time.monotonic() - t < UNKNOWN_RETRY_S]
                return


@dataclass
class Rig:
    cluster: EmbeddedKafka
    proxy: Toxiproxy
    config: KmqConfig
    children: Children
    folder: Path
    workers: list[Child] = field(default_factory=list)
    trackers: list[Service] = field(default_factory=list)
    http: HttpClient | None = None

    def history(self) -> History:
        return History.load(sorted(self.folder.glob("*.history")))

    def recorder(self, name: str) -> Recorder:
        return Recorder(self.folder / f"{name}.history", name)

    def leaders(self, topic: str, seen_by: int | None = None) -> Counter[int]:
        """How many partitions of `topic` each node leads, from the cluster's metadata; with `seen_by`, from that
        node's metadata alone (an isolated node's would be stale)."""
        settings = admin_settings(self.config)
        if seen_by is not None:
            settings["bootstrap.servers"] = self.cluster.nodes.address(seen_by)
        metadata = AdminClient(settings).list_topics(topic, timeout=30)
        return Counter(p.leader for p in metadata.topics[topic].partitions.values())

    def wait_in_sync(self, topic: str, timeout_s: float) -> None:
        """Until every replica of every partition of `topic` is in its ISR (or fail at the deadline). A follower
        that lagged for `replica.lag.time.max.ms` (5 s here; a loaded 2-core machine does that) has left the ISR,
        and a partition whose ISR is its leader alone cannot move when the leader is cut off: no other replica may
        lead it (no unclean election)."""
        admin = AdminClient(admin_settings(self.config))
        deadline = time.monotonic() + timeout_s
        while True:
            partitions = admin.list_topics(topic, timeout=30).topics[topic].partitions.values()
            out = {p.id: sorted(set(p.replicas) - set(p.isrs)) for p in partitions}
            behind = {partition: replicas for partition, replicas in out.items() if replicas}
            if not behind:
                return
            if time.monotonic() >= deadline:
                raise AssertionError(f"replicas of {topic} still out of sync after {timeout_s:.0f} s: {behind}")
            time.sleep(0.5)  # a poll interval: the condition is re-checked with a deadline

    def check_alive(self) -> None:
        self.children.check()
        if self.http is not None and self.http.failure is not None:
            raise AssertionError(f"the HTTP client died: {self.http.failure!r}")


def _create_placed_topics(config: KmqConfig) -> None:
    """Q and D led by QUEUE_LEADER, M by MARKERS_LEADER (three replicas each), with the settings ensure_topics
    gives them; ensure_topics then finds them and checks them."""
    ids = [QUEUE_LEADER, MARKERS_LEADER] + [n for n in (1, 2, 3) if n not in (QUEUE_LEADER, MARKERS_LEADER)]
    queue_replicas = [ids] * PARTITIONS
    marker_replicas = [[ids[1], ids[0], ids[2]]] * PARTITIONS
    durable = {"min.insync.replicas": "2"}
    markers = {**durable, "cleanup.policy": "delete", "message.timestamp.type": "LogAppendTime"}
    topics = [
        NewTopic(config.queue_topic, PARTITIONS, -1, replica_assignment=queue_replicas, config=durable),
        NewTopic(config.markers_topic, PARTITIONS, -1, replica_assignment=marker_replicas, config=markers),
        NewTopic(config.dead_letter_topic, PARTITIONS, -1, replica_assignment=queue_replicas, config=durable),
    ]
    admin = AdminClient(admin_settings(config))
    for future in admin.create_topics(topics, request_timeout=60).values():
        future.result(60)
    ensure_topics(config, PARTITIONS)


@contextmanager
def running_rig(folder: Path, queue: str, workers: int = 2) -> Iterator[Rig]:
    from tests.faults.toxiproxy import build

    proxy = Toxiproxy(build(), folder / "toxiproxy.log").start()
    try:
        with EmbeddedKafka("kafka", nodes=3, relay=proxy.relay) as cluster:
            config = cluster.config(queue, msg_timeout_ms=MSG_TIMEOUT_MS)
            _create_placed_topics(config)
            rig = Rig(cluster, proxy, config, Children(folder), folder)
            try:
                _start_clients(rig, workers)
                yield rig
            finally:
                if rig.http is not None:
                    rig.http.stop()
                rig.children.stop_all(STOP_TIMEOUT_S)
    finally:
        proxy.stop()


def _start_clients(rig: Rig, workers: int) -> None:
    env = {
        **rig.config.to_env(),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")])),
    }
    port = free_port()
    tracker_env = {**env, "KMQ_TRACKER_HTTP_HOST": "127.0.0.1", "KMQ_TRACKER_HTTP_PORT": str(port)}
    tracker = rig.children.spawn("tracker", ["-m", "kmq_tracker", "--log-level", "info"], tracker_env)
    rig.trackers.append(Service(tracker, f"http://127.0.0.1:{port}"))
    api = start_facade(rig.children, rig.config, "api", free_port(), FacadeKeys())
    wait_ready(rig.children, [*rig.trackers, api.service], "/readyz", READY_TIMEOUT_S)
    for index in range(1, workers + 1):
        name = f"worker-{index}"
        args = ["-m", "tests.faults.history_worker", "--history", str(rig.folder / f"{name}.history"), "--name", name]
        rig.workers.append(rig.children.spawn(name, args, env, stdin_pipe=True))
    rig.http = HttpClient(api, rig.config.queue_topic, rig.recorder("http")).start()


def wait_acked(rig: Rig, numbers: range, timeout_s: float) -> None:
    """Until every confirmed send among `numbers` is acked (or the deadline); children checked meanwhile."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        rig.check_alive()
        if not rig.history().check(numbers, 0.0, 0.0).lost:
            return
        time.sleep(0.5)  # a poll interval: the condition is re-checked with a deadline
