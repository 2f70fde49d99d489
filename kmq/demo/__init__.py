"""`kmq demo`: the whole flow on one machine, verified from the topics (broker, tracker, REST facade, workers)."""

from __future__ import annotations

from kmq.demo.options import DemoOptions
from kmq.demo.run import Outcome, run_demo
from kmq.demo.tally import Tally, Verdict

__all__ = ["DemoOptions", "Outcome", "Tally", "Verdict", "run_demo"]
