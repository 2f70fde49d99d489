"""A TCP proxy in front of one Kafka broker that can answer Metadata requests with *no* brokers.

That answer is what a broker in controlled shutdown may give (docs/guides/operating.md): librdkafka then drops every
broker it knows and, when the connection drops at the wrong moment, never bootstraps again, so its client waits
forever. One such answer strands a client only when it loses that race (otherwise librdkafka bootstraps again, as
observed with 2.16); answering *every* Metadata request so from `strand()` until `heal()` makes the stranded client
deterministic: it never reaches a broker, while its bootstrap address keeps accepting connections.

The proxy forwards every byte, except that Metadata and FindCoordinator responses name the proxy instead of the broker
(so every connection of the client stays on the proxy) and, while stranding, Metadata responses list no broker. Only
the broker addresses of those two responses are decoded and rewritten (Metadata 0-13, flexible from 9;
FindCoordinator 0-6, flexible from 3); the rest of every frame passes through untouched.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable

METADATA, FIND_COORDINATOR = 3, 10
_FLEXIBLE_FROM = {METADATA: 9, FIND_COORDINATOR: 3}
_SIZE = struct.Struct(">i")
_REQUEST_HEAD = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16, _INT32 = struct.Struct(">h"), struct.Struct(">i")


class MetadataProxy:
    """Listens on 127.0.0.1:`port` and forwards to `broker` ("host:port"); between `strand()` and `heal()` every
    Metadata response lists no brokers."""

    def __init__(self, broker: str) -> None:
        host, port = broker.rsplit(":", 1)
        self._broker = (host, int(port))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._stranding = False
        self.stranded = 0  # Metadata responses answered with no brokers
        self._sockets: list[socket.socket] = []
        self._closed = False
        self._accepting = threading.Thread(target=self._accept, name="metadata-proxy", daemon=True)
        self._accepting.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def strand(self) -> None:
        """From now on, answer every Metadata request with a list of no brokers."""
        with self._lock:
            self._stranding = True

    def heal(self) -> None:
        """Name the broker in Metadata responses again."""
        with self._lock:
            self._stranding = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            sockets = [self._listener, *self._sockets]
        for sock in sockets:
            with contextlib.suppress(OSError):  # not connected (the listener) or already closed by the peer
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        self._accepting.join(5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # closed
            try:
                upstream = socket.create_connection(self._broker, timeout=10)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._sockets += [client, upstream]
            versions: dict[int, tuple[int, int]] = {}  # correlation id -> (api key, version), for the responses
            pumps = (
                (client, upstream, lambda frame, v=versions: self._request(frame, v)),
                (upstream, client, lambda frame, v=versions: self._response(frame, v)),
            )
            for source, target, rewrite in pumps:
                threading.Thread(target=_pump, args=(source, target, rewrite), daemon=True).start()

    def _request(self, frame: bytes, versions: dict[int, tuple[int, int]]) -> bytes:
        api_key, api_version, correlation_id = _REQUEST_HEAD.unpack_from(frame)
        if api_key in _FLEXIBLE_FROM:
            with self._lock:
                versions[correlation_id] = (api_key, api_version)
        return frame

    def _response(self, frame: bytes, versions: dict[int, tuple[int, int]]) -> bytes:
        correlation_id = _INT32.unpack_from(frame)[0]
        with self._lock:
            api_key, version = versions.pop(correlation_id, (None, 0))
            strand = api_key == METADATA and self._stranding
            self.stranded += strand
        if api_key == METADATA:
            return rewrite_brokers(frame, version, None if strand else self.port)
        if api_key == FIND_COORDINATOR:
            return rewrite_coordinator(frame, version, self.port)
        return frame


def rewrite_brokers(frame: bytes, version: int, port: int | None) -> bytes:
    """A Metadata response whose brokers all listen on `port` (host kept), or with no brokers when `port` is None."""
    flexible = version >= _FLEXIBLE_FROM[METADATA]
    at = _body(frame, flexible)
    if version >= 3:
        at += 4  # throttle_time_ms
    count, end = _array_length(frame, at, flexible)
    brokers: list[bytes] = []
    position = end
    for _ in range(count):
        start = position
        position += 4  # node_id
        host_end = _skip_string(frame, position, flexible)
        port_at = host_end
        position = port_at + 4
        if version >= 1:
            position = _skip_string(frame, position, flexible)  # rack (nullable)
        if flexible:
            position = _skip_tags(frame, position)
        if port is not None:
            brokers.append(frame[start:port_at] + _INT32.pack(port) + frame[port_at + 4 : position])
    length = _uvarint(len(brokers) + 1) if flexible else _INT32.pack(len(brokers))
    return frame[:at] + length + b"".join(brokers) + frame[position:]


def rewrite_coordinator(frame: bytes, version: int, port: int) -> bytes:
    """A FindCoordinator response whose coordinators listen on `port` (host kept)."""
    flexible = version >= _FLEXIBLE_FROM[FIND_COORDINATOR]
    at = _body(frame, flexible)
    if version == 0:
        return _with_port(frame, _skip_string(frame, at + 2 + 4, flexible), port)  # error_code, node_id, host
    at += 4  # throttle_time_ms
    if version <= 3:
        at = _skip_string(frame, at + 2, flexible)  # error_code, error_message
        return _with_port(frame, _skip_string(frame, at + 4, flexible), port)  # node_id, host
    count, at = _array_length(frame, at, flexible)
    for _ in range(count):
        at = _skip_string(frame, at, flexible) + 4  # key, node_id
        port_at = _skip_string(frame, at, flexible)  # host
        frame = _with_port(frame, port_at, port)
        at = _skip_tags(frame, _skip_string(frame, port_at + 4 + 2, flexible))  # port, error_code, error_message
    return frame


def _with_port(frame: bytes, at: int, port: int) -> bytes:
    return frame[:at] + _INT32.pack(port) + frame[at + 4 :]


def _body(frame: bytes, flexible: bool) -> int:
    """Where the response body starts: after the correlation id and, in a flexible header, its tagged fields."""
    return _skip_tags(frame, 4) if flexible else 4


def _array_length(frame: bytes, at: int, flexible: bool) -> tuple[int, int]:
    if flexible:
        value, end = _read_uvarint(frame, at)
        return value - 1, end
    return _INT32.unpack_from(frame, at)[0], at + 4


def _skip_string(frame: bytes, at: int, flexible: bool) -> int:
    if flexible:
        length, end = _read_uvarint(frame, at)
        return end + max(length - 1, 0)
    length = _INT16.unpack_from(frame, at)[0]
    return at + 2 + max(length, 0)


def _skip_tags(frame: bytes, at: int) -> int:
    count, at = _read_uvarint(frame, at)
    for _ in range(count):
        _, at = _read_uvarint(frame, at)
        size, at = _read_uvarint(frame, at)
        at += size
    return at


def _read_uvarint(frame: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = frame[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _pump(source: socket.socket, target: socket.socket, rewrite: Callable[[bytes], bytes]) -> None:
    """Copy size-prefixed frames from `source` to `target`, each through `rewrite`, until either side closes."""
    try:
        while True:
            head = _read_exactly(source, 4)
            if head is None:
                break
            frame = _read_exactly(source, _SIZE.unpack(head)[0])
            if frame is None:
                break
            frame = rewrite(frame)
            target.sendall(_SIZE.pack(len(frame)) + frame)
    except OSError:
        pass  # a side went away: the connection ends, as it would without the proxy
    finally:
        for sock in (source, target):
            with contextlib.suppress(OSError):  # already closed
                sock.shutdown(socket.SHUT_RDWR)


def _read_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks, remaining = [], size
    while remaining:
        chunk = sock.recv(min(remaining, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)
