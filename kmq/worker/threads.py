"""The thread-pool path of `Worker`: plain-function handlers on `concurrency` threads fed from one queue."""

from __future__ import annotations

import queue
import threading

from kmq.client import KmqClient
from kmq.message import Message
from kmq.worker.core import RETRY_NOW, WorkerCore, now_ms
from kmq.worker.outcome import Handler, run_handler
from kmq.worker.settle import settle

_STOP = None


class HandlerThreads:
    """`concurrency` threads: each takes a message, checks the breaker lets it start, runs the handler, settles."""

    def __init__(self, core: WorkerCore, client: KmqClient, handler: Handler, concurrency: int) -> None:
        self._core, self._client, self._handler = core, client, handler
        self._queue: queue.SimpleQueue[Message | None] = queue.SimpleQueue()
        self.draining = False  # shutdown: messages not started yet are nacked, not run
        self._threads = [
            threading.Thread(target=self._serve, name=f"kmq-worker-{i}", daemon=True) for i in range(concurrency)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, messages: list[Message]) -> None:
        put = self._queue.put
        for msg in messages:
            put(msg)

    def stop(self) -> None:
        """Let idle threads end (busy ones end after their handler; they are daemons either way)."""
        for _ in self._threads:
            self._queue.put(_STOP)

    def _serve(self) -> None:
        get, core = self._queue.get, self._core
        while (msg := get()) is not _STOP:
            if self.draining:
                if core.release(msg):
                    settle(self._client, msg, RETRY_NOW)
                continue
            if not core.may_start(msg):
                continue
            outcome = run_handler(self._handler, msg)
            if core.finish(msg, outcome, now_ms()):
                settle(self._client, msg, outcome)
