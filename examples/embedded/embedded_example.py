"""The whole kmq flow in one script (SoftwareMill kmq's EmbeddedExample).

Starts an embedded broker (unless --bootstrap-servers or KMQ_BOOTSTRAP_SERVERS names one), creates the topics, runs a
redelivery tracker in this process, sends numbered messages, and processes them while "forgetting" to acknowledge
every --drop-every-th delivery: those come back after --msg-timeout-ms, until every message was processed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
import uuid
from collections.abc import Iterator

from kmq import KmqClient, KmqConfig, KmqProducer, ensure_topics
from kmq_tracker import TrackerConfig, TrackerService


@contextlib.contextmanager
def kafka(bootstrap_servers: str | None, queue: str, msg_timeout_ms: int) -> Iterator[KmqConfig]:
    """A config for `queue` on the given cluster, else on an embedded broker that lives as long as the block."""
    if bootstrap_servers or os.environ.get("KMQ_BOOTSTRAP_SERVERS"):
        servers = {"bootstrap_servers": bootstrap_servers} if bootstrap_servers else {}
        yield KmqConfig.from_env(queue_topic=queue, msg_timeout_ms=msg_timeout_ms, **servers)
        return
    from kmq.embedded import EmbeddedKafka

    with EmbeddedKafka() as broker:
        print(f"embedded broker at {broker.bootstrap_servers}")
        yield broker.config(queue, msg_timeout_ms=msg_timeout_ms)


def process(client: KmqClient, count: int, drop_every: int, timeout_s: float) -> dict[bytes, int]:
    """Receive until every one of `count` messages was processed; deliveries seen per message."""
    deliveries: dict[bytes, int] = {}
    processed: set[bytes] = set()
    deadline = time.monotonic() + timeout_s
    while len(processed) < count:
        if time.monotonic() > deadline:
            raise SystemExit(f"only {len(processed)} of {count} messages processed within {timeout_s:.0f}s")
        for msg in client.receive(max_messages=100, timeout_s=0.2):
            value = msg.value or b""
            deliveries[value] = deliveries.get(value, 0) + 1
            if deliveries[value] == 1 and int(value.split(b"-")[-1]) % drop_every == 0:
                print(f"dropping {value.decode()} (no acknowledgement: it comes back)")
                continue
            if msg.redelivery_count:
                print(f"{value.decode()} is back (redelivery {msg.redelivery_count}): processing it now")
            client.processed(msg)
            processed.add(value)
    return deliveries


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", help="a Kafka cluster (default: KMQ_BOOTSTRAP_SERVERS, else embedded)")
    parser.add_argument("--messages", type=int, default=100)
    parser.add_argument("--drop-every", type=int, default=10, help="leave every Nth message unacknowledged once")
    parser.add_argument("--msg-timeout-ms", type=int, default=2000, help="time before a redelivery")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up after this many seconds")
    parser.add_argument(
        "--marker-format", choices=("kmq", "batch"), help="markers (default: KMQ_MARKER_FORMAT, else batch)"
    )
    args = parser.parse_args()
    queue = f"embedded-example-{uuid.uuid4().hex[:8]}"
    with kafka(args.bootstrap_servers, queue, args.msg_timeout_ms) as config:
        if args.marker_format:
            config = config.with_overrides(marker_format=args.marker_format)
        ensure_topics(config, partitions=1)
        tracker = TrackerService(TrackerConfig(kmq=config, http_enabled=False)).run_in_thread()
        try:
            with KmqProducer(config) as producer:
                for i in range(args.messages):
                    producer.send(f"message-{i}".encode())
            with KmqClient(config) as client:
                deliveries = process(client, args.messages, args.drop_every, args.timeout)
        finally:
            tracker.stop()
    again = sum(1 for n in deliveries.values() if n > 1)
    print(f"done: all {args.messages} messages processed; {again} of them were delivered again after a drop")


if __name__ == "__main__":
    main()
