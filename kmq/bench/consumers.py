"""One measured run of a consumer contender (plain, kmq, share): fresh queue, worker process, preload, measure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kmq.bench import protocol
from kmq.bench.children import TrackerChild, Worker
from kmq.bench.display import Display
from kmq.bench.jvm_kmq import jvm_worker
from kmq.bench.options import JVM_KMQ, KMQ_CLIENTS, SHARE, WORKER_KEY, WORKER_KEYS, BenchOptions, split_variant
from kmq.bench.preload import fresh_queue, preload
from kmq.config import KmqConfig
from kmq.embedded import KafkaCluster

TRACKER_READY_TIMEOUT_MS = 60_000
SHARE_PREPARE_TIMEOUT_MS = 30_000


def run_consumer(
    cluster: KafkaCluster, options: BenchOptions, run_name: str, round_: int, display: Display
) -> dict[str, Any]:
    """The worker's figures; for kmq (and the JVM kmq client) also the tracker's memory and redeliveries (it runs for
    the whole window). `run_name` names the contender and its handler's work (`plain@20us`)."""
    display.phase("creating topics")
    contender, work_us = split_variant(run_name)
    config = fresh_queue(cluster, contender, options.partitions)
    args = _worker_args(options, run_name, round_, work_us)
    if contender not in KMQ_CLIENTS:
        return _measure(config, options, contender, args, display)
    display.phase("starting the tracker")
    tracker = TrackerChild(config)
    try:
        tracker.wait_ready(TRACKER_READY_TIMEOUT_MS)
        figures = _measure(config, options, contender, args, display, tracker)
        figures.update(tracker.figures())
    except BaseException:
        tracker.stop(check=False)  # the error at hand says more than the tracker's exit code
        raise
    tracker.stop()
    return figures


def _worker_args(options: BenchOptions, run_name: str, round_: int, work_us: int) -> list[str]:
    contender = split_variant(run_name)[0]
    # A cluster without share groups never returns the share contender's probes: give up sooner than on a stall.
    prepare_ms = SHARE_PREPARE_TIMEOUT_MS if contender == SHARE else options.stall_timeout_ms
    args = [
        f"--messages={options.messages}",
        f"--batch={options.batch}",
        f"--partitions={options.partitions}",
        f"--prepare-timeout-ms={prepare_ms}",
        f"--stall-timeout-ms={options.stall_timeout_ms}",
        f"--work-us={work_us}",
    ]
    if options.profile_dir is not None:
        args.append(f"--profile={Path(options.profile_dir) / f'{run_name}-{round_ + 1}.txt'}")
    return args


def _measure(
    config: KmqConfig,
    options: BenchOptions,
    contender: str,
    args: list[str],
    display: Display,
    tracker: TrackerChild | None = None,
) -> dict[str, Any]:
    """The worker's figures; with a tracker, also its CPU per message from the go to the result
    (`tracker_cpu_us_per_msg`): what the tracker beside the client costs, apart from the client's own."""
    display.phase("joining the group")
    child = jvm_worker(config, options) if contender == JVM_KMQ else Worker(contender, config, args)
    try:
        child.expect(protocol.READY, options.stall_timeout_ms + 10_000)
        display.phase("preloading")
        keys = WORKER_KEYS if contender == WORKER_KEY else 0
        preload(config, options.messages, options.size, options.partitions, keys)
        display.phase("measuring")
        tracker_ns = tracker.cpu_ns() if tracker is not None else 0
        child.go()
        figures = child.result(lambda done: display.progress(done, options.messages), options.stall_timeout_ms + 10_000)
        if tracker is not None:
            figures["tracker_cpu_us_per_msg"] = round((tracker.cpu_ns() - tracker_ns) / 1000 / options.messages, 3)
        return figures
    finally:
        child.stop()
