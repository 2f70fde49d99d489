"""Marker producers kept for the life of a Spark Python worker process, one per role and connection.

Spark runs task after task in the same Python worker (`spark.python.worker.reuse`, its default). A new idempotent
producer takes up to ~0.5 s before its first record is acknowledged (its producer id is fetched first, and a
refused first attempt waits out librdkafka's retry backoff): every `kmq-ack` task (a handler's not-ok rows) would pay
it again. A worker runs one task at a time, so a kept producer carries one task's records at a
time and `flush()` returning 0 still means every record of the running task is durable.

A task that fails drops its producer (`discard`): whatever state a failure left behind never meets the next task.
"""

from __future__ import annotations

import json
import logging
import threading
from typing import Literal

from confluent_kafka import Producer

from kmq.config import KmqConfig
from kmq.kafka import marker_producer_settings

Role = Literal["starts", "acks"]  # StartWriter and MarkerWriter never share a producer (kmq/marker_writer.py)
_log = logging.getLogger(__name__)
_lock = threading.Lock()
_producers: dict[tuple[Role, str], Producer] = {}


def marker_producer(config: KmqConfig, role: Role) -> Producer:
    """This worker's producer of markers for `role` on `config`'s cluster, made on first use."""
    key = _key(config, role)
    with _lock:
        producer = _producers.get(key)
        if producer is None:
            producer = _producers[key] = Producer(marker_producer_settings(config))
        return producer


def discard(config: KmqConfig, role: Role) -> None:
    """Forget this worker's producer for `role` (after a failure): the next task makes a fresh one."""
    with _lock:
        producer = _producers.pop(_key(config, role), None)
    if producer is not None:
        left = producer.flush(0)
        if left:
            _log.warning("dropped a %s producer of %s with %d records unacknowledged", role, config.queue_topic, left)


def _key(config: KmqConfig, role: Role) -> tuple[Role, str]:
    settings = {k: v for k, v in marker_producer_settings(config).items() if k != "logger"}
    return role, json.dumps(settings, sort_keys=True, default=str)
