"""`kmq worker --metrics-port`: `/metrics` (Prometheus) and `/healthz` (no thread died, no stall) on one port."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from kmq.worker.runtime import Worker

_log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 2.0


def health_problem(worker: Worker) -> str | None:
    """Why `/healthz` fails: a thread of the worker died, or no message was settled for the stall timeout while
    messages were held (kmq.progress); None when healthy."""
    if worker.failure is not None:
        return f"worker stopped: {worker.failure}"
    return worker.core.progress.problem()


class WorkerHttp:
    """A stdlib server on a thread of its own: scrapes and probes never touch the worker's Kafka clients."""

    def __init__(self, worker: Worker, port: int, host: str = "0.0.0.0") -> None:
        handler = type("_BoundHandler", (_Handler,), {"worker": worker})
        self._server = ThreadingHTTPServer((host, port), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.05,), name="kmq-worker-http")
        self._thread.daemon = True

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        _log.info("serving /metrics and /healthz on port %d", self.port)

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    worker: Worker
    timeout = REQUEST_TIMEOUT_S

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.worker.metrics.render(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            problem = health_problem(self.worker)
            self._send(503 if problem else 200, f"{problem or 'working'}\n".encode())
        else:
            self._send(404, b"not found: try /metrics or /healthz\n")

    def log_message(self, format: str, *args: Any) -> None:
        _log.debug("http: " + format, *args)

    def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
