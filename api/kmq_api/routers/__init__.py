"""One router per resource: messages (send), deliveries (receive), receipts (ack/nack/extend), queues, health."""

from __future__ import annotations
