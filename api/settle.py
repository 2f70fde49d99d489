"""Settling deliveries by receipt: ack writes END (a BATCH END per partition with `batch` markers), nack and extend
write START (PROTOCOL.md, "Marker records"; which records exactly: api.settle_markers).

Each receipt is judged on its own. A refused receipt (invalid, other queue) is never acted on. An expired one
(its delivery's deadline has passed, so the tracker may have redelivered it) still gets its END on ack — that only
stops this delivery from coming back — but no START on nack or extend: a START written after the tracker's END
would make the key pending again and cause a second redelivery.

A delivery settles once (issue 15, item 9): once ack or nack was written for it, by any replica, any further ack,
nack or extend of one of its receipts answers 409 and writes nothing (`AlreadySettledError`). What was settled is
read back from the markers topic (`SettleView`); two replicas settling one delivery within the same ~100 ms (the
view's read lag) may both write, one replica never does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio.to_thread
from confluent_kafka import KafkaError

from api.delivery import Outcome, is_outage
from api.metrics import ApiMetrics
from api.receipts import Receipt, ReceiptSigner, Refusal
from api.responses import ResultJson, receipt_result
from api.served import ServedQueue
from api.settle_markers import Write, plan
from api.settlements import Action, Delivery
from kmq.errors import BrokerUnavailableError


class AlreadySettledError(Exception):
    """A receipt's delivery was already settled (ack or nack), or is being settled by another request: 409."""


@dataclass(frozen=True, slots=True)
class Settlement:
    """What to do with a batch of receipts: ack; nack after `delay_ms` (None: backoff); extend by `timeout_ms`."""

    action: Action
    delay_ms: int | None = None
    timeout_ms: int = 0


async def settle(
    queue: ServedQueue, signer: ReceiptSigner, metrics: ApiMetrics, tokens: list[str], settlement: Settlement
) -> list[ResultJson]:
    """One result per token, in order; raises BrokerUnavailableError when the cluster is unreachable."""
    now_ms = int(time.time() * 1000)
    results, writes = _judge(tokens, queue.name, signer, settlement.action, now_ms)
    await _caught_up(queue, {write.receipt.partition for write in writes})
    with _reserved(queue, metrics, writes):
        markers = plan(queue.config, writes, settlement.action, now_ms, settlement.delay_ms, settlement.timeout_ms)
        outcomes = await queue.producer.produce([marker.record for marker in markers])
        _raise_on_outage(queue, outcomes)
        for marker, outcome in zip(markers, outcomes, strict=True):
            if not isinstance(outcome, KafkaError):
                queue.settled.observe(marker.record.partition, marker.runs, marker.note, outcome.offset)
    for marker, outcome in zip(markers, outcomes, strict=True):
        for write in marker.writes:
            results[write.index] = _result(write, outcome, settlement, signer, now_ms)
    _count(metrics, queue.name, settlement.action, results)
    return [result for result in results if result is not None]


def _judge(
    tokens: list[str], queue: str, signer: ReceiptSigner, action: Action, now_ms: int
) -> tuple[list[ResultJson | None], list[Write]]:
    """The results known without Kafka (refused, or expired for nack/extend), and the markers to write."""
    results: list[ResultJson | None] = [None] * len(tokens)
    writes: list[Write] = []
    for index, token in enumerate(tokens):
        verdict = signer.verify(token, queue)
        if isinstance(verdict, Refusal):
            results[index] = receipt_result(verdict.reason, verdict.detail)
        elif verdict.expired(now_ms) and action != "ack":
            results[index] = _expired(verdict)
        else:
            writes.append(Write(index, verdict, verdict.expired(now_ms)))
    return results, writes


async def _caught_up(queue: ServedQueue, partitions: set[int]) -> None:
    """Wait until this replica has read every note written before it started, and those of `partitions` (one
    added by `kmq topics grow` since it started is read from its start): 503 if that takes too long."""
    if queue.settled.has_read(partitions):
        return
    timeout_s = queue.producer.timeout_s
    if not await anyio.to_thread.run_sync(queue.settled.wait_read, partitions, timeout_s):
        raise BrokerUnavailableError(
            queue.config.bootstrap_servers, f"{queue.config.markers_topic} not read up to its end in {timeout_s:.0f}s"
        )


@contextmanager
def _reserved(queue: ServedQueue, metrics: ApiMetrics, writes: list[Write]) -> Iterator[None]:
    """Hold the deliveries of `writes` for this request; AlreadySettledError if one is settled or held already.
    Runs on the event loop with no await between the checks and the holding, so two requests never both pass."""
    held: list[Delivery] = []
    deliveries = [(w.receipt.partition, w.receipt.offset, w.receipt.issued_at_ms) for w in writes]
    try:
        for write, delivery, settled_by in zip(
            writes, deliveries, queue.settled.settled_by_all(deliveries), strict=True
        ):
            receipt = write.receipt
            if settled_by is not None or delivery in queue.settling:
                metrics.replayed.labels(queue.name).inc()
                how = f"already settled by {settled_by}" if settled_by else "being settled by another request"
                raise AlreadySettledError(
                    f"receipts[{write.index}]: the delivery of {queue.name}[{receipt.partition}]@{receipt.offset} "
                    f"is {how}; a receipt settles once, so nothing was written for this request"
                )
            queue.settling.add(delivery)
            held.append(delivery)
        yield
    finally:
        queue.settling.difference_update(held)


def _raise_on_outage(queue: ServedQueue, outcomes: list[Outcome]) -> None:
    for outcome in outcomes:
        if isinstance(outcome, KafkaError) and is_outage(outcome):
            raise BrokerUnavailableError(queue.config.bootstrap_servers, f"markers not written: {outcome.str()}")


def _result(write: Write, outcome: Outcome, settlement: Settlement, signer: ReceiptSigner, now_ms: int) -> ResultJson:
    receipt = write.receipt
    if isinstance(outcome, KafkaError):
        detail = f"marker not written: {outcome.str()}"
        return receipt_result("failed", detail, receipt.partition, receipt.offset)
    if write.expired:
        return _expired(receipt)
    if settlement.action != "extend":
        return receipt_result("ok", None, receipt.partition, receipt.offset)
    return _extended(receipt, settlement.timeout_ms, signer, now_ms)


def _extended(receipt: Receipt, timeout_ms: int, signer: ReceiptSigner, now_ms: int) -> ResultJson:
    """The tracker counts from the START's timestamp, stamped after `now_ms`: this deadline errs early, never late
    (as the client's does, from the local clock; a delivery report's timestamp is not reliable on every broker)."""
    deadline_ms = now_ms + timeout_ms
    # Same delivery, same issue time (it names the delivery, see api.settlements); a later deadline.
    renewed = Receipt(
        receipt.queue, receipt.partition, receipt.offset, receipt.issued_at_ms, deadline_ms, receipt.redelivery_count
    )
    return receipt_result("ok", None, receipt.partition, receipt.offset, signer.sign(renewed), deadline_ms)


def _expired(receipt: Receipt) -> ResultJson:
    detail = f"the delivery's deadline ({receipt.deadline_ms}) has passed; it may have been redelivered"
    return receipt_result("expired", detail, receipt.partition, receipt.offset)


def _count(metrics: ApiMetrics, topic: str, action: Action, results: list[ResultJson | None]) -> None:
    statuses = [result["status"] for result in results if result is not None]
    done = {"ack": metrics.acks, "nack": metrics.nacks, "extend": metrics.extends}[action]
    done.labels(topic).inc(statuses.count("ok"))
    metrics.refused.labels(topic).inc(statuses.count("invalid") + statuses.count("wrong_queue"))
    metrics.expired.labels(topic).inc(statuses.count("expired"))
    metrics.failed.labels(topic).inc(statuses.count("failed"))
