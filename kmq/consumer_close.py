"""`close_consumer`: a confluent-kafka consumer's `close()` with a deadline.

librdkafka's consumer close (leave the group, commit, stop its threads) can block for good after a broker was paused
or lost mid-session (confluent-kafka-python issue 1667: the internal main thread's termination never completes). A
client whose `close(timeout_s)` never returned would hang every shutdown behind it (a worker's SIGTERM, the REST
facade's lifespan), so the close runs on a daemon thread of its own and is waited for `timeout_s` at most."""

from __future__ import annotations

import contextlib
import logging
import threading
import time

from confluent_kafka import Consumer, KafkaException

from kmq.consumer_turns import ConsumerTurns

_log = logging.getLogger(__name__)


LEAVE_S = 5.0  # at most this long (and within the close's timeout) to leave the group before the close


def close_consumer(consumer: Consumer, timeout_s: float, what: str, turns: ConsumerTurns | None = None) -> bool:
    """Close `consumer`, waiting at most `timeout_s`: True when it closed. An error from `close()` is raised here.

    With `turns` (a subscribed consumer), the closing thread takes the consumer's turn itself: the close runs the
    rebalance callbacks (a revocation commits) on that thread, so a caller that held the turn while it waited would
    deadlock them until the deadline. It first leaves the group (`_leave_group`).

    When the deadline passes, the close goes on in the background (a daemon thread: it keeps no process alive), an
    error is logged, and False is returned: the group's session timeout then ends the consumer's membership, and its
    partitions' uncommitted offsets are read again by their next owner (markers make that safe)."""
    failure: list[BaseException] = []

    def close() -> None:
        try:
            with turns.call() if turns is not None else contextlib.nullcontext():
                if turns is not None:
                    _leave_group(consumer, time.monotonic() + min(LEAVE_S, timeout_s / 2))
                consumer.close()
        except BaseException as e:  # noqa: BLE001  # handed to the caller below
            failure.append(e)

    closing = threading.Thread(target=close, name=f"kmq-close-{what}", daemon=True)
    closing.start()
    closing.join(max(0.0, timeout_s))
    if closing.is_alive():
        _log.error(
            "closing %s: the Kafka consumer did not close within %.1fs (a librdkafka hang after a broker fault); left"
            " to finish in the background, its group membership ends with its session timeout",
            what,
            timeout_s,
        )
        return False
    if failure:
        raise failure[0]
    return True


def _leave_group(consumer: Consumer, deadline: float) -> None:
    """Unsubscribe, and serve the rebalance events that follow until the consumer holds no partition (or the deadline).

    A rebalance event left for `close()` to serve can hang the process: confluent-kafka's rebalance callback asks
    librdkafka for the rebalance protocol while holding the GIL, and once the close has begun that request is never
    answered (librdkafka issue 4041). A rebalance in flight when the close began (another member just left, say)
    froze a whole process that way. Served here, before the close, the events are answered as in any poll; records
    this poll returns are dropped unhanded (no START, no commit: the partitions' next owner reads them)."""
    try:
        consumer.unsubscribe()
        while True:  # one poll at least: an assignment not yet served holds no partition but waits in the queue
            consumer.consume(num_messages=500, timeout=0.1)
            if not consumer.assignment() or time.monotonic() >= deadline:
                return
    except KafkaException as e:  # no broker answers (the close then bounds what is left)
        _log.warning("leaving the group before the close: %s", e)
