"""Driving both sides in the interop tests: JVM kmq processes (kmq.jvm) and this project's client, side by side."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.embedded._child import ChildProcess
from kmq.jvm import JvmKmq, expect_line, stop
from kmq.producer import KmqProducer, OutgoingMessage
from kmq_tracker import TrackerConfig, TrackerService

START_TIMEOUT_MS = 60_000  # a JVM start compiles Interop.java first: seconds on a busy 2-core machine


@dataclass(frozen=True)
class Delivery:
    """One message as a client saw it: who, where, the kmq-redelivery-count, and whether it acknowledged it."""

    source: str
    partition: int
    offset: int
    redelivery_count: int
    value: int
    processed: bool


@dataclass
class Deliveries:
    """Every delivery any client reported, thread-safe."""

    _lock: threading.Lock = field(default_factory=threading.Lock)
    by_value: dict[int, list[Delivery]] = field(default_factory=lambda: defaultdict(list))

    def add(self, delivery: Delivery) -> None:
        with self._lock:
            self.by_value[delivery.value].append(delivery)

    def delivered(self) -> set[int]:
        with self._lock:
            return set(self.by_value)

    def processed(self) -> set[int]:
        with self._lock:
            return {v for v, ds in self.by_value.items() if any(d.processed for d in ds)}

    def dropped(self) -> list[Delivery]:
        with self._lock:
            return [d for ds in self.by_value.values() for d in ds if not d.processed]

    def sources(self) -> set[str]:
        with self._lock:
            return {d.source for ds in self.by_value.values() for d in ds}

    def all(self) -> list[Delivery]:
        with self._lock:
            return [d for ds in self.by_value.values() for d in ds]


def send_numbers(config: KmqConfig, first: int, count: int) -> None:
    """Values (and keys) str(i), with one application header that a faithful copy keeps."""
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(str(i).encode(), str(i).encode(), [("trace", f"t{i}".encode())])
            for i in range(first, first + count)
        )


def jvm_options(config: KmqConfig, group: str) -> dict[str, Any]:
    return {
        "bootstrap": config.bootstrap_servers,
        "queue": config.queue_topic,
        "markers": config.markers_topic,
        "group": group,
        "timeout-ms": config.msg_timeout_ms,
    }


def jvm_send(jvm: JvmKmq, config: KmqConfig, count: int) -> None:
    """Values (and keys) "0".."count-1" from a JVM producer (kmq's producer settings), all acknowledged."""
    child = jvm.start("send", {"bootstrap": config.bootstrap_servers, "topic": config.queue_topic, "count": count})
    try:
        expect_line(child, f"sent {count}", START_TIMEOUT_MS)
    finally:
        stop(child)


@contextmanager
def jvm_tracker(jvm: JvmKmq, config: KmqConfig) -> Iterator[ChildProcess]:
    """kmq's RedeliveryTracker in its own group, using "now" for deadlines 500 ms after the last marker it saw."""
    options = {**jvm_options(config, f"{config.markers_topic}__jvm_tracker"), "use-now-after-ms": 500}
    child = jvm.start("tracker", options)
    try:
        expect_line(child, "started", START_TIMEOUT_MS)
        yield child
    finally:
        stop(child)


@contextmanager
def jvm_client(jvm: JvmKmq, config: KmqConfig, deliveries: Deliveries, drop_every: int = 0) -> Iterator[ChildProcess]:
    """kmq's KmqClient in the workers' group; its reports go into `deliveries` from a reader thread."""
    child = jvm.start("client", {**jvm_options(config, config.group_id), "drop-every": drop_every})
    try:
        expect_line(child, "ready", START_TIMEOUT_MS)
        reader = threading.Thread(target=_collect, args=(child, deliveries), daemon=True)
        reader.start()
        yield child
    finally:
        stop(child)


def _collect(child: ChildProcess, deliveries: Deliveries) -> None:
    while (line := child.receive(timeout_ms=3_600_000)) is not None:
        if line.startswith(("processed ", "dropped ")):  # else "stopped", its last line
            kind, partition, offset, count, value = line.split(" ", 4)
            deliveries.add(Delivery("jvm", int(partition), int(offset), int(count), int(value), kind == "processed"))


@contextmanager
def python_client(config: KmqConfig, deliveries: Deliveries, drop_every: int = 0) -> Iterator[KmqClient]:
    """This project's KmqClient in a thread: leaves the first delivery it sees of every value v % drop_every == 0."""
    client = KmqClient(config)
    stopping = threading.Event()
    failures: list[BaseException] = []

    def work() -> None:
        seen: set[int] = set()
        try:
            while not stopping.is_set():
                for msg in client.receive(max_messages=100, timeout_s=0.2):
                    value = int(msg.value or b"-1")
                    first_time = value not in seen
                    seen.add(value)
                    drop = drop_every > 0 and first_time and value % drop_every == 0
                    if not drop:
                        client.processed(msg)
                    deliveries.add(Delivery("python", msg.partition, msg.offset, msg.redelivery_count, value, not drop))
        except BaseException as e:  # noqa: BLE001  # re-raised by the test thread below
            failures.append(e)

    thread = threading.Thread(target=work, name="python-kmq-client", daemon=True)
    thread.start()
    try:
        yield client
    finally:
        stopping.set()
        thread.join(30)
        client.close()
    if failures:
        raise failures[0]


@contextmanager
def python_tracker(config: KmqConfig) -> Iterator[TrackerService]:
    settings: dict[str, Any] = {"http_port": 0, "http_host": "127.0.0.1", "commit_interval_ms": 200}
    service = TrackerService(TrackerConfig(kmq=config, **settings)).run_in_thread()
    try:
        assert service.wait_ready(30), "tracker not ready within 30 s"
        yield service
    finally:
        service.stop()


def wait_all_processed(deliveries: Deliveries, expected: set[int], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while (missing := expected - deliveries.processed()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not missing, f"{len(missing)} of {len(expected)} never processed (lost), e.g. {sorted(missing)[:10]}"
