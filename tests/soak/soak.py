"""`scripts/soak MINUTES`: kmq under a steady mixed load for MINUTES, one component SIGKILLed every minute.

The load: a sender (a Kafka producer, acks=all) at half the measured maximum; three worker processes
(tests.faults.history_worker), two tracker replicas (`python -m kmq_tracker`), two REST facade replicas
(`python -m kmq_api`) and an HTTP client that receives and acknowledges through both of them. The maximum is measured
first: how fast the clients drain a backlog of `BURST` messages.

Every minute the next of worker-1, tracker-1, api-1 and worker-2 is SIGKILLed and started again (same ports); the
others (worker-3, tracker-2, api-2) and this process live through the whole run, so their memory tells whether
something leaks. Each minute prints every process's RSS, the throughput (confirmed acks per second), the longest
stall (time with messages waiting and no ack confirmed) and the overdue messages (sent and confirmed over 60 s ago,
not yet acknowledged). At the end sending stops and the queue drains; the run fails (exit 1) on any message lost
(confirmed sent, never acknowledged: no ack recorded and no END on the markers topic), any stall over 30 s, or RSS
growth over 20 % of a long-lived process from the end of minute 5 to the end (runs shorter than 6 minutes compare the
end of minute 1 with the end).

The broker: `KMQ_BOOTSTRAP_SERVERS` when set, else an embedded single-node Apache Kafka started for the run.
It lives under tests/ (with the worker it runs) so that the `kmq` wheel ships no test tooling.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from confluent_kafka import KafkaError, Message, Producer

from kmq.config import KmqConfig
from kmq.demo.numbers import decode_number, encode_number
from kmq.demo.processes import Child, Children
from kmq.demo.services import Api, Service, free_port, wait_ready
from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster
from kmq.kafka import producer_settings
from tests.faults.netrig import FacadeKeys, start_facade
from tests.helpers import each_record
from tests.integration.marker_formats import ended_among

REPO = Path(__file__).resolve().parents[2]
PARTITIONS = 4
MSG_TIMEOUT_MS = 5_000
BURST = 20_000
BURST_TIMEOUT_S = 120.0
MAX_STALL_S = 30.0
MAX_RSS_GROWTH = 0.20
OVERDUE_S = 60.0
DRAIN_TIMEOUT_S = 180.0
STILL_S = 20.0  # missing numbers unchanged this long are looked up on the markers topic
READ_TIMEOUT_S = 300.0  # a whole queue or markers topic
READY_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
TICK_S = 0.5
KILL_ROTATION = ("worker-1", "tracker-1", "api-1", "worker-2")
LONG_LIVED = ("worker-3", "tracker-2", "api-2")
WORKERS, TRACKERS, APIS = 3, 2, 2


@dataclass
class Sender:
    """Sends numbers 1, 2, ... at `rate` per second (or a burst) from its own thread; each confirmed number goes into
    `confirmed` (a thread-safe queue the main thread empties)."""

    config: KmqConfig
    confirmed: queue.SimpleQueue[int] = field(default_factory=queue.SimpleQueue)
    failed: int = 0
    next_n: int = 1
    rate: float = 0.0
    _burst: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)  # rate and burst, set by the main thread
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    failure: BaseException | None = None

    def start(self) -> Sender:
        self._thread = threading.Thread(target=self._guarded, name="soak-sender", daemon=True)
        self._thread.start()
        return self

    def burst(self, count: int) -> None:
        with self._lock:
            self._burst += count

    def set_rate(self, rate: float) -> None:
        with self._lock:
            self.rate = rate

    def stop(self) -> None:
        self._stop.set()
        assert self._thread is not None
        self._thread.join(120.0)
        if self._thread.is_alive():
            raise RuntimeError("the sender did not finish its deliveries within 120 s")

    def _on_delivery(self, error: KafkaError | None, message: Message) -> None:
        n = decode_number(message.value())
        if error is None and n is not None:
            self.confirmed.put(n)
        elif error is not None:
            self.failed += 1  # unknown outcome: not counted as sent

    def _guarded(self) -> None:
        try:
            self._run()
        except BaseException as e:  # the main loop checks `failure`: a dead sender stops the run loudly
            self.failure = e
            raise

    def _run(self) -> None:
        producer = Producer(producer_settings(self.config, **{"message.timeout.ms": 60_000}))
        last = time.monotonic()
        owed = 0.0
        while not self._stop.is_set():
            now = time.monotonic()
            with self._lock:
                owed += (now - last) * self.rate + self._burst
                self._burst = 0
            last = now
            while owed >= 1:
                n = self.next_n
                try:
                    producer.produce(
                        self.config.queue_topic, encode_number(n), encode_number(n), on_delivery=self._on_delivery
                    )
                except BufferError:
                    producer.poll(0.1)  # the local queue is full: let deliveries make room, then go on
                    continue
                self.next_n += 1
                owed -= 1
            producer.poll(0.05)
        producer.flush(90.0)


@dataclass
class HttpClient:
    """Receives and acknowledges through the facade replicas in turn; each number acked goes into `acked` (a
    thread-safe queue the main thread empties)."""

    apis: Callable[[], list[Api]]  # the replicas as they are now (a restarted one has a new key)
    queue: str
    acked: queue.SimpleQueue[int] = field(default_factory=queue.SimpleQueue)
    errors: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    failure: BaseException | None = None

    def start(self) -> HttpClient:
        self._thread = threading.Thread(target=self._guarded, name="soak-http", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(60.0)

    def _guarded(self) -> None:
        try:
            with httpx.Client(timeout=10.0) as http:
                turn = 0
                while not self._stop.is_set():
                    turn += 1
                    apis = self.apis()
                    self._round(http, apis[turn % len(apis)])
        except BaseException as e:  # the main loop checks `failure`
            self.failure = e
            raise

    def _round(self, http: httpx.Client, api: Api) -> None:
        headers = {"Authorization": f"Bearer {api.api_key}"}
        base = f"{api.service.url}/v1/queues/{self.queue}"
        try:
            answer = http.post(f"{base}/receive", json={"max_messages": 100, "wait_ms": 200}, headers=headers)
            if answer.status_code != 200:
                self.errors += 1
                return
            taken = [(decode_number((m["value"] or "").encode()), m["receipt"]) for m in answer.json()["messages"]]
            if not taken:
                return
            acked = http.post(f"{base}/ack", json={"receipts": [r for _, r in taken]}, headers=headers)
        except httpx.TransportError:
            self.errors += 1  # a replica killed or restarting: the other one answers the next round
            self._stop.wait(0.2)
            return
        if acked.status_code != 200:
            self.errors += 1
            return
        for (n, _), result in zip(taken, acked.json()["results"], strict=True):
            if result["status"] == "ok" and n is not None:
                self.acked.put(n)


_CONFIRMED, _ACKED = 1, 2


class Ledger:
    """Each number's state, one byte per number (confirmed sent, acknowledged), kept by the main thread alone: the
    sender's and the HTTP client's queues and the workers' history files are read into it. A byte per number keeps
    this process's memory flat enough for its RSS to be checked too (30 minutes at 1 500/s: 2.7 MB)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.state = bytearray()
        self.confirmed = self.acked = 0
        self._offsets: dict[Path, int] = {}

    def _mark(self, n: int, flag: int) -> None:
        if n >= len(self.state):
            self.state.extend(bytes(max(n + 1 - len(self.state), 65_536)))
        before = self.state[n]
        if not before & flag:
            self.state[n] = before | flag
            if flag == _CONFIRMED:
                self.confirmed += 1
            else:
                self.acked += 1

    def update(self, sender: Sender, http: HttpClient) -> None:
        for source, flag in ((sender.confirmed, _CONFIRMED), (http.acked, _ACKED)):
            while True:
                try:
                    self._mark(source.get_nowait(), flag)
                except queue.Empty:
                    break
        self._read_files()

    def missing(self, below: int | None = None) -> int:
        """Numbers confirmed sent and not acknowledged (below `below`)."""
        return self.state.count(_CONFIRMED, 0, len(self.state) if below is None else max(0, below))

    def missing_numbers(self) -> Iterator[int]:
        start = 0
        while (n := self.state.find(_CONFIRMED, start)) >= 0:
            yield n
            start = n + 1

    def _read_files(self) -> None:
        for path in self.folder.glob("*.history"):
            with path.open("rb") as lines:
                lines.seek(self._offsets.get(path, 0))
                data = lines.read()
            whole = data[: data.rfind(b"\n") + 1]  # a line still being written is read next time
            self._offsets[path] = self._offsets.get(path, 0) + len(whole)
            for line in whole.splitlines():
                event = json.loads(line)
                if event["kind"] == "ack":
                    self._mark(event["n"], _ACKED)


@dataclass
class Soak:
    config: KmqConfig
    children: Children
    folder: Path
    roles: dict[str, Child] = field(default_factory=dict)
    apis: dict[str, Api] = field(default_factory=dict)
    ports: dict[str, int] = field(default_factory=dict)
    spawned: int = 0
    keys: FacadeKeys = field(default_factory=FacadeKeys)  # shared by the replicas, kept across restarts

    def env(self) -> dict[str, str]:
        path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
        return {**self.config.to_env(), "PYTHONPATH": path}

    def start(self, role: str) -> None:
        self.spawned += 1
        if role.startswith("worker"):
            name = f"{role}.{self.spawned}"
            history = self.folder / f"{name}.history"
            args = ["-m", "tests.faults.history_worker", "--history", str(history), "--name", name, "--acks-only"]
            self.roles[role] = self.children.spawn(name, args, self.env(), stdin_pipe=True)
        elif role.startswith("tracker"):
            port = self.ports.setdefault(role, free_port())
            env = {**self.env(), "KMQ_TRACKER_HTTP_HOST": "127.0.0.1", "KMQ_TRACKER_HTTP_PORT": str(port)}
            child = self.children.spawn(f"{role}.{self.spawned}", ["-m", "kmq_tracker"], env)
            self.roles[role] = child
            wait_ready(self.children, [Service(child, f"http://127.0.0.1:{port}")], "/readyz", READY_TIMEOUT_S)
        else:
            port = self.ports.setdefault(role, free_port())
            api = start_facade(self.children, self.config, f"{role}.{self.spawned}", port, self.keys)
            self.apis[role] = api  # one writer (this thread); the HTTP client reads the replicas from here
            self.roles[role] = api.service.child
            wait_ready(self.children, [api.service], "/readyz", READY_TIMEOUT_S)

    def kill(self, role: str) -> None:
        child = self.roles.pop(role)
        child.stopping = True
        child.kill()
        if child.process.stdin is not None:
            child.process.stdin.close()

    def rss_mb(self) -> dict[str, float]:
        rss = {role: _rss_mb(child.process.pid) for role, child in sorted(self.roles.items())}
        rss["soak"] = _rss_mb(os.getpid())
        return rss


def _drain(
    config: KmqConfig, ledger: Ledger, check: Callable[[], None], out: Callable[[str], None]
) -> tuple[set[int], set[int]]:
    """Wait until every confirmed send is acknowledged, at most DRAIN_TIMEOUT_S: the numbers still missing then, and
    those of them whose END is on the markers topic (`_ended`). Numbers missing unchanged for STILL_S (a redelivery
    would have come by then) are looked up at once: when each has an END, none will come, and the wait is over. Each
    number is looked up once (a lookup reads both topics whole)."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    check()
    count, still_since = ledger.missing(), time.monotonic()
    looked: set[int] = set()  # the numbers looked up
    ended: set[int] = set()  # those of them with an END
    while count and time.monotonic() < deadline:
        time.sleep(TICK_S)  # a poll interval: the condition is re-checked with a deadline
        check()
        if (now_missing := ledger.missing()) != count:
            count, still_since = now_missing, time.monotonic()
        elif time.monotonic() - still_since >= STILL_S:
            missing = set(ledger.missing_numbers())
            ended |= _looked_up(config, missing - looked, out)
            looked |= missing
            if missing <= ended:
                break
            still_since = time.monotonic()  # some have no END: their redelivery may still come
    missing = set(ledger.missing_numbers())
    ended |= _looked_up(config, missing - looked, out)
    return missing, ended & missing


def _looked_up(config: KmqConfig, numbers: set[int], out: Callable[[str], None]) -> set[int]:
    if not numbers:
        return set()
    out(f"looking for ENDs of {len(numbers)} messages with no recorded ack on the markers topic")
    return _ended(config, numbers)


def _ended(config: KmqConfig, numbers: set[int]) -> set[int]:
    """Of `numbers` (confirmed sent, no ack recorded), those whose queue record has an END on the markers topic: the
    message was processed and its ack went through, whoever could not record it. A SIGKILL during a worker's flush,
    after the broker appended its ENDs and before their acknowledgement came back, leaves such acks; so does an HTTP
    ack that came back `expired` (its END written) when no copy of the message came after it. Read only when some
    are missing: a soak's topics hold millions of records."""
    where: dict[tuple[int, int], int] = {}
    for record in each_record(config, config.queue_topic, PARTITIONS, READ_TIMEOUT_S):
        if (n := decode_number(record.value)) in numbers:
            where[record.partition, record.offset] = n
    markers = each_record(config, config.markers_topic, PARTITIONS, READ_TIMEOUT_S)
    return {where[ended] for ended in ended_among(markers, set(where))}


def _rss_mb(pid: int) -> float:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0.0
    for line in status.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@dataclass
class Outcome:
    sent: int
    lost: int
    longest_stall_s: float
    rss_growth: dict[str, float]
    max_rate: float
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures


@contextmanager
def _cluster(cluster: KafkaCluster | None) -> Iterator[KafkaCluster]:
    if cluster is not None:
        yield cluster
    elif os.environ.get("KMQ_BOOTSTRAP_SERVERS"):
        yield ExternalKafka.from_env()
    else:
        with EmbeddedKafka("kafka") as embedded:
            yield embedded


def run(minutes: int, folder: Path, cluster: KafkaCluster | None = None, out: Callable[[str], None] = print) -> Outcome:
    """The soak of `minutes` minutes; its outcome (also printed through `out`)."""
    with _cluster(cluster) as kafka:
        config = kafka.config(f"soak-{uuid.uuid4().hex[:8]}", msg_timeout_ms=MSG_TIMEOUT_MS)
        kafka.ensure_topics(config, PARTITIONS)
        soak = Soak(config, Children(folder), folder)
        sender = Sender(config)
        http: HttpClient | None = None
        try:
            for role in ("tracker-1", "tracker-2", "api-1", "api-2"):
                soak.start(role)
            for index in range(1, WORKERS + 1):
                soak.start(f"worker-{index}")
            http = HttpClient(lambda: [soak.apis[role] for role in sorted(soak.apis)], config.queue_topic).start()
            sender.start()
            return _soak(minutes, soak, sender, http, out)
        finally:
            if http is not None:
                http.stop()
            soak.children.stop_all(STOP_TIMEOUT_S)


def _soak(minutes: int, soak: Soak, sender: Sender, http: HttpClient, out: Callable[[str], None]) -> Outcome:
    ledger = Ledger(soak.folder)

    def check() -> None:
        soak.children.check()
        for thread in (sender, http):
            if thread.failure is not None:
                raise RuntimeError(f"{type(thread).__name__} died: {thread.failure!r}")
        ledger.update(sender, http)

    # The maximum: how fast the clients drain a backlog of BURST messages.
    started = time.monotonic()
    sender.burst(BURST)
    check()
    while ledger.acked < BURST * 0.99 and time.monotonic() - started < BURST_TIMEOUT_S:
        time.sleep(TICK_S)  # a poll interval: the condition is re-checked with a deadline
        check()
    max_rate = ledger.acked / (time.monotonic() - started)
    rate = max_rate / 2
    out(f"measured maximum {max_rate:.0f} msgs/s ({BURST} messages drained); soaking at {rate:.0f} msgs/s")
    sender.set_rate(rate)
    baseline_minute = 5 if minutes >= 6 else 1
    baseline: dict[str, float] = {}
    failures: list[str] = []
    longest_stall = 0.0
    last_progress, last_count = time.monotonic(), ledger.acked
    for minute in range(1, minutes + 1):
        minute_start, minute_count, minute_stall = time.monotonic(), ledger.acked, 0.0
        while time.monotonic() - minute_start < 60.0:
            time.sleep(TICK_S)  # the minute's length is the point: sampled every half second
            check()
            now = time.monotonic()
            if ledger.acked > last_count or ledger.missing() == 0:  # progress, or nothing waiting
                last_progress, last_count = now, ledger.acked
            minute_stall = max(minute_stall, now - last_progress)
        overdue = ledger.missing(below=sender.next_n - int(rate * OVERDUE_S))
        rss = soak.rss_mb()
        throughput = (ledger.acked - minute_count) / (time.monotonic() - minute_start)
        longest_stall = max(longest_stall, minute_stall)
        out(
            f"minute {minute}: {throughput:.0f} acks/s, sent {ledger.confirmed}, acked {ledger.acked}, "
            f"longest stall {minute_stall:.1f} s, overdue {overdue}, HTTP errors {http.errors}; RSS MB "
            + ", ".join(f"{role} {mb:.0f}" for role, mb in rss.items())
        )
        if minute == baseline_minute:
            baseline = {role: rss[role] for role in (*LONG_LIVED, "soak")}
        if minute < minutes:
            victim = KILL_ROTATION[(minute - 1) % len(KILL_ROTATION)]
            soak.kill(victim)
            soak.start(victim)
            out(f"  SIGKILLed {victim} and started it again")
    final_rss = soak.rss_mb()
    sender.stop()
    missing, unrecorded = _drain(soak.config, ledger, check, out)
    lost = len(missing - unrecorded)
    growth = {role: final_rss[role] / mb - 1 for role, mb in baseline.items() if mb > 0}
    if lost:
        failures.append(f"lost {lost} messages, e.g. {sorted(missing - unrecorded)[:10]}")
    if longest_stall > MAX_STALL_S:
        failures.append(f"a stall of {longest_stall:.1f} s (limit {MAX_STALL_S:.0f} s)")
    for role, grown in sorted(growth.items()):
        if grown > MAX_RSS_GROWTH:
            failures.append(f"{role}'s RSS grew {grown:.0%} from minute {baseline_minute} to the end")
    out(
        f"end: sent {ledger.confirmed} (and {sender.failed} unconfirmed), lost {lost}"
        + (f" (and {len(unrecorded)} acked but unrecorded: their ENDs are on the markers topic)" if unrecorded else "")
        + f", longest stall {longest_stall:.1f} s, RSS growth from minute {baseline_minute}: "
        + ", ".join(f"{role} {grown:+.0%}" for role, grown in sorted(growth.items()))
    )
    out("FAILED: " + "; ".join(failures) if failures else "PASSED")
    return Outcome(ledger.confirmed, lost, longest_stall, growth, max_rate, failures)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="scripts/soak", description=__doc__)
    parser.add_argument("minutes", type=int)
    parser.add_argument("--logs", type=Path, default=None, help="folder for the processes' logs (default: a temp)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    if args.minutes < 1:
        parser.error("MINUTES must be at least 1")
    import tempfile

    folder = args.logs or Path(tempfile.mkdtemp(prefix="kmq-soak-"))
    folder.mkdir(parents=True, exist_ok=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    outcome = run(args.minutes, folder, out=lambda line: print(line, flush=True))
    print(f"logs: {folder}", flush=True)
    sys.exit(0 if outcome.ok else 1)


if __name__ == "__main__":
    main()
