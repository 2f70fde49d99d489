"""Is a librdkafka client still connected to its cluster? No silent stall (docs/guides/operating.md).

A broker in controlled shutdown may answer a Metadata request with no brokers; librdkafka can then drop every broker
it knows, bootstrap servers included, and never bootstrap again: the client waits forever and reports nothing. kmq
watches each long-lived client: a metadata probe through the client's own handle every `probe_interval_ms` while
nothing else shows that a broker answers (records received). Once no broker has answered for
`kafka_unavailable_after_ms` while a bootstrap server still accepts TCP connections (so the cluster is there, the
client is not), the client is declared unavailable: `KmqClient.receive()` raises `KafkaUnavailableError`, and the
tracker's and the REST facade's `/healthz` fail, so a supervisor restarts the process with fresh clients. A cluster
that is down (nothing accepts connections) is left to librdkafka, which reconnects by itself.

`Silence` is the pure state (it takes `now_ms`); `KafkaLiveness` probes a handle, on the thread that polls it.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Protocol

from confluent_kafka import KafkaException

from kmq.config import KmqConfig
from kmq.errors import KafkaUnavailableError

_log = logging.getLogger(__name__)
_PROBES_PER_WINDOW = 6
_PROBE_TIMEOUT_MAX_MS = 5_000
_CONNECT_TIMEOUT_S = 1.0


class _Handle(Protocol):
    """A librdkafka client (Consumer, Producer, AdminClient): its metadata request is the probe."""

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object: ...


class Silence:
    """Since when no broker has answered, and when to probe next; never touches Kafka or the clock.

    The silence that counts starts at the first failed probe after the last answer: a client nobody used for a
    while (a worker whose handlers all ran long jobs) is not unavailable because of one slow probe afterwards."""

    def __init__(self, unavailable_after_ms: int, now_ms: int) -> None:
        self.unavailable_after_ms = unavailable_after_ms
        self.probe_interval_ms = max(1, unavailable_after_ms // _PROBES_PER_WINDOW)
        self._heard_ms = now_ms
        self._probed_ms = now_ms
        self._failing_since_ms: int | None = None

    def heard(self, now_ms: int) -> None:
        """A broker answered (records came, a probe succeeded)."""
        self._heard_ms = max(self._heard_ms, now_ms)
        self._failing_since_ms = None

    def probe_due(self, now_ms: int) -> bool:
        return now_ms - max(self._heard_ms, self._probed_ms) >= self.probe_interval_ms

    def probed(self, now_ms: int, answered: bool) -> None:
        self._probed_ms = now_ms
        if answered:
            self.heard(now_ms)
        elif self._failing_since_ms is None:
            self._failing_since_ms = now_ms

    def silent_ms(self, now_ms: int) -> int:
        """How long since a broker last answered."""
        return max(0, now_ms - self._heard_ms)

    def too_long(self, now_ms: int) -> bool:
        """Probes have failed for `unavailable_after_ms`, with no answer in between."""
        failing_since = self._failing_since_ms
        return failing_since is not None and now_ms - failing_since >= self.unavailable_after_ms


class KafkaLiveness:
    """Watches one client handle of `config`'s cluster, from the thread that polls it: librdkafka can block a
    metadata request made from another thread while one polls the handle, so the probe runs inline, when due.

    `observe(heard)` notes records (a broker answered), probes when due and returns the problem, or None; `check`
    raises it as `KafkaUnavailableError`; `problem` is the last verdict, for a health probe on another thread."""

    def __init__(self, handle: _Handle, config: KmqConfig, topic: str, name: str) -> None:
        self._handle, self._config, self._topic, self._name = handle, config, topic, name
        self._silence = Silence(config.kafka_unavailable_after_ms, _now_ms())
        self._probe_timeout_s = min(self._silence.probe_interval_ms, _PROBE_TIMEOUT_MAX_MS) / 1000
        self._problem: str | None = None  # written by the polling thread only

    @property
    def problem(self) -> str | None:
        """Why the client is unavailable, as of the last `observe`, or None."""
        return self._problem

    def observe(self, heard: bool = False) -> str | None:
        """Note that a broker answered (`heard`: records came), probe when due; the problem, or None."""
        now = _now_ms()
        if heard:
            self._silence.heard(now)
        elif self._silence.probe_due(now):
            answered = self._probe()
            now = _now_ms()
            self._silence.probed(now, answered)
        problem = self._judge(self._silence.silent_ms(now)) if self._silence.too_long(now) else None
        if problem is not None and self._problem is None:
            _log.error("%s", problem)
        self._problem = problem
        return problem

    def check(self, heard: bool = False) -> None:
        """`observe`, and `KafkaUnavailableError` once the client is unavailable."""
        problem = self.observe(heard)
        if problem is not None:
            raise KafkaUnavailableError(self._config.bootstrap_servers, problem)

    def _probe(self) -> bool:
        """A broker answered a metadata request through this handle, and named at least one broker."""
        try:
            metadata = self._handle.list_topics(self._topic, timeout=self._probe_timeout_s)
        except KafkaException as e:
            _log.debug("metadata probe of %s failed: %s", self._name, e)
            return False
        return bool(getattr(metadata, "brokers", None))

    def _judge(self, silent_ms: int) -> str | None:
        if not bootstrap_accepts(self._config.bootstrap_servers):
            return None  # the cluster is away: librdkafka reconnects by itself once it is back
        return (
            f"no Kafka broker has answered {self._name} for {silent_ms} ms while the bootstrap servers accept "
            "connections: librdkafka has lost its brokers (docs/guides/operating.md); restart the process or "
            "create a new client"
        )


def bootstrap_accepts(bootstrap_servers: str, timeout_s: float = _CONNECT_TIMEOUT_S) -> bool:
    """A TCP connection to one of the bootstrap servers succeeds."""
    for server in bootstrap_servers.split(","):
        host, _, port = server.strip().rpartition(":")
        try:
            with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
                return True
        except (OSError, ValueError):
            continue
    return False


def _now_ms() -> int:
    return time.monotonic_ns() // 1_000_000
