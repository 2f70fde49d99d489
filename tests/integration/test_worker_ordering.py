"""`kmq.Worker` with `ordering="key"` and `"partition"` on a real broker with a tracker: per key (or partition) one
message at a time in offset order, yet many keys side by side; retries in place; a slow key neither redelivered nor
holding up the others; a stuck partition bounded while the others flow."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from kmq import headers as h
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.worker import Reject, Retry, Worker, WorkerConfig
from tests.helpers import read_topic, wait_for
from tests.integration.test_tracker_e2e import metric, running_tracker
from tests.integration.test_worker import running as worker_thread

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]


def send_keyed(config: KmqConfig, keys: list[str], per_key: int, partition: int | None = None) -> None:
    """`per_key` messages `key:seq` for each key, interleaved; the key chooses the partition (unless given)."""
    with KmqProducer(config) as producer:
        producer.send_batch(
            OutgoingMessage(f"{key}:{seq}".encode(), key.encode(), None, partition)
            for seq in range(per_key)
            for key in keys
        )


def parse(msg: Message) -> tuple[str, int]:
    key, seq = (msg.value or b"").decode().rsplit(":", 1)
    return key, int(seq)


@contextmanager
def running(worker: Worker) -> Iterator[Worker]:
    """The worker on a thread of its own, stopped on exit; it must not have failed."""
    with worker_thread(worker):
        yield worker
    assert worker.failure is None, worker.failure


class Journal:
    """What ran: per key the sequence numbers started and finished, overlaps, and the most keys running at once."""

    def __init__(self, lane: Callable[[Message], object] | None = None) -> None:
        self.lock = threading.Lock()
        self.lane = lane or (lambda msg: parse(msg)[0])
        self.started: defaultdict[object, list[int]] = defaultdict(list)
        self.done: defaultdict[object, list[int]] = defaultdict(list)
        self.times: dict[tuple[str, int], float] = {}
        self.running: Counter[object] = Counter()
        self.overlaps: list[object] = []
        self.most_at_once = 0

    def begin(self, msg: Message, order: int) -> None:
        lane = self.lane(msg)
        with self.lock:
            self.started[lane].append(order)
            self.running[lane] += 1
            if self.running[lane] > 1:
                self.overlaps.append(lane)
            self.most_at_once = max(self.most_at_once, sum(1 for n in self.running.values() if n))

    def end(self, msg: Message, order: int, done: bool = True) -> None:
        lane = self.lane(msg)
        with self.lock:
            self.running[lane] -= 1
            if done:
                self.done[lane].append(order)
                self.times[parse(msg)] = time.monotonic()

    def handled(self) -> int:
        with self.lock:
            return sum(len(orders) for orders in self.done.values())


def sleep_ms(key: str, seq: int) -> float:
    return (hash((key, seq)) % 5) / 1000  # 0-4 ms


@pytest.mark.parametrize("kind", ["threads", "asyncio"])
def test_each_key_runs_in_offset_order_one_at_a_time_and_many_keys_at_once(make_config: MakeConfig, kind: str) -> None:
    # given 4 000 messages over 200 keys on 4 partitions, handlers sleeping 0-4 ms
    config = make_config(partitions=4, msg_timeout_ms=10_000)
    keys = [f"k{i}" for i in range(200)]
    send_keyed(config, keys, 20)
    journal = Journal()

    def handle(msg: Message) -> None:
        key, seq = parse(msg)
        journal.begin(msg, seq)
        time.sleep(sleep_ms(key, seq))
        journal.end(msg, seq)

    async def handle_async(msg: Message) -> None:
        key, seq = parse(msg)
        journal.begin(msg, seq)
        await asyncio.sleep(sleep_ms(key, seq))
        journal.end(msg, seq)

    worker = Worker(handle if kind == "threads" else handle_async, config, concurrency=16, ordering="key")
    # when a key-ordered worker with 16 handlers works through them
    with running_tracker(config), running(worker):
        wait_for(lambda: journal.handled() == 4000, 90, interval_s=0.2, what="every message handled")
    # then each key ran its messages in offset order, never two at once, and many keys ran side by side
    assert journal.overlaps == []
    assert {key: journal.done[key] for key in keys if journal.done[key] != list(range(20))} == {}
    assert journal.most_at_once >= 8, journal.most_at_once
    assert worker.metrics.value("kmq_worker_processed_total") == 4000
    print(f"{kind}: at most {journal.most_at_once} keys at once")


def test_a_retried_message_finishes_before_its_keys_next_one_starts(make_config: MakeConfig) -> None:
    # given 30 keys of 4 messages; each key's first message asks for a retry on its first attempt, key p0's second
    # message always fails (dead-lettered after its attempts) and key r0's second is rejected
    config = make_config(partitions=2, msg_timeout_ms=3000, max_redeliveries=2, nack_backoff_base_ms=50)
    keys = [f"k{i}" for i in range(28)] + ["p0", "r0"]
    send_keyed(config, keys, 4)
    journal = Journal()
    attempts: Counter[tuple[str, int]] = Counter()
    seen_counts: defaultdict[tuple[str, int], list[int]] = defaultdict(list)

    def handle(msg: Message) -> None:
        key, seq = parse(msg)
        journal.begin(msg, seq)
        with journal.lock:
            attempts[(key, seq)] += 1
            seen_counts[(key, seq)].append(msg.redelivery_count)
        if seq == 0 and msg.redelivery_count == 0:
            journal.end(msg, seq, done=False)
            raise Retry(delay_ms=200)
        if (key, seq) == ("p0", 1):
            journal.end(msg, seq, done=False)
            raise RuntimeError("always fails")
        if (key, seq) == ("r0", 1):
            journal.end(msg, seq, done=False)
            raise Reject("poison")
        journal.end(msg, seq)

    # (a Retry counts as a downstream failure: the breaker, which would pause the worker, is out of the way here)
    worker = Worker(handle, config, settings=WorkerConfig(concurrency=8, ordering="key", breaker_threshold=1.0))
    with running_tracker(config) as tracker, running(worker):
        # when every message has been handled or dead-lettered
        wait_for(lambda: journal.handled() == 4 * 30 - 2, 60, what="every message handled")
        wait_for(lambda: worker.core.outstanding == 0, 30, what="every message settled")
        redeliveries = metric(tracker, "kmq_redeliveries_total")
    # then each key started its messages in order: the retried first one again before the second ever started
    assert journal.overlaps == []
    for key in keys:
        expected = [0, 0, 1, 2, 3] if key not in ("p0", "r0") else [0, 0, 1, 1, 1, 2, 3]
        if key == "r0":
            expected = [0, 0, 1, 2, 3]
        assert journal.started[key] == expected, (key, journal.started[key])
    # the handler saw the attempt as the redelivery count; the failing one ran 1 + max_redeliveries times
    assert seen_counts[("k0", 0)] == [0, 1]
    assert seen_counts[("p0", 1)] == [0, 1, 2]
    # nothing went through the tracker (retries were in place), and the two bad ones are dead letters with reasons
    assert redeliveries == 0
    dead = read_topic(config, config.dead_letter_topic, 2)
    reasons = {(r.value or b"").decode(): h.get(r.headers, h.DLQ_REASON) for r in dead}
    assert reasons == {"p0:1": b"rejected: 3 attempts failed, the last: failed", "r0:1": b"rejected: poison"}


def test_a_slow_key_is_extended_not_redelivered_and_holds_up_no_other_key(make_config: MakeConfig) -> None:
    # given one key of 20 messages taking 500 ms each (twice the 5 s lease in all) among 40 keys of quick ones
    config = make_config(partitions=2, msg_timeout_ms=5000)
    quick = [f"k{i}" for i in range(40)]
    send_keyed(config, ["slow", *quick], 20)
    journal = Journal()

    def handle(msg: Message) -> None:
        key, seq = parse(msg)
        journal.begin(msg, seq)
        time.sleep(0.5 if key == "slow" else 0.002)
        journal.end(msg, seq)

    settings = WorkerConfig(concurrency=8, ordering="key", partition_limit=200)
    worker = Worker(handle, config, settings=settings)
    with running_tracker(config) as tracker, running(worker):
        # when the worker runs until the slow key is through
        wait_for(lambda: len(journal.done["slow"]) == 20, 60, interval_s=0.2, what="the slow key handled")
        redeliveries = metric(tracker, "kmq_redeliveries_total")
        waited = worker.metrics.value("kmq_worker_key_wait_seconds_sum")
    # then the quick keys were all done long before the slow one, which ran in order, each message once
    assert journal.done["slow"] == list(range(20))
    quick_done = max(journal.times[(key, 19)] for key in quick)
    slow_done = journal.times[("slow", 19)]
    assert all(journal.done[key] == list(range(20)) for key in quick)
    assert slow_done - quick_done > 5.0, slow_done - quick_done
    # and none of its waiting messages was redelivered: their leases were extended while they waited
    assert redeliveries == 0
    assert worker.metrics.value("kmq_worker_lease_extensions_total") > 0
    assert waited > 20 * 9 * 0.5 / 2  # the slow key's messages waited about 95 s in all
    print(f"slow key done {slow_done - quick_done:.1f} s after the quick ones; waits summed {waited:.0f} s")


def test_quick_handlers_run_whole_batches_in_order_and_a_retry_among_them_keeps_its_keys_order(
    make_config: MakeConfig,
) -> None:
    # given 20 000 messages over 500 keys on 4 partitions, and quick handlers: the first attempt of every 7th message
    # of every 5th key asks for a retry, the rest only record what ran
    config = make_config(partitions=4, msg_timeout_ms=10_000)
    keys = [f"k{i}" for i in range(500)]
    send_keyed(config, keys, 40)
    lock = threading.Lock()
    started: defaultdict[str, list[int]] = defaultdict(list)
    busy: set[str] = set()
    overlaps: list[str] = []
    done = Counter[str]()

    def retried(key: str, seq: int) -> bool:
        return int(key[1:]) % 5 == 0 and seq % 7 == 3

    def handle(msg: Message) -> None:
        key, seq = parse(msg)
        with lock:
            if key in busy:
                overlaps.append(key)
            busy.add(key)
            started[key].append(seq)
        sum(range(50))  # (the handler's work, a quick one: a thread switch meanwhile would show an overlap)
        with lock:
            busy.discard(key)
            if retried(key, seq) and msg.redelivery_count == 0:
                raise Retry(delay_ms=20)
            done[key] += 1

    # (a Retry counts as a downstream failure: the breaker, which would pause the worker, is out of the way here)
    worker = Worker(handle, config, settings=WorkerConfig(concurrency=8, ordering="key", breaker_threshold=1.0))
    # when a key-ordered worker works through them
    with running_tracker(config) as tracker, running(worker):
        wait_for(lambda: sum(done.values()) == 20_000, 90, interval_s=0.2, what="every message handled")
        redeliveries = metric(tracker, "kmq_redeliveries_total")
    # then handler threads ran received batches in order themselves, and yet each key started its messages in
    # offset order, never two at once, each retried message again before its key's next one
    assert worker.threads is not None and worker.threads.batches_in_order > 0
    assert overlaps == []
    for key in keys:
        expected = [seq for seq in range(40) for _ in range(2 if retried(key, seq) else 1)]
        assert started[key] == expected, (key, started[key])
    assert redeliveries == 0 and worker.metrics.value("kmq_worker_processed_total") == 20_000
    print(f"batches run in order by the thread that received them: {worker.threads.batches_in_order}")


def test_partition_ordering_runs_each_partition_in_offset_order(make_config: MakeConfig) -> None:
    # given 1 200 messages over 3 partitions
    config = make_config(partitions=3, msg_timeout_ms=10_000)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"{p}:{i}".encode(), None, None, p) for i in range(400) for p in range(3))
    journal = Journal(lane=lambda msg: msg.partition)

    def handle(msg: Message) -> None:
        journal.begin(msg, msg.offset)
        time.sleep(0.001)
        journal.end(msg, msg.offset)

    worker = Worker(handle, config, concurrency=8, ordering="partition")
    with running_tracker(config), running(worker):
        wait_for(lambda: journal.handled() == 1200, 90, interval_s=0.2, what="every message handled")
    # then each partition ran one message at a time, in offset order, while the partitions ran side by side
    assert journal.overlaps == []
    assert {p: journal.done[p] == sorted(journal.done[p]) for p in range(3)} == dict.fromkeys(range(3), True)
    assert journal.most_at_once >= 2


def test_a_stuck_partition_stays_within_its_bound_while_the_others_flow(make_config: MakeConfig) -> None:
    # given 4 partitions of 120 messages, and a handler stuck on partition 0's first message
    config = make_config(partitions=4, msg_timeout_ms=5000)
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(f"{p}:{i}".encode(), None, None, p) for i in range(120) for p in range(4))
    release = threading.Event()
    done: Counter[int] = Counter()
    lock = threading.Lock()

    def handle(msg: Message) -> None:
        if msg.partition == 0:
            release.wait(60)
        with lock:
            done[msg.partition] += 1

    limit = 8  # of a capacity of 20 (4 running, 16 ahead): a stuck partition leaves the others 12
    worker = Worker(handle, config, settings=WorkerConfig(concurrency=4, ordering="partition", partition_limit=limit))
    samples: list[float] = []

    def held_by_stuck() -> float:
        found = worker.metrics.registry.get_sample_value(
            "kmq_worker_partition_held", {"topic": config.queue_topic, "partition": "0"}
        )
        samples.append(found or 0.0)
        with worker.core.lock:
            assert worker.core.gate is not None
            samples.append(worker.core.gate.lanes.held.get(0, 0))
        return found or 0.0

    with running_tracker(config), running(worker):
        # when the other partitions are worked through
        def others_done() -> bool:
            held_by_stuck()
            with lock:
                return all(done[p] == 120 for p in (1, 2, 3))

        wait_for(others_done, 60, interval_s=0.05, what="the other partitions handled")
        # then the stuck partition held no more than its limit meanwhile, and is paused (half a second after it
        # filled up, and the gauge is published once per loop turn: waited for)
        paused = wait_for(
            lambda: held_by_stuck() and worker.metrics.value("kmq_worker_paused_partitions") == 1, 10, what="paused"
        )
        assert paused
        assert max(samples) <= limit, max(samples)
        assert max(samples) == limit
        # and once it is unstuck, it drains too and resumes
        release.set()
        wait_for(lambda: done[0] == 120, 60, what="the stuck partition handled")
        wait_for(lambda: worker.metrics.value("kmq_worker_paused_partitions") == 0, 10, what="resumed")
