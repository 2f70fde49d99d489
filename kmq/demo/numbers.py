"""The demo's messages: numbers 1..N as ASCII decimal values, a few of them "poison"."""

from __future__ import annotations


def encode_number(number: int) -> bytes:
    return str(number).encode()


def decode_number(value: bytes | None) -> int | None:
    """The number a demo message carries, or None for anything else (e.g. a message sent by hand)."""
    if value is None or not value.isdigit() or len(value) > 18:
        return None
    return int(value)


def is_poison(number: int, poison_every: int) -> bool:
    """Poison messages are rejected by every worker; `poison_every=0` sends none."""
    return poison_every > 0 and number % poison_every == 0
