"""kmq's REST facade: HTTP receivers send, receive and settle queue messages through signed receipts.

`create_app(ApiConfig(...))` builds the FastAPI app; `kmq api` / `python -m kmq_api` serve it with uvicorn from `KMQ_*`
variables; `python -m kmq_api.bench` measures it.
"""

from __future__ import annotations

from kmq.extras import require

require("kmq_api", "api")  # before the imports below: without the extra, one line names the pip install

from kmq_api.app import create_app  # noqa: E402
from kmq_api.config import ApiConfig  # noqa: E402
from kmq_api.metrics import ApiMetrics  # noqa: E402
from kmq_api.receipts import Receipt, ReceiptSigner, Refusal  # noqa: E402

__all__ = ["ApiConfig", "ApiMetrics", "Receipt", "ReceiptSigner", "Refusal", "create_app"]
