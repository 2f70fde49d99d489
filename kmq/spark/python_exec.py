"""The Python that Spark's executors run for kmq's code and the user's (PYSPARK_PYTHON).

PySpark starts executors' Python workers with `PYSPARK_PYTHON` as it was when the SparkContext was made, else
`python3` from the PATH: a driver started as `venv/bin/python pipeline.py`, the virtualenv not activated, gets workers
that cannot import kmq, and a micro-batch fails minutes later deep in a task. On a local master the executors share
this machine, so when PYSPARK_PYTHON was left unset they run this interpreter; an interpreter that was chosen and
cannot import kmq fails at once, naming the fix. A cluster's executors are configured by the deployment
(`spark.pyspark.python`) and are left alone.
"""

from __future__ import annotations

import functools
import logging
import os
import subprocess
import sys
from typing import Any

from kmq.errors import ConfigError

_log = logging.getLogger(__name__)
_CHECK_TIMEOUT_S = 60


def ensure_python(spark: Any) -> None:
    """Make a local master's Python workers run an interpreter that imports kmq (see the module's docstring)."""
    context = spark.sparkContext
    if not str(context.master).startswith("local") or context.pythonExec == sys.executable:
        return
    chosen = os.environ.get("PYSPARK_PYTHON")
    if not chosen:
        _log.info("PYSPARK_PYTHON is unset: Spark's Python workers run %s, as the driver does", sys.executable)
        context.pythonExec = sys.executable
        return
    problem = imports_kmq(chosen)
    if problem:
        raise ConfigError(
            "PYSPARK_PYTHON",
            f"{chosen} (Spark's Python workers) cannot import kmq.spark: {problem}. Set PYSPARK_PYTHON={sys.executable}"
            " (this driver's interpreter) before the SparkSession is made, or install kmq[spark] into that one",
        )


@functools.cache
def imports_kmq(python: str) -> str:
    """'' when `python` imports kmq.spark and pyarrow, else what went wrong."""
    try:
        done = subprocess.run([python, "-c", "import kmq.spark, pyarrow"], capture_output=True, text=True,
                              timeout=_CHECK_TIMEOUT_S, check=False)  # fmt: skip
    except OSError as e:
        return str(e)
    except subprocess.TimeoutExpired:
        return f"importing it took over {_CHECK_TIMEOUT_S} s"
    lines = done.stderr.strip().splitlines()
    return "" if done.returncode == 0 else (lines[-1] if lines else f"exit code {done.returncode}")
