"""Terminal 1 of 3: send numbered messages to the queue (SoftwareMill kmq's StandaloneSender).

The broker comes from --bootstrap-servers or KMQ_BOOTSTRAP_SERVERS (with KMQ_KAFKA_CONFIG / KMQ_CONSUMER_KAFKA_CONFIG
for its settings); the queue's topics are created when missing.
"""

from __future__ import annotations

import argparse

from kmq import KmqConfig, KmqProducer, TopicMissingError, check_topics, ensure_topics


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
    parser.add_argument("--count", type=int, default=100, help="messages to send")
    parser.add_argument("--partitions", type=int, default=4, help="partitions when the topics are created")
    args = parser.parse_args()
    servers = {"bootstrap_servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    config = KmqConfig.from_env(queue_topic=args.queue, **servers)
    create_topics_if_missing(config, args.partitions)
    with KmqProducer(config) as producer:  # closing flushes: every message is acknowledged by the broker
        for i in range(args.count):
            producer.send(f"message-{i}".encode(), key=str(i).encode())
    print(f"sent {args.count} messages to {config.queue_topic} on {config.bootstrap_servers}")


if __name__ == "__main__":
    main()
