"""The kmq redelivery tracker: consumes the markers topic and redelivers messages whose processing timed out."""

from __future__ import annotations

from tracker.pending import PendingSet

__all__ = ["PendingSet"]
