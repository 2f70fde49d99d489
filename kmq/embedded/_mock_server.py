"""The mock backend's own process: librdkafka's mock cluster, driven by lines on stdin, answering on stdout.

`python -m kmq.embedded._mock_server --parent-pid PID [--brokers N]`. The protocol, one line each way:

    (at start)                    ->  READY <bootstrap servers>     or  FAILED <reason>
    CREATE <topic> <partitions>   ->  OK                            or  ERR <reason>

The mock cluster has no CreateTopics, hence this channel. The process stops (cluster destroyed, exit 0) on stdin EOF,
which is also how it notices that its parent died, and on SIGTERM; on Linux the kernel SIGKILLs it with its parent.
"""

from __future__ import annotations

import argparse
import signal
import sys
from types import FrameType
from typing import Protocol

from kmq.embedded._guard import die_with_parent
from kmq.embedded._librdkafka import MockCluster, load_librdkafka
from kmq.errors import KmqError


class TopicCreator(Protocol):
    def create_topic(self, name: str, partitions: int) -> str | None: ...


def handle(cluster: TopicCreator, line: str) -> str:
    """The answer to one command line."""
    match line.split():
        case ["CREATE", topic, partitions] if partitions.isdigit() and int(partitions) > 0:
            error = cluster.create_topic(topic, int(partitions))
            return "OK" if error is None else f"ERR {error}"
        case _:
            return f"ERR unknown command {line.strip()!r} (expected: CREATE <topic> <partitions>)"


def serve(cluster: MockCluster) -> None:
    _answer(f"READY {cluster.bootstrap_servers}")
    for line in sys.stdin:
        _answer(handle(cluster, line))


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    die_with_parent(args.parent_pid)
    signal.signal(signal.SIGTERM, _exit_on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides when we stop
    try:
        cluster = MockCluster(load_librdkafka(), args.brokers)
    except KmqError as e:
        _answer(f"FAILED {e}")
        return 1
    try:
        serve(cluster)
    finally:
        cluster.destroy()
    return 0


def _answer(line: str) -> None:
    sys.stdout.write(line.replace("\n", " ") + "\n")
    sys.stdout.flush()


def _exit_on_signal(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(0)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m kmq.embedded._mock_server", description=__doc__)
    parser.add_argument("--parent-pid", type=int, required=True, help="exit at once if this is not our parent")
    parser.add_argument("--brokers", type=int, default=1, help="brokers in the mock cluster")
    return parser


if __name__ == "__main__":
    sys.exit(main())
