"""The configuration reference (docs/reference/configuration.md, a page of the documentation site), generated from
the settings models so it cannot drift.

`python -m tests.config_reference --write` rewrites the block in that page; tests/unit/test_readme.py fails when the
page's block differs from what this renders.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from kmq.config import KmqConfig
from kmq.embedded import KAFKA_VERSION
from kmq.settings import env_name
from kmq.worker import WorkerConfig
from kmq_api.config import ApiConfig
from kmq_tracker.config import ENV_FIELD_PREFIX, TrackerConfig

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "configuration.md"
START = "<!-- config-reference:start (generated: python -m tests.config_reference --write) -->"
END = "<!-- config-reference:end -->"
_API_SPECIAL = {
    "KMQ_API_QUEUES": (
        "(`KMQ_QUEUE_TOPIC`)",
        "queues served, comma-separated; each one's topics and group derive from its name",
    ),
    "KMQ_API_KEYS": ("none", "bearer API keys, comma-separated (read-only in the console)"),
    "KMQ_API_ADMIN_KEYS": (
        "none",
        "bearer API keys that may also redrive, move and purge dead letters in the console, comma-separated",
    ),
    "KMQ_API_RECEIPT_SECRET": ("required", "HMAC key for receipts (e.g. `openssl rand -hex 32`)"),
}
# Read by `kmq worker` (its flags --ordering and --partition-limit).
WORKER = [
    ("KMQ_WORKER_ORDERING", "`none`", "`none`, `partition` or `key`: what runs one at a time, in offset order"),
    (
        "KMQ_WORKER_PARTITION_LIMIT",
        "`0`",
        "ordered workers: messages held per partition (running, waiting, received ahead) before its fetching pauses"
        " (0: half of what the worker holds)",
    ),
]
# Read by the scripts, examples and tests rather than by a config class.
OTHER = [
    (
        "KMQ_TEST_BACKEND",
        "`kafka` with Java 17+ and mvn, else `tansu`",
        "tests: embedded broker backend (`kafka`, `tansu` or `mock`) when no external cluster is set",
    ),
    (
        "KMQ_KAFKA_VERSION",
        f"`{KAFKA_VERSION}`",
        "the Apache Kafka release the embedded kafka backend runs (e.g. `3.9.2`)",
    ),
    ("KMQ_CACHE_DIR", "`~/.cache/kmq`", "where the kafka backend keeps the jars it resolved from Maven Central"),
    ("KMQ_TEST_REPLICATION_FACTOR", "`1`", "tests on an external cluster: replicas of the topics they create"),
    ("KMQ_VENV", "`.venv`", "scripts/test and scripts/demo: the virtualenv they create and use"),
    ("KMQ_ALLOW_SKIPS", "unset", "tests: `1` skips what this machine cannot run (root, Docker, mvn), else it fails"),
    ("KMQ_API_URL", "`http://127.0.0.1:8080`", "examples/http: where the REST facade is"),
    ("KMQ_API_KEY", "none", "examples/http: the bearer key to send"),
    ("KMQ_CONSOLE_SCREENSHOTS", "none", "tests: a folder where the console's browser tests also save screenshots"),
]


def _default(info: FieldInfo) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if value in ("", {}, ()):
        return "derived" if "default:" in (info.description or "") else "none"
    return f"`{str(value).lower() if isinstance(value, bool) else value}`"


def _rows(model: type[BaseModel], prefix: str = "", skip: tuple[str, ...] = ()) -> list[tuple[str, str, str]]:
    return [
        (env_name(prefix + name), _default(info), info.description or "")
        for name, info in model.model_fields.items()
        if name not in skip
    ]


def _api_rows() -> list[tuple[str, str, str]]:
    rows = []
    for variable in ApiConfig.env_names():
        field = variable.removeprefix("KMQ_API_").lower()
        info = ApiConfig.model_fields.get(field)
        special = _API_SPECIAL.get(variable)
        rows.append((variable, *special) if special else (variable, _default(info), info.description or ""))  # type: ignore[arg-type]
    return rows


def _worker_rows() -> list[tuple[str, str, str]]:
    info = WorkerConfig.model_fields["stall_timeout_ms"]
    return [("KMQ_WORKER_STALL_TIMEOUT_MS", _default(info), info.description or "")]


def _table(title: str, rows: list[tuple[str, str, str]], key: str = "variable") -> str:
    lines = [f"**{title}**", "", f"| {key} | default | meaning |", "|---|---|---|"]
    lines += [f"| `{name}` | {default} | {_cell(meaning)} |" for name, default, meaning in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render() -> str:
    tables = [
        _table("Every component (`KmqConfig`)", _rows(KmqConfig)),
        _table(
            "Tracker (`TrackerConfig`; flags of `kmq tracker` win)", _rows(TrackerConfig, ENV_FIELD_PREFIX, ("kmq",))
        ),
        _table("REST facade (`ApiConfig`; `kmq api` flags win)", _api_rows()),
        _table("Worker (`kmq worker`; its flags win)", [*WORKER, *_worker_rows()]),
        _table("Scripts, examples and tests", OTHER),
        _table(
            "Worker (`kmq.WorkerConfig`: arguments of `kmq.Worker`; `kmq worker` takes the common ones as flags, and "
            "the variables above)",
            [(name, _default(info), info.description or "") for name, info in WorkerConfig.model_fields.items()],
            key="field",
        ),
    ]
    return "\n\n".join([START, *tables, END])


def page_block(text: str) -> str:
    found = re.search(re.escape(START) + ".*?" + re.escape(END), text, re.S)
    return found.group(0) if found else ""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--write", action="store_true", help=f"rewrite the block in {PAGE.relative_to(ROOT)}")
    args = parser.parse_args()
    if not args.write:
        print(render())
        return
    text = PAGE.read_text()
    block = page_block(text)
    if not block:
        raise SystemExit(f"{PAGE.relative_to(ROOT)} has no {START} ... {END} block")
    PAGE.write_text(text.replace(block, render()))


if __name__ == "__main__":
    main()
