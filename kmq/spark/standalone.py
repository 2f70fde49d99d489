"""A Spark standalone cluster on this machine (the tests' and `kmq bench --master standalone`): a master and two
workers started from pyspark's own `spark-class` (each its own JVM, bound to 127.0.0.1, one core and a small memory
per worker), each in a process group of its own so that stopping it also stops the executors it launched."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import pyspark

from kmq.errors import SparkClusterError

SPARK_CLASS = Path(pyspark.__file__).parent / "bin" / "spark-class"
WORKERS = 2
WORKER_MEMORY = "768m"
EXECUTOR_MEMORY = "512m"  # what a driver asks for (SPARK_EXECUTOR_MEMORY): one executor fits a worker
_START_TIMEOUT_S = 180


@dataclass(frozen=True, slots=True)
class StandaloneCluster:
    master_url: str
    web_url: str
    workers: tuple[subprocess.Popen[bytes], ...]

    def alive_workers(self) -> int:
        return sum(1 for worker in self._state().get("workers", []) if worker.get("state") == "ALIVE")

    def _state(self) -> dict[str, list[dict[str, object]]]:
        with urllib.request.urlopen(f"{self.web_url}/json", timeout=5) as response:
            state: dict[str, list[dict[str, object]]] = json.load(response)
        return state

    def executors(self) -> list[int]:
        """The pids of the executor JVMs the workers run now (children of the worker JVMs)."""
        found = []
        worker_pids = {w.pid for w in self.workers}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
                cmdline = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            parent = int(stat.rsplit(")", 1)[1].split()[1])
            if parent in worker_pids and b"CoarseGrainedExecutorBackend" in cmdline:
                found.append(int(entry.name))
        return found


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@contextmanager
def standalone_cluster(work_dir: Path) -> Iterator[StandaloneCluster]:
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work_dir / "logs"),
           "SPARK_DAEMON_MEMORY": "384m"}  # fmt: skip
    port, web_port = free_port(), free_port()
    started: list[subprocess.Popen[bytes]] = []

    def start(args: list[str], log: str) -> subprocess.Popen[bytes]:
        with (work_dir / log).open("wb") as out:
            process = subprocess.Popen([str(SPARK_CLASS), *args], env=env, stdout=out, stderr=subprocess.STDOUT,
                                       start_new_session=True)  # fmt: skip
        started.append(process)
        return process

    try:
        start(["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port), "--webui-port",
               str(web_port)], "master.log")  # fmt: skip
        master_url = f"spark://127.0.0.1:{port}"
        workers = tuple(start(_worker_args(n, work_dir, master_url), f"worker{n}.log") for n in range(WORKERS))
        cluster = StandaloneCluster(master_url, f"http://127.0.0.1:{web_port}", workers)

        _wait_ready(cluster, started, work_dir)
        yield cluster
    finally:
        for process in reversed(started):  # workers first (and the executors in their groups), then the master
            with suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGTERM)
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(30)


def _worker_args(n: int, work_dir: Path, master_url: str) -> list[str]:
    return ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1", "--memory", WORKER_MEMORY,
            "--webui-port", str(free_port()), "--work-dir", str(work_dir / f"worker{n}"), master_url]  # fmt: skip


def _wait_ready(cluster: StandaloneCluster, started: list[subprocess.Popen[bytes]], work_dir: Path) -> None:
    """Until the master counts every worker alive; SparkClusterError if a daemon exits or it takes too long."""
    deadline = time.monotonic() + _START_TIMEOUT_S
    while True:
        if any(process.poll() is not None for process in started):
            raise SparkClusterError(f"a Spark daemon exited while the cluster started: see the logs in {work_dir}")
        with suppress(OSError):
            if cluster.alive_workers() == WORKERS:
                return
        if time.monotonic() > deadline:
            raise SparkClusterError(
                f"no Spark master with {WORKERS} workers within {_START_TIMEOUT_S} s: see {work_dir}"
            )
        time.sleep(1)
