"""The Helm chart deploy/helm/kmq, offline: `helm lint`, its renders valid for Kubernetes, and the same pods as the
Kustomize base (probes, security, grace periods, ports), Kafka security wired as the base wires it, the
ServiceMonitors off by default. tests/k8s installs it on a cluster and runs the overlay's checks on it."""

from __future__ import annotations

import shutil
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
from crd_schemas import CRD_SCHEMAS
from deploytools import Resource, container, of_kind, one, pod_spec, selects
from helmtools import CHART, REQUIRED, helm, helm_path, render_chart, set_args

from tests.helpers import unavailable

# The oldest Kubernetes the chart promises (Chart.yaml kubeVersion) and the newest kubernetes-validate knows.
K8S_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
SAME_AS_THE_BASE = ("livenessProbe", "readinessProbe", "startupProbe", "securityContext", "ports", "lifecycle", "args")


@pytest.fixture(scope="module")
def helm_binary() -> str:
    if shutil.which("go") is None:
        unavailable("Go is not installed: scripts/helm-build builds Helm from the Go module proxy")
    return helm_path()


@pytest.fixture(scope="module")
def chart(helm_binary: str) -> list[Resource]:
    return render_chart(helm_binary)


def test_helm_lint_passes_strictly(helm_binary: str) -> None:
    done = helm(helm_binary, "lint", "--strict", str(CHART), *set_args(REQUIRED))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_the_default_render_validates_against_the_kubernetes_schemas(chart: list[Resource], version: str) -> None:
    kinds = sorted(r["kind"] for r in chart)
    two = ["Deployment", "PodDisruptionBudget", "Service"]
    assert kinds == sorted([*two, *two, "ConfigMap", "Secret", "ServiceAccount"])
    for resource in chart:
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{resource['kind']} {resource['metadata']['name']} is invalid on {version}: {e}")


def test_the_pods_are_the_kustomize_bases(chart: list[Resource], rendered: dict[str, list[Resource]]) -> None:
    """Probes, security, ports, grace periods and strategy as in deploy/kubernetes (the dev overlay's render)."""
    base = rendered["dev"]
    for name in ("kmq-tracker", "kmq-api"):
        ours, theirs = one(chart, "Deployment", name), one(base, "Deployment", name)
        for field in SAME_AS_THE_BASE:
            assert container(ours).get(field) == container(theirs).get(field), f"{name}: {field}"
        for field in ("securityContext", "terminationGracePeriodSeconds", "automountServiceAccountToken"):
            assert pod_spec(ours)[field] == pod_spec(theirs)[field], f"{name}: {field}"
        assert ours["spec"]["strategy"] == theirs["spec"]["strategy"], name
        assert one(chart, "PodDisruptionBudget", name)["spec"] == one(base, "PodDisruptionBudget", name)["spec"]
        service = one(chart, "Service", name)
        assert selects(service["spec"]["selector"], ours["spec"]["template"]["metadata"]["labels"]), name
        assert ours["spec"]["selector"]["matchLabels"] == theirs["spec"]["selector"]["matchLabels"], name


def test_replicas_image_and_settings_come_from_the_values(helm_binary: str) -> None:
    values = {"image.repository": "registry.example/kmq", "image.tag": "9.9.9", "image.pullPolicy": "Never"}
    values |= {"env.KMQ_TRACKER_REDELIVERY_RATE_PER_S": "500"}
    numbers = ["--set", "tracker.replicas=3", "--set", "api.replicas=4"]
    resources = render_chart(helm_binary, values, *numbers, "--set", "secrets.apiKeys={k1,k2}")
    tracker, api = one(resources, "Deployment", "kmq-tracker"), one(resources, "Deployment", "kmq-api")
    assert (tracker["spec"]["replicas"], api["spec"]["replicas"]) == (3, 4)
    for deployment in (tracker, api):
        assert container(deployment)["image"] == "registry.example/kmq:9.9.9"
        assert container(deployment)["imagePullPolicy"] == "Never"
    config = one(resources, "ConfigMap")["data"]
    assert config["KMQ_BOOTSTRAP_SERVERS"] == "kafka:9092"
    assert (config["KMQ_QUEUE_TOPIC"], config["KMQ_API_QUEUES"]) == ("orders", "orders")
    assert config["KMQ_TRACKER_REDELIVERY_RATE_PER_S"] == "500"
    assert one(resources, "Secret")["stringData"]["KMQ_API_KEYS"] == "k1,k2"


def test_kafka_security_is_wired_as_the_base_wires_it(helm_binary: str) -> None:
    """SASL/TLS settings in the ConfigMap, the password and the CA as files from Secrets at the base's paths."""
    values = {
        "kafka.security.protocol": "SASL_SSL",
        "kafka.security.saslMechanism": "SCRAM-SHA-512",
        "kafka.security.saslUsername": "kmq",
        "kafka.security.passwordSecret.name": "kmq-user",
        "kafka.security.caSecret.name": "kafka-cluster-ca-cert",
    }
    resources = render_chart(helm_binary, values)
    config = one(resources, "ConfigMap")["data"]
    assert config["KMQ_SECURITY_PROTOCOL"] == "SASL_SSL" and config["KMQ_SASL_MECHANISM"] == "SCRAM-SHA-512"
    assert config["KMQ_SASL_USERNAME"] == "kmq"
    assert config["KMQ_SASL_PASSWORD_FILE"] == "/etc/kmq/kafka-user/password"
    assert config["KMQ_SSL_CA_LOCATION"] == "/etc/kmq/kafka-ca/ca.crt"
    for deployment in of_kind(resources, "Deployment"):
        volumes = {v["name"]: v["secret"]["secretName"] for v in pod_spec(deployment)["volumes"] if "secret" in v}
        assert volumes == {"kafka-user": "kmq-user", "kafka-ca": "kafka-cluster-ca-cert"}
        mounts = {m["name"]: m["mountPath"] for m in container(deployment)["volumeMounts"]}
        assert mounts["kafka-user"] == "/etc/kmq/kafka-user" and mounts["kafka-ca"] == "/etc/kmq/kafka-ca"
    assert "KMQ_SASL_PASSWORD" not in config, "the password is a file, never a ConfigMap value"


def test_plaintext_kafka_mounts_no_secret_files(chart: list[Resource]) -> None:
    config = one(chart, "ConfigMap")["data"]
    assert not {"KMQ_SECURITY_PROTOCOL", "KMQ_SASL_PASSWORD_FILE", "KMQ_SSL_CA_LOCATION"} & set(config)
    for deployment in of_kind(chart, "Deployment"):
        assert [v["name"] for v in pod_spec(deployment)["volumes"]] == ["tmp"]


def test_an_existing_secret_replaces_the_charts(helm_binary: str) -> None:
    resources = render_chart(helm_binary, {"secrets.existingSecret": "my-kmq-secrets", "secrets.receiptSecret": ""})
    assert of_kind(resources, "Secret") == []
    for deployment in of_kind(resources, "Deployment"):
        refs = [s["secretRef"]["name"] for s in container(deployment)["envFrom"] if "secretRef" in s]
        assert refs == ["my-kmq-secrets"]


@pytest.mark.parametrize("missing", sorted(REQUIRED))
def test_a_missing_required_value_is_named(helm_binary: str, missing: str) -> None:
    values = {name: value for name, value in REQUIRED.items() if name != missing}
    done = helm(helm_binary, "template", "kmq", str(CHART), *set_args(values))
    assert done.returncode != 0
    assert missing in done.stderr, done.stderr


def test_service_monitors_are_off_by_default_and_scrape_each_service_when_on(
    chart: list[Resource], helm_binary: str
) -> None:
    assert of_kind(chart, "ServiceMonitor") == []
    resources = render_chart(
        helm_binary, {"serviceMonitor.labels.release": "prom"}, "--set", "serviceMonitor.enabled=true"
    )
    monitors = of_kind(resources, "ServiceMonitor")
    assert sorted(m["metadata"]["name"] for m in monitors) == ["kmq-api", "kmq-tracker"]
    for monitor in monitors:
        jsonschema.Draft202012Validator(CRD_SCHEMAS["ServiceMonitor"]).validate(monitor)
        assert monitor["metadata"]["labels"]["release"] == "prom"
        service = one(resources, "Service", monitor["metadata"]["name"])
        assert selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"])
        ports = {p["name"] for p in service["spec"]["ports"]}
        assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports


def test_components_can_be_left_out(helm_binary: str) -> None:
    resources: list[dict[str, Any]] = render_chart(
        helm_binary, {"secrets.receiptSecret": ""}, "--set", "api.enabled=false"
    )
    assert [d["metadata"]["name"] for d in of_kind(resources, "Deployment")] == ["kmq-tracker"]
    assert of_kind(resources, "Secret") == []
