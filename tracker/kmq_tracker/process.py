"""`python -m kmq_tracker` as a child process, for the benchmark and the tests that kill a replica.

The child reads exactly the given `TrackerConfig` from its environment (`to_env`), serves its probes on a free
local port, and logs to a file. Whoever starts one stops it: `stop()` (SIGTERM) or `kill()` (SIGKILL), and the
context manager always does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType

from prometheus_client.parser import text_string_to_metric_families

from kmq_tracker.config import TrackerConfig

LOCALHOST = "127.0.0.1"
_PROBE_TIMEOUT_S = 2.0


class TrackerProcess:
    """One tracker replica in a child process."""

    def __init__(self, config: TrackerConfig, log_path: Path, extra_env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://{LOCALHOST}:{self.port}"
        self.log_path = log_path
        self.config = config.model_copy(update={"http_host": LOCALHOST, "http_port": self.port, "http_enabled": True})
        self._env = {**os.environ, **self.config.to_env(), **(extra_env or {})}
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        return self._require().pid

    def start(self) -> TrackerProcess:
        with self.log_path.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "kmq_tracker", "--log-level", "info"],
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        return self

    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def status(self, path: str) -> int | None:
        """The HTTP status of GET `path`, None while nothing answers."""
        try:
            with urllib.request.urlopen(self.url + path, timeout=_PROBE_TIMEOUT_S) as response:
                return int(response.status)
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return None

    def wait_ready(self, timeout_s: float) -> None:
        """Until /readyz answers 200; raises with the log's tail if the child exits or the deadline passes."""
        deadline = time.monotonic() + timeout_s
        while self.status("/readyz") != 200:
            if not self.running():
                raise RuntimeError(f"tracker exited with {self._require().returncode}:\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"tracker not ready within {timeout_s}s:\n{self.log_tail()}")
            time.sleep(0.02)  # poll interval of a condition checked against a deadline

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics, keyed `name{label="value",...}` (labels sorted), or `name` without labels."""
        with urllib.request.urlopen(self.url + "/metrics", timeout=_PROBE_TIMEOUT_S) as response:
            return metric_samples(response.read().decode())

    def owned_partitions(self) -> list[int]:
        return owned_partitions(self.metrics())

    def rss_bytes(self) -> int:
        """Resident memory of the child now (Linux /proc)."""
        return self._proc_status("VmRSS")

    def peak_rss_bytes(self) -> int:
        """The child's highest resident memory so far (Linux /proc)."""
        return self._proc_status("VmHWM")

    def _proc_status(self, field: str) -> int:
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError(f"no {field} in /proc/{self.pid}/status")

    def stop(self, timeout_s: float = 30.0) -> int:
        """SIGTERM, then wait for the graceful exit; returns the exit code (SIGKILL after the timeout)."""
        process = self._require()
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                return process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
                raise
        return process.returncode

    def kill(self) -> None:
        process = self._require()
        if process.poll() is None:
            process.kill()
        process.wait()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError as e:
            return f"(no log: {e})"

    def __enter__(self) -> TrackerProcess:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._process is not None:
            self.kill()

    def _require(self) -> subprocess.Popen[bytes]:
        if self._process is None:
            raise RuntimeError("tracker process not started")
        return self._process


def metric_samples(text: str) -> dict[str, float]:
    """Every sample of a /metrics text, keyed `name{label="value",...}` (labels sorted), or `name` without labels."""
    samples: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
    return samples


def owned_partitions(samples: dict[str, float]) -> list[int]:
    """The markers partitions a tracker reports (`kmq_partition_caught_up`), from its `metric_samples`."""
    prefix = "kmq_partition_caught_up{"
    return sorted(int(k.split('partition="')[1].split('"')[0]) for k in samples if k.startswith(prefix))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOCALHOST, 0))
        return int(probe.getsockname()[1])
