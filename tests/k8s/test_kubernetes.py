"""deploy/kubernetes on a real cluster (scripts/k8s-up): the local overlay of the same base users apply elsewhere,
applied with `kubectl apply -k`; two tracker replicas and the REST facade, Ready under the restricted Pod Security
Standard; messages through the facade's Service; a tracker pod deleted mid-stream; a rolling restart of the facade
under load; the PodDisruptionBudget against the eviction of the last ready tracker. Each runs on the overlay and
then on the Helm chart (deploy/helm/kmq) installed with the same settings; the chart's render, with every optional
part on, also passes the API server's own validation (a server-side dry run).

The tests share one deployment (tests/k8s/conftest.py: `stack`) and each starts from its steady state: two Ready
trackers splitting the partitions, one Ready facade pod.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from kube import PARTITIONS, TEST_TIMEOUT_S, Cluster, Kube, Stack, helm_namespace

from tests.deploy.helmtools import template
from tests.facade_http import leave_one_per_partition, stream_through_a_blow
from tests.helpers import wait_for

pytestmark = pytest.mark.timeout(TEST_TIMEOUT_S)
REPO = Path(__file__).resolve().parents[2]
VISIBILITY_MS = 10_000
# deploy/README.md, "Upgrading": during a rolling update of the facade a client retries a request that failed on a
# connection error or a 502/503 for up to this long (what a pod's preStop pause and kube-proxy's update leave).
RETRY_WINDOW_S = 10.0
RETRY_INTERVAL_S = 0.1
STREAM_TIMEOUT_S = 240


def http_client(stack: Stack) -> httpx.Client:
    return httpx.Client(base_url=stack.queue_url(), headers={"Authorization": f"Bearer {stack.api_key}"}, timeout=15.0)


def redeliveries(stack: Stack) -> float:
    return sum(p.tracker_metrics().get("kmq_redeliveries_total", 0.0) for p in stack.kube.ready_pods("tracker"))


def test_two_trackers_and_the_facade_are_ready_under_the_restricted_pod_security_standard(stack: Stack) -> None:
    stack.wait_steady()
    namespace = stack.kube.get("namespace", stack.kube.namespace)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    for pod in stack.kube.get("pods")["items"]:
        spec = pod["spec"]
        assert spec["securityContext"]["runAsUser"] == 10001, pod["metadata"]["name"]
        assert all(c["imagePullPolicy"] == "Never" for c in spec["containers"])
        assert all(s["restartCount"] == 0 for s in pod["status"]["containerStatuses"]), pod["status"]
    # the HorizontalPodAutoscaler of the prod overlay (not in the local one: no metrics server here), accepted by this
    # API server field by field
    hpa = REPO / "deploy" / "kubernetes" / "autoscaling" / "api-hpa.yaml"
    stack.kube.run("apply", "--dry-run=server", "--validate=strict", "-f", str(hpa))
    # the disruption controller counts the Ready trackers in its own time
    wait_for(
        lambda: stack.kube.get("pdb", "kmq-tracker")["status"].get("currentHealthy") == 2,
        60,
        0.5,
        what="the tracker budget counting 2 healthy pods",
    )
    assert stack.kube.get("pdb", "kmq-tracker")["status"]["disruptionsAllowed"] == 1


def test_messages_left_unacknowledged_through_the_service_are_redelivered(stack: Stack) -> None:
    stack.wait_steady()
    before = redeliveries(stack)
    with http_client(stack) as http:
        outcome = leave_one_per_partition(http, [f"u{i}" for i in range(40)], VISIBILITY_MS)
    assert set(outcome.left) == outcome.used_partitions
    assert sorted(c.value for c in outcome.copies) == sorted(d.value for d in outcome.left.values())
    assert all(c.redelivery_count == 1 for c in outcome.copies)
    assert redeliveries(stack) - before == len(outcome.left)


def test_deleting_the_tracker_pod_that_owns_most_partitions_mid_stream_loses_nothing(stack: Stack) -> None:
    stack.wait_steady()
    trackers = stack.kube.ready_pods("tracker")
    victim = max(trackers, key=lambda p: len(p.owned_partitions()))
    survivor = next(p for p in trackers if p.name != victim.name)
    outcome = stream_through_a_blow(
        lambda: http_client(stack),
        lambda: stack.kube.run("delete", "pod", victim.name, "--wait=false"),
        set(victim.owned_partitions()),
        VISIBILITY_MS,
        STREAM_TIMEOUT_S,
    )
    assert outcome.settled == set(outcome.sent), f"lost: {sorted(set(outcome.sent) - outcome.settled)}"
    left = outcome.left_with_victim
    assert outcome.struck_at - min(left.values()) < VISIBILITY_MS / 1000, "deleted too late to test a take-over"
    assert set(left) <= {c.value for c in outcome.copies}, "the victim's unacknowledged messages came back"
    # the Deployment replaced the deleted pod, and the two split the partitions again
    stack.wait_steady()
    names = {p.name for p in stack.kube.ready_pods("tracker")}
    assert victim.name not in names and survivor.name in names


def test_a_rolling_restart_of_the_facade_under_load_fails_no_request_beyond_the_retry_window(stack: Stack) -> None:
    stack.wait_steady()
    old_pod = stack.kube.ready_pods("api")[0].name
    outages: list[float] = []  # how long each request that failed at first took to succeed
    restarted = threading.Event()
    sent: list[str] = []
    failure: list[BaseException] = []

    def retried(http: httpx.Client, path: str, body: dict[str, Any]) -> httpx.Response:
        """A POST retried on a connection error or 502/503 until it succeeds, within RETRY_WINDOW_S."""
        first_failure: float | None = None
        while True:
            try:
                answer = http.post(path, json=body)
                if answer.status_code not in (502, 503):
                    if first_failure is not None:
                        outages.append(time.monotonic() - first_failure)
                    return answer
                problem = f"HTTP {answer.status_code}: {answer.text[:200]}"
            except httpx.TransportError as error:
                problem = repr(error)
            first_failure = first_failure or time.monotonic()
            waited = time.monotonic() - first_failure
            assert waited < RETRY_WINDOW_S, (
                f"a request failed for {waited:.1f} s (window {RETRY_WINDOW_S} s): {problem}"
            )
            time.sleep(RETRY_INTERVAL_S)  # between retries of a failed request

    def stream() -> None:
        try:
            with http_client(stack) as http:
                for batch in range(30):
                    values = [f"r{batch}-{i}" for i in range(10)]
                    body = {"messages": [{"value": v, "key": v} for v in values]}
                    answer = retried(http, "/messages", body)
                    assert answer.status_code == 200, answer.text
                    sent.extend(values)
                    if batch == 10:
                        restarted.wait(STREAM_TIMEOUT_S)  # the rest once the restart has begun
                    time.sleep(0.2)  # the stream's pace, not a wait for a condition
        except BaseException as error:  # noqa: BLE001  # re-raised in the test's thread
            failure.append(error)

    sender = threading.Thread(target=stream, name="http-sender", daemon=True)
    sender.start()
    settled: set[str] = set()
    rolled_out = False
    try:
        with http_client(stack) as http:
            deadline = time.monotonic() + STREAM_TIMEOUT_S
            while sender.is_alive() or settled != set(sent) or not rolled_out:
                assert not failure, f"sending failed: {failure[0]!r}"
                assert time.monotonic() < deadline, f"settled {len(settled)} of {len(sent)}, rolled out: {rolled_out}"
                body = {"max_messages": 100, "wait_ms": 500, "visibility_timeout_ms": VISIBILITY_MS}
                answer = retried(http, "/receive", body)
                assert answer.status_code == 200, answer.text
                got = list(answer.json()["messages"])
                if got:
                    acked = retried(http, "/ack", {"receipts": [m["receipt"] for m in got]})
                    # 409: a retried ack whose first attempt had settled them already
                    assert acked.status_code in (200, 409), acked.text
                    if acked.status_code == 200:
                        statuses = {r["status"] for r in acked.json()["results"]}
                        assert statuses <= {"ok", "expired"}, acked.text
                    # only this test's values: a late copy of an earlier test's message is acknowledged, not counted
                    settled |= {m["value"] for m in got if m["value"].startswith("r")}
                if not restarted.is_set() and len(settled) >= 50:
                    stack.kube.run("rollout", "restart", "deployment/kmq-api")
                    restarted.set()
                rolled_out = restarted.is_set() and _rolled_out(stack, old_pod)
    finally:
        restarted.set()
        sender.join(30)
    assert not failure, f"sending failed: {failure[0]!r}"
    assert len(sent) == 300
    assert settled == set(sent), f"lost: {sorted(set(sent) - settled)}"
    assert [p.name for p in stack.kube.ready_pods("api")] != [old_pod]
    print(f"\nrolling restart: {len(outages)} requests retried, the longest for {max(outages, default=0):.2f} s")


def test_the_disruption_budget_refuses_to_evict_the_last_ready_tracker(stack: Stack) -> None:
    stack.wait_steady()
    kube = stack.kube
    first, last = kube.ready_pods("tracker")
    node = kube.get("pod", first.name)["spec"]["nodeName"]
    kube.run("cordon", node)  # the evicted tracker's replacement stays Pending: one node, cordoned
    try:
        evicted = kube.evict(first.name)
        assert evicted.returncode == 0, f"the first eviction is within the budget:\n{evicted.stderr}"
        wait_for(
            lambda: (
                kube.get("pdb", "kmq-tracker")["status"].get("disruptionsAllowed") == 0
                and [p.name for p in kube.ready_pods("tracker")] == [last.name]
            ),
            60,
            0.5,
            what="one ready tracker left, and the budget allowing no disruption",
        )
        refused = kube.evict(last.name)
        assert refused.returncode != 0, "the last ready tracker was evicted"
        assert "disruption budget" in refused.stderr, refused.stderr
        assert "429" in refused.stderr or "TooManyRequests" in refused.stderr, refused.stderr
        assert [p.name for p in kube.ready_pods("tracker")] == [last.name]
    finally:
        kube.run("uncordon", node)
    stack.wait_steady()
    assert sum(len(p.owned_partitions()) for p in kube.ready_pods("tracker")) == PARTITIONS


def test_the_charts_render_passes_the_api_servers_validation(cluster: Cluster, helm_binary: str) -> None:
    """`helm template` with the security values set, applied as a server-side dry run with strict field validation:
    the API server's own schemas (and admission: the restricted Pod Security Standard) accept every object."""
    kube = Kube(cluster.kubectl, cluster.kubeconfig, "kmq-helm-dry-run")
    security = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.security.saslMechanism": "SCRAM-SHA-512",
        "kafka.security.saslUsername": "kmq",
        "kafka.security.passwordSecret.name": "kmq-user",
        "kafka.security.caSecret.name": "kafka-ca",
    }
    rendered = template(helm_binary, security, "--namespace", kube.namespace, "--set", "secrets.apiKeys={k}")
    kube.run("apply", "-f", "-", stdin=helm_namespace(kube.namespace))
    try:
        applied = kube.run("apply", "--dry-run=server", "--validate=strict", "-f", "-", stdin=rendered)
    finally:
        kube.run("delete", "namespace", kube.namespace, "--wait=true", timeout_s=300)
    objects = ["configmap/kmq-config", "secret/kmq-secrets", "serviceaccount/kmq"]
    for name in ("kmq-tracker", "kmq-api"):
        objects += [f"deployment.apps/{name}", f"service/{name}", f"poddisruptionbudget.policy/{name}"]
    assert sorted(applied.splitlines()) == sorted(f"{o} created (server dry run)" for o in objects), applied


def _rolled_out(stack: Stack, old_pod: str) -> bool:
    deployment = stack.kube.get("deployment", "kmq-api")
    status, wanted = deployment["status"], deployment["spec"]["replicas"]
    done = (
        status.get("observedGeneration", 0) >= deployment["metadata"]["generation"]
        and status.get("updatedReplicas") == wanted
        and status.get("availableReplicas") == wanted
        and status.get("replicas") == wanted
    )
    return done and old_pod not in {p.name for p in stack.kube.pods("api")}
