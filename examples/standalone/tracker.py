"""Terminal 3 of 3: the redelivery tracker (SoftwareMill kmq's StandaloneRedeliveryTracker).

It reads the markers topic and sends back to the queue every message whose processing timed out. The same service
runs as `kmq tracker` or in Kubernetes; start it more than once and the replicas share the partitions.
Stops on Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import argparse
import signal
import threading

from kmq import KmqConfig, TopicMissingError, check_topics, ensure_topics
from kmq_tracker import TrackerConfig, TrackerService


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
    parser.add_argument("--http-port", type=int, default=0, help="port of /metrics, /healthz, /readyz (0: any free)")
    args = parser.parse_args()
    servers = {"bootstrap_servers": args.bootstrap_servers} if args.bootstrap_servers else {}
    config = KmqConfig.from_env(queue_topic=args.queue, **servers)
    create_topics_if_missing(config, args.partitions)
    service = TrackerService(TrackerConfig(kmq=config, http_host="127.0.0.1", http_port=args.http_port))

    stopping = threading.Event()
    signal.signal(signal.SIGINT, lambda signum, frame: stopping.set())
    signal.signal(signal.SIGTERM, lambda signum, frame: stopping.set())
    service.run_in_thread()
    print(f"tracking {config.queue_topic}; metrics on http://127.0.0.1:{service.http_port}/metrics; Ctrl-C stops")
    while not stopping.wait(1.0) and service.failure is None:
        continue
    service.stop()  # flushes, commits, leaves the group; raises what stopped the loop, if anything did
    print("tracker stopped")


if __name__ == "__main__":
    main()
