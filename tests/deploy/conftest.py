"""Fixtures of the deploy tier: the rendered Kustomize trees and the environment the pods would get (offline)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from deploytools import DEPLOY, KUSTOMIZE_ROOTS, Resource, kubectl_path, render


@pytest.fixture(scope="session")
def kubectl() -> str:
    path = kubectl_path()
    if path is None:
        pytest.skip("kubectl is not installed (scripts/test installs Debian's kubernetes-client when it runs as root)")
    return path


@pytest.fixture(scope="session")
def rendered(kubectl: str) -> dict[str, list[Resource]]:
    """`kubectl kustomize` of the dev and prod overlays and of the example Kafka cluster."""
    return {name: render(kubectl, root) for name, root in KUSTOMIZE_ROOTS.items()}


@pytest.fixture(scope="session")
def dashboard() -> Resource:
    loaded: Resource = json.loads((DEPLOY / "grafana" / "kmq-dashboard.json").read_text())
    return loaded


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    """No KMQ_* variable of the test run (KMQ_BOOTSTRAP_SERVERS may point at a cluster) leaks into a config read."""
    for name in list(os.environ):
        if name.startswith("KMQ_"):
            monkeypatch.delenv(name)
    yield monkeypatch
