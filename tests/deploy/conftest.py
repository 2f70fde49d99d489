"""Fixtures of the deploy tier: the rendered Kustomize trees, the environment the pods would get, and the image on
a Docker engine (scripts/image). Without kubectl or Docker these tests fail, unless the caller opts in to skipping
them (KMQ_ALLOW_SKIPS=1)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator

import pytest
from deploytools import DEPLOY, KUSTOMIZE_ROOTS, Resource, kubectl_path, render
from dockertools import DockerEngine, DockerUnavailable

from tests.helpers import unavailable


@pytest.fixture(scope="session")
def kubectl() -> str:
    path = kubectl_path()
    if path is None:
        unavailable("kubectl is not installed (scripts/test installs Debian's kubernetes-client when it runs as root)")
    return path


@pytest.fixture(scope="session")
def engine() -> Iterator[DockerEngine]:
    """The image of this tree (scripts/image builds it, cached) on the engine scripts/image used; a private dockerd
    it started for the session is stopped at the session's end, with every container the tests left."""
    try:
        docker = DockerEngine.build_image()
    except DockerUnavailable as error:
        unavailable(f"no image: {error}")
    try:
        yield docker
    finally:
        docker.remove_all()
        docker.close()


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
