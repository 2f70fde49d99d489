"""The rows a `foreach_batch` handler returns as not ok: checked on the driver against the micro-batch, then nacked
or dead-lettered by the executors (`kmq-ack`), joined to the batch's own rows so a dead letter carries the message.

The handler's frame is read once, here: what is nacked and what the BATCH END leaves out are the same rows even
when the frame would change on a second evaluation (a random verdict, a source that moved on).
"""

from __future__ import annotations

from collections import Counter

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # Spark's convention

from kmq.errors import AckInputError
from kmq.spark.acking import Ack, parse
from kmq.spark.batch_offsets import BatchRuns, contains

NOT_OK_STATUSES = ("retry", "reject")
REQUIRED = ("partition", "offset", "status")
OPTIONAL = ("delay_ms", "reason")
_ACK_SCHEMA = "partition int, offset long, status string, delay_ms long, reason string"


def collect_not_ok(result: object, runs: BatchRuns) -> list[Ack]:
    """The handler's not-ok rows, every one checked; AckInputError (nothing acked) names the first bad one."""
    if result is None:
        return []
    if not isinstance(result, DataFrame):
        raise AckInputError(
            f"the handler returned {type(result).__name__}: return None (every row ok) or a DataFrame of the rows "
            f"that are not ok, with columns {', '.join(REQUIRED)} and optional {', '.join(OPTIONAL)}"
        )
    missing = [column for column in REQUIRED if column not in result.columns]
    if missing:
        needed = ", ".join(REQUIRED)
        raise AckInputError(f"the handler's not-ok rows need columns {needed}; missing: {', '.join(missing)}")
    columns = [F.col(c) if c in result.columns else F.lit(None).alias(c) for c in (*REQUIRED, *OPTIONAL)]
    acks = [parse(row.asDict()) for row in result.select(*columns).collect()]
    _check(acks, runs)
    return acks


def _check(acks: list[Ack], runs: BatchRuns) -> None:
    for ack in acks:
        where = f"row (partition={ack.partition}, offset={ack.offset})"
        if ack.status not in NOT_OK_STATUSES:
            raise AckInputError(f"{where}: status {ack.status!r} among the not-ok rows: use retry or reject (rows "
                                "left out are ok); nothing was acked")  # fmt: skip
        if not contains(runs.get(ack.partition, ()), ack.offset):
            raise AckInputError(f"{where} is not a row of this micro-batch; nothing was acked")
    twice = [key for key, times in Counter((a.partition, a.offset) for a in acks).items() if times > 1]
    if twice:
        raise AckInputError(f"row (partition={twice[0][0]}, offset={twice[0][1]}) is among the not-ok rows twice; "
                            "nothing was acked")  # fmt: skip


def write_not_ok(batch: DataFrame, acks: list[Ack], options: dict[str, str]) -> None:
    """Nack (a START with the delay) or dead-letter (then END) each row, from the executors; every marker and dead
    letter acknowledged before this returns (a failure raises)."""
    if not acks:
        return
    spark = batch.sparkSession
    rows = [(a.partition, a.offset, a.status, a.delay_ms, a.reason) for a in acks]
    chosen = spark.createDataFrame(rows, _ACK_SCHEMA)
    content = batch.select("partition", "offset", "key", "value", "headers", "redelivery_count")
    chosen.join(content, ["partition", "offset"]).write.format("kmq-ack").options(**options).mode("append").save()
