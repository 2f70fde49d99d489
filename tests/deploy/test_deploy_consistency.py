"""deploy/ against the code: metric names, KMQ_* variables, ports, probe paths, topics and timeouts cannot drift."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from deploytools import (
    DEPLOY,
    PROMETHEUS_SERIES,
    Resource,
    all_panels,
    container,
    dashboard_expressions,
    exported_families,
    exported_series,
    family_of,
    grafana_to_promql,
    metric_names,
    of_kind,
    one,
    pod_environment,
    pod_spec,
)
from fastapi.testclient import TestClient
from pydantic import SecretStr

import kmq_api.cli
import kmq_api.routers.health
import kmq_api.state
from kmq.config import KmqConfig
from kmq.settings import env_names
from kmq_api.app import create_app
from kmq_api.config import MAX_WAIT_MS, ApiConfig
from kmq_tracker.config import TrackerConfig
from kmq_tracker.http import HealthServer
from kmq_tracker.metrics import TrackerMetrics

KMQ_TREES = ("dev", "prod")


def _rules(rendered: dict[str, list[Resource]]) -> list[Resource]:
    groups = one(rendered["prod"], "PrometheusRule")["spec"]["groups"]
    return [rule for group in groups for rule in group["rules"]]


def _alert(rendered: dict[str, list[Resource]], name: str) -> Resource:
    return next(rule for rule in _rules(rendered) if rule.get("alert") == name)


# -- metrics --------------------------------------------------------------------------------------------------------


def test_the_metric_name_extraction_sees_every_selector() -> None:
    expr = 'sum by (le) (rate(a_bucket{x=~"$ns"}[5m])) / on() group_left b_total and absent(up{job="j"})'
    assert metric_names(expr) == {"a_bucket", "b_total", "up"}
    assert grafana_to_promql("rate(x[$__rate_interval])") == "rate(x[5m])"
    with pytest.raises(ValueError, match="rate"):
        metric_names("rate(kmq_redeliveries_total)")


def test_alerts_parse_and_name_only_exported_metrics(rendered: dict[str, list[Resource]]) -> None:
    exported = exported_series() | PROMETHEUS_SERIES
    rules = _rules(rendered)
    assert len(rules) >= 4
    for rule in rules:
        unknown = metric_names(rule["expr"]) - exported
        assert not unknown, f"alert {rule['alert']} names metrics the code does not export: {sorted(unknown)}"


def test_the_dashboard_parses_and_names_only_exported_metrics(dashboard: Resource) -> None:
    exported = exported_series()
    expressions = list(dashboard_expressions(dashboard))
    assert len(expressions) >= 10
    for title, expr in expressions:
        unknown = metric_names(expr) - exported
        assert not unknown, f"panel {title!r} names metrics the code does not export: {sorted(unknown)}"
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            named = variable["definition"].removeprefix("label_values(").split(",")[0]
            assert named in exported, f"variable {variable['name']} reads {named}"


def test_the_dashboard_shows_every_exported_metric(dashboard: Resource) -> None:
    families = exported_families()
    shown = {family_of(name, families) for _, expr in dashboard_expressions(dashboard) for name in metric_names(expr)}
    missing = set(families) - shown
    assert not missing, f"metrics without a panel in deploy/grafana/kmq-dashboard.json: {sorted(missing)}"


def test_the_dashboard_is_well_formed(dashboard: Resource) -> None:
    panels = all_panels(dashboard)
    assert len({panel["id"] for panel in panels}) == len(panels), "panel ids must be unique"
    for panel in panels:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
        if panel["type"] != "row":
            assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
    assert not _overlapping([panel["gridPos"] for panel in panels])


def _overlapping(grids: list[Resource]) -> list[tuple[int, int]]:
    cells: dict[tuple[int, int], int] = {}
    clashes = []
    for index, grid in enumerate(grids):
        for x in range(grid["x"], grid["x"] + grid["w"]):
            for y in range(grid["y"], grid["y"] + grid["h"]):
                if (x, y) in cells:
                    clashes.append((cells[(x, y)], index))
                cells[(x, y)] = index
    return clashes


def test_the_backlog_alert_follows_the_message_timeout(
    rendered: dict[str, list[Resource]], clean_env: pytest.MonkeyPatch
) -> None:
    tracker = one(rendered["prod"], "Deployment", "kmq-tracker")
    for name, value in pod_environment(rendered["prod"], tracker).items():
        clean_env.setenv(name, value)
    timeout_s = KmqConfig.from_env().msg_timeout_ms / 1000
    expr = _alert(rendered, "KmqRedeliveryBacklog")["expr"]
    assert "kmq_oldest_pending_age_seconds" in metric_names(expr)
    assert float(expr.rsplit(">", 1)[1]) == timeout_s


def test_every_alert_is_labelled_annotated_and_explained(rendered: dict[str, list[Resource]]) -> None:
    readme = (DEPLOY / "README.md").read_text()
    names = [rule["alert"] for rule in _rules(rendered)]
    assert len(set(names)) == len(names)
    for rule in _rules(rendered):
        assert rule["labels"]["severity"] in {"critical", "warning", "info"}, rule["alert"]
        assert {"summary", "description"} <= set(rule["annotations"]), rule["alert"]
        assert f"`{rule['alert']}`" in readme, f"deploy/README.md does not explain {rule['alert']}"


def test_the_alerts_cover_what_operators_need(rendered: dict[str, list[Resource]]) -> None:
    by_metric = {name: rule["alert"] for rule in _rules(rendered) for name in metric_names(rule["expr"])}
    for needed in ("kmq_oldest_pending_age_seconds", "kmq_dead_letters_total", "kmq_partition_caught_up"):
        assert needed in by_metric, needed
    assert "kmq_redeliveries_total" in metric_names(_alert(rendered, "KmqRedeliveryRateHigh")["expr"])


# -- KMQ_* variables ------------------------------------------------------------------------------------------------


def _variables_read() -> set[str]:
    return {*env_names(KmqConfig), *ApiConfig.env_names(), *TrackerConfig.env_names()}


def test_every_kmq_variable_set_is_one_the_code_reads(rendered: dict[str, list[Resource]]) -> None:
    read = _variables_read()
    for tree in KMQ_TREES:
        for deployment in of_kind(rendered[tree], "Deployment"):
            env = pod_environment(rendered[tree], deployment)
            assert env, deployment["metadata"]["name"]
            unknown = {name for name in env if name.startswith("KMQ_")} - read
            assert not unknown, f"{tree}: {deployment['metadata']['name']} sets variables nothing reads: {unknown}"
            assert all(name.startswith("KMQ_") for name in env)


@pytest.mark.parametrize("tree", KMQ_TREES)
def test_the_pods_environment_is_a_valid_configuration(
    rendered: dict[str, list[Resource]], tree: str, clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """What each pod gets parses into its config; prod's Secrets are the operator's, so their keys are stand-ins here
    (the mounted password file too)."""
    resources = rendered[tree]
    password = tmp_path / "password"
    password.write_text("p")
    stand_ins = {"KMQ_API_KEYS": "k", "KMQ_API_RECEIPT_SECRET": "s" * 32, "KMQ_SASL_PASSWORD_FILE": str(password)}
    tracker, api_deployment = one(resources, "Deployment", "kmq-tracker"), one(resources, "Deployment", "kmq-api")
    with clean_env.context() as env:
        _set_environment(env, pod_environment(resources, tracker), stand_ins if tree == "prod" else {})
        tracker_config = TrackerConfig.from_env()
    with clean_env.context() as env:
        _set_environment(env, pod_environment(resources, api_deployment), stand_ins if tree == "prod" else {})
        api_config = ApiConfig.from_env()
    assert _port(tracker, "metrics") == tracker_config.http_port
    assert _port(api_deployment, "http") == api_config.port
    assert [queue.queue_topic for queue in api_config.queues] == [tracker_config.kmq.queue_topic]


def _set_environment(env: pytest.MonkeyPatch, *sources: dict[str, str]) -> None:
    for source in sources:
        for name, value in source.items():
            env.setenv(name, value)


def _port(deployment: Resource, name: str) -> int:
    ports = {port["name"]: port["containerPort"] for port in container(deployment)["ports"]}
    return int(ports[name])


# -- probes, ports and shutdown -------------------------------------------------------------------------------------


class _Healthy:
    def alive(self) -> bool:
        return True

    def ready(self) -> bool:
        return True

    def problem(self) -> str | None:
        return None


def test_tracker_probe_and_scrape_paths_are_served(rendered: dict[str, list[Resource]]) -> None:
    tracker = container(one(rendered["prod"], "Deployment", "kmq-tracker"))
    probes = [tracker[kind]["httpGet"] for kind in ("startupProbe", "livenessProbe", "readinessProbe")]
    assert {probe["port"] for probe in probes} == {"metrics"}
    scraped = [e["path"] for e in one(rendered["prod"], "ServiceMonitor", "kmq-tracker")["spec"]["endpoints"]]
    server = HealthServer("127.0.0.1", 0, TrackerMetrics(), _Healthy())
    server.start()
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{server.port}", timeout=5) as client:
            for path in [probe["path"] for probe in probes] + scraped:
                assert client.get(path).status_code == 200, path
    finally:
        server.stop()
    assert tracker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert tracker["readinessProbe"]["httpGet"]["path"] == "/readyz"


def test_api_probe_and_scrape_paths_are_open_routes(rendered: dict[str, list[Resource]]) -> None:
    """The kubelet and Prometheus carry no API key: their paths must be GET routes without a security requirement."""
    api = container(one(rendered["prod"], "Deployment", "kmq-api"))
    config = ApiConfig(
        queues=(KmqConfig(bootstrap_servers="localhost:9092", queue_topic="orders"),),
        receipt_secret="s" * 32,
        api_keys=(SecretStr("key"),),
    )
    app = create_app(config)
    paths = app.openapi()["paths"]
    scraped = [e["path"] for e in one(rendered["prod"], "ServiceMonitor", "kmq-api")["spec"]["endpoints"]]
    probed = [api[kind]["httpGet"]["path"] for kind in ("livenessProbe", "readinessProbe")]
    assert probed == ["/healthz", "/readyz"]
    for path in probed + scraped:
        assert "get" in paths.get(path, {}), f"{path} is not a GET route of the REST facade"
        assert not paths[path]["get"].get("security"), f"{path} requires an API key"
    assert any(operation.get("security") for operation in paths["/v1/queues/{queue}/messages"].values())
    # Liveness needs nothing from Kafka: it answers even before the lifespan connected.
    assert TestClient(app).get(probed[0]).status_code == 200


@pytest.mark.parametrize("tree", KMQ_TREES)
def test_grace_periods_cover_the_services_shutdown(
    rendered: dict[str, list[Resource]], tree: str, clean_env: pytest.MonkeyPatch
) -> None:
    resources = rendered[tree]
    tracker, api_deployment = one(resources, "Deployment", "kmq-tracker"), one(resources, "Deployment", "kmq-api")
    for name, value in pod_environment(resources, tracker).items():
        clean_env.setenv(name, value)
    config = TrackerConfig.from_env()
    # A redelivery pass in progress (read, then write the copies), then the shutdown flush, then commit and leave.
    tracker_needs_s = (config.read_timeout_ms + 2 * config.write_timeout_ms) / 1000 + 5
    assert pod_spec(tracker)["terminationGracePeriodSeconds"] >= tracker_needs_s
    # It gives up (exit 1) only after that, and before Kubernetes kills it.
    grace_s = pod_spec(tracker)["terminationGracePeriodSeconds"]
    assert tracker_needs_s <= config.shutdown_timeout_ms / 1000 < grace_s
    pre_stop_s = int(container(api_deployment)["lifecycle"]["preStop"]["exec"]["command"][-1])
    api_env = pod_environment(resources, api_deployment)
    write_s = int(api_env["KMQ_API_WRITE_TIMEOUT_MS"]) / 1000
    # The lifespan closes (flushes) the served queues one after the other.
    closing_s = kmq_api.state.CLOSE_TIMEOUT_S * len(api_env["KMQ_API_QUEUES"].split(","))
    api_needs_s = pre_stop_s + MAX_WAIT_MS / 1000 + write_s + closing_s
    assert pod_spec(api_deployment)["terminationGracePeriodSeconds"] >= api_needs_s
    # `kmq api` gives up on its stop (exit 1) after all that, before Kubernetes kills it.
    stop_s = kmq_api.cli.STOP_TIMEOUT_MS / 1000
    assert api_needs_s - pre_stop_s <= stop_s < pod_spec(api_deployment)["terminationGracePeriodSeconds"] - pre_stop_s


def test_api_readiness_timeout_covers_its_topic_checks(rendered: dict[str, list[Resource]]) -> None:
    for tree in KMQ_TREES:
        deployment = one(rendered[tree], "Deployment", "kmq-api")
        queues = pod_environment(rendered[tree], deployment)["KMQ_API_QUEUES"].split(",")
        timeout_s = container(deployment)["readinessProbe"]["timeoutSeconds"]
        assert timeout_s > kmq_api.routers.health.READY_TIMEOUT_S * len(queues)


# -- Kafka topics and credentials -----------------------------------------------------------------------------------


def _topics(rendered: dict[str, list[Resource]]) -> dict[str, Resource]:
    return {topic["spec"]["topicName"]: topic for topic in of_kind(rendered["kafka"], "KafkaTopic")}


def test_kafka_topics_follow_the_protocol(rendered: dict[str, list[Resource]], clean_env: pytest.MonkeyPatch) -> None:
    topics = _topics(rendered)
    for tree in KMQ_TREES:
        with clean_env.context() as env:
            _set_environment(env, pod_environment(rendered[tree], one(rendered[tree], "Deployment", "kmq-tracker")))
            config = KmqConfig.from_env()
        assert {config.queue_topic, config.markers_topic, config.dead_letter_topic} == set(topics)
        queue, markers = topics[config.queue_topic]["spec"], topics[config.markers_topic]["spec"]
        assert markers["partitions"] == queue["partitions"], "the markers topic needs exactly the queue's partitions"
        assert markers["config"]["message.timestamp.type"] == "LogAppendTime"
        assert markers["config"]["cleanup.policy"] == "delete"
        assert int(markers["config"]["retention.ms"]) >= 24 * 3600 * 1000


def test_every_kafka_resource_belongs_to_the_example_cluster(rendered: dict[str, list[Resource]]) -> None:
    cluster = one(rendered["kafka"], "Kafka")["metadata"]["name"]
    for resource in rendered["kafka"]:
        if resource["kind"] != "Kafka":
            assert resource["metadata"]["labels"]["strimzi.io/cluster"] == cluster, resource["metadata"]["name"]


def test_the_overlays_reach_the_example_clusters_listeners(rendered: dict[str, list[Resource]]) -> None:
    kafka = one(rendered["kafka"], "Kafka")
    listeners = {listener["name"]: listener for listener in kafka["spec"]["kafka"]["listeners"]}
    service = f"{kafka['metadata']['name']}-kafka-bootstrap.{kafka['metadata']['namespace']}.svc"
    dev = one(rendered["dev"], "ConfigMap", "kmq-config")["data"]
    assert dev["KMQ_BOOTSTRAP_SERVERS"] == f"{service}:{listeners['plain']['port']}"
    assert "KMQ_SECURITY_PROTOCOL" not in dev and not listeners["plain"]["tls"]
    prod = one(rendered["prod"], "ConfigMap", "kmq-config")["data"]
    assert prod["KMQ_BOOTSTRAP_SERVERS"] == f"{service}:{listeners['tls']['port']}"
    assert listeners["tls"]["tls"] and prod["KMQ_SECURITY_PROTOCOL"] == "SASL_SSL"
    assert listeners["tls"]["authentication"]["type"] == prod["KMQ_SASL_MECHANISM"].lower()
    assert prod["KMQ_SASL_USERNAME"] == one(rendered["prod"], "KafkaUser")["metadata"]["name"]
    tracker = container(one(rendered["prod"], "Deployment", "kmq-tracker"))
    mounts = {mount["name"]: mount["mountPath"] for mount in tracker["volumeMounts"]}
    assert prod["KMQ_SSL_CA_LOCATION"].startswith(mounts["kafka-ca"] + "/")


def test_the_pods_read_the_kafka_users_password_from_its_operators_secret(rendered: dict[str, list[Resource]]) -> None:
    """Strimzi's User Operator watches kmq's namespace, writes the KafkaUser's Secret there (named after the user,
    key `password`), and both Deployments mount it where KMQ_SASL_PASSWORD_FILE points: nothing to copy by hand."""
    user = one(rendered["prod"], "KafkaUser")
    kafka = one(rendered["kafka"], "Kafka")
    assert kafka["spec"]["entityOperator"]["userOperator"]["watchedNamespace"] == user["metadata"]["namespace"]
    assert user["metadata"]["labels"]["strimzi.io/cluster"] == kafka["metadata"]["name"]
    for name in ("kmq-tracker", "kmq-api"):
        deployment = one(rendered["prod"], "Deployment", name)
        env = pod_environment(rendered["prod"], deployment)
        assert "KMQ_SASL_PASSWORD" not in env, f"{name}: the password belongs in the mounted file, not a variable"
        secrets = {
            volume["name"]: volume["secret"]["secretName"]
            for volume in deployment["spec"]["template"]["spec"]["volumes"]
            if "secret" in volume
        }
        mounts = {mount["mountPath"]: mount["name"] for mount in container(deployment)["volumeMounts"]}
        folder, key = env["KMQ_SASL_PASSWORD_FILE"].rsplit("/", 1)
        assert key == "password" and secrets[mounts[folder]] == user["metadata"]["name"], name
        assert env["KMQ_SASL_USERNAME"] == user["metadata"]["name"]
        assert env["KMQ_SSL_CA_LOCATION"].rsplit("/", 1)[0] in mounts, name


def test_the_kafka_user_may_do_what_kmq_does(
    rendered: dict[str, list[Resource]], clean_env: pytest.MonkeyPatch
) -> None:
    with clean_env.context() as env:
        _set_environment(env, pod_environment(rendered["prod"], one(rendered["prod"], "Deployment", "kmq-tracker")))
        tracker = TrackerConfig.from_env()
    kmq = tracker.kmq
    acls = one(rendered["prod"], "KafkaUser")["spec"]["authorization"]["acls"]
    needs = {
        ("topic", kmq.queue_topic): {"Describe", "Read", "Write"},
        ("topic", kmq.markers_topic): {"Describe", "Read", "Write"},
        ("topic", kmq.dead_letter_topic): {"Describe", "Write"},
        ("group", kmq.group_id): {"Describe", "Read"},
        ("group", tracker.group_id): {"Describe", "Read"},
    }
    for (kind, name), operations in needs.items():
        granted = {op for acl in acls if _grants(acl["resource"], kind, name) for op in acl["operations"]}
        assert operations <= granted, f"KafkaUser lacks {sorted(operations - granted)} on {kind} {name}"


def _grants(resource: Resource, kind: str, name: str) -> bool:
    if resource["type"] != kind:
        return False
    if resource.get("patternType", "literal") == "prefix":
        return bool(name.startswith(resource["name"]))
    return bool(resource["name"] == name)
