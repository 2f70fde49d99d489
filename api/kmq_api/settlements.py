"""The settle notes the facade writes and reads back: defined in `kmq.receipt_notes`, which the tracker shares (every
reader of the markers topic applies the same settle-once rule)."""

from __future__ import annotations

from kmq.receipt_notes import HEADER, RETAIN_MS, Action, Delivery, Note, Settlements

__all__ = ["HEADER", "RETAIN_MS", "Action", "Delivery", "Note", "Settlements"]
