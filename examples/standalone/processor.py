"""Terminal 2 of 3: process messages, leaving 1 in 10 unacknowledged (SoftwareMill kmq's StandaloneProcessor).

An unacknowledged message is redelivered by the tracker (terminal 3) after the message timeout. Runs until Ctrl-C,
or until --count distinct messages were processed.
"""

from __future__ import annotations

import argparse
import random

from kmq import KmqClient, KmqConfig, TopicMissingError, check_topics, ensure_topics


def create_topics_if_missing(config: KmqConfig, partitions: int) -> None:
    """Whichever script starts first creates the queue's topics; the others find them."""
    try:
        check_topics(config)
    except TopicMissingError:
        ensure_topics(config, partitions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--bootstrap-servers", help="Kafka bootstrap servers (default: KMQ_BOOTSTRAP_SERVERS)")
    parser.add_argument("--queue", default="standalone-queue", help="queue topic")
    parser.add_argument("--partitions", type=int, default=4, help="partitions when the topics are created")
    parser.add_argument("--drop-rate", type=float, default=0.1, help="fraction of deliveries left unacknowledged")
    parser.add_argument("--msg-timeout-ms", type=int, default=5000, help="time before a redelivery")
    parser.add_argument("--count", type=int, default=None, help="stop after this many distinct messages")
    parser.add_argument("--seed", type=int, default=None, help="random seed of the drops")
    parser.add_argument(
        "--marker-format", choices=("kmq", "batch"), help="markers (default: KMQ_MARKER_FORMAT, else batch)"
    )
    args = parser.parse_args()
    servers = {"bootstrap_servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    if args.marker_format:
        servers["marker_format"] = args.marker_format
    config = KmqConfig.from_env(queue_topic=args.queue, msg_timeout_ms=args.msg_timeout_ms, **servers)
    create_topics_if_missing(config, args.partitions)
    chance = random.Random(args.seed)
    done: set[bytes | None] = set()
    client = KmqClient(config)
    try:
        while args.count is None or len(done) < args.count:
            for msg in client.receive(max_messages=100, timeout_s=0.5):
                again = f" (redelivery {msg.redelivery_count})" if msg.redelivery_count else ""
                if chance.random() < args.drop_rate:
                    print(f"dropped   {msg.value!r}{again}: the tracker will redeliver it")
                    continue
                client.processed(msg)
                done.add(msg.value)
                print(f"processed {msg.value!r}{again}")
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
    print(f"processed {len(done)} distinct messages")


if __name__ == "__main__":
    main()
