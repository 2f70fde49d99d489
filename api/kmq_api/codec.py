"""Between JSON and Kafka bytes: utf-8 text or base64, for values, keys and header values alike."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass

from kmq import headers as h
from kmq.headers import Headers
from kmq.message import Message
from kmq_api.models import Encoding, OutgoingMessage
from kmq_api.responses import ReceivedJson


class UndecodableError(ValueError):
    """A field declared base64 is not valid base64; the message names the field."""


@dataclass(frozen=True, slots=True)
class Payload:
    """One outgoing message as bytes."""

    value: bytes | None
    key: bytes | None
    headers: Headers

    @property
    def size(self) -> int:
        """What counts against the message size limit: value, key, header names and values."""
        header_bytes = sum(len(name.encode()) + len(value or b"") for name, value in self.headers)
        return len(self.value or b"") + len(self.key or b"") + header_bytes


def to_payload(message: OutgoingMessage, where: str) -> Payload:
    """Decode one message of a send request; `where` (e.g. `messages[3]`) prefixes errors."""
    headers: Headers = []
    for name, text in message.headers.items():
        _utf8(name, f"{where}.headers")
        headers.append((name, _decode(text, message.encoding, f"{where}.headers.{name}")))
    return Payload(
        value=_decode_optional(message.value, message.encoding, f"{where}.value"),
        key=_decode_optional(message.key, message.encoding, f"{where}.key"),
        headers=headers,
    )


def to_received(message: Message, receipt: str, preferred: Encoding) -> ReceivedJson:
    """A delivered message as JSON (`ReceivedMessage`): utf-8 when every part of it is text and that is preferred,
    else base64."""
    app_headers = h.without_kmq(message.headers) if message.headers else []
    encoding: Encoding = "utf-8"
    parts = _as_text(message, app_headers) if preferred == "utf-8" else None
    if parts is None:
        encoding = "base64"
        parts = _base64(message.value), _base64(message.key), {n: _base64(v) or "" for n, v in app_headers}
    value, key, headers = parts
    return {
        "receipt": receipt,
        "partition": message.partition,
        "offset": message.offset,
        "value": value,
        "key": key,
        "headers": headers,
        "encoding": encoding,
        "redelivery_count": message.redelivery_count,
        "timestamp_ms": message.timestamp_ms,
        "deadline_ms": message.deadline_ms,
    }


def _as_text(message: Message, app_headers: Headers) -> tuple[str | None, str | None, dict[str, str]] | None:
    """Value, key and headers as utf-8 text, each decoded once; None when any part is not utf-8."""
    try:
        headers = {name: _text(data) or "" for name, data in app_headers}
        return _text(message.value), _text(message.key), headers
    except UnicodeDecodeError:
        return None


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8")


def _base64(data: bytes | None) -> str | None:
    return None if data is None else base64.b64encode(data).decode("ascii")


def _decode_optional(text: str | None, encoding: Encoding, where: str) -> bytes | None:
    return None if text is None else _decode(text, encoding, where)


def _decode(text: str, encoding: Encoding, where: str) -> bytes:
    if encoding == "utf-8":
        return _utf8(text, where)
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError) as e:
        raise UndecodableError(f"{where}: not valid base64 ({e})") from e


def _utf8(text: str, where: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise UndecodableError(f"{where}: not valid unicode (lone surrogate at {e.start})") from e
