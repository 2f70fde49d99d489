"""docs/PROTOCOL.md names everything kmq writes on the wire: every `kmq-*` header name defined in kmq/, api/ and
tracker/, every marker type byte the codecs encode, every dead-letter reason and the default topic and group names.
The values come from the code (constants found in the source, records encoded by the codecs), not from a list kept
by hand, so a header or type byte added later fails here until the document describes it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from kmq import headers
from kmq.batch_markers import BatchEnd, BatchStart
from kmq.config import KmqConfig
from kmq.dlq import records
from kmq.markers import EndMarker, StartMarker
from kmq_api import settlements
from kmq_tracker.config import TrackerConfig

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "PROTOCOL.md").read_text()
_HEADER_NAME = re.compile(r"kmq-[a-z0-9-]+")


def header_names_in_code() -> dict[str, str]:
    """Every module-level string constant of kmq/, api/ and tracker/ that is a `kmq-*` name, by where it is."""
    found: dict[str, str] = {}
    for package in ("kmq", "api", "tracker"):
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.parse(path.read_text()).body:
                value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
                name = value.value if isinstance(value, ast.Constant) else None
                if isinstance(name, str) and _HEADER_NAME.fullmatch(name):
                    found[name] = f"{path.relative_to(ROOT)}:{node.lineno}"
    return found


def test_the_scan_finds_the_header_names_the_writers_import() -> None:
    written = {headers.REDELIVERY_COUNT, headers.DLQ_TRUNCATED, settlements.HEADER, records.REDRIVE_MARKER}
    assert written <= set(header_names_in_code())


def test_every_header_name_the_code_defines_is_in_the_protocol() -> None:
    missing = {name: where for name, where in header_names_in_code().items() if f"`{name}`" not in DOC}
    assert not missing, f"docs/PROTOCOL.md does not name these headers: {missing}"


def test_every_marker_type_byte_is_in_the_protocol() -> None:
    records_ = (StartMarker(0), EndMarker(), BatchStart(0, ((0, 1),)), BatchEnd(((0, 1),)))
    type_bytes = {record.encode()[0] for record in records_}
    assert len(type_bytes) == 4
    missing = [f"0x{byte:02x}" for byte in sorted(type_bytes) if f"`0x{byte:02x}`" not in DOC]
    assert not missing, f"docs/PROTOCOL.md does not name these marker type bytes: {missing}"


def test_every_dead_letter_reason_is_in_the_protocol() -> None:
    for reason in (headers.REASON_MAX_REDELIVERIES, headers.REASON_UNDELIVERABLE, "rejected"):
        assert f"`{reason}" in DOC, reason


def test_the_default_topic_and_group_names_are_the_protocols() -> None:
    kmq = KmqConfig(bootstrap_servers="localhost:9092", queue_topic="Q")
    names = (kmq.markers_topic, kmq.dead_letter_topic, kmq.group_id, TrackerConfig(kmq=kmq).group_id)
    assert names == ("Q__markers", "Q__undelivered", "Q__workers", "Q__markers__tracker")
    for derived in ("`Q__markers`", "`Q__undelivered`", "`Q__workers`", "`M__tracker`"):
        assert derived in DOC


def test_the_readme_and_docs_link_the_projects_protocol_not_a_file_outside_the_repository() -> None:
    texts = {path: path.read_text() for path in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]}
    assert "](docs/PROTOCOL.md)" in texts[ROOT / "README.md"]
    outside = [str(path.relative_to(ROOT)) for path, text in texts.items() if "shared/PROTOCOL" in text]
    assert not outside, f"these link a PROTOCOL.md outside the repository: {outside}"
