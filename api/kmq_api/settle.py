"""Settling deliveries by receipt: ack writes END (a BATCH END per partition with `batch` markers), nack and extend
write START (PROTOCOL.md, "Marker records"; which records exactly: api.settle_markers).

Each receipt is judged on its own. A refused receipt (invalid, other queue) is never acted on. An expired one
(its delivery's deadline has passed, so the tracker may have redelivered it) still gets its END on ack — that only
stops this delivery from coming back — but no START on nack or extend: a START written after the tracker's END
would make the key pending again and cause a second redelivery.

A delivery settles once (issue 15, item 9; across replicas, issue 29): once ack or nack was written for it, by any
replica, any further ack, nack or extend of one of its receipts answers 409, and a receipt that an extend used is
spent (the extend returned the one to use). Which settle wins is decided by the markers partition's order, the same
way by every replica and by the tracker (kmq.receipt_notes): a replica writes its marker, waits until its settle
view has read the partition past it, and answers 200 only if its note won; a note that lost (another replica's
settle came first) answers 409 and has no effect anywhere. Settles this replica already knows to lose answer 409
before writing anything. A replica remembers notes until a minute and three settle timeouts past their deadline
(kmq_api.settle_view, NOTE_MARGIN_MS): a repeated ack later than that answers `expired` rather than 409, and the
tracker, which keeps notes ten minutes, ignores its END if an earlier settle won.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import anyio.to_thread
from confluent_kafka import KafkaError

from kmq.errors import BrokerUnavailableError
from kmq_api.delivery import Delivered, Outcome, is_outage
from kmq_api.metrics import ApiMetrics
from kmq_api.receipts import Receipt, ReceiptSigner, Refusal
from kmq_api.responses import ResultJson, receipt_result
from kmq_api.served import ServedQueue
from kmq_api.settle_markers import Marker, Write, plan
from kmq_api.settlements import Action, Delivery


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
        written = [(m, outcome) for m, outcome in zip(markers, outcomes, strict=True) if isinstance(outcome, Delivered)]
        for marker, delivered in written:
            queue.settled.observe(marker.record.partition, marker.runs, marker.note, delivered.offset)
        await _arbitrate(queue, metrics, written)
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
    receipts = [(*delivery, w.receipt.deadline_ms) for delivery, w in zip(deliveries, writes, strict=True)]
    try:
        for write, delivery, refusal in zip(writes, deliveries, queue.settled.refusals(receipts), strict=True):
            receipt = write.receipt
            if refusal is not None or delivery in queue.settling:
                metrics.replayed.labels(queue.name).inc()
                how = refusal or "being settled by another request"
                raise AlreadySettledError(
                    f"receipts[{write.index}]: the delivery of {queue.name}[{receipt.partition}]@{receipt.offset} "
                    f"(this receipt) is {how}; a receipt settles once, so nothing was written for this request"
                )
            queue.settling.add(delivery)
            held.append(delivery)
        yield
    finally:
        queue.settling.difference_update(held)


async def _arbitrate(queue: ServedQueue, metrics: ApiMetrics, written: list[tuple[Marker, Delivered]]) -> None:
    """Once the view has read past this request's markers, every earlier note is known: AlreadySettledError (409)
    if a note of this request lost to one written first (by another replica) — it then has no effect anywhere."""
    if not written:
        return
    ends: dict[int, int] = {}
    for marker, delivered in written:
        ends[marker.record.partition] = max(ends.get(marker.record.partition, -1), delivered.offset)
    timeout_s = queue.producer.timeout_s
    if not await queue.settled.wait_past(ends, timeout_s):
        raise BrokerUnavailableError(
            queue.config.bootstrap_servers, f"{queue.config.markers_topic} not read back in {timeout_s:.0f}s"
        )
    pairs = [(delivered, write) for marker, delivered in written for write in marker.writes]
    verdicts = queue.settled.won(
        [(w.receipt.partition, w.receipt.offset, w.receipt.issued_at_ms, delivered.offset) for delivered, w in pairs]
    )
    lost = [write for (_, write), won in zip(pairs, verdicts, strict=True) if not won]
    if lost:
        metrics.replayed.labels(queue.name).inc(len(lost))
        receipt = lost[0].receipt
        raise AlreadySettledError(
            f"receipts[{lost[0].index}]: the delivery of {queue.name}[{receipt.partition}]@{receipt.offset} was "
            "settled first by another request (another replica's, a moment earlier); a receipt settles once, so "
            f"this request's settle of {len(lost)} receipt(s) has no effect"
        )


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
