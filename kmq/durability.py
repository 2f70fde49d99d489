"""What replication kmq's topics need so that an acknowledged marker survives a broker's loss (pure rules).

kmq produces markers with `acks=all` and an idempotent producer: a marker is acknowledged once every in-sync replica
has it. That survives the loss of a broker only when the ISR cannot shrink to the leader alone, i.e. when the topic
has `min.insync.replicas` ≥ 2 (and so a replication factor ≥ 2; 3 keeps it writable while one broker is down).
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_DEFAULT_REPLICATION = 3


def default_replication_factor(brokers: int) -> int:
    """Three replicas where the cluster has three brokers or more, else one per broker."""
    return max(1, min(MAX_DEFAULT_REPLICATION, brokers))


def min_insync_replicas(replication_factor: int) -> int | None:
    """The `min.insync.replicas` kmq sets on a topic it creates: 2 once there are replicas to lose, else the
    broker's default (None: a single replica cannot do better than 1)."""
    return 2 if replication_factor >= 2 else None


@dataclass(frozen=True)
class TopicReplication:
    """How one topic is replicated on a cluster of `brokers` brokers."""

    topic: str
    brokers: int
    replication_factor: int
    min_insync_replicas: int

    def warning(self) -> str | None:
        """Why an acknowledged marker or message on this topic could be lost with one broker, or None."""
        if self.replication_factor == 1 and self.brokers > 1:
            return (
                f"{self.topic} has 1 replica on a {self.brokers}-broker cluster: a broker lost loses what it "
                f"acknowledged (recreate it with --replication-factor {default_replication_factor(self.brokers)})"
            )
        if self.replication_factor > 1 and self.min_insync_replicas < 2:
            return (
                f"{self.topic} has min.insync.replicas={self.min_insync_replicas} with {self.replication_factor} "
                "replicas: acks=all may then mean one copy, lost with its broker (set min.insync.replicas=2: "
                f"kafka-configs --alter --entity-type topics --entity-name {self.topic} "
                "--add-config min.insync.replicas=2)"
            )
        if self.replication_factor < self.min_insync_replicas:
            return (
                f"{self.topic} has min.insync.replicas={self.min_insync_replicas} but only "
                f"{self.replication_factor} replicas: every write is refused"
            )
        return None
