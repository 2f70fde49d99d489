"""`python -m tracker`: run one tracker replica (the same command as `kmq tracker`)."""

from __future__ import annotations

from tracker.cli import main

main()
