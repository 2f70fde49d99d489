"""`DeadLetter`: one record of the dead-letter topic, read back (PROTOCOL.md "Headers"), and the filters that select
dead letters for `kmq dlq list` and `kmq dlq redrive`."""

from __future__ import annotations

import json
from dataclasses import dataclass

from kmq import headers as h
from kmq.headers import Headers

# Written by `redrive` (this package), read by nothing else: a copy says which dead letter it came from, and a
# marker record on the dead-letter topic lists the dead letters a redrive sent back (so none is sent twice).
REDRIVEN_FROM = "kmq-redriven-from"
FIRST_FAILURE = "kmq-first-failure-ms"
REDRIVE_MARKER = "kmq-redrive-marker"


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """A dead letter at `partition`/`offset` of the dead-letter topic, and where it came from.

    `first_failure_ms`: when the message first became a dead letter (a redriven message that fails again keeps the
    time of its first dead letter); `redriven`: a redrive already sent it back."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Headers  # the application's own
    reason: str
    origin_topic: str
    origin_partition: int | None
    origin_offset: int | None
    delivery_count: int
    dead_lettered_ms: int
    first_failure_ms: int
    redriven: bool = False

    @classmethod
    def parse(
        cls, partition: int, offset: int, key: bytes | None, value: bytes | None, raw: Headers, ts: int
    ) -> DeadLetter:
        origin_partition = h.get(raw, h.ORIGINAL_PARTITION)
        first = h.get(raw, FIRST_FAILURE)
        return cls(
            partition=partition,
            offset=offset,
            key=key,
            value=value,
            headers=[(k, v) for k, v in h.without_kmq(raw) if k not in (REDRIVEN_FROM, FIRST_FAILURE)],
            reason=(h.get(raw, h.DLQ_REASON) or b"").decode(errors="replace"),
            origin_topic=(h.get(raw, h.ORIGINAL_TOPIC) or b"").decode(errors="replace"),
            origin_partition=int.from_bytes(origin_partition, "big", signed=True)
            if origin_partition is not None and len(origin_partition) == 4
            else None,
            origin_offset=h.decode_int64(h.get(raw, h.ORIGINAL_OFFSET)),
            delivery_count=h.redelivery_count(raw),
            dead_lettered_ms=ts,
            first_failure_ms=int(first) if first is not None and first.isdigit() else ts,
        )

    def copy_headers(self, dead_letter_topic: str) -> Headers:
        """Headers of the redriven copy: the application's own, a fresh delivery count (none), and its origins."""
        return [
            *self.headers,
            (REDRIVEN_FROM, f"{dead_letter_topic}/{self.partition}/{self.offset}".encode()),
            (FIRST_FAILURE, str(self.first_failure_ms).encode()),
        ]


@dataclass(frozen=True, slots=True)
class DeadLetterFilter:
    """Which dead letters: all of these that are set must match. Offsets are the dead-letter topic's, inclusive."""

    reason: str | None = None  # a substring of the reason
    partition: int | None = None
    from_offset: int | None = None
    to_offset: int | None = None
    origin_partition: int | None = None
    include_redriven: bool = True

    def matches(self, dead: DeadLetter) -> bool:
        return (
            (self.reason is None or self.reason in dead.reason)
            and (self.partition is None or dead.partition == self.partition)
            and (self.from_offset is None or dead.offset >= self.from_offset)
            and (self.to_offset is None or dead.offset <= self.to_offset)
            and (self.origin_partition is None or dead.origin_partition == self.origin_partition)
            and (self.include_redriven or not dead.redriven)
        )

    @property
    def selects_all(self) -> bool:
        return all(
            value is None
            for value in (self.reason, self.partition, self.from_offset, self.to_offset, self.origin_partition)
        )


def encode_marker(positions: list[tuple[int, int]]) -> bytes:
    """The value of a redrive marker: the (partition, offset) of every dead letter the redrive sent back."""
    return json.dumps({"redriven": [list(position) for position in positions]}).encode()


def decode_marker(value: bytes | None) -> list[tuple[int, int]]:
    """The positions a marker lists ([] for a value that is not one: it is then ignored, never fatal)."""
    try:
        data = json.loads(value or b"")
        return [(int(p), int(o)) for p, o in data["redriven"]]
    except (ValueError, KeyError, TypeError):
        return []
