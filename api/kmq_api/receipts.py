"""Receipts: signed, opaque tokens naming one delivery of a message, so any API replica can settle it.

A receipt holds the queue, the message's partition and offset, when it was issued, the delivery's deadline and its
redelivery count, followed by an HMAC-SHA256 of those bytes under the configured secret. Nothing about it is kept in
the API process: the state lives in Kafka (the markers topic), the receipt only proves who may act on which key.
"""

from __future__ import annotations

import binascii
import hashlib
import hmac
import struct
from dataclasses import dataclass
from typing import Literal

from kmq.markers import MarkerKey

_VERSION = 1
# version, partition, offset, issued_at_ms, deadline_ms, redelivery_count; the queue name follows.
_FIXED = struct.Struct(">BiqqqI")
_MAC_BYTES = 32
MAX_TOKEN_LENGTH = 512
# base64url through binascii directly: base64's wrappers cost more than the encoding of a receipt.
_TO_URLSAFE = bytes.maketrans(b"+/", b"-_")
_FROM_URLSAFE = bytes.maketrans(b"-_", b"+/")

RefusalReason = Literal["invalid", "wrong_queue"]


@dataclass(frozen=True, slots=True)
class Receipt:
    """One delivery of a queue message, as handed to an HTTP receiver."""

    queue: str
    partition: int
    offset: int
    issued_at_ms: int
    deadline_ms: int
    redelivery_count: int = 0

    @property
    def marker_key(self) -> MarkerKey:
        return MarkerKey(self.partition, self.offset)

    def expired(self, now_ms: int) -> bool:
        """True once the delivery's deadline has passed: the tracker may already have redelivered it."""
        return now_ms >= self.deadline_ms


@dataclass(frozen=True, slots=True)
class Refusal:
    """Why a token is not acted on: `invalid` (malformed, forged or tampered) or `wrong_queue`."""

    reason: RefusalReason
    detail: str


class ReceiptSigner:
    """Issues and verifies receipts under one secret; every replica sharing the secret accepts the others'."""

    def __init__(self, secret: bytes) -> None:
        if not secret:
            raise ValueError("the receipt secret must not be empty")
        # HMAC-SHA256 keyed once: each receipt copies the keyed state instead of hashing the key again.
        self._keyed = hmac.new(secret, digestmod=hashlib.sha256)

    def sign(self, receipt: Receipt) -> str:
        payload = _encode(receipt)
        return _b64url(payload + self._mac(payload))

    def verify(self, token: str, queue: str) -> Receipt | Refusal:
        """The receipt, if `token` was signed with this secret and names `queue`; else why not."""
        raw = _decode_token(token)
        if raw is None or len(raw) <= _FIXED.size + _MAC_BYTES:
            return Refusal("invalid", "not a receipt")
        payload, mac = raw[:-_MAC_BYTES], raw[-_MAC_BYTES:]
        if not hmac.compare_digest(mac, self._mac(payload)):
            return Refusal("invalid", "signature does not match (forged, tampered or signed with another secret)")
        receipt = _decode(payload)
        if receipt is None:
            return Refusal("invalid", "unsupported receipt version")
        if receipt.queue != queue:
            return Refusal("wrong_queue", f"receipt belongs to queue {receipt.queue!r}, not {queue!r}")
        return receipt

    def _mac(self, payload: bytes) -> bytes:
        mac = self._keyed.copy()
        mac.update(payload)
        return mac.digest()


def _encode(receipt: Receipt) -> bytes:
    fixed = _FIXED.pack(
        _VERSION,
        receipt.partition,
        receipt.offset,
        receipt.issued_at_ms,
        receipt.deadline_ms,
        receipt.redelivery_count,
    )
    return fixed + receipt.queue.encode("utf-8")


def _decode(payload: bytes) -> Receipt | None:
    version, partition, offset, issued_at_ms, deadline_ms, count = _FIXED.unpack_from(payload)
    if version != _VERSION:
        return None
    queue = payload[_FIXED.size :].decode("utf-8", errors="replace")
    return Receipt(queue, partition, offset, issued_at_ms, deadline_ms, count)


def _decode_token(token: str) -> bytes | None:
    """Strict unpadded base64url; None for anything else (including non-canonical encodings). No pattern is
    matched first: whatever is not canonical unpadded base64url (other characters, padding, `+` or `/`) fails to
    decode or does not encode back to the same token."""
    if len(token) > MAX_TOKEN_LENGTH:
        return None
    try:
        padded = (token + "=" * (-len(token) % 4)).encode("ascii").translate(_FROM_URLSAFE)
        raw = binascii.a2b_base64(padded, strict_mode=True)
    except (binascii.Error, ValueError):
        return None
    return raw if _b64url(raw) == token else None


def _b64url(raw: bytes) -> str:
    """Unpadded base64url."""
    return binascii.b2a_base64(raw, newline=False).translate(_TO_URLSAFE).rstrip(b"=").decode("ascii")
