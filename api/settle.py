"""Settling deliveries by receipt: ack writes END, nack and extend write START (PROTOCOL.md, "Marker records").

Each receipt is judged on its own. A refused receipt (invalid, other queue) is never acted on. An expired one
(its delivery's deadline has passed, so the tracker may have redelivered it) still gets its END on ack — that only
stops this delivery from coming back — but no START on nack or extend: a START written after the tracker's END
would make the key pending again and cause a second redelivery.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from confluent_kafka import KafkaError

from api.delivery import Outcome, Record, is_outage
from api.metrics import ApiMetrics
from api.models import ReceiptResult
from api.receipts import Receipt, ReceiptSigner, Refusal
from api.served import ServedQueue
from kmq.errors import BrokerUnavailableError
from kmq.markers import EndMarker, StartMarker

Action = Literal["ack", "nack", "extend"]
_END = EndMarker().encode()


@dataclass(frozen=True, slots=True)
class Settlement:
    """What to do with a batch of receipts: ack; nack after `delay_ms` (None: backoff); extend by `timeout_ms`."""

    action: Action
    delay_ms: int | None = None
    timeout_ms: int = 0


@dataclass(frozen=True, slots=True)
class _Write:
    index: int
    receipt: Receipt
    expired: bool


async def settle(
    queue: ServedQueue, signer: ReceiptSigner, metrics: ApiMetrics, tokens: list[str], settlement: Settlement
) -> list[ReceiptResult]:
    """One result per token, in order; raises BrokerUnavailableError when the cluster is unreachable."""
    now_ms = int(time.time() * 1000)
    results, writes = _judge(tokens, queue.name, signer, settlement.action, now_ms)
    outcomes = await queue.producer.produce([_record(queue, w.receipt, settlement) for w in writes])
    _raise_on_outage(queue, outcomes)
    for write, outcome in zip(writes, outcomes, strict=True):
        results[write.index] = _result(write, outcome, settlement, signer, now_ms)
    _count(metrics, queue.name, settlement.action, results)
    return [result for result in results if result is not None]


def _judge(
    tokens: list[str], queue: str, signer: ReceiptSigner, action: Action, now_ms: int
) -> tuple[list[ReceiptResult | None], list[_Write]]:
    """The results known without Kafka (refused, or expired for nack/extend), and the markers to write."""
    results: list[ReceiptResult | None] = [None] * len(tokens)
    writes: list[_Write] = []
    for index, token in enumerate(tokens):
        verdict = signer.verify(token, queue)
        if isinstance(verdict, Refusal):
            results[index] = ReceiptResult(status=verdict.reason, detail=verdict.detail)
        elif verdict.expired(now_ms) and action != "ack":
            results[index] = _expired(verdict)
        else:
            writes.append(_Write(index, verdict, verdict.expired(now_ms)))
    return results, writes


def _record(queue: ServedQueue, receipt: Receipt, settlement: Settlement) -> Record:
    key = receipt.marker_key
    marker = _marker(queue, receipt, settlement)
    return Record(queue.config.markers_topic, marker, key.encode(), partition=key.partition)


def _marker(queue: ServedQueue, receipt: Receipt, settlement: Settlement) -> bytes:
    if settlement.action == "ack":
        return _END
    if settlement.action == "extend":
        return StartMarker(settlement.timeout_ms).encode()
    delay_ms = settlement.delay_ms
    if delay_ms is None:
        delay_ms = queue.config.nack_delay_ms(receipt.redelivery_count)
    return StartMarker(delay_ms).encode()


def _raise_on_outage(queue: ServedQueue, outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        if isinstance(outcome, KafkaError) and is_outage(outcome):
            raise BrokerUnavailableError(queue.config.bootstrap_servers, f"markers not written: {outcome.str()}")


def _result(
    write: _Write, outcome: Outcome, settlement: Settlement, signer: ReceiptSigner, now_ms: int
) -> ReceiptResult:
    receipt = write.receipt
    if isinstance(outcome, KafkaError):
        detail = f"marker not written: {outcome.str()}"
        return ReceiptResult(status="failed", detail=detail, partition=receipt.partition, offset=receipt.offset)
    if write.expired:
        return _expired(receipt)
    if settlement.action != "extend":
        return ReceiptResult(status="ok", partition=receipt.partition, offset=receipt.offset)
    return _extended(receipt, settlement.timeout_ms, signer, now_ms)


def _extended(receipt: Receipt, timeout_ms: int, signer: ReceiptSigner, now_ms: int) -> ReceiptResult:
    """The tracker counts from the START's timestamp, stamped after `now_ms`: this deadline errs early, never late
    (as the client's does, from the local clock; a delivery report's timestamp is not reliable on every broker)."""
    deadline_ms = now_ms + timeout_ms
    renewed = Receipt(receipt.queue, receipt.partition, receipt.offset, now_ms, deadline_ms, receipt.redelivery_count)
    return ReceiptResult(
        status="ok",
        partition=receipt.partition,
        offset=receipt.offset,
        receipt=signer.sign(renewed),
        deadline_ms=deadline_ms,
    )


def _expired(receipt: Receipt) -> ReceiptResult:
    return ReceiptResult(
        status="expired",
        detail=f"the delivery's deadline ({receipt.deadline_ms}) has passed; it may have been redelivered",
        partition=receipt.partition,
        offset=receipt.offset,
    )


def _count(metrics: ApiMetrics, topic: str, action: Action, results: list[ReceiptResult | None]) -> None:
    statuses = [result.status for result in results if result is not None]
    done = {"ack": metrics.acks, "nack": metrics.nacks, "extend": metrics.extends}[action]
    done.labels(topic).inc(statuses.count("ok"))
    metrics.refused.labels(topic).inc(statuses.count("invalid") + statuses.count("wrong_queue"))
    metrics.expired.labels(topic).inc(statuses.count("expired"))
    metrics.failed.labels(topic).inc(statuses.count("failed"))
