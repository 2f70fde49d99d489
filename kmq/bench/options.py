"""`BenchOptions`: what one `kmq bench` run measures, and on which broker."""

from __future__ import annotations

from dataclasses import dataclass

from kmq.embedded import BACKENDS
from kmq.errors import ConfigError

PLAIN, KMQ, KMQ_BATCH, SHARE, TRACKER, HTTP = "plain", "kmq", "kmq-batch", "share", "tracker", "http"
WORKER, WORKER_KEY = "worker", "worker-key"
CONTENDERS = (PLAIN, KMQ, KMQ_BATCH, SHARE, TRACKER, HTTP, WORKER)
WORKER_KEYS = 1_000  # the keys of worker-key's messages (its queue alone has keys)
# Only when named: SoftwareMill's JVM KmqClient (tests/interop, via kmq.jvm), as it needs Java and Maven; and a
# second reference, the plain consumer committing asynchronously.
JVM_KMQ = "jvm-kmq"
PLAIN_ASYNC = "plain-async"
ALL_CONTENDERS = (*CONTENDERS, WORKER_KEY, PLAIN_ASYNC, JVM_KMQ)
CONSUMERS = (
    PLAIN,
    PLAIN_ASYNC,
    KMQ,
    KMQ_BATCH,
    SHARE,
    WORKER,
    WORKER_KEY,
    JVM_KMQ,
)  # measured by a worker process on a preloaded queue
# The contenders whose queue has markers (a tracker runs beside them), and the marker format of their client: the
# JVM client writes kmq's; the worker runtime writes batch markers (its default), so it is compared with kmq-batch.
KMQ_CLIENTS = {KMQ: "kmq", KMQ_BATCH: "batch", WORKER: "batch", WORKER_KEY: "batch", JVM_KMQ: "kmq"}
# librdkafka's mock cluster drops a partition's oldest data past 5 MiB (measured: value + ~40 bytes per record).
MOCK_PARTITION_LIMIT_BYTES = 4 * 1024 * 1024
RECORD_OVERHEAD_BYTES = 40
WARM_UP_ROUND = -1  # the round number of a warm-up run (not counted)
_WORK_SUFFIX = "us"


def variant(contender: str, work_us: int) -> str:
    """The name of a consumer contender's runs whose handler burns `work_us` µs per message: `plain@20us`."""
    return contender if work_us == 0 else f"{contender}@{work_us}{_WORK_SUFFIX}"


def split_variant(name: str) -> tuple[str, int]:
    """`plain@20us` -> ("plain", 20); `plain` -> ("plain", 0)."""
    contender, _, work = name.partition("@")
    return contender, int(work.removesuffix(_WORK_SUFFIX)) if work else 0


@dataclass(frozen=True, slots=True)
class BenchOptions:
    """`messages` of `size` bytes on `partitions` partitions, consumed in batches of `batch`, `repeat` times.

    The broker is an embedded one of `backend` unless `bootstrap_servers` names a cluster. `tracker_pending` START
    markers feed the tracker contender; `http_messages` go through the REST facade in batches of `http_batch`.
    With `profile_dir`, each consumer run writes a pyinstrument profile of its measured window there (and runs
    slower for it: profiles say where the time goes, not how fast). With `warm_up`, every contender first runs once
    unmeasured (round `WARM_UP_ROUND`): a broker started for the bench (a JVM) is slow until warm.
    """

    messages: int = 100_000
    partitions: int = 4
    size: int = 100
    batch: int = 500
    repeat: int = 3
    backend: str = "kafka"
    bootstrap_servers: str | None = None
    contenders: tuple[str, ...] = CONTENDERS
    tracker_pending: int = 1_000_000
    http_messages: int = 20_000
    http_batch: int = 100
    stall_timeout_ms: int = 60_000
    profile_dir: str | None = None  # pyinstrument profiles of the consumer runs' windows go here
    marker_format: str = "batch"  # of the tracker and http contenders (kmq and kmq-batch have their own)
    warm_up: bool = True  # one unmeasured round of every contender before the measured ones
    # CPU each handler burns per message, µs: every consumer contender runs once per value in each round (named
    # `plain@20us` for a value other than 0), so that ratios at each value come from the same rounds.
    work_us: tuple[int, ...] = (0,)

    def __post_init__(self) -> None:
        for name in ("messages", "partitions", "batch", "repeat", "tracker_pending", "http_messages", "http_batch"):
            if getattr(self, name) < 1:
                raise ConfigError(name, "must be at least 1")
        if self.bootstrap_servers is None and self.backend not in BACKENDS:
            raise ConfigError("backend", f"choose {', '.join(BACKENDS)}, or give bootstrap servers")
        if self.marker_format not in ("kmq", "batch"):
            raise ConfigError("marker_format", f"choose kmq or batch (got {self.marker_format!r})")
        if not self.work_us or min(self.work_us) < 0 or len(set(self.work_us)) != len(self.work_us):
            raise ConfigError("work_us", f"give distinct values of at least 0 (got {self.work_us})")
        if self.size < 0:
            raise ConfigError("size", "must not be negative")
        unknown = [c for c in self.contenders if c not in ALL_CONTENDERS]
        if unknown or not self.contenders:
            known = ", ".join(ALL_CONTENDERS)
            raise ConfigError("contenders", f"choose from {known} (got {', '.join(unknown) or 'none'})")
        if self.on_mock and self.partition_bytes > MOCK_PARTITION_LIMIT_BYTES:
            raise ConfigError(
                "messages",
                f"{self.partition_bytes // 1024} KiB per partition is too much for the mock broker, which drops "
                f"data past ~5 MiB per partition: use more --partitions or fewer --messages",
            )

    @property
    def on_mock(self) -> bool:
        return self.bootstrap_servers is None and self.backend == "mock"

    @property
    def broker(self) -> str:
        return self.bootstrap_servers or f"embedded {self.backend}"

    @property
    def partition_bytes(self) -> int:
        return self.messages * (self.size + RECORD_OVERHEAD_BYTES) // self.partitions

    @property
    def measured(self) -> tuple[str, ...]:
        """The names of one round's runs: every consumer contender at every `work_us`, the others once."""
        names = [
            variant(name, work)
            for work in self.work_us
            for name in self.contenders
            if name in CONSUMERS and (work == 0 or name != JVM_KMQ)  # the JVM client has no handler work to burn
        ]
        return (*dict.fromkeys(names), *(name for name in self.contenders if name not in CONSUMERS))

    @property
    def schedule(self) -> list[tuple[int, str]]:
        """(round, run name) in the order they run: A B C C B A A B C ..., every other round reversed, so that a load
        that rises or falls during the bench favours no contender (with A always first, a falling load favoured the
        last of each round)."""
        return [
            (round_, name)
            for round_ in range(self.repeat)
            for name in (self.measured if round_ % 2 == 0 else reversed(self.measured))
        ]
