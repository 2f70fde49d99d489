"""Fixtures of the Kubernetes tier: the one-node cluster of scripts/k8s-up, a Kafka on its pod bridge, and
the local overlay of deploy/kubernetes applied with `kubectl apply -k`, as a user applies it; all three per module
(one module uses them), so nothing of the cluster runs beside the rest of the suite.

The cluster needs root on Linux (the kubelet, containerd, a bridge); without it these tests fail, unless the caller
opts in to skipping them (KMQ_ALLOW_SKIPS=1). Kubernetes is built once per machine (scripts/k8s-build; scripts/test
builds it before pytest): run alone without it, the first test waits for the build.

`stack` comes twice, one after the other on the same cluster: the local overlay applied with `kubectl apply -k`,
then the Helm chart deploy/helm/kmq installed with `helm install` in a namespace of its own, with the same settings;
every test that takes `stack` runs on both.
"""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kube import KUBECTL_TIMEOUT_S, PARTITIONS, READY_TIMEOUT_S, Cluster, Kube, Stack, helm_namespace

from kmq.embedded import EmbeddedKafka
from tests.deploy.helmtools import CHART, helm_path
from tests.helpers import unavailable

REPO = Path(__file__).resolve().parents[2]
LOCAL_OVERLAY = REPO / "deploy" / "kubernetes" / "overlays" / "local"
NAMESPACE = "kmq-local"  # the local overlay's
HELM_NAMESPACE = "kmq-helm"  # the chart's install
HELM_RELEASE = "kmq"  # objects named kmq-tracker, kmq-api, ... as the overlay names them
BRIDGE = "kmq0"  # scripts/k8s-up's pod bridge
BRIDGE_ADDRESS = "10.233.0.1"  # the host on that bridge: the pods reach it here
K8S_UP_TIMEOUT_S = 2400  # with a build of Kubernetes on a machine that has none yet (scripts/k8s-build)
K8S_DOWN_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if sys.platform != "linux" or os.geteuid() != 0:
        unavailable("the Kubernetes tests need root on Linux (scripts/k8s-up runs a kubelet and containerd)")
    folder: Path | None = None
    try:  # k8s-down whatever happens: a k8s-up killed at its timeout leaves its processes behind
        up = subprocess.run(
            [str(REPO / "scripts" / "k8s-up")], capture_output=True, text=True, timeout=K8S_UP_TIMEOUT_S, check=False
        )
        if up.returncode != 0:
            pytest.fail(f"scripts/k8s-up failed ({up.returncode}):\n{up.stderr[-6000:]}", pytrace=False)
        found = re.search(r"^export KUBECONFIG=(\S+)$", up.stdout, re.MULTILINE)
        assert found, f"scripts/k8s-up printed no KUBECONFIG:\n{up.stdout}"
        folder = Path(found.group(1)).parent
        build = subprocess.run(
            [str(REPO / "scripts" / "k8s-build")], capture_output=True, text=True, timeout=60, check=True
        )
        yield Cluster(kubectl=str(Path(build.stdout.strip()) / "kubectl"), kubeconfig=found.group(1))
    finally:
        k8s_down = [str(REPO / "scripts" / "k8s-down"), *([str(folder)] if folder else [])]
        down = subprocess.run(k8s_down, capture_output=True, text=True, timeout=K8S_DOWN_TIMEOUT_S, check=False)
        assert down.returncode == 0, f"scripts/k8s-down failed ({down.returncode}):\n{down.stderr}"
        if folder is not None:
            assert_nothing_left(folder)


def assert_nothing_left(folder: Path) -> None:
    """After scripts/k8s-down: no process naming the cluster's folder, no mount under it, no folder, no bridge."""
    mounts = [line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()]
    assert not [m for m in mounts if m.startswith(f"{folder}/")], "mounts left under the cluster's folder"
    running = subprocess.run(["pgrep", "-f", f"{folder}/"], capture_output=True, text=True, check=False).stdout.split()
    assert running == [], f"processes left naming {folder}: {running}"
    assert not folder.exists(), f"{folder} left"
    bridge = subprocess.run(["ip", "link", "show", BRIDGE], capture_output=True, text=True, check=False)
    assert bridge.returncode != 0, f"the bridge {BRIDGE} left"


@pytest.fixture(scope="module")
def kafka_on_bridge(cluster: Cluster) -> Iterator[EmbeddedKafka]:
    """Apache Kafka listening on the pod bridge's address: the pods have a network namespace of their own, so the
    session's broker (on 127.0.0.1) is out of their reach."""
    with EmbeddedKafka("kafka", host=BRIDGE_ADDRESS) as kafka:
        yield kafka


@pytest.fixture(scope="module")
def helm_binary() -> str:
    """Helm, built once by scripts/helm-build (scripts/test builds it before pytest)."""
    return helm_path()


@pytest.fixture(scope="module", params=["kustomize", "helm"])
def stack(
    request: pytest.FixtureRequest,
    cluster: Cluster,
    kafka_on_bridge: EmbeddedKafka,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Stack]:
    """The local overlay or the Helm chart, pointed at this module's broker and a queue of its own, and Ready."""
    queue = kafka_on_bridge.config(f"t-k8s-{request.param}-{uuid.uuid4().hex[:8]}")
    kafka_on_bridge.ensure_topics(queue, PARTITIONS)
    settings = {
        "KMQ_BOOTSTRAP_SERVERS": kafka_on_bridge.bootstrap_servers,
        "KMQ_QUEUE_TOPIC": queue.queue_topic,
        "KMQ_API_QUEUES": queue.queue_topic,
        "KMQ_KAFKA_CONFIG": json.dumps(kafka_on_bridge.kafka_config),
        "KMQ_CONSUMER_KAFKA_CONFIG": json.dumps(kafka_on_bridge.consumer_kafka_config),
    }
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "kustomize":
        yield from _overlay_stack(cluster, kafka_on_bridge, settings, folder)
    else:
        yield from _chart_stack(cluster, kafka_on_bridge, settings, folder, request.getfixturevalue("helm_binary"))


def _ready(kube: Kube, kafka: EmbeddedKafka, queue: str, api_key: str) -> Stack:
    for deployment in ("kmq-tracker", "kmq-api"):
        kube.run("rollout", "status", f"deployment/{deployment}", f"--timeout={READY_TIMEOUT_S}s")
    service = kube.get("service", "kmq-api")
    port = service["spec"]["ports"][0]["port"]
    result = Stack(kube, kafka, queue, api_key, f"http://{service['spec']['clusterIP']}:{port}")
    result.wait_steady()
    return result


def _overlay_stack(
    cluster: Cluster, kafka_on_bridge: EmbeddedKafka, settings: dict[str, str], overlay: Path
) -> Iterator[Stack]:
    """The local overlay, applied with `kubectl apply -k` through an overlay of the test's that only points it at
    this module's broker and queue (and the broker's short consumer sessions)."""
    kube = Kube(cluster.kubectl, cluster.kubeconfig, NAMESPACE)
    (overlay / "kustomization.yaml").write_text(
        "apiVersion: kustomize.config.k8s.io/v1beta1\n"
        "kind: Kustomization\n"
        f"resources:\n  - {os.path.relpath(LOCAL_OVERLAY, overlay)}\n"
        "patches:\n  - path: configmap.yaml\n"
    )
    (overlay / "configmap.yaml").write_text(
        json.dumps({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "kmq-config"}, "data": settings})
    )
    secrets = subprocess.run(
        [cluster.kubectl, "kustomize", str(LOCAL_OVERLAY)], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    api_key = re.search(r"KMQ_API_KEYS: (\S+)", secrets)
    assert api_key, "the local overlay generates the facade's API keys"
    kube.run("apply", "-k", str(overlay))
    try:
        yield _ready(
            kube,
            kafka_on_bridge,
            settings["KMQ_QUEUE_TOPIC"],
            base64.b64decode(api_key.group(1)).decode().split(",")[0],
        )
    finally:
        deleted = kube.attempt("delete", "-k", str(overlay), "--wait=true", timeout_s=300)
        assert deleted.returncode == 0, f"kubectl delete -k failed:\n{deleted.stderr}"


def helm_values(kafka: EmbeddedKafka, settings: dict[str, str], api_key: str) -> dict[str, object]:
    """The chart's values for the local cluster: what the local overlay sets (two trackers, one facade, the image
    imported into the node, small requests) and the test's broker and queue."""
    small = {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}}
    return {
        "image": {"repository": "kmq", "pullPolicy": "Never"},
        "kafka": {
            "bootstrapServers": settings["KMQ_BOOTSTRAP_SERVERS"],
            "config": kafka.kafka_config,
            "consumerConfig": kafka.consumer_kafka_config,
        },
        "queue": {"topic": settings["KMQ_QUEUE_TOPIC"]},
        "secrets": {"apiKeys": [api_key], "receiptSecret": f"helm-test-receipt-key-{uuid.uuid4().hex}"},
        "tracker": {"replicas": 2, "resources": small},
        "api": {"replicas": 1, "resources": small},
    }


def _chart_stack(
    cluster: Cluster, kafka_on_bridge: EmbeddedKafka, settings: dict[str, str], folder: Path, helm: str
) -> Iterator[Stack]:
    """The Helm chart, installed with `helm install` as a user installs it, in a restricted namespace of its own."""
    kube = Kube(cluster.kubectl, cluster.kubeconfig, HELM_NAMESPACE)
    api_key = f"helm-api-key-{uuid.uuid4().hex[:8]}"
    values = folder / "values.json"
    values.write_text(json.dumps(helm_values(kafka_on_bridge, settings, api_key)))
    kube.run("apply", "-f", "-", stdin=helm_namespace(HELM_NAMESPACE))
    command = [helm, "--kubeconfig", cluster.kubeconfig, "--namespace", HELM_NAMESPACE]
    try:
        installed = subprocess.run(
            [*command, "install", HELM_RELEASE, str(CHART), "--values", str(values)],
            capture_output=True,
            text=True,
            timeout=KUBECTL_TIMEOUT_S,
            check=False,
        )
        assert installed.returncode == 0, f"helm install failed:\n{installed.stderr}"
        yield _ready(kube, kafka_on_bridge, settings["KMQ_QUEUE_TOPIC"], api_key)
    finally:
        uninstall = [*command, "uninstall", HELM_RELEASE, "--wait", "--timeout", "300s", "--ignore-not-found"]
        removed = subprocess.run(uninstall, capture_output=True, text=True, timeout=360, check=False)
        deleted = kube.attempt("delete", "namespace", HELM_NAMESPACE, "--wait=true", timeout_s=300)
        assert removed.returncode == 0, f"helm uninstall failed:\n{removed.stderr}"
        assert deleted.returncode == 0, f"kubectl delete namespace failed:\n{deleted.stderr}"
