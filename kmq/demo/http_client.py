"""A few JSON calls to the REST facade (stdlib only): catching its receivers up before the curl lines are shown."""

from __future__ import annotations

import json
import time
import urllib.request
from typing import Any

from kmq.errors import DemoError

BATCH = 1000
_TIMEOUT_S = 30.0


def post(url: str, api_key: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=_TIMEOUT_S) as response:
            return json.load(response)
    except OSError as e:
        raise DemoError(f"POST {url} failed: {e}") from e


def drain(queue_url: str, api_key: str, records: int, timeout_s: float) -> int:
    """Receive and acknowledge over HTTP until `records` deliveries were taken; the number taken.

    The facade's receivers are a consumer group of their own, starting at the queue's beginning: taking the demo's
    messages first means a message sent with the printed curl line is the next one a receive returns.
    """
    deadline = time.monotonic() + timeout_s
    taken = 0
    while taken < records and time.monotonic() < deadline:
        answer = post(f"{queue_url}/receive", api_key, {"max_messages": BATCH, "wait_ms": 2000})
        receipts = [message["receipt"] for message in answer["messages"]]
        if receipts:
            post(f"{queue_url}/ack", api_key, {"receipts": receipts})
        taken += len(receipts)
    return taken
