"""What the Spark pipeline tests share: loading the example, sending numbers, and counting from the topics."""

from __future__ import annotations

import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from pyarrow import dataset
from pyspark import cloudpickle
from pyspark.sql.streaming import StreamingQuery

from kmq import headers as h
from kmq.config import KmqConfig
from kmq.demo.numbers import decode_number, encode_number
from kmq.demo.tally import Tally
from kmq.producer import KmqProducer, OutgoingMessage
from kmq.spark.markers_source import decode as decode_marker_rows
from tests.helpers import read_topic

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "spark" / "pipeline.py"


def load_example() -> ModuleType:
    """examples/spark/pipeline.py as a module; its functions travel to executors by value."""
    spec = importlib.util.spec_from_file_location("kmq_spark_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cloudpickle.register_pickle_by_value(module)
    return module


def send_numbers(config: KmqConfig, count: int, partitions: int) -> None:
    with KmqProducer(config) as producer:
        producer.send_batch(OutgoingMessage(encode_number(n), None, None, n % partitions) for n in range(1, count + 1))


def processed_numbers(output: str | Path) -> list[int]:
    """Every number the pipeline wrote to its Parquet results (a duplicate appears twice). Read with pyarrow, not
    Spark: the tests poll it while the stream runs, and a Spark job per poll took the stream's cores. Files of a
    write still in progress (under `_temporary`) are not read."""
    if not Path(output).exists():
        return []
    results = dataset.dataset(str(output), format="parquet")
    if not results.files:
        return []
    numbers: list[int] = results.to_table(columns=["number"]).column("number").to_pylist()
    return numbers


def every_offset_ended(config: KmqConfig, partitions: int) -> bool:
    """Every offset of the queue (copies included) has an END as its newest marker, read with kmq's own codec (kmq
    and batch formats): what the audit counts as acked or dead-lettered, for a cheap wait before the audit itself."""
    newest: dict[tuple[int | None, int | None], str] = {}
    for record in read_topic(config, config.markers_topic, partitions):
        for queue_partition, queue_offset, kind, _ in decode_marker_rows(record.partition, record.key, record.value):
            newest[(queue_partition, queue_offset)] = kind
    queued = [(r.partition, r.offset) for r in read_topic(config, config.queue_topic, partitions)]
    return bool(queued) and all(newest.get(key) == "end" for key in queued)


def dead_numbers(config: KmqConfig, partitions: int) -> dict[int, str]:
    found = {}
    for record in read_topic(config, config.dead_letter_topic, partitions):
        number = decode_number(record.value)
        assert number is not None, record
        found[number] = (h.get(record.headers, h.DLQ_REASON) or b"").decode()
    return found


def demo_tally(config: KmqConfig, partitions: int, processed: list[int]) -> Tally:
    """What `kmq demo` counts (its Tally), fed the queue, the results (here: the Parquet) and the dead letters."""
    tally = Tally()
    for record in read_topic(config, config.queue_topic, partitions):
        tally.add_queued(record.value, record.headers)
    for number in processed:
        tally.add_processed(encode_number(number))
    for record in read_topic(config, config.dead_letter_topic, partitions):
        tally.add_dead(record.value, record.headers)
    return tally


def json_totals(output: str) -> dict[str, object]:
    totals: dict[str, object] = json.loads(output)["totals"]
    return totals


def running(query: StreamingQuery, condition: Callable[[], object]) -> Callable[[], object]:
    """`condition`, failing at once (with Spark's error) when the query died instead of waiting for the deadline."""

    def check() -> object:
        error = query.exception()
        assert error is None, f"the streaming query failed: {error}"
        return condition()

    return check
