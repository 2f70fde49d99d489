"""`kmq worker --ordering key` as a real process stopped mid-stream: SIGTERM loses nothing and keeps every key's order;
SIGKILL loses nothing, and the out-of-order handlings it causes are counted and printed (docs/guides/ordering.md)."""

from __future__ import annotations

import signal
import subprocess
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from kmq.config import KmqConfig
from tests.helpers import wait_for
from tests.integration.test_tracker_e2e import running_tracker
from tests.integration.test_worker_ordering import send_keyed
from tests.integration.test_worker_process import worker_process

pytestmark = pytest.mark.integration
MakeConfig = Callable[..., KmqConfig]
KEYS, PER_KEY = 30, 20
HANDLER = textwrap.dedent(
    """
    import os, time

    LOG = os.environ["JOBS_LOG"]

    def handle(msg):
        time.sleep(0.02)
        with open(LOG, "a") as log:
            log.write(msg.value.decode() + "\\n")
    """
)


@contextmanager
def ordered_worker(config: KmqConfig, tmp_path: Path, log: Path, by_flag: bool) -> Iterator[subprocess.Popen[str]]:
    """`kmq worker` with key ordering, chosen by its flag or by `KMQ_WORKER_ORDERING`."""
    env = {**config.to_env(), "JOBS_LOG": str(log)}
    args = ["--concurrency", "8", "--shutdown-grace-ms", "20000"]
    if by_flag:
        args += ["--ordering", "key"]
    else:
        env["KMQ_WORKER_ORDERING"] = "key"
    with worker_process(tmp_path, HANDLER, env, *args) as process:
        yield process


def handled(log: Path) -> list[tuple[str, int]]:
    if not log.exists():
        return []
    entries = []
    for line in log.read_text().splitlines():
        key, _, seq = line.rpartition(":")
        if key and seq.isdigit():  # a line cut by the SIGKILL is no handling
            entries.append((key, int(seq)))
    return entries


def out_of_order(entries: list[tuple[str, int]]) -> int:
    """Handlings of a key's message after a later message of that key had been handled."""
    latest: dict[str, int] = {}
    count = 0
    for key, seq in entries:
        if seq < latest.get(key, -1):
            count += 1
        latest[key] = max(seq, latest.get(key, -1))
    return count


def stop_mid_stream(config: KmqConfig, tmp_path: Path, how: signal.Signals) -> list[tuple[str, int]]:
    """A worker handles a third of the messages and gets `how`; a second one handles the rest."""
    log = tmp_path / "jobs.log"
    send_keyed(config, [f"k{i}" for i in range(KEYS)], PER_KEY)
    everything = {(f"k{i}", seq) for i in range(KEYS) for seq in range(PER_KEY)}
    with running_tracker(config):
        with ordered_worker(config, tmp_path, log, by_flag=how == signal.SIGTERM) as first:
            wait_for(lambda: len(handled(log)) >= len(everything) // 3, 60, what="a third handled")
            first.send_signal(how)
            code = first.wait(40)
        assert code == (0 if how == signal.SIGTERM else -signal.SIGKILL), (tmp_path / "worker.out").read_text()
        with ordered_worker(config, tmp_path, log, by_flag=how == signal.SIGTERM) as second:
            wait_for(lambda: set(handled(log)) == everything, 90, interval_s=0.2, what="every message handled")
            second.send_signal(signal.SIGTERM)
            assert second.wait(40) == 0
    return handled(log)


def test_sigterm_mid_stream_loses_nothing_and_keeps_every_keys_order(make_config: MakeConfig, tmp_path: Path) -> None:
    config = make_config(partitions=2, msg_timeout_ms=3000, consumer_kafka_config={"session.timeout.ms": 6000})
    entries = stop_mid_stream(config, tmp_path, signal.SIGTERM)
    # the first worker finished what it held, in order, before it left: the second went on from there
    assert out_of_order(entries) == 0
    duplicates = sum(times - 1 for times in Counter(entries).values())
    print(f"SIGTERM mid-stream: {len(entries)} handlings, {duplicates} duplicates, 0 out of order")


def test_sigkill_mid_stream_loses_nothing_and_counts_what_came_out_of_order(
    make_config: MakeConfig, tmp_path: Path
) -> None:
    config = make_config(partitions=2, msg_timeout_ms=3000, consumer_kafka_config={"session.timeout.ms": 6000})
    entries = stop_mid_stream(config, tmp_path, signal.SIGKILL)
    # nothing lost (stop_mid_stream waited for every message); the copies of what the killed worker held came back at
    # the partitions' ends, after later messages of their keys: those handlings are out of order
    duplicates = sum(times - 1 for times in Counter(entries).values())
    late = out_of_order(entries)
    print(
        f"\nSIGKILL mid-stream ({KEYS} keys x {PER_KEY}, concurrency 8): {len(entries)} handlings, "
        f"{duplicates} duplicates, {late} out of order"
    )
    assert late <= len(entries) - KEYS * PER_KEY + 40  # at most what it held (capacity 40) plus what it re-handled
