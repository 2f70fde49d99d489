"""The kmq redelivery tracker: consumes the markers topic and redelivers messages whose processing timed out."""

from __future__ import annotations

from kmq.extras import require

require("kmq_tracker", "tracker")  # before the imports below: without the extra, one line names the pip install

from kmq_tracker.config import TrackerConfig  # noqa: E402
from kmq_tracker.metrics import TrackerMetrics  # noqa: E402
from kmq_tracker.partition import PartitionState  # noqa: E402
from kmq_tracker.pending import PendingSet  # noqa: E402
from kmq_tracker.service import TrackerService  # noqa: E402

__all__ = ["PartitionState", "PendingSet", "TrackerConfig", "TrackerMetrics", "TrackerService"]
