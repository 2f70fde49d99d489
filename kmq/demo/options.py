"""`DemoOptions`: what one `kmq demo` run does (the command line's flags, validated)."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

from kmq.errors import ConfigError

RESULTS_SUFFIX = "__processed"


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """Sizes, rates and timeouts of a demo run; `bootstrap_servers=None` starts the embedded broker."""

    messages: int = 10_000
    workers: int = 3
    trackers: int = 2
    partitions: int = 8
    drop_rate: float = 0.1
    poison_every: int = 997
    msg_timeout_ms: int = 2_000
    max_redeliveries: int = 3
    deadline_ms: int = 120_000
    bootstrap_servers: str | None = None
    backend: str = "kafka"
    queue: str = ""
    api: bool = True
    api_port: int | None = None
    keep_running: bool = False
    seed: int | None = None

    def __post_init__(self) -> None:
        _at_least("messages", self.messages, 1)
        _at_least("workers", self.workers, 1)
        _at_least("trackers", self.trackers, 1)
        _at_least("partitions", self.partitions, 1)
        _at_least("poison_every", self.poison_every, 0)
        _at_least("msg_timeout_ms", self.msg_timeout_ms, 1)
        _at_least("max_redeliveries", self.max_redeliveries, 0)
        _at_least("deadline_ms", self.deadline_ms, 1)
        if not 0.0 <= self.drop_rate < 1.0:
            raise ConfigError("drop_rate", "must be at least 0 and below 1 (1 would never acknowledge anything)")


def fresh_queue_name() -> str:
    """A queue name of its own for each run, so runs on one cluster never mix."""
    return f"kmq-demo-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid() % 100_000:05d}"


def results_topic(queue_topic: str) -> str:
    """Where workers record each message they processed: the evidence the verification reads."""
    return f"{queue_topic}{RESULTS_SUFFIX}"


def _at_least(name: str, value: int, minimum: int) -> None:
    if value < minimum:
        raise ConfigError(name, f"must be at least {minimum}, got {value}")
