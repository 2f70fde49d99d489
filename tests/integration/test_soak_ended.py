"""The soak's last check (tests/soak/soak.py's `_ended`): of the messages no ack was recorded for, those whose END
is on the markers topic (acked by a process killed before it could record it) are told apart from the lost ones."""

from __future__ import annotations

import pytest

from kmq.client import KmqClient
from kmq.demo.numbers import decode_number, encode_number
from kmq.message import Message
from kmq.producer import KmqProducer
from tests.helpers import wait_for
from tests.integration.marker_formats import FORMATS, MakeConfig, with_marker_format
from tests.soak.soak import PARTITIONS, _ended

pytestmark = pytest.mark.integration
COUNT = 40


@pytest.mark.parametrize("marker_format", FORMATS)
def test_only_the_numbers_whose_end_is_on_the_markers_topic_count_as_acked(
    make_config: MakeConfig, marker_format: str
) -> None:
    config = with_marker_format(make_config, marker_format)(PARTITIONS)
    with KmqProducer(config) as producer:
        for n in range(1, COUNT + 1):
            producer.send(encode_number(n), key=str(n).encode())
        producer.flush()
    received: list[Message] = []
    with KmqClient(config) as client:
        wait_for(lambda: received.extend(client.receive(max_messages=COUNT, timeout_s=0.2)) or len(received) == COUNT)
        client.processed_many([msg for msg in received if (decode_number(msg.value) or 0) % 3 == 0])
        client.flush(10.0)
        assert client.failed_markers == 0
    # Every number's START is there too: only an END counts
    assert _ended(config, set(range(1, COUNT + 1))) == {n for n in range(1, COUNT + 1) if n % 3 == 0}
    assert _ended(config, {3, 4}) == {3}
