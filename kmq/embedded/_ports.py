"""Local TCP ports: picking a free one, validating a chosen one, waiting for a listener."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable

from kmq.errors import EmbeddedBrokerError

HOST = "127.0.0.1"
_POLL_INTERVAL_S = 0.02


def free_port(host: str = HOST) -> int:
    """A port nobody listens on right now (the kernel's pick). Another process may take it before we bind it:
    callers retry with a new port when the broker fails to start on it."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


def check_host(host: str) -> str:
    """`host`, an IPv4 address of this machine that a broker can listen on; else an error that says so."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.bind((host, 0))
    except OSError as e:
        raise EmbeddedBrokerError(
            f"cannot listen on {host!r} ({e.strerror or e}): give an IPv4 address of this machine, such as "
            f"{HOST} (the default) or the address of a local bridge (scripts/k8s-up makes 10.233.0.1)"
        ) from e
    return host


def check_port(port: int) -> int:
    if not 0 < port < 65536:
        raise EmbeddedBrokerError(f"port must be between 1 and 65535, not {port}")
    return port


def accepts_connections(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5):
            return True
    except OSError:
        return False


def wait_until(condition: Callable[[], bool], deadline: float) -> bool:
    """Poll `condition` until it holds (True) or the monotonic `deadline` passes (False)."""
    while not condition():
        if time.monotonic() >= deadline:
            return False
        time.sleep(_POLL_INTERVAL_S)
    return True
