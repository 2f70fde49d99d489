"""An asyncio worker: an `async def` handler run by `kmq.Worker` on an event loop, up to --concurrency at once.

The runtime receives through `kmq.aio.AsyncKmqClient` (librdkafka's blocking calls stay off the loop), acknowledges
what the handler returns from, nacks what raises (it comes back after a backoff; a tracker must run, e.g.
`kmq tracker`), and extends the lease of a message whose handler is still running near its deadline.

The broker comes from --bootstrap-servers or KMQ_BOOTSTRAP_SERVERS, else an embedded one is started; --send N first
sends N messages of its own and stops once all are processed (without it, it runs until Ctrl-C).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import signal
import uuid
from collections.abc import Iterator

from kmq import KmqConfig, KmqProducer, Message, TopicMissingError, Worker, check_topics, ensure_topics


class Jobs:
    """The application's work: here a short async pause standing for an HTTP call or a database write."""

    def __init__(self, expected: int | None) -> None:
        self.expected = expected
        self.done: set[bytes | None] = set()
        self.worker: Worker | None = None

    async def __call__(self, message: Message) -> None:
        await asyncio.sleep(0.01)
        self.done.add(message.value)
        if self.expected is not None and len(self.done) >= self.expected and self.worker is not None:
            self.worker.stop()  # graceful: the messages still in progress finish first


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
    args = parser.parse_args()
    with kafka(args.bootstrap_servers, args.queue or f"asyncio-example-{uuid.uuid4().hex[:8]}") as config:
        create_topics_if_missing(config, partitions=4)
        if args.send:
            with KmqProducer(config) as producer:
                for i in range(args.send):
                    producer.send(f"job-{i}".encode())
        jobs = Jobs(args.send)
        worker = jobs.worker = Worker(jobs, config, concurrency=args.concurrency)
        signal.signal(signal.SIGINT, lambda *_: worker.stop())  # Ctrl-C: finish what is in progress, then stop
        print(f"working on {config.queue_topic} ({args.concurrency} at once); Ctrl-C stops")
        worker.run()
        print(f"processed {len(jobs.done)} distinct messages")


if __name__ == "__main__":
    main()
