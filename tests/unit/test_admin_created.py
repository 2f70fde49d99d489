"""`ensure_topics`'s last check: a broker still unaware of topics just made is asked again, a real mismatch is not."""

from __future__ import annotations

from typing import Any, cast

import pytest
from confluent_kafka.admin import AdminClient

from kmq import admin as admin_module
from kmq.config import KmqConfig
from kmq.errors import TopicMismatchError

CONFIG = KmqConfig(bootstrap_servers="k:9092", queue_topic="jobs")


class _Topic:
    def __init__(self, partitions: int) -> None:
        self.partitions, self.error = dict.fromkeys(range(partitions)), None


class _Metadata:
    def __init__(self, topics: dict[str, int]) -> None:
        self.topics = {name: _Topic(count) for name, count in topics.items()}
        self.brokers = {1: object()}


class _Admin:
    """Answers each metadata request with the next of `answers` (the last one repeats)."""

    def __init__(self, *answers: dict[str, int]) -> None:
        self.answers, self.asked = list(answers), 0

    def list_topics(self, timeout: float) -> _Metadata:
        self.asked += 1
        return _Metadata(self.answers.pop(0) if len(self.answers) > 1 else self.answers[0])


def test_a_broker_that_has_not_learned_of_the_new_markers_topic_yet_is_asked_again() -> None:
    lagging = _Admin({CONFIG.queue_topic: 4}, {CONFIG.queue_topic: 4, CONFIG.markers_topic: 4})
    admin_module._check_created(CONFIG, 5.0, cast(AdminClient, lagging))
    assert lagging.asked == 2


def test_a_partition_count_mismatch_is_reported_at_once() -> None:
    mismatched: Any = _Admin({CONFIG.queue_topic: 4, CONFIG.markers_topic: 2})
    with pytest.raises(TopicMismatchError):
        admin_module._check_created(CONFIG, 5.0, mismatched)
    assert mismatched.asked == 1
