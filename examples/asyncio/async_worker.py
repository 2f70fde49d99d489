"""An asyncio worker: `async for` over queue messages, each handled in its own task, no blocking call in the loop.

KmqClient is synchronous (librdkafka): `receive` runs on one dedicated thread (it is meant for one thread) and the
acknowledgements on another, so the event loop only awaits. The handler stands for real async work (an HTTP call, a
database write); a failure nacks the message, which then comes back after a backoff.

The broker comes from --bootstrap-servers or KMQ_BOOTSTRAP_SERVERS, else an embedded one is started; --send N first
sends N messages of its own and stops once all are processed (without it, it runs until Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor

from kmq import KmqClient, KmqConfig, KmqProducer, Message, TopicMissingError, check_topics, ensure_topics


class AsyncQueue:
    """Async access to a KmqClient: messages by `async for`, acknowledgements awaited off the loop."""

    def __init__(self, client: KmqClient) -> None:
        self._client = client
        self._receiver = ThreadPoolExecutor(1, thread_name_prefix="kmq-receive")
        self._acker = ThreadPoolExecutor(1, thread_name_prefix="kmq-ack")
        self._stopping = False

    async def __aiter__(self) -> AsyncIterator[Message]:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            for message in await loop.run_in_executor(self._receiver, self._client.receive, 100, 0.5):
                if self._stopping:
                    return  # the rest of the batch is not acknowledged: the tracker redelivers it
                yield message

    def stop(self) -> None:
        """End the iteration after the current receive."""
        self._stopping = True

    async def processed(self, message: Message) -> None:
        await asyncio.get_running_loop().run_in_executor(self._acker, self._client.processed, message)

    async def nack(self, message: Message) -> None:
        await asyncio.get_running_loop().run_in_executor(self._acker, self._client.nack, message)

    def close(self) -> None:
        self._receiver.shutdown()
        self._acker.shutdown()


async def handle(message: Message) -> None:
    """The application's work: here a short async pause standing for an HTTP call or a database write."""
    await asyncio.sleep(0.01)


async def work(queue: AsyncQueue, message: Message, done: set[bytes | None], expected: int | None) -> None:
    try:
        await handle(message)
    except Exception as e:  # noqa: BLE001  # any failure of the handler: redeliver after a backoff
        print(f"failed {message.value!r}: {e}; nack")
        await queue.nack(message)
        return
    await queue.processed(message)
    done.add(message.value)
    if expected is not None and len(done) >= expected:
        queue.stop()


async def run(config: KmqConfig, expected: int | None, concurrency: int) -> int:
    done: set[bytes | None] = set()
    limit = asyncio.Semaphore(concurrency)  # at most this many messages in progress
    tasks: set[asyncio.Task[None]] = set()
    client = KmqClient(config)
    queue = AsyncQueue(client)
    try:
        async for message in queue:
            await limit.acquire()
            task = asyncio.create_task(work(queue, message, done, expected))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
            task.add_done_callback(lambda _: limit.release())
        await asyncio.gather(*tasks)
    finally:
        queue.close()
        client.close()
    return len(done)


@contextlib.contextmanager
def kafka(bootstrap_servers: str | None, queue: str) -> Iterator[KmqConfig]:
    """A config for `queue` on the given cluster, else on an embedded broker that lives as long as the block."""
    if bootstrap_servers or os.environ.get("KMQ_BOOTSTRAP_SERVERS"):
        servers = {"bootstrap_servers": bootstrap_servers} if bootstrap_servers else {}
        yield KmqConfig.from_env(queue_topic=queue, **servers)
        return
    from kmq.embedded import EmbeddedKafka

    with EmbeddedKafka() as broker:
        yield broker.config(queue)


def create_topics_if_missing(config: KmqConfig, partitions: int) -> None:
    """Whichever script starts first creates the queue's topics; the others find them."""
    try:
        check_topics(config)
    except TopicMissingError:
        ensure_topics(config, partitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", help="a Kafka cluster (default: KMQ_BOOTSTRAP_SERVERS, else embedded)")
    parser.add_argument("--queue", default=None, help="queue topic (default: a fresh one)")
    parser.add_argument("--send", type=int, default=None, help="send this many messages first, stop once processed")
    parser.add_argument("--concurrency", type=int, default=50, help="messages handled at once")
    parser.add_argument(
        "--marker-format", choices=("kmq", "batch"), help="markers (default: KMQ_MARKER_FORMAT, else batch)"
    )
    args = parser.parse_args()
    with kafka(args.bootstrap_servers, args.queue or f"asyncio-example-{uuid.uuid4().hex[:8]}") as config:
        if args.marker_format:
            config = config.with_overrides(marker_format=args.marker_format)
        create_topics_if_missing(config, partitions=4)
        if args.send:
            with KmqProducer(config) as producer:
                for i in range(args.send):
                    producer.send(f"job-{i}".encode())
        print(f"working on {config.queue_topic} ({args.concurrency} at once); Ctrl-C stops")
        with contextlib.suppress(KeyboardInterrupt):
            processed = asyncio.run(run(config, args.send, args.concurrency))
            print(f"processed {processed} distinct messages")


if __name__ == "__main__":
    main()
