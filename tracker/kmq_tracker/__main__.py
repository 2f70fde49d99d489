"""`python -m kmq_tracker`: run one tracker replica (the same command as `kmq tracker`)."""

from __future__ import annotations

from kmq_tracker.cli import main

main()
