"""`GET /v1/queues/{queue}`: the queue's topics, partitions and backlog."""

from __future__ import annotations

from fastapi import APIRouter

from kmq_api.deps import Authorized, Queue
from kmq_api.models import PartitionBacklog, QueueInfo
from kmq_api.problems import NOT_SERVED, UNAUTHORIZED, UNAVAILABLE

router = APIRouter(prefix="/v1/queues", tags=["queues"], dependencies=[Authorized])


@router.get("/{queue}", responses={**UNAUTHORIZED, **NOT_SERVED, **UNAVAILABLE})
async def describe(queue: Queue) -> QueueInfo:
    """Partitions and backlog: the lag of the worker group (messages not yet received by anyone)."""
    lags = await queue.backlog()
    config = queue.config
    return QueueInfo(
        queue=queue.name,
        markers_topic=config.markers_topic,
        dead_letter_topic=config.dead_letter_topic,
        group_id=config.group_id,
        partition_count=len(lags),
        backlog=sum(lag.backlog for lag in lags),
        partitions=[
            PartitionBacklog(
                partition=lag.partition,
                end_offset=lag.end_offset,
                committed_offset=lag.committed_offset,
                backlog=lag.backlog,
            )
            for lag in lags
        ],
    )
