"""How the handler threads share the work, without Kafka: quick handlers run in large chunks on few threads (their
checks made once a chunk), a failure among them is settled alone, and a handler that turns slow holds up only its
chunk: the other chunks wake the parked threads."""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from typing import cast

from kmq.client import KmqClient
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.core import WorkerCore, now_ms
from kmq.worker.leases import lease_keys
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.ordering import Ordering
from kmq.worker.threads import MAX_QUICK_CHUNK, HandlerThreads
from tests.helpers import wait_for

CONFIG = KmqConfig(bootstrap_servers="unused:9092", queue_topic="jobs", msg_timeout_ms=30_000)
WAIT_S = 10.0
CONCURRENCY = 4
Send = Callable[[WorkerCore, HandlerThreads, int, int], None]  # sends a batch of messages: from offset, how many


class Settled:
    """What `HandlerThreads` calls on its client here (no Kafka): acknowledgements and nacks, counted per offset."""

    ends_batched = True

    def __init__(self) -> None:
        self.acked: Counter[int] = Counter()
        self.nacked: Counter[int] = Counter()
        self._lock = threading.Lock()

    def processed_many(self, messages: list[Message]) -> None:
        with self._lock:
            self.acked.update(msg.offset for msg in messages)

    def nack(self, msg: Message, delay_ms: int | None = None) -> None:
        with self._lock:
            self.nacked[msg.offset] += 1


class Handler:
    """Records which thread ran each offset; raises on `failing`; blocks on `blocking` until `release` is set."""

    def __init__(self, failing: int = -1, blocking: int = -1) -> None:
        self.failing, self.blocking = failing, blocking
        self.ran: dict[int, str] = {}
        self.blocked = threading.Event()
        self.release = threading.Event()

    def __call__(self, msg: Message) -> None:
        if msg.offset == self.failing:
            raise RuntimeError(f"downstream hiccup on {msg.offset}")
        if msg.offset == self.blocking:
            self.blocked.set()
            self.release.wait(WAIT_S)
        self.ran[msg.offset] = threading.current_thread().name


def started(
    handler: Handler, ordering: Ordering = Ordering.NONE
) -> tuple[WorkerCore, HandlerThreads, Settled, list[BaseException]]:
    settings = WorkerConfig(concurrency=CONCURRENCY, prefetch=10_000, ordering=ordering)
    core = WorkerCore(CONFIG, settings, WorkerMetrics("jobs"))
    client, died = Settled(), cast(list[BaseException], [])
    threads = HandlerThreads(core, cast(KmqClient, client), handler, CONCURRENCY, lambda thread, e: died.append(e))
    return core, threads, client, died


def submit(core: WorkerCore, threads: HandlerThreads, first: int, count: int) -> None:
    """`count` messages from offset `first`, received as one batch."""
    batch = [Message(b"v", None, "jobs", 0, offset, 0, 0, now_ms() + 30_000) for offset in range(first, first + count)]
    keys = lease_keys(batch)
    threads.submit(core.admit(batch, now_ms(), keys), len(batch), keys=keys)


def warmed_up(
    core: WorkerCore, threads: HandlerThreads, client: Settled, send: Send | None = None, size: int = 500
) -> int:
    """Batches of quick handlers (sent by `send`, default `submit`) until the threads measured them quick; returns
    the next free offset."""
    send = send or submit
    offset = 0
    for _ in range(20):
        send(core, threads, offset, size)
        offset += size
        wait_for(lambda end=offset: sum(client.acked.values()) == end, WAIT_S, what="the quick batch acknowledged")
    return offset


def test_quick_handlers_run_in_large_chunks_on_one_thread_at_a_time() -> None:
    handler = Handler()
    core, threads, client, died = started(handler)
    try:
        offset = warmed_up(core, threads, client)
        submit(core, threads, offset, 500)
        wait_for(lambda: sum(client.acked.values()) == offset + 500, WAIT_S, what="the last batch acknowledged")
        awake = threads.awake
    finally:
        threads.stop()
    last = [handler.ran[o] for o in range(offset, offset + 500)]
    # in chunks of MAX_QUICK_CHUNK: each ran by one thread, back to back
    assert all(len(set(last[i : i + MAX_QUICK_CHUNK])) == 1 for i in range(0, 500, MAX_QUICK_CHUNK))
    assert awake < CONCURRENCY  # not every thread woke: the queue held a few threads' worth at most
    assert died == [] and client.nacked == Counter()
    assert core.outstanding == 0


def test_a_failure_in_a_quick_chunk_is_settled_alone_and_its_chunk_mates_run() -> None:
    handler = Handler()
    core, threads, client, died = started(handler)
    try:
        offset = warmed_up(core, threads, client)
        handler.failing = offset + 5
        submit(core, threads, offset, 100)
        wait_for(lambda: sum(client.acked.values()) == offset + 99, WAIT_S, what="the chunk's other 99 acknowledged")
        wait_for(lambda: client.nacked == Counter({offset + 5: 1}), WAIT_S, what="the failure nacked")
    finally:
        threads.stop()
    assert set(handler.ran) == set(range(offset + 100)) - {offset + 5}
    assert all(client.acked[o] == 1 for o in handler.ran)
    assert died == [] and core.outstanding == 0


def test_a_handler_that_turns_slow_holds_up_only_its_chunk_the_parked_threads_run_the_rest() -> None:
    handler = Handler()
    core, threads, client, died = started(handler)
    try:
        offset = warmed_up(core, threads, client)
        handler.blocking = offset  # the first of the next batch blocks
        submit(core, threads, offset, 600)
        assert handler.blocked.wait(WAIT_S)
        rest = set(range(offset + MAX_QUICK_CHUNK, offset + 600))  # the other chunks of the batch
        # The threads' nudge comes from the receiving loop and the lease thread, which this test has not: it nudges
        wait_for(lambda: threads.nudge() or rest <= set(handler.ran), WAIT_S, what="the other chunks run meanwhile")
        assert offset not in handler.ran
        handler.release.set()
        wait_for(lambda: sum(client.acked.values()) == offset + 600, WAIT_S, what="every message acknowledged")
    finally:
        handler.release.set()
        threads.stop()
    assert handler.ran[offset] != handler.ran[offset + 599]  # the rest ran on a woken thread
    assert died == [] and core.outstanding == 0


def submit_keyed(core: WorkerCore, threads: HandlerThreads, first: int, count: int) -> None:
    """`count` messages of partition 0 from offset `first`, each of its own key, received as one batch."""
    batch = [
        Message(b"v", str(offset).encode(), "jobs", 0, offset, 0, 0, now_ms() + 30_000)
        for offset in range(first, first + count)
    ]
    heads, mark, keys, _ = core.admit_ordered(batch, now_ms())
    threads.submit(heads, len(batch), mark, keys)


def test_a_revocation_in_the_middle_of_a_quick_ordered_chunk_runs_none_of_its_later_messages() -> None:
    handler = Handler()
    core, threads, client, died = started(handler, Ordering.KEY)
    gate = core.gate
    assert gate is not None
    try:
        offset = warmed_up(core, threads, client, submit_keyed, 100)
        revoke_at = offset + 10
        original = handler.__call__

        def revoking(msg: Message) -> None:  # the group takes partition 0 away while the chunk runs
            original(msg)
            if msg.offset == revoke_at:
                gate.revoked({0})

        threads._handler = revoking
        submit_keyed(core, threads, offset, 100)
        wait_for(lambda: core.outstanding == 0, WAIT_S, what="the batch settled or dropped")
    finally:
        threads.stop()
    ran = {o for o in handler.ran if o >= offset}
    assert ran == set(range(offset, revoke_at + 1))  # none after the revocation started
    assert sum(client.acked.values()) == revoke_at + 1  # those that ran acknowledged; the rest dropped unsettled
    assert died == [] and client.nacked == Counter()


def test_a_failure_in_a_quick_ordered_chunk_is_retried_in_place_and_its_chunk_mates_run() -> None:
    handler = Handler()
    core, threads, client, died = started(handler, Ordering.KEY)
    try:
        offset = warmed_up(core, threads, client, submit_keyed, 100)
        handler.failing = offset + 5
        submit_keyed(core, threads, offset, 100)
        wait_for(lambda: set(handler.ran) >= set(range(offset + 100)) - {offset + 5}, WAIT_S, what="chunk-mates run")
        handler.failing = -1  # its retry in place (after the backoff) then succeeds
        gate = core.gate
        assert gate is not None
        # (the receiving loop starts the retries that are due; this test has none: it does)
        wait_for(
            lambda: threads.submit(gate.retries_due(now_ms())) or sum(client.acked.values()) == offset + 100,
            WAIT_S,
            what="the retry acknowledged",
        )
    finally:
        threads.stop()
    assert client.nacked == Counter()  # retried in place, never nacked
    assert died == [] and core.outstanding == 0


def test_a_shutdown_in_the_middle_of_a_quick_chunk_runs_none_of_its_later_messages() -> None:
    handler = Handler()
    core, threads, client, died = started(handler)
    try:
        offset = warmed_up(core, threads, client)
        stop_at = offset + 10
        original = handler.__call__

        def stopping(msg: Message) -> None:  # the worker's shutdown begins while the chunk runs
            original(msg)
            if msg.offset == stop_at:
                threads.drain()

        threads._handler = stopping
        submit(core, threads, offset, 100)
        wait_for(lambda: core.outstanding == 0, WAIT_S, what="the chunk acknowledged or given back")
    finally:
        threads.stop()
    assert {o for o in handler.ran if o >= offset} == set(range(offset, stop_at + 1))
    assert client.nacked == Counter({o: 1 for o in range(stop_at + 1, offset + 100)})  # given back, never run
    assert died == []
