"""The tracker replicas and the REST facade, started as child processes (`kmq` never imports `tracker` or `api`)."""

from __future__ import annotations

import secrets
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families

from kmq.config import KmqConfig
from kmq.demo.processes import Child, Children
from kmq.errors import DemoError

LOCALHOST = "127.0.0.1"
DEFAULT_API_PORT = 8080
_PROBE_TIMEOUT_S = 1.0


@dataclass(frozen=True, slots=True)
class Service:
    """A child serving HTTP on `url` (the tracker's probes and metrics, or the REST facade)."""

    child: Child
    url: str


@dataclass(frozen=True, slots=True)
class Api:
    service: Service
    api_key: str


def start_trackers(children: Children, config: KmqConfig, count: int) -> list[Service]:
    trackers = []
    for index in range(1, count + 1):
        port = free_port()
        env = {**config.to_env(), "KMQ_TRACKER_HTTP_HOST": LOCALHOST, "KMQ_TRACKER_HTTP_PORT": str(port)}
        child = children.spawn(f"tracker-{index}", ["-m", "kmq_tracker", "--log-level", "info"], env)
        trackers.append(Service(child, f"http://{LOCALHOST}:{port}"))
    return trackers


def start_api(children: Children, config: KmqConfig, port: int | None, tracker_urls: list[str] | None = None) -> Api:
    api_key = secrets.token_urlsafe(24)
    port = port if port is not None else free_port(DEFAULT_API_PORT)
    env = {
        **config.to_env(),
        "KMQ_API_QUEUES": config.queue_topic,
        "KMQ_API_ADMIN_KEYS": api_key,  # the REST API's key, and the console's: it may redrive, move and purge
        "KMQ_API_RECEIPT_SECRET": secrets.token_hex(32),
        "KMQ_API_HOST": LOCALHOST,
        "KMQ_API_PORT": str(port),
        "KMQ_API_TRACKER_URLS": ",".join(tracker_urls or []),  # the console shows their health and partitions
    }
    child = children.spawn("api", ["-m", "kmq_api"], env)
    return Api(Service(child, f"http://{LOCALHOST}:{port}"), api_key)


def wait_ready(children: Children, services: list[Service], path: str, timeout_s: float) -> None:
    """Until every service answers 200 on `path`; DemoError when one exits or the deadline passes."""
    deadline = time.monotonic() + timeout_s
    waiting = list(services)
    while waiting:
        children.check([s.child for s in waiting])
        waiting = [s for s in waiting if http_status(s.url + path) != 200]
        if waiting and time.monotonic() > deadline:
            names = ", ".join(s.child.name for s in waiting)
            raise DemoError(f"{names} not ready on {path} within {timeout_s:.0f}s (logs in {children.log_dir})")
        if waiting:
            time.sleep(0.1)  # a poll interval: the condition is re-checked with a deadline


def owned_partitions(tracker: Service) -> list[int]:
    """The markers partitions a tracker replica owns, from its /metrics."""
    try:
        with urllib.request.urlopen(tracker.url + "/metrics", timeout=_PROBE_TIMEOUT_S) as response:
            text = response.read().decode()
    except (OSError, urllib.error.URLError):
        return []
    owned: set[int] = set()
    for family in text_string_to_metric_families(text):
        if family.name == "kmq_partition_caught_up":
            owned.update(int(sample.labels["partition"]) for sample in family.samples)
    return sorted(owned)


def http_status(url: str, headers: dict[str, str] | None = None) -> int | None:
    """The status code of a GET, or None when nothing answers."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=_PROBE_TIMEOUT_S) as response:
            return int(response.status)
    except urllib.error.HTTPError as e:
        return int(e.code)
    except (OSError, urllib.error.URLError):
        return None


def free_port(preferred: int | None = None) -> int:
    """`preferred` when it is free on localhost, else a port the OS picks."""
    for port in ((preferred,) if preferred else ()) + (0,):
        with socket.socket() as sock:
            try:
                sock.bind((LOCALHOST, port))
            except OSError:
                continue
            return int(sock.getsockname()[1])
    raise DemoError("no free TCP port on localhost")
