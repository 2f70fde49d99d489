"""The line protocol between `kmq bench` and a worker process (`python -m kmq.bench.worker`).

READY            the consumer has joined its group (the queue is still empty); the parent preloads the queue
GO               (from the parent) the queue is loaded: the measured window starts now
PROGRESS <n>     messages processed so far (a few times a second)
RESULT <json>    the figures; the process then exits 0
ERROR <text>     it could not measure; exit 1 (details on stderr)
"""

from __future__ import annotations

READY, GO, PROGRESS, RESULT, ERROR = "READY", "GO", "PROGRESS", "RESULT", "ERROR"
# In the share worker's ERROR when the cluster never hands out share-group records: the share row is then skipped.
SHARE_UNAVAILABLE = "share groups unavailable"
