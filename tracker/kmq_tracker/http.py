"""The tracker's one HTTP port: `/metrics` (Prometheus), `/healthz` (loop alive) and `/readyz` (caught up)."""

from __future__ import annotations

import logging
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from socketserver import ThreadingMixIn
from typing import Any, Protocol

from kmq.errors import ConfigError
from kmq_tracker.metrics import CONTENT_TYPE_LATEST, TrackerMetrics

_log = logging.getLogger(__name__)
MAX_CONNECTIONS = 16
REQUEST_TIMEOUT_S = 2.0


class Status(Protocol):
    """What the probes ask the service."""

    def alive(self) -> bool: ...

    def ready(self) -> bool: ...

    def problem(self) -> str | None:
        """Why it is not alive, when known (e.g. its Kafka client lost its brokers)."""


class HealthServer:
    """A small stdlib server on a thread of its own; scrapes and probes never touch the loop or its Kafka clients.

    Each connection is served on a thread of its own, so an idle or slow client never delays a probe; a client gets
    `REQUEST_TIMEOUT_S` to send its request, and at most `MAX_CONNECTIONS` are served at once (more are closed at
    once), which bounds the threads (and their malloc arenas) whatever the clients do.
    """

    def __init__(self, host: str, port: int, metrics: TrackerMetrics, status: Status) -> None:
        handler = type("_BoundHandler", (_Handler,), {"metrics": metrics, "status": status})
        try:
            self._server = _ProbeServer((host, port), handler)
        except OSError as e:
            raise ConfigError("http_port", f"cannot serve probes on {host}:{port}: {e.strerror or e}") from e
        self._thread = threading.Thread(target=self._serve, name="kmq-tracker-http", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> None:
        self._thread.start()
        _log.info("serving /metrics, /healthz and /readyz on port %d", self.port)

    def _serve(self) -> None:
        self._server.serve_forever(poll_interval=0.05)  # how soon stop() is noticed

    def stop(self) -> None:
        if self._thread.is_alive():
            self._server.shutdown()
            self._thread.join()
        self._server.server_close()


class _ProbeServer(ThreadingMixIn, HTTPServer):
    """A thread per connection, at most MAX_CONNECTIONS of them."""

    daemon_threads = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], handler: Any) -> None:
        super().__init__(address, handler)
        self._slots = threading.BoundedSemaphore(MAX_CONNECTIONS)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            _log.warning("%d probe connections open: closing one from %s", MAX_CONNECTIONS, client_address)
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class _Handler(BaseHTTPRequestHandler):
    metrics: TrackerMetrics
    status: Status
    timeout = REQUEST_TIMEOUT_S  # seconds a client may take to send its request

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        if path == "/metrics":
            self._send(200, self.metrics.render(), CONTENT_TYPE_LATEST)
        elif path == "/healthz":
            alive = self.status.alive()
            why = "" if alive else self.status.problem() or "loop stalled"
            self._probe(alive, b"loop alive\n", f"{why}\n".encode())
        elif path == "/readyz":
            self._probe(self.status.ready(), b"caught up\n", b"not caught up on every owned partition\n")
        else:
            self._send(404, b"not found: try /metrics, /healthz or /readyz\n")

    def log_message(self, format: str, *args: object) -> None:
        _log.debug("http: " + format, *args)  # BaseHTTPRequestHandler hands over a %-format

    def _probe(self, ok: bool, good: bytes, bad: bytes) -> None:
        self._send(200 if ok else 503, good if ok else bad)

    def _send(self, code: int, body: bytes, content_type: str = "text/plain; charset=utf-8") -> None:
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
