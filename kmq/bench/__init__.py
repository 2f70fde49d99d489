"""`kmq bench`: the cost of per-message acknowledgement, measured side by side with a plain Kafka consumer and Kafka
share groups on one broker in one run, plus the tracker's and the REST facade's own benchmarks.

Each consumer run happens in a worker process of its own (`kmq.bench.worker`) on a fresh, preloaded queue; the
contenders alternate (A B C C B A ...) and the report gives medians, so machine noise hits them all alike.
"""

from __future__ import annotations

from kmq.bench.options import CONTENDERS, BenchOptions
from kmq.bench.results import Row, Run
from kmq.bench.runner import BenchReport, run_bench
from kmq.bench.targets import Target

__all__ = ["CONTENDERS", "BenchOptions", "BenchReport", "Row", "Run", "Target", "run_bench"]
