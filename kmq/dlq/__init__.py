"""Dead letters: list them, show one, and redrive selected ones to their queue (`kmq dlq`, the REST facade)."""

from __future__ import annotations

from kmq.dlq.reader import read_dead_letters
from kmq.dlq.records import DeadLetter, DeadLetterFilter
from kmq.dlq.redrive import RedriveResult, redrive

__all__ = ["DeadLetter", "DeadLetterFilter", "RedriveResult", "read_dead_letters", "redrive"]
