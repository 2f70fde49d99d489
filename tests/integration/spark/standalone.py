"""The tests' standalone Spark cluster: kmq's own (`kmq.spark.standalone`, which `kmq bench --master standalone`
starts too)."""

from __future__ import annotations

from kmq.spark.standalone import EXECUTOR_MEMORY, StandaloneCluster, standalone_cluster

__all__ = ["EXECUTOR_MEMORY", "StandaloneCluster", "standalone_cluster"]
