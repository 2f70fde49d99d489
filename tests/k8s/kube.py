"""kubectl against the one-node cluster of scripts/k8s-up, from the tests' side."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from kmq.embedded import EmbeddedKafka
from kmq_tracker.process import metric_samples, owned_partitions
from tests.helpers import wait_for

KUBECTL_TIMEOUT_S = 120
TRACKER_PORT = 9095  # the base's KMQ_TRACKER_HTTP_PORT and the tracker container's port
READY_TIMEOUT_S = 180
PARTITIONS = 4
K8S_VERSION = os.environ.get("KMQ_K8S_VERSION", "1.34.4")
K8S_BIN = Path(os.environ.get("KMQ_K8S_CACHE", Path.home() / ".cache" / "kmq" / "k8s" / K8S_VERSION)) / "bin"
COMPONENTS = ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "kubectl")
# scripts/test builds Kubernetes before pytest; a session without the binaries builds them in its first test
# (scripts/k8s-up calls scripts/k8s-build: minutes), and that test's time limit says so.
TEST_TIMEOUT_S = 600 if all((K8S_BIN / c).exists() for c in COMPONENTS) else 3000


@dataclass(frozen=True)
class Cluster:
    kubectl: str
    kubeconfig: str


@dataclass(frozen=True)
class Pod:
    name: str
    uid: str
    ip: str
    ready: bool
    terminating: bool
    node: str

    def tracker_metrics(self) -> dict[str, float]:
        return metric_samples(httpx.get(f"http://{self.ip}:{TRACKER_PORT}/metrics", timeout=2.0).text)

    def owned_partitions(self) -> list[int]:
        """The partitions this tracker pod serves (its /metrics, from the host over the pod bridge); none if it does
        not answer."""
        try:
            return owned_partitions(self.tracker_metrics())
        except httpx.HTTPError:
            return []


@dataclass(frozen=True)
class Kube:
    kubectl: str
    kubeconfig: str
    namespace: str

    def run(self, *args: str, timeout_s: float = KUBECTL_TIMEOUT_S, stdin: str | None = None) -> str:
        """kubectl with the cluster's kubeconfig in the namespace; its stdout, or a failure naming its stderr."""
        done = self.attempt(*args, timeout_s=timeout_s, stdin=stdin)
        assert done.returncode == 0, f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}"
        return done.stdout

    def attempt(
        self, *args: str, timeout_s: float = KUBECTL_TIMEOUT_S, stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]:
        command = [self.kubectl, "--kubeconfig", self.kubeconfig, "--namespace", self.namespace, *args]
        return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=timeout_s, check=False)

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", *args, "-o", "json"))

    def pods(self, component: str) -> list[Pod]:
        """The pods of a component (tracker, api), oldest first."""
        found = self.get("pods", "-l", f"app.kubernetes.io/component={component}")["items"]
        found.sort(key=lambda p: p["metadata"]["creationTimestamp"])
        return [_pod(p) for p in found]

    def ready_pods(self, component: str) -> list[Pod]:
        return [p for p in self.pods(component) if p.ready and not p.terminating]

    def evict(self, pod: str) -> subprocess.CompletedProcess[str]:
        """The Eviction API (what `kubectl drain` uses) on one pod: a PodDisruptionBudget can refuse it (429)."""
        eviction = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": pod, "namespace": self.namespace},
        }
        path = f"/api/v1/namespaces/{self.namespace}/pods/{pod}/eviction"
        return self.attempt("create", "--raw", path, "-f", "-", stdin=json.dumps(eviction))


def _pod(item: dict[str, Any]) -> Pod:
    conditions = {c["type"]: c["status"] for c in item["status"].get("conditions", [])}
    return Pod(
        name=item["metadata"]["name"],
        uid=item["metadata"]["uid"],
        ip=item["status"].get("podIP", ""),
        ready=conditions.get("Ready") == "True",
        terminating="deletionTimestamp" in item["metadata"],
        node=item["spec"].get("nodeName", ""),
    )


@dataclass(frozen=True)
class Stack:
    kube: Kube
    kafka: EmbeddedKafka
    queue: str
    api_key: str
    api_url: str  # the Service's cluster IP, through kube-proxy

    def queue_url(self) -> str:
        return f"{self.api_url}/v1/queues/{self.queue}"

    def wait_steady(self) -> None:
        """Two Ready trackers that split the partitions between them, and one Ready facade pod."""

        def steady() -> bool:
            trackers = self.kube.ready_pods("tracker")
            if len(trackers) != 2 or len(self.kube.ready_pods("api")) != 1:
                return False
            owned = [t.owned_partitions() for t in trackers]
            return all(owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS))

        wait_for(steady, READY_TIMEOUT_S, 0.5, what="2 Ready trackers splitting the partitions and 1 Ready facade")


def helm_namespace(name: str) -> str:
    """A namespace enforcing the restricted Pod Security Standard, as the local overlay's does."""
    labels = {f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn")}
    return json.dumps({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}})
