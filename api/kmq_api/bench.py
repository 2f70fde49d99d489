"""`python -m kmq_api.bench`: HTTP throughput and latency of send, and of receive + ack, through a real uvicorn.

The API runs as `python -m kmq_api` in a child process on loopback (its own interpreter, as in production), against
an embedded broker — or the cluster in `KMQ_BOOTSTRAP_SERVERS` — and an aiohttp client (keep-alive connections,
bodies encoded and parsed with orjson) drives it; httpx cost about three times its CPU per request, taken from the
cores the API and the broker share. The figures include the CPU time the API process and the client spent per
message while draining (where /proc exists). `run_benchmark()` returns the figures as a dict (`kmq bench` wraps it).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import IO, Any

import aiohttp
import orjson

from kmq.bench.threads import thread_cpu_ns, us_per_message
from kmq.config import KmqConfig
from kmq.embedded import EmbeddedKafka, ExternalKafka, KafkaCluster
from kmq.errors import KmqError

Figures = dict[str, float | int | str | dict[str, float]]
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 20.0
_RECEIVE_WAIT_MS = 500
_DRAIN_TIMEOUT_S = 600.0
# Settings that name one queue: the child serves the benchmark's own queue, whatever the environment says.
_REQUEST_TIMEOUT = aiohttp.ClientTimeout(total=30.0)
_QUEUE_VARIABLES = ("KMQ_QUEUE_TOPIC", "KMQ_MARKERS_TOPIC", "KMQ_DEAD_LETTER_TOPIC", "KMQ_GROUP_ID")


@dataclass(frozen=True)
class _Plan:
    messages: int
    batch: int
    concurrency: int
    value_bytes: int


@dataclass
class _Tally:
    """What the drain workers measured (they share one event loop: no locking needed)."""

    target: int
    deadline: float
    received: int = 0
    acked: int = 0
    finished: float = 0.0
    receive_ms: list[float] = field(default_factory=list)
    ack_ms: list[float] = field(default_factory=list)
    not_ok: int = 0


def run_benchmark(
    messages: int = 20_000,
    batch: int = 100,
    partitions: int = 4,
    concurrency: int = 1,
    value_bytes: int = 100,
    cluster: KafkaCluster | None = None,
    marker_format: str = "batch",
) -> Figures:
    """Send `messages` in batches of `batch`, then receive and ack them all in batches of `batch`.

    The cluster: `cluster`, else the one `KMQ_BOOTSTRAP_SERVERS` names, else an embedded tansu broker."""
    with _cluster(cluster) as kafka:
        config = kafka.config(f"bench-api-{uuid.uuid4().hex[:8]}", marker_format=marker_format)
        kafka.ensure_topics(config, partitions)
        with _api_process(config) as (base_url, api_key, pid):
            plan = _Plan(messages, batch, concurrency, value_bytes)
            measured = asyncio.run(_measure(f"{base_url}/v1/queues/{config.queue_topic}", api_key, plan, pid))
    setup: Figures = {"backend": kafka.backend, "marker_format": marker_format, "messages": messages, "batch": batch}
    setup["partitions"] = partitions
    return {**setup, "concurrency": concurrency, **measured}


@contextlib.contextmanager
def _cluster(given: KafkaCluster | None) -> Iterator[KafkaCluster]:
    if given is not None:
        yield given
    elif os.environ.get("KMQ_BOOTSTRAP_SERVERS"):
        yield ExternalKafka.from_env()
    else:
        with EmbeddedKafka() as embedded:
            yield embedded


@contextlib.contextmanager
def _api_process(config: KmqConfig) -> Iterator[tuple[str, str, int]]:
    """`python -m kmq_api` serving the queue on a free loopback port; stopped with SIGTERM (then killed) on exit."""
    port, api_key = _free_port(), secrets.token_urlsafe(16)
    with tempfile.TemporaryFile() as log:  # a file, not a pipe: a full pipe would stall the child
        child = subprocess.Popen(
            [sys.executable, "-m", "kmq_api", "--log-level", "warning"],
            env=_child_env(config, port, api_key),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_ready(child, base_url, log)
            yield base_url, api_key, child.pid
        finally:
            _stop(child)


def _child_env(config: KmqConfig, port: int, api_key: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _QUEUE_VARIABLES and not k.startswith("KMQ_API_")}
    env.update(
        {
            "KMQ_BOOTSTRAP_SERVERS": config.bootstrap_servers,
            "KMQ_KAFKA_CONFIG": json.dumps(config.kafka_config),
            "KMQ_CONSUMER_KAFKA_CONFIG": json.dumps(config.consumer_kafka_config),
            "KMQ_API_QUEUES": config.queue_topic,
            "KMQ_MARKER_FORMAT": config.marker_format,
            "KMQ_API_KEYS": api_key,
            "KMQ_API_RECEIPT_SECRET": secrets.token_hex(32),
            "KMQ_API_HOST": "127.0.0.1",
            "KMQ_API_PORT": str(port),
        }
    )
    return env


def _wait_ready(child: subprocess.Popen[bytes], base_url: str, log: IO[bytes]) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            break
        # Not listening yet, or not ready (urllib's errors are OSErrors).
        with contextlib.suppress(OSError), urllib.request.urlopen(f"{base_url}/readyz", timeout=1.0) as answer:
            if answer.status == 200:
                return
        time.sleep(0.05)  # polling a condition (the child's port) with a deadline
    _stop(child)
    log.seek(0)
    error = log.read().decode(errors="replace")[-2000:]
    raise KmqError(f"the API did not become ready at {base_url} (exit code {child.returncode}): {error}")


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


async def _measure(queue_url: str, api_key: str, plan: _Plan, pid: int) -> Figures:
    headers = {"Authorization": f"Bearer {api_key}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=plan.concurrency)  # keep-alive connections, one per receiver
    async with aiohttp.ClientSession(f"{queue_url}/", headers=headers, connector=connector) as http:
        # Warm-up, not measured: producer metadata, the receivers' consumer-group join.
        await _send(http, plan.batch, "warm-up", [])
        await _drain(http, replace(plan, messages=plan.batch, concurrency=1))
        sent = await _send_all(http, plan)
        server_s, server_threads, client_s = _cpu_s(pid), thread_cpu_ns(pid), time.process_time()
        drained = await _drain(http, plan)
        cpu: Figures = {"client_cpu_us_per_msg": round((time.process_time() - client_s) / plan.messages * 1e6, 1)}
        server_end_s = _cpu_s(pid)
        if server_s is not None and server_end_s is not None:
            cpu["server_cpu_us_per_msg"] = round((server_end_s - server_s) / plan.messages * 1e6, 1)
        # Where the API's CPU goes: MainThread is uvicorn's event loop (FastAPI, receipts, settles); the receives
        # run in anyio's worker threads ("python threads"); the rest is librdkafka's and kmq's own threads.
        by_thread = us_per_message(server_threads, thread_cpu_ns(pid), plan.messages)
    return {**sent, **drained, **cpu, "server_cpu_us_per_msg_by_thread": by_thread}


def _cpu_s(pid: int) -> float | None:
    """CPU time (user + system, every thread) of process `pid` from /proc; None where there is no /proc."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _send(http: aiohttp.ClientSession, count: int, value: str, latencies_ms: list[float]) -> None:
    started = time.perf_counter()
    await _post(http, "messages", {"messages": [{"value": value}] * count})
    latencies_ms.append((time.perf_counter() - started) * 1000)


async def _send_all(http: aiohttp.ClientSession, plan: _Plan) -> Figures:
    value = "x" * plan.value_bytes
    sizes = [min(plan.batch, plan.messages - start) for start in range(0, plan.messages, plan.batch)]
    latencies_ms: list[float] = []

    async def sender() -> None:
        while sizes:
            await _send(http, sizes.pop(), value, latencies_ms)

    started = time.perf_counter()
    await asyncio.gather(*(sender() for _ in range(plan.concurrency)))
    elapsed_s = time.perf_counter() - started
    return {"send_msgs_per_s": round(plan.messages / elapsed_s), **_percentiles("send", latencies_ms)}


async def _drain(http: aiohttp.ClientSession, plan: _Plan) -> Figures:
    """Receive and ack until `plan.messages` are acked; the time runs from the start to the last ack."""
    tally = _Tally(plan.messages, time.monotonic() + _DRAIN_TIMEOUT_S)
    started = time.perf_counter()
    await asyncio.gather(*(_receiver(http, plan.batch, tally) for _ in range(plan.concurrency)))
    elapsed_s = tally.finished - started
    return {
        "receive_ack_msgs_per_s": round(tally.acked / elapsed_s),
        "receive_ack_seconds": round(elapsed_s, 3),
        "acks_not_ok": tally.not_ok,
        **_percentiles("receive", tally.receive_ms),
        **_percentiles("ack", tally.ack_ms),
    }


async def _receiver(http: aiohttp.ClientSession, batch: int, tally: _Tally) -> None:
    body = {"max_messages": batch, "wait_ms": _RECEIVE_WAIT_MS}
    while tally.received < tally.target:
        if time.monotonic() > tally.deadline:
            raise KmqError(f"received {tally.received} of {tally.target} messages in {_DRAIN_TIMEOUT_S:.0f}s")
        started = time.perf_counter()
        receipts = [message["receipt"] for message in (await _post(http, "receive", body))["messages"]]
        if receipts:  # an empty answer is a long poll that ran out: not a receive latency
            tally.receive_ms.append((time.perf_counter() - started) * 1000)
            tally.received += len(receipts)
            await _ack(http, receipts, tally)


async def _ack(http: aiohttp.ClientSession, receipts: list[str], tally: _Tally) -> None:
    started = time.perf_counter()
    answer = await _post(http, "ack", {"receipts": receipts})
    tally.finished = time.perf_counter()
    tally.ack_ms.append((tally.finished - started) * 1000)
    tally.acked += len(receipts)
    tally.not_ok += sum(result["status"] != "ok" for result in answer["results"])


async def _post(http: aiohttp.ClientSession, path: str, body: object) -> Any:
    """POST a JSON body; the answer parsed once read whole (orjson both ways). Raises on an error status."""
    async with http.post(path, data=orjson.dumps(body), timeout=_REQUEST_TIMEOUT) as response:
        response.raise_for_status()
        return orjson.loads(await response.read())


def _percentiles(name: str, latencies_ms: list[float]) -> Figures:
    if len(latencies_ms) < 2:
        return {f"{name}_requests": len(latencies_ms)}
    cuts = statistics.quantiles(latencies_ms, n=100, method="inclusive")
    return {
        f"{name}_requests": len(latencies_ms),
        f"{name}_ms_p50": round(cuts[49], 2),
        f"{name}_ms_p99": round(cuts[98], 2),
        f"{name}_ms_max": round(max(latencies_ms), 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m kmq_api.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=1, help="concurrent HTTP clients (each: receive, then ack)")
    parser.add_argument("--value-bytes", type=int, default=100)
    parser.add_argument("--marker-format", choices=("kmq", "batch"), default="batch")
    args = parser.parse_args()
    figures = run_benchmark(
        args.messages, args.batch, args.partitions, args.concurrency, args.value_bytes, marker_format=args.marker_format
    )
    sys.stdout.write(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
