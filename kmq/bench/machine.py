"""The machine a run measured on, for the report (figures only compare within one machine and one run)."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path
from typing import Any

import confluent_kafka

from kmq.bench.options import BenchOptions
from kmq.embedded import KAFKA_VERSION

_SOURCE = Path(__file__).resolve().parents[2]  # the checkout kmq runs from, when it is one
_GIT_TIMEOUT_S = 10
_PACKAGES = ("kmq", "tracker", "api", "pyproject.toml")


def at_start() -> dict[str, Any]:
    """What to note as a run starts: the code it runs (its commit, and whether kmq's packages differ from it) and
    the load average."""
    commit = _git("rev-parse", "HEAD")
    changed = None if commit is None else _git("status", "--porcelain", "--", *_PACKAGES)
    return {
        "git_commit": commit,
        "git_dirty": None if changed is None else bool(changed),
        "load_average_start": load_average(),
    }


def machine(broker: str, broker_version: str | None, started: dict[str, Any]) -> dict[str, Any]:
    """The machine, the versions and the code a run measured (`started`: `at_start()`); the load average at its end."""
    return {
        **started,
        "load_average_end": load_average(),
        "broker_version": broker_version,
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": _version(confluent_kafka.version()),
        "librdkafka": _version(confluent_kafka.libversion()),
        "broker": broker,
    }


def load_average() -> list[float] | None:
    """The 1, 5 and 15 minute load averages (what else ran on the machine), where the OS gives them."""
    try:
        return [round(load, 2) for load in os.getloadavg()]
    except OSError:
        return None


def broker_version(options: BenchOptions) -> str | None:
    """The embedded broker's release (Apache Kafka's, from KMQ_KAFKA_VERSION); unknown for another cluster."""
    if options.bootstrap_servers is None and options.backend == "kafka":
        return f"Apache Kafka {os.environ.get('KMQ_KAFKA_VERSION') or KAFKA_VERSION}"
    return None


def _git(*args: str) -> str | None:
    """`git <args>` in kmq's own checkout; None outside one (an installed package) or without git."""
    if not (_SOURCE / ".git").exists():
        return None
    try:
        done = subprocess.run(
            ["git", "-C", str(_SOURCE), *args], capture_output=True, text=True, timeout=_GIT_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() if done.returncode == 0 else None


def _version(reported: object) -> str:
    """confluent-kafka reports versions as a string or as a (string, int) pair, depending on the call."""
    return str(reported[0] if isinstance(reported, tuple) else reported)


def _cpu_model() -> str:
    for line in _read("/proc/cpuinfo").splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def _memory_gb() -> float | None:
    for line in _read("/proc/meminfo").splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
