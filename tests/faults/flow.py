"""A running kmq flow for the fault tests: tracker replicas and demo workers as child processes, a sender, and the
demo's tally of the topics (lost = numbers neither processed nor dead-lettered)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kmq.config import KmqConfig
from kmq.demo.observer import TopicObserver
from kmq.demo.options import results_topic
from kmq.demo.processes import Child, Children
from kmq.demo.sending import Sender
from kmq.demo.services import LOCALHOST, Service, free_port, wait_ready
from kmq.demo.tally import Verdict
from kmq.embedded import KafkaCluster

STOP_TIMEOUT_S = 20.0
READY_TIMEOUT_S = 60.0


@dataclass(eq=False)
class Flow:
    """Workers and trackers of one queue, respawned under fresh names when killed."""

    config: KmqConfig
    children: Children
    results: str
    drop_rate: float
    workers: list[Child] = field(default_factory=list)
    trackers: list[Service] = field(default_factory=list)
    spawned: int = 0
    closers: list[Callable[[], None]] = field(default_factory=list)

    def start_tracker(self) -> Service:
        self.spawned += 1
        port = free_port()
        env = {**self.config.to_env(), "KMQ_TRACKER_HTTP_HOST": LOCALHOST, "KMQ_TRACKER_HTTP_PORT": str(port)}
        child = self.children.spawn(f"tracker-{self.spawned}", ["-m", "kmq_tracker", "--log-level", "info"], env)
        service = Service(child, f"http://{LOCALHOST}:{port}")
        self.trackers.append(service)
        return service

    def start_worker(self) -> Child:
        self.spawned += 1
        args = ["-m", "kmq.demo.worker", "--results-topic", self.results, "--drop-rate", str(self.drop_rate)]
        args += ["--poison-every", "0", "--seed", str(self.spawned)]
        child = self.children.spawn(f"worker-{self.spawned}", args, self.config.to_env(), stdin_pipe=True)
        self.workers.append(child)
        return child

    def kill_one(self, chance: random.Random) -> str:
        """SIGKILL a random worker or tracker replica and start a new one in its place; what was killed."""
        if chance.random() < 0.5:
            tracker = chance.choice(self.trackers)
            tracker.child.stopping = True
            tracker.child.kill()
            self.trackers.remove(tracker)
            self.start_tracker()
            return tracker.child.name
        worker = chance.choice(self.workers)
        worker.stopping = True
        worker.kill()
        if worker.process.stdin is not None:
            worker.process.stdin.close()
        self.workers.remove(worker)
        self.start_worker()
        return worker.name


@contextmanager
def running_flow(
    cluster: KafkaCluster,
    config: KmqConfig,
    log_dir: Path,
    trackers: int = 2,
    workers: int = 3,
    drop_rate: float = 0.05,
) -> Iterator[Flow]:
    results = results_topic(config.queue_topic)
    cluster.create_topics({results: 4})
    flow = Flow(config, Children(log_dir), results, drop_rate)
    try:
        for _ in range(trackers):
            flow.start_tracker()
        wait_ready(flow.children, flow.trackers, "/readyz", READY_TIMEOUT_S)
        for _ in range(workers):
            flow.start_worker()
        yield flow
    finally:
        for close in flow.closers:
            close()
        flow.children.stop_all(STOP_TIMEOUT_S)


def wait_accounted(
    flow: Flow, *senders: Sender, timeout_s: float, on_poll: Callable[[], object] = lambda: None
) -> Verdict:
    """Until every number sent is processed or dead-lettered, or the deadline; then the verdict, read again from the
    topics. The senders together send the numbers 1..N; `on_poll` runs between polls (e.g. a fault injector)."""
    count = sum(sender.count for sender in senders)
    numbers = sorted(n for s in senders for n in range(s.first, s.first + s.count))
    assert numbers == list(range(1, count + 1)), "the senders must send the numbers 1..N between them, each once"
    observer = TopicObserver(flow.config, flow.results)
    deadline = time.monotonic() + timeout_s
    try:
        while not observer.tally.all_accounted(count) and time.monotonic() < deadline:
            observer.poll(0.2)
            on_poll()
            flow.children.check()
            for sender in senders:
                assert sender.failure is None, f"sending failed: {sender.failure}"
    finally:
        observer.close()
    verifier = TopicObserver(flow.config, flow.results)
    try:
        return verifier.read_to_end(60.0).verdict(count)
    finally:
        verifier.close()


def accounted(flow: Flow) -> Callable[[], int]:
    """A probe of how many numbers are processed or dead-lettered so far (reads on from where it was)."""
    observer = TopicObserver(flow.config, flow.results)
    flow.closers.append(observer.close)

    def probe() -> int:
        observer.poll(0.1)
        return observer.tally.accounted

    return probe
