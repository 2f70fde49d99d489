"""`python -m kmq_api.bench_layers`: where the REST facade's event-loop thread spends its CPU, layer by layer.

Reads a py-spy profile of the API process in raw (collapsed-stack) form, recorded with `--gil --threads` (so that a
sample is a moment the thread held the GIL: CPU, not waiting), keeps the event loop's thread (MainThread), and
charges each sample to the first layer that one of its frames belongs to, from the innermost frame out. With the
thread's CPU per message (`python -m kmq_api.bench` prints it), each layer's share becomes µs per message.
"""

from __future__ import annotations

import argparse
import gzip
import re
import sys
from collections import Counter
from collections.abc import Iterable
from pathlib import Path

# (layer, file name fragments): the first layer matching a frame's file wins, so the specific ones come first.
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("receipts: sign and verify (HMAC, base64)", ("kmq_api/receipts.py", "hmac.py")),
    ("messages to JSON (codec)", ("kmq_api/codec.py", "kmq/headers.py")),
    ("JSON encoding and decoding", ("kmq_api/responses.py", "json/", "orjson")),
    ("pydantic validation", ("pydantic/", "fastapi/_compat", "kmq_api/models.py")),
    (
        "settle logic (judge, reserve, plan, arbitrate)",
        ("kmq_api/settle", "kmq/receipt_notes", "kmq/batch_markers", "kmq_api/settlements"),
    ),
    ("marker produce (librdkafka enqueue)", ("kmq_api/delivery.py",)),
    ("receive and thread hand-offs (anyio)", ("kmq_api/served.py", "anyio/", "threading.py", "queue.py", "sniffio/")),
    ("metrics (prometheus_client)", ("prometheus_client/",)),
    ("dependencies (API key, queue, state)", ("fastapi/dependencies", "fastapi/security", "kmq_api/deps.py")),
    ("route handlers", ("kmq_api/routers/",)),
    ("routing (FastAPI, Starlette)", ("fastapi/routing", "starlette/routing", "fastapi/applications")),
    (
        "middleware (ASGI layers)",
        (
            "starlette/middleware",
            "fastapi/middleware",
            "kmq_api/limits",
            "kmq_api/progress",
            "kmq_api/console",
            "fastapi/_body_limit",
            "fastapi/telemetry",
            "starlette/_exception_handler",
            "proxy_headers",
            "contextlib.py",
            "starlette/applications",
        ),
    ),
    ("HTTP (uvicorn, httptools, request and response)", ("uvicorn/", "starlette/requests", "starlette/responses")),
    ("event loop", ("asyncio/",)),
)
OTHER = "other"
_FILE = re.compile(r"\((.*?):\d+\)$")


def layer_of(frame: str) -> str | None:
    """The layer of one py-spy frame (`function (path/file.py:line)`), or None when it belongs to none."""
    match = _FILE.search(frame)
    path = match.group(1) if match else frame
    return next((layer for layer, fragments in LAYERS if any(f in path for f in fragments)), None)


def split(lines: Iterable[str], thread: str = "MainThread") -> Counter[str]:
    """Samples per layer of `thread`, from py-spy's raw lines (`thread (tid): name;frame;...;frame count`)."""
    samples: Counter[str] = Counter()
    for line in lines:
        stack, _, count = line.rstrip().rpartition(" ")
        frames = stack.split(";")
        if not count.isdigit() or not frames[0].endswith(f": {thread}"):
            continue
        layers = (layer_of(frame) for frame in reversed(frames[1:]))
        samples[next((layer for layer in layers if layer is not None), OTHER)] += int(count)
    return samples


def table(samples: Counter[str], us_per_message: float) -> str:
    """A markdown table: each layer's share of the samples and of the thread's µs per message."""
    total = sum(samples.values()) or 1
    rows = [f"| {layer} | {n / total:.0%} | {us_per_message * n / total:.1f} |" for layer, n in samples.most_common()]
    header = ["| layer | share | µs/msg |", "|---|---:|---:|"]
    return "\n".join([*header, *rows, f"| all ({total} samples) | 100% | {us_per_message:.1f} |"])


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m kmq_api.bench_layers", description=__doc__.splitlines()[0])
    parser.add_argument("profile", type=Path, help="py-spy record --gil --threads -f raw output (or it gzipped: .gz)")
    parser.add_argument("--us-per-msg", type=float, required=True, help="the thread's CPU µs per message")
    parser.add_argument("--thread", default="MainThread")
    args = parser.parse_args()
    sys.stdout.write(table(split(read(args.profile), args.thread), args.us_per_msg) + "\n")


def read(profile: Path) -> list[str]:
    """The lines of a raw profile, gzipped (`.gz`) or not."""
    if profile.suffix == ".gz":
        with gzip.open(profile, "rt") as zipped:
            return zipped.readlines()
    return profile.read_text().splitlines()


if __name__ == "__main__":
    main()
