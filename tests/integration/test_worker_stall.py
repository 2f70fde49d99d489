"""The worker never waits while messages are ready, against the broker: the bench's scenario (a no-op handler on 8
threads over a preloaded queue), with the client's `flush()` called from another thread meanwhile, as the bench and
a user's code do.

A stall shows as a gap in the handled count while messages are still waiting; the assertion prints every thread's
stack at the longest gap, so a failure says what each thread was waiting on."""

from __future__ import annotations

import itertools
import sys
import threading
import time
import traceback
from collections.abc import Callable

from kmq.bench.preload import CONSUMER_TUNING, preload
from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker import Worker, WorkerConfig
from tests.helpers import wait_for

MakeConfig = Callable[..., KmqConfig]
MESSAGES = 30_000
LONGEST_GAP_S = 2.0
FLUSH_WITHIN_S = 2.0
SAMPLE_S = 0.02


def _stacks() -> str:
    names = {t.ident: t.name for t in threading.enumerate()}
    return "\n".join(
        f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(frame, limit=8))}"
        for ident, frame in sys._current_frames().items()
    )


class _Progress:
    """The handled count sampled every 20 ms; the longest gap and the threads' stacks during it."""

    def __init__(self) -> None:
        self.counter = itertools.count(1)
        self.handled = 0
        self.longest_gap_s = 0.0
        self.stacks_at_gap = ""

    def handle(self, msg: Message) -> None:
        _ = msg.value
        self.handled = next(self.counter)

    def watch(self, target: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        seen, changed = self.handled, time.monotonic()
        while self.handled < target and time.monotonic() < deadline:
            time.sleep(SAMPLE_S)  # sampling the handled count against a deadline
            now = time.monotonic()
            if self.handled != seen:
                seen, changed = self.handled, now
            elif now - changed > self.longest_gap_s:
                self.longest_gap_s = now - changed
                if self.longest_gap_s > LONGEST_GAP_S / 2 and not self.stacks_at_gap:
                    self.stacks_at_gap = _stacks()


def test_the_worker_never_waits_while_messages_are_ready(make_config: MakeConfig) -> None:
    config = make_config(partitions=4, consumer_kafka_config=CONSUMER_TUNING)
    preload(config, MESSAGES, 100, 4)
    progress = _Progress()
    worker = Worker(progress.handle, config, settings=WorkerConfig(concurrency=8, prefetch=1000))
    thread = worker.run_in_thread()
    flushes: list[float] = []
    try:
        wait_for(lambda: progress.handled > 0, timeout_s=60, what="the worker's first message")
        client = worker.client
        assert client is not None

        def flush_meanwhile() -> None:  # a user's flush() from another thread, while the worker receives
            while progress.handled < MESSAGES and len(flushes) < 20:
                started = time.monotonic()
                client.flush(timeout_s=30)
                flushes.append(time.monotonic() - started)
                time.sleep(0.1)  # a flush every 100 ms or so (bounded: at most 20)

        flusher = threading.Thread(target=flush_meanwhile, name="test-flusher", daemon=True)
        flusher.start()
        progress.watch(MESSAGES, timeout_s=120)
        flusher.join(60)
        assert progress.handled >= MESSAGES, f"handled {progress.handled} of {MESSAGES} in 120 s"
        assert progress.longest_gap_s < LONGEST_GAP_S, (
            f"the worker handled nothing for {progress.longest_gap_s:.1f} s while messages were ready;"
            f" threads then:\n{progress.stacks_at_gap}"
        )
        for _ in range(10):  # the bench's last flush, the worker idle in receive meanwhile
            started = time.monotonic()
            client.flush(timeout_s=30)
            flushes.append(time.monotonic() - started)
        assert max(flushes) < FLUSH_WITHIN_S, f"flush() took {max(flushes):.1f} s (all: {flushes})"
    finally:
        worker.stop()
        thread.join(60)
    assert not thread.is_alive() and worker.failure is None
