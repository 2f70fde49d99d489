"""`python -m kmq_api.bench` end to end, small: uvicorn in a child process, driven over HTTP, every message acked."""

from __future__ import annotations

from kmq.embedded import KafkaCluster
from kmq_api.bench import run_benchmark


def test_the_benchmark_sends_receives_and_acks_every_message_over_http(kafka: KafkaCluster) -> None:
    figures = run_benchmark(messages=400, batch=100, partitions=2, concurrency=2, cluster=kafka)
    assert (figures["messages"], figures["batch"], figures["backend"]) == (400, 100, kafka.backend)
    assert figures["acks_not_ok"] == 0
    assert int(figures["ack_requests"]) >= 4  # batches of at most 100
    assert figures["send_requests"] == 4
    for name in ("send_msgs_per_s", "receive_ack_msgs_per_s", "ack_ms_p99", "receive_ms_p99"):
        assert float(figures[name]) > 0, name
    assert "MainThread" in figures["server_cpu_us_per_msg_by_thread"]  # the API's event loop
