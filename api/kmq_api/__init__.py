"""kmq's REST facade: HTTP receivers send, receive and settle queue messages through signed receipts.

`create_app(ApiConfig(...))` builds the FastAPI app; `kmq api` / `python -m kmq_api` serve it with uvicorn from `KMQ_*`
variables; `python -m kmq_api.bench` measures it.
"""

from __future__ import annotations

from kmq_api.app import create_app
from kmq_api.config import ApiConfig
from kmq_api.metrics import ApiMetrics
from kmq_api.receipts import Receipt, ReceiptSigner, Refusal

__all__ = ["ApiConfig", "ApiMetrics", "Receipt", "ReceiptSigner", "Refusal", "create_app"]
