"""`kmq.spark.ack`: check a whole micro-batch on the cluster, then acknowledge it through format("kmq-ack")."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F  # Spark's convention

from kmq.errors import AckInputError
from kmq.spark.ack_sink import check_schema
from kmq.spark.acking import STATUSES


def ack_batch(batch_df: DataFrame, options: dict[str, str]) -> None:
    check_schema(batch_df.schema)
    bad = batch_df.where(
        F.col("partition").isNull()
        | F.col("offset").isNull()
        | ~F.coalesce(F.col("status").isin(*STATUSES), F.lit(False))
    )
    first = bad.select("partition", "offset", "status").limit(1).collect()
    if first:
        row = first[0]
        raise AckInputError(
            f"row (partition={row['partition']}, offset={row['offset']}, status={row['status']!r}) is invalid: "
            f"partition and offset must be set and status one of {', '.join(STATUSES)}; nothing was acked"
        )
    batch_df.write.format("kmq-ack").options(**options).mode("append").save()
