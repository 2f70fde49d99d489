#!/usr/bin/env bash
# kmq's REST facade from curl: send a message, receive it, acknowledge it by its receipt.
# Needs KMQ_API_URL (e.g. http://127.0.0.1:8080), KMQ_API_KEY and KMQ_QUEUE_TOPIC: `kmq demo --keep-running` prints them.
set -euo pipefail
: "${KMQ_API_URL:?set KMQ_API_URL}" "${KMQ_API_KEY:?set KMQ_API_KEY}" "${KMQ_QUEUE_TOPIC:?set KMQ_QUEUE_TOPIC}"
queue="$KMQ_API_URL/v1/queues/$KMQ_QUEUE_TOPIC"
post() { curl -sS --fail-with-body -H "Authorization: Bearer $KMQ_API_KEY" -H 'Content-Type: application/json' "$@"; }

echo "== send"
post "$queue/messages" -d '{"messages": [{"value": "hello from curl", "headers": {"origin": "curl.sh"}}]}'
echo
echo "== receive (long poll up to 5 s)"
received=$(post "$queue/receive" -d '{"max_messages": 1, "wait_ms": 5000}')
echo "$received"
receipt=$(printf '%s' "$received" | python3 -c 'import json, sys; print(json.load(sys.stdin)["messages"][0]["receipt"])')
echo "== ack"
post "$queue/ack" -d "{\"receipts\": [\"$receipt\"]}"
echo
echo "== the queue"
curl -sS --fail-with-body -H "Authorization: Bearer $KMQ_API_KEY" "$queue"
echo
