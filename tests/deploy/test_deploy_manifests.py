"""The Kustomize trees render, and every rendered resource is valid and follows the house rules for pods."""

from __future__ import annotations

import re
import tomllib

import jsonschema
import kubernetes_validate
import pytest
from crd_schemas import CRD_SCHEMAS
from deploytools import (
    DEPLOY,
    REPO,
    Resource,
    container,
    dockerfile_stages,
    of_kind,
    one,
    pod_spec,
    selected_deployments,
    selects,
)

# The oldest Kubernetes the manifests promise (deploy/README.md) and the newest kubernetes-validate knows.
K8S_VERSIONS = ("1.28.0", kubernetes_validate.latest_version())
STABLE_SELECTOR_KEYS = {"app.kubernetes.io/name", "app.kubernetes.io/instance", "app.kubernetes.io/component"}
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def _all(rendered: dict[str, list[Resource]]) -> list[tuple[str, Resource]]:
    return [(tree, resource) for tree, resources in rendered.items() for resource in resources]


def _kmq_trees(rendered: dict[str, list[Resource]]) -> list[list[Resource]]:
    return [rendered["dev"], rendered["prod"]]


def test_each_tree_renders_what_it_promises(rendered: dict[str, list[Resource]]) -> None:
    kinds = {tree: sorted({r["kind"] for r in resources}) for tree, resources in rendered.items()}
    base = {"ConfigMap", "Deployment", "Namespace", "PodDisruptionBudget", "Service", "ServiceAccount"}
    assert base | {"Secret"} == set(kinds["dev"])
    assert base | {"HorizontalPodAutoscaler", "KafkaUser", "PrometheusRule", "ServiceMonitor"} == set(kinds["prod"])
    assert {"Kafka", "KafkaNodePool", "KafkaTopic"} == set(kinds["kafka"])
    assert {r["metadata"].get("namespace") for r in rendered["prod"] if r["kind"] != "Namespace"} == {"kmq"}


@pytest.mark.parametrize("version", K8S_VERSIONS)
def test_built_in_kinds_validate_against_the_kubernetes_schemas(
    rendered: dict[str, list[Resource]], version: str
) -> None:
    checked = 0
    for tree, resource in _all(rendered):
        if resource["kind"] in CRD_SCHEMAS:
            continue
        try:
            kubernetes_validate.validate(resource, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{tree}: {resource['kind']} {resource['metadata']['name']} is invalid on {version}: {e}")
        checked += 1
    assert checked >= 20


def test_custom_resources_validate_structurally(rendered: dict[str, list[Resource]]) -> None:
    """Strimzi and Prometheus Operator kinds: see crd_schemas.py for what is (and is not) checked."""
    seen = set()
    for tree, resource in _all(rendered):
        schema = CRD_SCHEMAS.get(resource["kind"])
        if schema is None:
            continue
        try:
            jsonschema.Draft202012Validator(schema).validate(resource)
        except jsonschema.ValidationError as e:
            pytest.fail(f"{tree}: {resource['kind']} {resource['metadata']['name']}: {e.message} at {list(e.path)}")
        seen.add(resource["kind"])
    assert seen == set(CRD_SCHEMAS)


def test_the_structural_schemas_catch_a_typo(rendered: dict[str, list[Resource]]) -> None:
    topic = one(rendered["kafka"], "KafkaTopic", "orders-markers")
    broken = {**topic, "spec": {**topic["spec"], "partiton": 3}}
    with pytest.raises(jsonschema.ValidationError, match="partiton"):
        jsonschema.Draft202012Validator(CRD_SCHEMAS["KafkaTopic"]).validate(broken)


def test_every_name_is_a_valid_kubernetes_name(rendered: dict[str, list[Resource]]) -> None:
    for tree, resource in _all(rendered):
        name = resource["metadata"]["name"]
        assert len(name) <= 253 and _DNS_SUBDOMAIN.match(name), f"{tree}: {resource['kind']} name {name!r}"


def test_every_pod_runs_locked_down(rendered: dict[str, list[Resource]]) -> None:
    uid = _image_uid()
    for resources in _kmq_trees(rendered):
        for deployment in of_kind(resources, "Deployment"):
            name, pod = deployment["metadata"]["name"], pod_spec(deployment)
            assert pod["securityContext"]["runAsNonRoot"] is True, name
            assert pod["securityContext"]["runAsUser"] == uid, f"{name}: runAsUser differs from the image's USER"
            assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}, name
            assert pod["automountServiceAccountToken"] is False, name
            for box in pod["containers"]:
                context = box["securityContext"]
                assert context["allowPrivilegeEscalation"] is False, name
                assert context["readOnlyRootFilesystem"] is True, name
                assert context["capabilities"]["drop"] == ["ALL"], name
                assert context.get("privileged", False) is False, name
                assert {"cpu", "memory"} <= set(box["resources"]["requests"]), f"{name}: resource requests"
                assert "livenessProbe" in box and "readinessProbe" in box, f"{name}: probes"


def test_namespaces_enforce_the_restricted_pod_security_standard(rendered: dict[str, list[Resource]]) -> None:
    for resources in _kmq_trees(rendered):
        labels = one(resources, "Namespace")["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"


def test_selectors_are_stable_and_select_exactly_their_pods(rendered: dict[str, list[Resource]]) -> None:
    for resources in _kmq_trees(rendered):
        deployments = of_kind(resources, "Deployment")
        for deployment in deployments:
            selector = deployment["spec"]["selector"]["matchLabels"]
            assert set(selector) == STABLE_SELECTOR_KEYS, f"{deployment['metadata']['name']}: unstable selector"
            assert selects(selector, deployment["spec"]["template"]["metadata"]["labels"])
            for spread in pod_spec(deployment)["topologySpreadConstraints"]:
                assert spread["labelSelector"]["matchLabels"] == selector
        for resource in resources:
            selector = _selector(resource)
            if selector is None:
                continue
            chosen = selected_deployments(resources, selector)
            assert len(chosen) == 1, (
                f"{resource['kind']} {resource['metadata']['name']} selects {len(chosen)} Deployments"
            )
            component = chosen[0]["spec"]["selector"]["matchLabels"]["app.kubernetes.io/component"]
            assert resource["metadata"]["labels"]["app.kubernetes.io/component"] == component


def _selector(resource: Resource) -> dict[str, str] | None:
    if resource["kind"] == "Service":
        selector: dict[str, str] = resource["spec"]["selector"]
        return selector
    if resource["kind"] in ("PodDisruptionBudget", "ServiceMonitor"):
        matched: dict[str, str] = resource["spec"]["selector"]["matchLabels"]
        return matched
    return None


def test_every_kmq_resource_carries_the_recommended_labels(rendered: dict[str, list[Resource]]) -> None:
    for resources in _kmq_trees(rendered):
        for resource in resources:
            labels = resource["metadata"].get("labels", {})
            assert labels.get("app.kubernetes.io/name") == "kmq", f"{resource['kind']} {resource['metadata']['name']}"
            assert labels.get("app.kubernetes.io/part-of") == "kmq"


def test_services_and_monitors_reach_declared_ports(rendered: dict[str, list[Resource]]) -> None:
    for resources in _kmq_trees(rendered):
        for service in of_kind(resources, "Service"):
            (deployment,) = selected_deployments(resources, service["spec"]["selector"])
            declared = {port["name"] for port in container(deployment)["ports"]}
            assert {port["targetPort"] for port in service["spec"]["ports"]} <= declared
            offered = {port["name"] for port in service["spec"]["ports"]}
            for monitor in of_kind(resources, "ServiceMonitor"):
                if selects(monitor["spec"]["selector"]["matchLabels"], service["metadata"]["labels"]):
                    assert {endpoint["port"] for endpoint in monitor["spec"]["endpoints"]} <= offered


def test_images_are_configured_by_the_overlays_and_match_the_release(rendered: dict[str, list[Resource]]) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    images = {tree: {container(d)["image"] for d in of_kind(rendered[tree], "Deployment")} for tree in ("dev", "prod")}
    assert images == {"dev": {f"kmq:{version}"}, "prod": {f"registry.example.com/kmq:{version}"}}


def test_prod_runs_three_trackers_and_scales_the_api(rendered: dict[str, list[Resource]]) -> None:
    prod = rendered["prod"]
    assert one(prod, "Deployment", "kmq-tracker")["spec"]["replicas"] == 3
    hpa = one(prod, "HorizontalPodAutoscaler", "kmq-api")
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "kmq-api"}
    assert 1 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"]
    assert one(rendered["dev"], "Deployment", "kmq-tracker")["spec"]["replicas"] == 1


def test_tracker_replicas_never_exceed_the_markers_partitions(rendered: dict[str, list[Resource]]) -> None:
    markers = next(t for t in of_kind(rendered["kafka"], "KafkaTopic") if t["spec"]["topicName"].endswith("__markers"))
    for resources in _kmq_trees(rendered):
        assert one(resources, "Deployment", "kmq-tracker")["spec"]["replicas"] <= markers["spec"]["partitions"]


def _image_uid() -> int:
    final_stage = dockerfile_stages((DEPLOY / "Dockerfile").read_text())[-1]
    users = [arguments for instruction, arguments in final_stage if instruction == "USER"]
    return int(users[-1].split(":")[0])
