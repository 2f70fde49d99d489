"""The machine a run measured on, for the report (figures only compare within one machine and one run)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

import confluent_kafka


def machine(broker: str) -> dict[str, Any]:
    return {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gb": _memory_gb(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "confluent_kafka": _version(confluent_kafka.version()),
        "librdkafka": _version(confluent_kafka.libversion()),
        "broker": broker,
    }


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
