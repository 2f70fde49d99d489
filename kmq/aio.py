"""`AsyncKmqClient`: `KmqClient` for asyncio applications (workers, FastAPI): every call is a coroutine that never
blocks the event loop.

librdkafka is synchronous, so the calls run on threads of the client's own: `receive` on one (a consumer is for one
thread), `processed`/`nack`/`extend` in order on another (markers of one message are produced in the order they
were awaited), and `reject`, which waits for the dead letter to be acknowledged, on a third — after every marker
submitted before it. Same semantics as `KmqClient` (PROTOCOL.md, "Client flow").
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TypeVar

from kmq.client import KmqClient, Target
from kmq.config import KmqConfig
from kmq.errors import ClientClosedError
from kmq.message import Message

R = TypeVar("R")


class AsyncKmqClient:
    """Wraps a `KmqClient`; create it with `await AsyncKmqClient.connect(config)` (the topic check and the group
    join happen off the loop) or around a client you made."""

    def __init__(self, client: KmqClient) -> None:
        self.client = client
        self.config = client.config
        self._receiver = ThreadPoolExecutor(1, thread_name_prefix="kmq-aio-receive")
        self._settler = ThreadPoolExecutor(1, thread_name_prefix="kmq-aio-settle")
        self._rejecter = ThreadPoolExecutor(1, thread_name_prefix="kmq-aio-reject")
        self._closed = False

    @classmethod
    async def connect(cls, config: KmqConfig, check: bool = True) -> AsyncKmqClient:
        client = await asyncio.to_thread(KmqClient, config, check)
        return cls(client)

    async def receive(
        self, max_messages: int = 500, timeout_s: float = 1.0, msg_timeout_ms: int | None = None
    ) -> list[Message]:
        """One batch (`KmqClient.receive`): pipelined by default (STARTs queued, offsets committed once they are
        acknowledged; a START failure raises here one receive later), else STARTs durable and offsets committed
        first."""
        return await self._run(self._receiver, self.client.receive, max_messages, timeout_s, msg_timeout_ms)

    async def processed(self, msg: Target) -> None:
        """END marker (not waited for: a lost END only costs a redelivery)."""
        await self._run(self._settler, self.client.processed, msg)

    async def nack(self, msg: Target, delay_ms: int | None = None) -> None:
        """Redeliver after `delay_ms` (None: backoff by the delivery count)."""
        await self._run(self._settler, self.client.nack, msg, delay_ms)

    async def extend(self, msg: Target, timeout_ms: int) -> None:
        """Give the application `timeout_ms` more."""
        await self._run(self._settler, self.client.extend, msg, timeout_ms)

    async def reject(self, msg: Message, reason: str) -> None:
        """Dead letter (waited for), then END: never redelivered."""
        await self._run(self._settler, _nothing)  # every marker submitted before this one is produced first
        await self._run(self._rejecter, self.client.reject, msg, reason)

    def pause(self, partitions: Iterable[int]) -> None:
        """`KmqClient.pause` (a local call of the consumer: no wait)."""
        self.client.pause(partitions)

    def resume(self, partitions: Iterable[int]) -> None:
        self.client.resume(partitions)

    async def flush(self, timeout_s: float = 30.0) -> None:
        await self._run(self._settler, self.client.flush, timeout_s)

    @property
    def failed_markers(self) -> int:
        return self.client.failed_markers

    @property
    def failed_commits(self) -> int:
        return self.client.failed_commits

    async def close(self, timeout_s: float = 30.0) -> None:
        """Flush markers, leave the group, stop the threads. Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await asyncio.to_thread(self.client.close, timeout_s)
        finally:
            for executor in (self._receiver, self._settler, self._rejecter):
                executor.shutdown(wait=False)

    async def __aenter__(self) -> AsyncKmqClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    async def __aiter__(self) -> AsyncIterator[Message]:
        """Messages from successive batches, until `close()`."""
        while not self._closed:
            for msg in await self.receive():
                yield msg

    async def _run(self, executor: ThreadPoolExecutor, func: Callable[..., R], *args: object) -> R:
        if self._closed:
            raise ClientClosedError(f"AsyncKmqClient for {self.config.queue_topic} is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(executor, functools.partial(func, *args))


def _nothing() -> None:
    return None
