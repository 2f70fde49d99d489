"""Header names and encodings of PROTOCOL.md, shared by the client, the tracker and the REST facade."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping, Sequence

REDELIVERY_COUNT = "kmq-redelivery-count"
ORIGINAL_OFFSET = "kmq-original-offset"
ORIGINAL_TOPIC = "kmq-original-topic"
ORIGINAL_PARTITION = "kmq-original-partition"
DLQ_REASON = "kmq-dlq-reason"
DLQ_TRUNCATED = "kmq-dlq-truncated"  # on a dead letter whose value was cut to fit: the original length (ascii)

REASON_MAX_REDELIVERIES = "max-redeliveries"
REASON_UNDELIVERABLE = "undeliverable"  # "undeliverable: <error>": the broker or producer refused the copy for good

Header = tuple[str, bytes | None]
Headers = list[Header]
# What a sender may give: a mapping of names to values (as confluent-kafka takes) or any sequence of (name, value)
# pairs, such as a received `Message.headers` (a tuple).
SendHeaders = Mapping[str, bytes | None] | Sequence[Header]

_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")
_KMQ_HEADERS = frozenset(
    {REDELIVERY_COUNT, ORIGINAL_OFFSET, ORIGINAL_TOPIC, ORIGINAL_PARTITION, DLQ_REASON, DLQ_TRUNCATED}
)


def encode_count(count: int) -> bytes:
    """kmq's encoding: one byte up to 127, else a big-endian int32."""
    return bytes([count]) if 0 <= count <= 127 else _INT32.pack(count)


def decode_count(data: bytes | None) -> int:
    """Read both encodings of the redelivery count; anything else, a negative int32 included, counts as 0."""
    if data is None:
        return 0
    if len(data) == 1:
        return data[0]
    if len(data) == 4:
        return max(0, int(_INT32.unpack(data)[0]))
    return 0


def encode_int64(value: int) -> bytes:
    return _INT64.pack(value)


def decode_int64(data: bytes | None) -> int | None:
    if data is None or len(data) != 8:
        return None
    return int(_INT64.unpack(data)[0])


def from_kafka(raw: object) -> Headers:
    """Headers as confluent-kafka returns them (a list of pairs, or None) in kmq's form."""
    if not raw:
        return []
    pairs = raw.items() if isinstance(raw, dict) else raw
    return [(str(k), v.encode() if isinstance(v, str) else v) for k, v in pairs]  # type: ignore[attr-defined]  # pairs


def to_send(headers: SendHeaders | None) -> Headers | None:
    """The list of pairs confluent-kafka's produce() takes, from a mapping or any sequence of pairs. Iterating a
    mapping yields only its names, so it is read through its items."""
    if headers is None:
        return None
    if isinstance(headers, Mapping):
        return list(headers.items())
    return headers if isinstance(headers, list) else list(headers)


def get(headers: Sequence[Header] | None, name: str) -> bytes | None:
    """The last value of header `name` (Kafka allows repeats; the last one set wins)."""
    found: bytes | None = None
    for key, value in headers or ():
        if key == name:
            found = value
    return found


def redelivery_count(headers: Sequence[Header] | None) -> int:
    return decode_count(get(headers, REDELIVERY_COUNT))


def original_offset(headers: Sequence[Header] | None, offset: int) -> int:
    """The offset of the first delivery: the header when this is a copy, else the message's own offset."""
    found = decode_int64(get(headers, ORIGINAL_OFFSET))
    return offset if found is None else found


def without_kmq(headers: Iterable[Header] | None) -> Headers:
    """The application's own headers, kmq's bookkeeping removed."""
    return [(k, v) for k, v in headers or () if k not in _KMQ_HEADERS]


def redelivered(headers: Sequence[Header] | None, offset: int) -> Headers:
    """Headers of a redelivered copy: the original ones, the count raised by one, the first offset kept."""
    return [
        *without_kmq(headers),
        (REDELIVERY_COUNT, encode_count(redelivery_count(headers) + 1)),
        (ORIGINAL_OFFSET, encode_int64(original_offset(headers, offset))),
    ]


def dead_letter(headers: Sequence[Header] | None, topic: str, partition: int, offset: int, reason: str) -> Headers:
    """Headers of a dead letter: the original ones plus where it came from and why."""
    return [
        *without_kmq(headers),
        (DLQ_REASON, reason.encode()),
        (ORIGINAL_TOPIC, topic.encode()),
        (ORIGINAL_PARTITION, _INT32.pack(partition)),
        (ORIGINAL_OFFSET, encode_int64(original_offset(headers, offset))),
        (REDELIVERY_COUNT, encode_count(redelivery_count(headers))),
    ]
