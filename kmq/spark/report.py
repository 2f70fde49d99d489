"""`AuditReport`: what the delivery audit found, per queue partition and in total; rendered as a table or JSON.

Pure: built from the few rows (one per partition) the Spark job collects.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, fields

from rich.table import Table


@dataclass(frozen=True, slots=True)
class PartitionAudit:
    """One queue partition. A *message* is a first delivery and its redelivered copies (one chain)."""

    partition: int
    messages: int  # records on the queue partition: first deliveries + redelivered copies
    first_deliveries: int
    redelivered_copies: int
    acked: int  # messages whose last delivery was ENDed and that were not dead-lettered
    pending: int  # messages whose last delivery has a START and no END
    oldest_pending_age_ms: int | None
    dead_lettered: int
    max_redelivery_count: int
    unaccounted: int  # below the group's committed offset and never started (or, without markers, unknown)
    unconsumed: int  # at or past the group's committed offset and never started: not read yet
    committed_offset: int
    no_record: int = 0  # offsets markers name that hold no record (transaction markers, aborted records): no message
    dead_reasons: dict[str, int] = field(default_factory=dict)


_COUNTED = ("messages", "first_deliveries", "redelivered_copies", "acked", "pending", "dead_lettered", "unaccounted",
            "unconsumed", "no_record")  # fmt: skip


@dataclass(frozen=True, slots=True)
class AuditReport:
    queue: str
    partitions: tuple[PartitionAudit, ...]

    def total(self, name: str) -> int:
        return sum(int(getattr(p, name)) for p in self.partitions)

    @property
    def dead_reasons(self) -> dict[str, int]:
        found: Counter[str] = Counter()
        for p in self.partitions:
            found.update(p.dead_reasons)
        return dict(sorted(found.items()))

    @property
    def max_redelivery_count(self) -> int:
        return max((p.max_redelivery_count for p in self.partitions), default=0)

    @property
    def oldest_pending_age_ms(self) -> int | None:
        ages = [p.oldest_pending_age_ms for p in self.partitions if p.oldest_pending_age_ms is not None]
        return max(ages) if ages else None

    @property
    def ok(self) -> bool:
        return self.total("unaccounted") == 0

    def to_json(self) -> str:
        totals: dict[str, object] = {name: self.total(name) for name in _COUNTED}
        totals.update(max_redelivery_count=self.max_redelivery_count, oldest_pending_age_ms=self.oldest_pending_age_ms,
                      dead_reasons=self.dead_reasons)  # fmt: skip
        return json.dumps({"queue": self.queue, "totals": totals, "partitions": [asdict(p) for p in self.partitions]})

    def table(self) -> Table:
        table = Table(title=f"kmq audit of {self.queue}")
        names = [f.name for f in fields(PartitionAudit) if f.name not in ("dead_reasons", "committed_offset")]
        for name in names:
            table.add_column(name.replace("_", " "), justify="right")
        for p in self.partitions:
            table.add_row(*(_cell(getattr(p, name)) for name in names))
        totals: dict[str, object] = {name: self.total(name) for name in _COUNTED}
        totals.update(partition="all", max_redelivery_count=self.max_redelivery_count,
                      oldest_pending_age_ms=self.oldest_pending_age_ms)  # fmt: skip
        table.add_row(*(_cell(totals.get(name)) for name in names), style="bold")
        return table


def report_from_rows(queue: str, rows: Sequence[Mapping[str, object]]) -> AuditReport:
    """The report from the Spark job's per-partition rows (dicts with PartitionAudit's field names)."""
    names = {f.name for f in fields(PartitionAudit)}
    partitions = [PartitionAudit(**{k: v for k, v in row.items() if k in names}) for row in rows]  # type: ignore[arg-type]
    return AuditReport(queue, tuple(sorted(partitions, key=lambda p: p.partition)))


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else str(value)
