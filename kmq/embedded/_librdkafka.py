"""ctypes bindings for librdkafka's mock cluster, on the librdkafka that confluent-kafka itself loaded."""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from pathlib import Path

import confluent_kafka

from kmq.errors import EmbeddedBrokerError

_RD_KAFKA_PRODUCER = 0
_ERRSTR_SIZE = 512
_VOID_P, _CHAR_P, _INT = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
_SIGNATURES: dict[str, tuple[type | None, list[type]]] = {
    "rd_kafka_conf_new": (_VOID_P, []),
    "rd_kafka_conf_set": (_INT, [_VOID_P, _CHAR_P, _CHAR_P, _CHAR_P, ctypes.c_size_t]),
    "rd_kafka_new": (_VOID_P, [_INT, _VOID_P, _CHAR_P, ctypes.c_size_t]),
    "rd_kafka_destroy": (None, [_VOID_P]),
    "rd_kafka_err2str": (_CHAR_P, [_INT]),
    "rd_kafka_mock_cluster_new": (_VOID_P, [_VOID_P, _INT]),
    "rd_kafka_mock_cluster_destroy": (None, [_VOID_P]),
    "rd_kafka_mock_cluster_bootstraps": (_CHAR_P, [_VOID_P]),
    "rd_kafka_mock_topic_create": (_INT, [_VOID_P, _CHAR_P, _INT, _INT]),
    "rd_kafka_mock_group_initial_rebalance_delay_ms": (None, [_VOID_P, ctypes.c_int32]),
}


def library_candidates() -> list[Path]:
    """Where librdkafka may be, best first: the copy the loaded confluent_kafka uses, then the wheel's bundled
    directories (Linux `confluent_kafka.libs`, macOS `.dylibs`), then the system's."""
    package = Path(confluent_kafka.__file__).parent
    found = _loaded_copies()
    for directory in (package.parent / "confluent_kafka.libs", package / ".dylibs"):
        found += sorted(directory.glob("librdkafka*")) if directory.is_dir() else []
    system = ctypes.util.find_library("rdkafka")
    return list(dict.fromkeys(found + ([Path(system)] if system else [])))


def load_librdkafka() -> ctypes.CDLL:
    """The first candidate that has the mock cluster API, with argument and result types declared."""
    for path in library_candidates():
        try:
            library = ctypes.CDLL(str(path))
        except OSError:
            continue
        if all(hasattr(library, name) for name in _SIGNATURES):
            return _declare(library)
    raise EmbeddedBrokerError(
        f"no librdkafka with the mock cluster API next to confluent-kafka {confluent_kafka.version()[0]} "
        f"(looked at: {', '.join(map(str, library_candidates())) or 'nothing found'})"
    )


class MockCluster:
    """A librdkafka mock cluster of `brokers` brokers, each on an ephemeral 127.0.0.1 port (librdkafka picks it)."""

    def __init__(self, library: ctypes.CDLL, brokers: int) -> None:
        self._lib = library
        errstr = ctypes.create_string_buffer(_ERRSTR_SIZE)
        conf = library.rd_kafka_conf_new()
        # Notices only say that this owner handle has no bootstrap.servers of its own, which it needs none of.
        library.rd_kafka_conf_set(conf, b"log_level", b"4", errstr, _ERRSTR_SIZE)
        self._owner = library.rd_kafka_new(_RD_KAFKA_PRODUCER, conf, errstr, _ERRSTR_SIZE)
        if not self._owner:
            raise EmbeddedBrokerError(f"librdkafka could not create the mock cluster's owner: {errstr.value.decode()}")
        self._cluster = library.rd_kafka_mock_cluster_new(self._owner, brokers)
        if not self._cluster:
            library.rd_kafka_destroy(self._owner)
            raise EmbeddedBrokerError("librdkafka could not create a mock cluster (see its log above)")
        # Group joins otherwise wait group.initial.rebalance.delay.ms (3 s) like Kafka's default.
        library.rd_kafka_mock_group_initial_rebalance_delay_ms(self._cluster, 0)
        self.bootstrap_servers: str = library.rd_kafka_mock_cluster_bootstraps(self._cluster).decode()

    def create_topic(self, name: str, partitions: int) -> str | None:
        """None on success, else librdkafka's error text (e.g. the topic exists)."""
        code = self._lib.rd_kafka_mock_topic_create(self._cluster, name.encode(), partitions, 1)
        return None if code == 0 else f"{self._lib.rd_kafka_err2str(code).decode()} (error {code})"

    def destroy(self) -> None:
        self._lib.rd_kafka_mock_cluster_destroy(self._cluster)
        self._lib.rd_kafka_destroy(self._owner)


def _loaded_copies() -> list[Path]:
    """librdkafka files mapped into this process (Linux): exactly the one confluent_kafka's extension uses."""
    maps = Path("/proc/self/maps")
    if not sys.platform.startswith("linux") or not maps.exists():
        return []
    paths = {line.split(maxsplit=5)[-1] for line in maps.read_text().splitlines() if "librdkafka" in line}
    return sorted(Path(p) for p in paths if p.startswith("/"))


def _declare(library: ctypes.CDLL) -> ctypes.CDLL:
    for name, (restype, argtypes) in _SIGNATURES.items():
        function = getattr(library, name)
        function.restype, function.argtypes = restype, argtypes
    return library
