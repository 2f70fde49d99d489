"""Spark column values as kmq's: bytes from binary or string columns, headers from array<struct<key, value>>."""

from __future__ import annotations

from typing import Any

from kmq.headers import Headers


def headers(raw: Any) -> Headers:
    """Spark's array<struct<key, value>> as kmq headers."""
    return [(str(pair["key"]), to_bytes(pair["value"])) for pair in raw or ()]


def to_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    return str(value).encode()
