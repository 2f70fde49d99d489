"""The kmq redelivery tracker: consumes the markers topic and redelivers messages whose processing timed out."""

from __future__ import annotations

from tracker.config import TrackerConfig
from tracker.metrics import TrackerMetrics
from tracker.partition import PartitionState
from tracker.pending import PendingSet
from tracker.service import TrackerService

__all__ = ["PartitionState", "PendingSet", "TrackerConfig", "TrackerMetrics", "TrackerService"]
