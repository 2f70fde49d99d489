"""`python -m kmq`: the same as the `kmq` command."""

from __future__ import annotations

from kmq.cli import main

main()
