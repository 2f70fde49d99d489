"""The jvm-kmq contender: SoftwareMill's JVM `KmqClient` (tests/interop's harness, `Interop.java bench`).

It speaks the worker protocol of `kmq.bench.protocol` itself, so the run is measured exactly as the Python
contenders' are: same fresh preloaded queue, same broker, our tracker running for the window, the window closed when
every END is acknowledged. It reports no per-batch overhead: kmq's `nextBatch()` hides where its poll ends.
"""

from __future__ import annotations

from kmq.bench.children import Worker
from kmq.bench.options import JVM_KMQ, BenchOptions
from kmq.config import KmqConfig
from kmq.errors import BenchError, JvmKmqError
from kmq.jvm import JvmKmq


def jvm_worker(config: KmqConfig, options: BenchOptions) -> Worker:
    """`Interop.java bench` on `config`'s queue and group, as a bench `Worker`."""
    options_ = {
        "bootstrap": config.bootstrap_servers,
        "queue": config.queue_topic,
        "markers": config.markers_topic,
        "group": config.group_id,
        "timeout-ms": config.msg_timeout_ms,
        "messages": options.messages,
        "prepare-timeout-ms": options.stall_timeout_ms,
        "stall-timeout-ms": options.stall_timeout_ms,
    }
    try:
        child = JvmKmq().start("bench", options_, kafka={"max.poll.records": str(options.batch)})
    except JvmKmqError as e:
        raise BenchError(f"the {JVM_KMQ} contender cannot run: {e}") from e
    return Worker(JVM_KMQ, config, [], child=child)
