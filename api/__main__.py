"""`python -m api`: serve the REST facade (the same command as `kmq api`)."""

from __future__ import annotations

from api.cli import main

main()
