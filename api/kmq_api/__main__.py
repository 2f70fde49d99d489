"""`python -m kmq_api`: serve the REST facade (the same command as `kmq api`)."""

from __future__ import annotations

from kmq_api.cli import main

main()
