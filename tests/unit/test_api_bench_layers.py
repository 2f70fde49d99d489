"""kmq_api.bench_layers: py-spy samples of the facade's event loop charged to layers, innermost frame first."""

from __future__ import annotations

import gzip
from pathlib import Path

from kmq_api.bench_layers import OTHER, layer_of, read, split, table

ROOT = "thread (7): MainThread;run_asgi (uvicorn/protocols/http/httptools_impl.py:409)"
LINES = [
    f"{ROOT};app (fastapi/routing.py:762);ack (kmq_api/routers/receipts.py:28);verify (kmq_api/receipts.py:80) 6",
    f"{ROOT};app (fastapi/routing.py:762);ack (kmq_api/routers/receipts.py:28);settle (kmq_api/settle.py:60) 3",
    f"{ROOT};send (uvicorn/protocols/http/httptools_impl.py:500) 1",
    "thread (7): MainThread;<module> (mystery.py:1) 2",
    "thread (9): kmq-api-delivery-q;_serve (kmq_api/delivery.py:200) 50",
    "not a sample line",
]


def test_each_sample_goes_to_the_innermost_frame_s_layer() -> None:
    samples = split(LINES)
    assert samples == {
        "receipts: sign and verify (HMAC, base64)": 6,
        "settle logic (judge, reserve, plan, arbitrate)": 3,
        "HTTP (uvicorn, httptools, request and response)": 1,
        OTHER: 2,
    }


def test_other_threads_are_left_out_unless_asked_for() -> None:
    assert split(LINES, "kmq-api-delivery-q") == {"marker produce (librdkafka enqueue)": 50}


def test_a_frame_outside_every_layer_has_none() -> None:
    assert layer_of("<module> (mystery.py:1)") is None
    assert layer_of("dumps (kmq_api/responses.py:25)") == "JSON encoding and decoding"


def test_the_table_turns_shares_into_microseconds_per_message() -> None:
    rendered = table(split(LINES), us_per_message=24.0)
    assert "| receipts: sign and verify (HMAC, base64) | 50% | 12.0 |" in rendered
    assert "| settle logic (judge, reserve, plan, arbitrate) | 25% | 6.0 |" in rendered
    assert rendered.endswith("| all (12 samples) | 100% | 24.0 |")


def test_a_profile_is_read_gzipped_or_not(tmp_path: Path) -> None:
    (tmp_path / "api.raw").write_text("\n".join(LINES) + "\n")
    with gzip.open(tmp_path / "api.raw.gz", "wt") as zipped:
        zipped.write("\n".join(LINES) + "\n")
    assert split(read(tmp_path / "api.raw")) == split(read(tmp_path / "api.raw.gz")) == split(LINES)
