"""Shopify's toxiproxy, driven through its HTTP API: TCP proxies on loopback whose links a test cuts or slows.

The server is built once from the Go module proxy by scripts/toxiproxy-build (cached under ~/.cache/kmq/toxiproxy)
and runs as a child process of the test session; nothing here touches the machine's network settings, so other
brokers on the same loopback interface are not affected.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from kmq.demo.services import LOCALHOST, free_port
from kmq.embedded._spawn import guarded, spawn

BUILD_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "toxiproxy-build"
BUILD_TIMEOUT_S = 900.0  # a first build from empty Go caches on a busy 2-core machine
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


def build() -> Path:
    """The toxiproxy server binary, built first if it is not cached yet (the script says so on stderr)."""
    done = subprocess.run([str(BUILD_SCRIPT)], check=False, capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/toxiproxy-build failed (exit {done.returncode}):\n{done.stderr}")
    return Path(done.stdout.strip().splitlines()[-1])


class Toxiproxy:
    """A toxiproxy server on a free loopback port; proxies by name, each listening on a port it picked."""

    def __init__(self, binary: Path, log_file: Path) -> None:
        self._binary, self._log_file = binary, log_file
        self._process: subprocess.Popen[bytes] | None = None
        self._http: httpx.Client | None = None
        self.ports: dict[str, int] = {}

    def start(self) -> Toxiproxy:
        port = free_port()
        with self._log_file.open("wb") as log:
            # Guarded like the embedded brokers: SIGKILLed when the test session dies without its teardown (a
            # session killed from outside once left the server running).
            self._process = spawn(
                guarded([str(self._binary), "-host", LOCALHOST, "-port", str(port)]),
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self._http = httpx.Client(base_url=f"http://{LOCALHOST}:{port}", timeout=10.0)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"toxiproxy did not start within {START_TIMEOUT_S:.0f}s: {self._log_file}")
            time.sleep(0.05)  # a poll interval: the condition is re-checked with a deadline
        return self

    def _answers(self) -> bool:
        try:
            return self._client.get("/version").status_code == 200
        except httpx.TransportError:
            return False

    @property
    def _client(self) -> httpx.Client:
        assert self._http is not None, "toxiproxy is not started"
        return self._http

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        answer = self._client.request(method, path, json=body)
        if answer.status_code >= 300:
            raise RuntimeError(f"toxiproxy {method} {path}: {answer.status_code} {answer.text}")
        return answer.json() if answer.content else None

    def relay(self, name: str, upstream_port: int) -> int:
        """A proxy `name` to `upstream_port` on loopback (replacing one of that name); the port it listens on."""
        if name in self.ports:
            self._call("DELETE", f"/proxies/{name}")
        created = self._call(
            "POST", "/proxies", {"name": name, "listen": f"{LOCALHOST}:0", "upstream": f"{LOCALHOST}:{upstream_port}"}
        )
        self.ports[name] = int(created["listen"].rsplit(":", 1)[1])
        return self.ports[name]

    def set_enabled(self, names: list[str], enabled: bool) -> None:
        """Disabled: the proxy's connections are closed and new ones refused (the link is cut)."""
        for name in names:
            self._call("POST", f"/proxies/{name}", {"enabled": enabled})

    def add_toxic(
        self, proxy: str, name: str, kind: str, stream: str, attributes: dict[str, int], toxicity: float = 1.0
    ) -> None:
        body = {"name": name, "type": kind, "stream": stream, "toxicity": toxicity, "attributes": attributes}
        self._call("POST", f"/proxies/{proxy}/toxics", body)

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}")

    def reset(self) -> None:
        """Every proxy enabled again and every toxic removed."""
        self._call("POST", "/reset")

    def stop(self) -> None:
        if self._http is not None:
            self._http.close()
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def __enter__(self) -> Toxiproxy:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()
