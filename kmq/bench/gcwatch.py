"""Inside a worker process: the cyclic garbage collector's collections and their time over the measured window.

Measured with `gc.callbacks` (called at each collection's start and stop, on the thread that triggered it), the time
as that thread's CPU time (`time.thread_time`): robust to a loaded machine, where a collection's wall time includes
the time the thread waited for a core. Objects the collector follows
(every `Message`, a tuple subclass, stays tracked) make the collections more frequent and longer."""

from __future__ import annotations

import gc
import time
from typing import Any


class GcWatch:
    """Counts collections per generation and adds up their time, from `start()` until `stop()`."""

    def __init__(self) -> None:
        self.collections = [0, 0, 0]
        self.seconds = 0.0
        self._began = 0.0

    def start(self) -> None:
        gc.callbacks.append(self._callback)

    def stop(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def figures(self, messages: int) -> dict[str, Any]:
        """Collections per 1000 messages (each generation) and the collector's CPU µs per message."""
        per_k = 1000 / max(messages, 1)
        return {
            "gc_collections_per_1k_msgs": [round(n * per_k, 3) for n in self.collections],
            "gc_us_per_msg": round(self.seconds / max(messages, 1) * 1e6, 3),
        }

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._began
            self.collections[info["generation"]] += 1
