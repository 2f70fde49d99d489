"""A small Python client of kmq's REST facade (standard library only): send, receive, nack, receive again, ack.

The facade comes from --url / KMQ_API_URL, its key from --api-key / KMQ_API_KEY, the queue from --queue /
KMQ_QUEUE_TOPIC. `kmq demo --keep-running` prints all three.
"""

from __future__ import annotations

import argparse
import json
import os
import urllib.request
from typing import Any


class QueueClient:
    """The four calls a receiver needs; every answer is the facade's JSON."""

    def __init__(self, url: str, api_key: str, queue: str) -> None:
        self.base = f"{url.rstrip('/')}/v1/queues/{queue}"
        self.headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}

    def send(self, *values: str) -> Any:
        return self._post("messages", {"messages": [{"value": value} for value in values]})

    def receive(self, max_messages: int = 10, wait_ms: int = 5000) -> list[dict[str, Any]]:
        messages: list[dict[str, Any]] = self._post("receive", {"max_messages": max_messages, "wait_ms": wait_ms})[
            "messages"
        ]
        return messages

    def ack(self, *receipts: str) -> Any:
        return self._post("ack", {"receipts": list(receipts)})

    def nack(self, *receipts: str, delay_ms: int = 0) -> Any:
        return self._post("nack", {"receipts": list(receipts), "delay_ms": delay_ms})

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        request = urllib.request.Request(f"{self.base}/{path}", json.dumps(body).encode(), self.headers, method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)


def receive_until(client: QueueClient, wanted: set[str], tries: int = 10) -> list[dict[str, Any]]:
    """Receive until every wanted value came; other messages (an earlier run's) are acknowledged and skipped."""
    found: list[dict[str, Any]] = []
    for _ in range(tries):
        for message in client.receive(max_messages=100):
            if message["value"] in wanted:
                found.append(message)
            else:
                print(f"(acknowledging an unrelated message: {message['value']!r})")
                client.ack(message["receipt"])
        if {m["value"] for m in found} >= wanted:
            return found
    raise SystemExit(f"did not receive {sorted(wanted - {m['value'] for m in found})}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", default=os.environ.get("KMQ_API_URL", "http://127.0.0.1:8080"))
    parser.add_argument("--api-key", default=os.environ.get("KMQ_API_KEY", ""))
    parser.add_argument("--queue", default=os.environ.get("KMQ_QUEUE_TOPIC", ""))
    args = parser.parse_args()
    if not args.queue:
        parser.error("--queue (or KMQ_QUEUE_TOPIC) is required")
    client = QueueClient(args.url, args.api_key, args.queue)
    sent = client.send("order 1", "order 2")["messages"]
    print("sent:", ", ".join(f"partition {m['partition']} offset {m['offset']}" for m in sent))
    first = receive_until(client, {"order 1", "order 2"})
    for message in first:
        print(f"received {message['value']!r} (redelivery {message['redelivery_count']})")
    order_2 = next(m for m in first if m["value"] == "order 2")
    client.ack(*(m["receipt"] for m in first if m is not order_2))
    print("acknowledged 'order 1'; nack 'order 2': it comes back at once")
    client.nack(order_2["receipt"])
    again = receive_until(client, {"order 2"})[0]
    print(f"received {again['value']!r} again (redelivery {again['redelivery_count']})")
    result = client.ack(again["receipt"])["results"][0]
    print(f"acknowledged it: {result['status']}")


if __name__ == "__main__":
    main()
