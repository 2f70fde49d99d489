"""kmq's REST facade: HTTP receivers send, receive and settle queue messages through signed receipts.

`create_app(ApiConfig(...))` builds the FastAPI app; `kmq api` / `python -m api` serve it with uvicorn from `KMQ_*`
variables; `python -m api.bench` measures it.
"""

from __future__ import annotations

from api.app import create_app
from api.config import ApiConfig
from api.metrics import ApiMetrics
from api.receipts import Receipt, ReceiptSigner, Refusal

__all__ = ["ApiConfig", "ApiMetrics", "Receipt", "ReceiptSigner", "Refusal", "create_app"]
