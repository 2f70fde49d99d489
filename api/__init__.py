"""kmq's REST facade: HTTP receivers send, receive and settle queue messages through signed receipts."""

from __future__ import annotations

from api.config import ApiConfig
from api.receipts import Receipt, ReceiptSigner, Refusal

__all__ = ["ApiConfig", "Receipt", "ReceiptSigner", "Refusal"]
