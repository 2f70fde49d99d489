"""`WorkerCore` without Kafka: messages held while the breaker is open, probes when half open, leases dropped by
settling, and the receive budget."""

from __future__ import annotations

from kmq.config import KmqConfig
from kmq.message import Message
from kmq.worker.breaker import BreakerState
from kmq.worker.config import WorkerConfig
from kmq.worker.core import WorkerCore, now_ms
from kmq.worker.metrics import WorkerMetrics
from kmq.worker.outcome import FAILED, OK

CONFIG = KmqConfig(bootstrap_servers="unused:9092", queue_topic="jobs", msg_timeout_ms=30_000)


def core(**settings: int | float) -> WorkerCore:
    return WorkerCore(CONFIG, WorkerConfig(**settings), WorkerMetrics("jobs"))  # type: ignore[arg-type]


def messages(count: int, start: int = 0) -> list[Message]:
    return [Message(b"v", None, "jobs", 0, start + i, 0, 0, now_ms() + 30_000) for i in range(count)]


def test_settled_messages_leave_the_leases_and_free_the_budget() -> None:
    c = core(concurrency=2, prefetch=2)  # capacity 4, receive again once 2 have room
    batch = messages(4)
    c.admit(batch, now_ms())
    assert (c.outstanding, c.budget()) == (4, 0)
    assert all(c.may_start(m) for m in batch[:2])
    assert c.finish_ok(batch[:2]) == batch[:2]
    assert (c.outstanding, c.budget()) == (2, 2)
    assert c.finish_ok(batch[:1]) == []  # settled already: not to be acknowledged twice
    c.publish(now_ms())
    assert c.metrics.value("kmq_worker_processed_total") == 2


def test_an_open_breaker_holds_messages_then_lets_probes_through_and_closes() -> None:
    c = core(concurrency=4, breaker_min_calls=2, breaker_probes=2, breaker_backoff_ms=1000)
    batch = messages(6)
    c.admit(batch, now_ms())
    # given two failures: the breaker opens, receiving stops, and waiting messages are held, not started
    for msg in batch[:2]:
        assert c.may_start(msg)
        assert c.finish(msg, FAILED)
    assert c.breaker.state is BreakerState.OPEN
    assert c.budget() == 0
    assert not c.may_start(batch[2]) and not c.may_start(batch[3])
    assert list(c.held) == batch[2:4] and c.releasable() == []
    # when the backoff has passed: half open, two probes released
    c.due(now_ms() + 1_000)
    assert c.breaker.state is BreakerState.HALF_OPEN
    probes = c.releasable()
    assert probes == batch[2:4] and not c.held
    assert all(c.may_start(m) for m in probes)
    assert not c.may_start(batch[4])  # no third probe
    # then two successes close it
    assert c.finish(probes[0], OK) and c.finish(probes[1], OK)
    assert c.breaker.state is BreakerState.CLOSED
    assert c.releasable() == [batch[4]]
    c.publish(now_ms())
    assert c.metrics.value("kmq_worker_breaker_opened_total") == 1
    assert c.metrics.value("kmq_worker_breaker_closed_total") == 1
    assert c.metrics.value("kmq_worker_breaker_state") == 0


def test_shutdown_gives_back_held_and_abandoned_messages_once() -> None:
    c = core(concurrency=2)
    batch = messages(3)
    c.admit(batch, now_ms())
    c.held.append(batch[0])
    assert c.held_out() == [batch[0]]
    assert sorted(m.offset for m in c.abandon()) == [1, 2]
    assert c.outstanding == 0 and not c.release(batch[1])
