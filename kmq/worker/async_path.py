"""The asyncio path of `Worker`: `async def` handlers as `concurrency` tasks on one event loop, through
`AsyncKmqClient` (no blocking call on the loop)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kmq.aio import AsyncKmqClient
from kmq.config import KmqConfig
from kmq.errors import CommitError, MarkerWriteError
from kmq.message import Message
from kmq.worker.config import WorkerConfig
from kmq.worker.core import RETRY_NOW, WorkerCore, now_ms
from kmq.worker.leases import lease_key
from kmq.worker.outcome import FAILED, AsyncHandler, Outcome, run_async_handler
from kmq.worker.settle import settle_async

_log = logging.getLogger(__name__)
TICK_S = 0.05
RECEIVE_RETRY_S = 0.5


class AsyncWorker(Protocol):
    """What the asyncio path reads from its `Worker` (kmq.worker.runtime, which imports this module)."""

    @property
    def handler(self) -> Any: ...
    @property
    def config(self) -> KmqConfig: ...
    @property
    def settings(self) -> WorkerConfig: ...
    @property
    def core(self) -> WorkerCore: ...
    @property
    def ready(self) -> threading.Event: ...
    @property
    def stopping(self) -> bool: ...
    def fail(self, thread: str, error: BaseException) -> None: ...


class AsyncPath:
    """One run of a worker whose handler is a coroutine function."""

    def __init__(self, worker: AsyncWorker) -> None:
        self.worker = worker
        self.core = worker.core
        self.handler: AsyncHandler = worker.handler
        self._work: asyncio.Queue[Message] = asyncio.Queue()
        self._woken = asyncio.Event()
        self._draining = False
        self._running = 0

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        # Stop and handler outcomes may come from other threads (a signal handler, `Worker.stop`).
        self.core.notify = lambda: _call_soon(loop, self._woken.set)
        client = await AsyncKmqClient.connect(self.worker.config)
        if self.core.gate is not None:
            client.client.add_revoke_listener(self.core.gate.revoked)  # on the receiving thread, under the core's lock
        tasks = [
            asyncio.create_task(self._serve(client), name=f"kmq-worker-{i}")
            for i in range(self.worker.settings.concurrency)
        ]
        # Leases are tended by a task of their own: awaiting a slow receive never delays an extension.
        tender = asyncio.create_task(self._tend_forever(client), name="kmq-leases")
        tasks.append(tender)
        for task in tasks:
            task.add_done_callback(self._died)
        self.worker.ready.set()
        try:
            while not self.worker.stopping:
                await self._turn(client)
        finally:
            await self._shutdown(client, tasks)

    async def _turn(self, client: AsyncKmqClient) -> None:
        core = self.core
        self._woken.clear()
        if core.gate is not None:
            self._flow(client)
        self._put(core.releasable())
        budget = core.budget()
        if not budget:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), TICK_S)
            return
        try:
            batch = await client.receive(budget, self.worker.settings.poll_timeout_ms / 1000)
        except (MarkerWriteError, CommitError) as e:
            _log.warning("receive failed, the batch will be read again: %s", e)
            await asyncio.sleep(RECEIVE_RETRY_S)
            return
        if batch:
            self._put(core.admit(batch, now_ms()))

    def _put(self, messages: list[Message]) -> None:
        for msg in messages:
            self._work.put_nowait(msg)

    def _flow(self, client: AsyncKmqClient) -> None:
        """Ordered: start the retries that are due; pause full partitions, resume those with room again."""
        assert self.core.gate is not None
        self._put(self.core.gate.retries_due(now_ms()))
        pause, resume = self.core.gate.flow(now_ms())
        if pause:
            client.pause(pause)
        if resume:
            client.resume(resume)

    async def _tend_forever(self, client: AsyncKmqClient) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            await self._tend(client)

    async def _tend(self, client: AsyncKmqClient) -> None:
        now = now_ms()
        with self.core.lock:
            due = self.core.due(now)
        for msg, timeout_ms in due.extend:
            # Checked and submitted with no await in between: a message settled meanwhile is not extended.
            if lease_key(msg) in self.core.leases:
                await client.extend(msg, timeout_ms)
        for msg in due.expired:
            await settle_async(client, msg, FAILED)
        self.core.publish(now)

    async def _serve(self, client: AsyncKmqClient) -> None:
        core = self.core
        while True:
            msg = await self._work.get()
            if self._draining:
                if core.release(msg):
                    await settle_async(client, msg, RETRY_NOW)
                continue
            if not core.may_start(msg):
                if core.gate is not None:
                    self._put(core.gate.skipped(msg, now_ms()))
                continue
            self._running += 1
            try:
                outcome = await run_async_handler(self.handler, msg)
            finally:
                self._running -= 1
            if core.gate is not None:
                await self._finish_ordered(client, msg, outcome)
            elif core.finish(msg, outcome):
                await settle_async(client, msg, outcome)

    async def _finish_ordered(self, client: AsyncKmqClient, msg: Message, outcome: Outcome) -> None:
        """Key or partition ordering: settle (or retry in place), then hand on the next message of its lane."""
        assert self.core.gate is not None
        settled, following = self.core.gate.finish(msg, outcome, now_ms())
        if settled is not None:
            await settle_async(client, msg, settled)
        self._put(following)

    async def _shutdown(self, client: AsyncKmqClient, tasks: list[asyncio.Task[None]]) -> None:
        deadline = time.monotonic() + self.worker.settings.shutdown_grace_ms / 1000
        gate = self.core.gate
        # Ordered: the messages held run on, in order, within the grace period (given back, they would come back
        # behind later messages of their keys); what is left at its end is given back.
        while gate is not None and gate.holding() and time.monotonic() < deadline and self._breaker_closed():
            self._put(gate.retries_due(now_ms()))
            await asyncio.sleep(TICK_S)  # polling the lanes against the grace deadline (leases still tended)
        self._draining = True
        for msg in self.core.held_out():
            await settle_async(client, msg, RETRY_NOW)
        for msg in gate.give_back() if gate is not None else []:
            await settle_async(client, msg, RETRY_NOW)
        while not self._work.empty():
            msg = self._work.get_nowait()
            if self.core.release(msg):
                await settle_async(client, msg, RETRY_NOW)
        while self._running > 0 and time.monotonic() < deadline:
            await asyncio.sleep(TICK_S)  # polling the handlers' count (the tending task keeps extending leases)
        abandoned = self.core.abandon()
        if abandoned:
            _log.warning("%d messages still in progress after the grace period: nacked", len(abandoned))
        for msg in abandoned:
            await settle_async(client, msg, RETRY_NOW)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        self.core.publish(now_ms())
        await client.close()
        _log.info("worker on %s stopped", self.worker.config.queue_topic)

    def _breaker_closed(self) -> bool:
        return self.core.breaker.permits() is None

    def _died(self, task: asyncio.Task[None]) -> None:
        """A serving or tending task ended other than by the shutdown's cancel: the whole worker stops."""
        if not task.cancelled() and (error := task.exception()) is not None:
            self.worker.fail(task.get_name(), error)


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    loop.call_soon_threadsafe(callback)
