"""Helm from the tests' side: the binary scripts/helm-build made, and the chart deploy/helm/kmq rendered offline."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "deploy" / "helm" / "kmq"
HELM_BUILD_TIMEOUT_S = 1800  # a first build from the Go module proxy on a loaded machine; then it returns at once
# The values every install needs (the chart refuses to render without them).
REQUIRED = {
    "kafka.bootstrapServers": "kafka:9092",
    "queue.topic": "orders",
    "secrets.receiptSecret": "r" * 64,
}


def helm_path() -> str:
    """The pinned Helm, built once by scripts/helm-build (cached in ~/.cache/kmq/bin)."""
    done = subprocess.run(
        [str(REPO / "scripts" / "helm-build")],
        capture_output=True,
        text=True,
        timeout=HELM_BUILD_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"scripts/helm-build failed:\n{done.stderr[-4000:]}"
    return done.stdout.strip()


def set_args(values: dict[str, str]) -> list[str]:
    return [arg for name, value in values.items() for arg in ("--set-string", f"{name}={value}")]


def helm(binary: str, *args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=timeout_s, check=False)


def template(binary: str, values: dict[str, str] | None = None, *extra: str, release: str = "kmq") -> str:
    """`helm template` of the chart with the required values (and `values` over them): its YAML."""
    done = helm(binary, "template", release, str(CHART), *set_args({**REQUIRED, **(values or {})}), *extra)
    assert done.returncode == 0, f"helm template failed:\n{done.stderr}"
    return done.stdout


def render_chart(binary: str, values: dict[str, str] | None = None, *extra: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(template(binary, values, *extra)) if doc]
