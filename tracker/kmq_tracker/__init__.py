"""The kmq redelivery tracker: consumes the markers topic and redelivers messages whose processing timed out."""

from __future__ import annotations

from kmq_tracker.config import TrackerConfig
from kmq_tracker.metrics import TrackerMetrics
from kmq_tracker.partition import PartitionState
from kmq_tracker.pending import PendingSet
from kmq_tracker.service import TrackerService

__all__ = ["PartitionState", "PendingSet", "TrackerConfig", "TrackerMetrics", "TrackerService"]
