"""The marker codec: kmq 0.3.x bytes, so JVM kmq clients and trackers interoperate (PROTOCOL.md)."""

from __future__ import annotations

import struct
from dataclasses import dataclass

from kmq.errors import MarkerDecodeError

_KEY = struct.Struct(">iq")
_START = struct.Struct(">bq")
_START_TYPE = 1
_END_TYPE = 0
_END_BYTES = bytes([_END_TYPE])
# The 12 key bytes of (partition, offset), without building a MarkerKey: the client's per-message path.
encode_key = _KEY.pack


@dataclass(frozen=True, slots=True, order=True)
class MarkerKey:
    """Identifies one message of the queue topic: its partition and offset."""

    partition: int
    offset: int

    def encode(self) -> bytes:
        return _KEY.pack(self.partition, self.offset)

    @staticmethod
    def decode(data: bytes | None) -> MarkerKey:
        if data is None or len(data) != _KEY.size:
            raise MarkerDecodeError(f"marker key must be {_KEY.size} bytes, got {_describe(data)}")
        partition, offset = _KEY.unpack(data)
        return MarkerKey(partition, offset)


@dataclass(frozen=True, slots=True)
class StartMarker:
    """The message was handed to a worker; redeliver it unless an END comes within the duration."""

    redeliver_after_ms: int

    def encode(self) -> bytes:
        return _START.pack(_START_TYPE, self.redeliver_after_ms)


@dataclass(frozen=True, slots=True)
class EndMarker:
    """The message was processed (or dead-lettered): never redeliver it."""

    def encode(self) -> bytes:
        return _END_BYTES


Marker = StartMarker | EndMarker


def decode_marker(data: bytes | None) -> Marker:
    """Decode a marker value; anything that is not a START or END raises `MarkerDecodeError`."""
    if data is None:
        raise MarkerDecodeError("marker value is null")
    if len(data) == _START.size and data[0] == _START_TYPE:
        return StartMarker(_START.unpack(data)[1])
    if data == _END_BYTES:
        return EndMarker()
    raise MarkerDecodeError(f"not a START or END marker: {_describe(data)}")


def _describe(data: bytes | None) -> str:
    if data is None:
        return "null"
    preview = data[:16].hex()
    return f"{len(data)} bytes ({preview}{'...' if len(data) > 16 else ''})"
