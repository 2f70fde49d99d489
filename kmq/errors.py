"""The kmq error hierarchy: every error the library raises derives from `KmqError`."""

from __future__ import annotations


class KmqError(Exception):
    """Base of every error raised by kmq."""


class ConfigError(KmqError, ValueError):
    """A configuration value is missing or invalid; the message names the setting."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field = field


class MarkerDecodeError(KmqError, ValueError):
    """A record on the markers topic is not a kmq marker (wrong length, unknown type byte, null)."""


class DurationTooLongError(KmqError, ValueError):
    """A nack delay, extension or processing timeout is not shorter than the markers topic's retention: the START
    would be deleted before it is due, and the message lost."""

    def __init__(self, what: str, duration_ms: int, markers_topic: str, retention_ms: int) -> None:
        super().__init__(
            f"{what}={duration_ms} is not shorter than the retention of {markers_topic} (retention.ms={retention_ms}): "
            "its START marker would be deleted before it is due and the message lost; use a shorter duration, "
            f"or raise retention.ms of {markers_topic}"
        )
        self.what = what
        self.duration_ms = duration_ms
        self.retention_ms = retention_ms


class TopicMismatchError(KmqError):
    """The markers topic does not have exactly as many partitions as the queue topic."""

    def __init__(self, queue_topic: str, queue_partitions: int, markers_topic: str, markers_partitions: int) -> None:
        super().__init__(
            f"markers topic {markers_topic!r} has {markers_partitions} partitions but queue topic "
            f"{queue_topic!r} has {queue_partitions}; they must be equal (recreate {markers_topic!r} "
            f"with {queue_partitions} partitions)"
        )
        self.queue_topic = queue_topic
        self.queue_partitions = queue_partitions
        self.markers_topic = markers_topic
        self.markers_partitions = markers_partitions


class TopicMissingError(KmqError):
    """A topic kmq needs does not exist on the cluster."""

    def __init__(self, topic: str, bootstrap_servers: str) -> None:
        super().__init__(f"topic {topic!r} does not exist on {bootstrap_servers} (create it with `kmq topics create`)")
        self.topic = topic


class TopicAdminError(KmqError):
    """The broker refused a change to a topic (e.g. adding partitions); the message names the topic and the reason."""

    def __init__(self, topic: str, detail: str) -> None:
        super().__init__(f"the broker refused to change topic {topic!r}: {detail}")
        self.topic = topic


class BrokerUnavailableError(KmqError):
    """The Kafka cluster could not be reached or did not answer in time."""

    def __init__(self, bootstrap_servers: str, detail: str) -> None:
        super().__init__(f"cannot reach Kafka at {bootstrap_servers}: {detail}")
        self.bootstrap_servers = bootstrap_servers


class KafkaUnavailableError(BrokerUnavailableError):
    """No broker has answered a client for `kafka_unavailable_after_ms` while the cluster accepts connections: the
    client has lost its brokers for good (kmq.liveness); a new client (or process) recovers."""


class KafkaSecurityError(KmqError):
    """Kafka refused the connection's SASL credentials, TLS could not verify the broker, or an ACL denied an
    operation; the message names the setting or the topic and permission to fix (never a secret)."""

    def __init__(self, bootstrap_servers: str, detail: str) -> None:
        super().__init__(f"Kafka at {bootstrap_servers}: {detail}")
        self.bootstrap_servers = bootstrap_servers


class MarkerWriteError(KmqError):
    """START markers could not be written; the batch's offsets were not committed and it will be read again."""

    def __init__(self, topic: str, partition: int, offset: int, detail: str) -> None:
        super().__init__(
            f"could not write START marker for {topic}[{partition}]@{offset}: {detail}; "
            "no offsets were committed, the batch will be delivered again"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset


class TransactionError(MarkerWriteError):
    """The transaction of a batch (its STARTs and its offset commit) failed or timed out; it is aborted and the batch
    will be read again (transactional mode)."""

    def __init__(self, topic: str, partition: int, offset: int, detail: str, aborted: bool) -> None:
        outcome = (
            "it was aborted: nothing was committed, the batch will be delivered again"
            if aborted
            else "aborting it failed too; the next receive() aborts it first, then the batch is delivered again"
        )
        KmqError.__init__(
            self, f"the transaction of the batch from {topic}[{partition}]@{offset} failed: {detail}; {outcome}"
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.aborted = aborted


class TransactionalSetupError(KmqError):
    """The transactional producer of a `transactional` client could not start (`init_transactions` failed)."""

    def __init__(self, transactional_id: str, detail: str) -> None:
        super().__init__(
            f"the transactional producer {transactional_id!r} could not start: {detail}; check that the brokers are "
            "reachable, that the cluster allows transactions (a transaction coordinator with enough replicas of "
            "__transaction_state) and that this principal may use that transactional id (a TransactionalId ACL)"
        )
        self.transactional_id, self.detail = transactional_id, detail


class CommitError(KmqError):
    """Committing the queue offsets of a batch failed after its markers were written."""


class DeliveryError(KmqError):
    """A produced record was not acknowledged by the broker."""

    def __init__(self, topic: str, partition: int | None, detail: str) -> None:
        where = topic if partition is None else f"{topic}[{partition}]"
        super().__init__(f"write to {where} failed: {detail}")
        self.topic = topic
        self.partition = partition


class WorkerFailedError(KmqError):
    """A thread of a `Worker` died on an unexpected error, so the worker stopped as a whole (its consumer left the
    group, unfinished messages were nacked); the error that killed the thread is chained as `__cause__`."""

    def __init__(self, topic: str, thread: str, error: BaseException) -> None:
        super().__init__(f"worker on {topic} stopped: its thread {thread} died on {type(error).__name__}: {error}")
        self.topic, self.thread = topic, thread


class ClientClosedError(KmqError):
    """The client or producer was used after `close()`."""


class EmbeddedBrokerError(KmqError):
    """The embedded broker could not be started or stopped."""


class DemoError(KmqError):
    """`kmq demo` could not complete: a child process failed, or a topic could not be read back in time."""


class BenchError(KmqError):
    """`kmq bench` could not measure: a contender's process failed or stalled, or the options cannot work."""


class SparkClusterError(KmqError):
    """A standalone Spark cluster on this machine (a master and its workers) did not start."""


class JvmKmqError(KmqError):
    """The JVM kmq harness (SoftwareMill's kmq, tests/interop) could not be resolved, started or read."""


class TrackerCompatibilityError(KmqError):
    """The call needs this project's tracker, but the config declares SoftwareMill's JVM tracker."""


class AckInputError(KmqError, ValueError):
    """A row given to the Spark acknowledgement sink is invalid (unknown status, null partition or offset)."""


class MissingExtraError(KmqError, ImportError):
    """A feature's optional dependencies are not installed; the message names the `pip install` that adds them."""

    def __init__(self, feature: str, extras: tuple[str, ...], missing: tuple[str, ...]) -> None:
        names = " and ".join(extras)
        plural = "s" if len(extras) > 1 else ""
        super().__init__(f"{feature} needs the {names} extra{plural}: pip install 'kmq[{','.join(extras)}]'")
        self.feature = feature
        self.extras = extras
        self.missing = missing


class OffsetLogError(KmqError):
    """A streaming query's offset log (Spark's checkpoint) does not give a micro-batch's offset ranges."""

    def __init__(self, where: str, detail: str) -> None:
        super().__init__(f"Spark checkpoint file {where}: {detail}")
        self.where = where
