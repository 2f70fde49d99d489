"""The image as Kubernetes runs it, on a Docker engine: built by scripts/image, run with the manifests' settings.

`DockerEngine` is the engine scripts/image used (a private dockerd it started and left up for the session, stopped
at its end). `pod_run_options` turns a Deployment's container into `docker run` options: its environment (ConfigMap
and Secret as rendered), its security context, its tmp volume; `probe` reads a probe's path and port from it.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import socket
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deploytools import REPO, Resource, container, pod_spec

IMAGE_SCRIPT = REPO / "scripts" / "image"
# From a fresh machine: apt-get of docker.io and debootstrap, debootstrap, the build (about 2-4 min on 2 busy cores).
IMAGE_BUILD_TIMEOUT_S = 900
DOCKER_TIMEOUT_S = 60
DAEMON_STOP_TIMEOUT_S = 30


class DockerUnavailable(Exception):
    """No Docker engine could be had here (why, and what to do, in the message)."""


@dataclass
class DockerEngine:
    env: dict[str, str]
    image: str
    started_pid: int | None
    build_log: str
    session_lock: int | None
    names: list[str] = field(default_factory=list)

    @classmethod
    def build_image(cls) -> DockerEngine:
        """scripts/image --keep-daemon: the engine it used (a private dockerd it may have started) and the image of
        this tree under a tag of this session's own (another session may build another tree meanwhile).

        Without DOCKER_HOST (which scripts/test sets, holding the lock itself) the session first takes the private
        dockerd's lock, waiting for another session to finish with it, so none stops it under another's containers.
        """
        if shutil.which("docker") is None and (os.geteuid() != 0 or shutil.which("apt-get") is None):
            raise DockerUnavailable("no docker client, and scripts/image can only install Debian's docker.io as root")
        lock = None if os.environ.get("DOCKER_HOST") else _lock_session(IMAGE_BUILD_TIMEOUT_S)
        image = f"kmq:test-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        done = subprocess.run(
            [str(IMAGE_SCRIPT), "--keep-daemon", "--tag", image],
            capture_output=True,
            text=True,
            timeout=IMAGE_BUILD_TIMEOUT_S,
            check=False,
            cwd=REPO,
        )
        if done.returncode != 0:
            if lock is not None:
                os.close(lock)
            raise DockerUnavailable(f"scripts/image failed ({done.returncode}):\n{done.stderr[-4000:]}")
        lines = [line.removeprefix("export ") for line in done.stdout.splitlines() if line.startswith("export ")]
        exports = dict(line.split("=", 1) for line in lines)
        env = dict(os.environ)
        if "DOCKER_HOST" in exports:
            env["DOCKER_HOST"] = exports["DOCKER_HOST"]
        pid = int(exports["KMQ_DOCKERD_PID"]) if exports.get("KMQ_DOCKERD_PID") else None
        return cls(env=env, image=image, started_pid=pid, build_log=done.stderr, session_lock=lock)

    def docker(self, *args: str, timeout_s: float = DOCKER_TIMEOUT_S, check: bool = True) -> str:
        done = subprocess.run(
            ["docker", *args], capture_output=True, text=True, timeout=timeout_s, check=False, env=self.env
        )
        if check and done.returncode != 0:
            raise AssertionError(f"docker {' '.join(args[:3])} ... failed ({done.returncode}): {done.stderr[-2000:]}")
        return done.stdout.strip()

    def inspect(self, name: str) -> Any:
        return json.loads(self.docker("inspect", name))[0]

    def run(self, name: str, options: list[str], args: list[str]) -> None:
        self.names.append(name)
        self.docker("run", "--detach", "--name", name, *options, self.image, *args)

    def remove_all(self) -> None:
        """Every container this session started, whatever state it is in."""
        for name in self.names:
            self.docker("rm", "--force", "--volumes", name, check=False)
        self.names.clear()

    def close(self) -> None:
        """Untags this session's image; stops the private dockerd scripts/image started for this session (one that
        ran before is left alone) and releases the lock."""
        try:
            self.docker("image", "rm", self.image, check=False)
            if self.started_pid is not None:
                stop = [str(IMAGE_SCRIPT), "--stop"]
                subprocess.run(stop, timeout=DAEMON_STOP_TIMEOUT_S + 30, check=True, cwd=REPO)
                assert not _alive(self.started_pid), f"dockerd {self.started_pid} still runs after scripts/image --stop"
        finally:
            if self.session_lock is not None:
                os.close(self.session_lock)


def _lock_session(timeout_s: float) -> int:
    """An exclusive lock on the private dockerd's directory (the file scripts/test locks too), held until closed."""
    directory = Path(os.environ.get("KMQ_DOCKER_DIR") or Path.home() / ".cache" / "kmq" / "docker")
    directory.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(directory / "session.lock", os.O_CREAT | os.O_RDWR, 0o644)
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if time.monotonic() > deadline:
                os.close(descriptor)
                held = f"another test session held {directory}/session.lock for {timeout_s:.0f}s"
                raise DockerUnavailable(held) from None
            time.sleep(0.5)  # poll interval of a condition checked against a deadline
        else:
            return descriptor


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "\nState:\tZ" in status.read_text())


def process_uids(pid: int) -> set[int]:
    """The real, effective, saved and filesystem uids of a process (Linux /proc)."""
    line = next(x for x in Path(f"/proc/{pid}/status").read_text().splitlines() if x.startswith("Uid:"))
    return {int(uid) for uid in line.split()[1:]}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def container_port(deployment: Resource, name: str) -> int:
    ports = {p["name"]: p["containerPort"] for p in container(deployment).get("ports", [])}
    assert name in ports, f"{deployment['metadata']['name']}: no containerPort named {name!r}"
    port: int = ports[name]
    return port


@dataclass(frozen=True)
class Probe:
    path: str
    port_name: str


def probe(deployment: Resource, kind: str) -> Probe:
    """The httpGet of a probe (livenessProbe, readinessProbe, startupProbe) of the Deployment's container."""
    get = container(deployment)[kind]["httpGet"]
    return Probe(path=get["path"], port_name=get["port"])


def termination_grace_s(deployment: Resource) -> int:
    grace: int = pod_spec(deployment)["terminationGracePeriodSeconds"]
    return grace


def pod_run_options(deployment: Resource, env: dict[str, str]) -> list[str]:
    """`docker run` options that give a container what the pod gives it: its environment (`env`), the host's
    network (the test's broker listens on localhost), the security context and an emptyDir per volume mount that is
    not a Secret. The user is the image's own, so the test sees whether it matches the manifests' runAsUser."""
    spec, main = pod_spec(deployment), container(deployment)
    options = ["--network", "host"]
    security = main.get("securityContext", {})
    if security.get("readOnlyRootFilesystem"):
        options.append("--read-only")
    for capability in security.get("capabilities", {}).get("drop", []):
        options += ["--cap-drop", capability]
    if security.get("allowPrivilegeEscalation") is False:
        options += ["--security-opt", "no-new-privileges"]
    empty_dirs = {v["name"]: v["emptyDir"] for v in spec.get("volumes", []) if "emptyDir" in v}
    for mount in main.get("volumeMounts", []):
        if mount["name"] in empty_dirs:
            size = _docker_size(empty_dirs[mount["name"]].get("sizeLimit", "64Mi"))
            options += ["--tmpfs", f"{mount['mountPath']}:rw,nosuid,nodev,size={size}"]
    for name, value in sorted(env.items()):
        options += ["--env", f"{name}={value}"]
    return options


def _docker_size(quantity: str) -> str:
    """A Kubernetes binary quantity (64Mi, 1Gi) as Docker writes it (64m, 1g)."""
    for suffix, docker_suffix in (("Ki", "k"), ("Mi", "m"), ("Gi", "g")):
        if quantity.endswith(suffix):
            return quantity.removesuffix(suffix) + docker_suffix
    raise AssertionError(f"unexpected emptyDir sizeLimit {quantity!r}: use Ki, Mi or Gi")


def process_tree_uids(pid: int) -> set[int]:
    """Every uid of `pid` and of all its descendants (Linux /proc)."""
    children: dict[int, list[int]] = {}
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue  # exited meanwhile
        children.setdefault(int(fields["PPid"]), []).append(int(fields["Pid"]))
    uids: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        uids |= process_uids(current)
        todo += children.get(current, [])
    return uids
