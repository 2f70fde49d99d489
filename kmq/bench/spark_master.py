"""`kmq bench --master`: where the Spark contenders run. Pure (no Spark): parsed before anything starts."""

from __future__ import annotations

import re
from dataclasses import dataclass

from kmq.errors import ConfigError

STANDALONE = "standalone"
DEFAULT_MASTER = "local[2]"
_LOCAL = re.compile(r"local(\[(\*|[1-9][0-9]*)(,[1-9][0-9]*)?\])?")
_SPARK_URL = re.compile(r"spark://[^\s:/]+:[0-9]{1,5}(,[^\s:/]+:[0-9]{1,5})*")


@dataclass(frozen=True, slots=True)
class BenchMaster:
    """A master URL for the bench's Spark session, or `standalone`: a master and two workers on this machine,
    started for the bench and stopped after it."""

    url: str  # "standalone" until the cluster is started

    @property
    def standalone(self) -> bool:
        return self.url == STANDALONE

    @property
    def local(self) -> bool:
        return self.url.startswith("local")


def parse_master(text: str) -> BenchMaster:
    """`local`, `local[N]`, `local[*]`, `local[N,F]`, `spark://host:port[,host:port...]` or `standalone`."""
    value = text.strip()
    if value == STANDALONE or _LOCAL.fullmatch(value) or _SPARK_URL.fullmatch(value):
        return BenchMaster(value)
    raise ConfigError("--master", f"{text!r}: use local[N], spark://host:port (a running cluster) or standalone "
                      "(a master and two workers started on this machine for the bench)")  # fmt: skip
