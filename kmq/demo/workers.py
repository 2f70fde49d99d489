"""Starting the demo's worker processes (`python -m kmq.demo.worker`); they stop when their stdin closes."""

from __future__ import annotations

from kmq.config import KmqConfig
from kmq.demo.options import DemoOptions
from kmq.demo.processes import Child, Children


def start_workers(children: Children, config: KmqConfig, options: DemoOptions, results_topic: str) -> list[Child]:
    env = config.to_env()
    workers = []
    for index in range(1, options.workers + 1):
        args = [
            "-m",
            "kmq.demo.worker",
            "--results-topic",
            results_topic,
            "--drop-rate",
            str(options.drop_rate),
            "--poison-every",
            str(options.poison_every),
        ]
        if options.seed is not None:
            args += ["--seed", str(options.seed * 1000 + index)]
        workers.append(children.spawn(f"worker-{index}", args, env, stdin_pipe=True))
    return workers
