"""The broker's clock as the tracker reads it: deadlines are LogAppendTime stamps (the broker's clock) plus a timeout,
so "now" must be the broker's time too, whatever the tracker host's clock says (PROTOCOL.md, "Clocks").

Each marker read live gives an upper bound of how far the local clock runs ahead of the broker's: received at local
time L, appended at broker time A, so L - A = lead + transit, and transit >= 0. The smallest bound of the last
`WINDOW_MS` is the estimate (min-filter). It can only overstate the lead, by the fastest transit seen (milliseconds on
a live partition): the broker time it gives is never ahead of the true one, so nothing is redelivered early, and late
only by that transit. Records read while catching up are old (a large L - A) and are not sampled; until a marker has
been read live, the lead is taken as 0 (the local clock). Pure: the caller passes the local time.
"""

from __future__ import annotations

from collections import deque

WINDOW_MS = 60_000
_BUCKET_MS = WINDOW_MS // 6


class ClockLead:
    """How far the local clock runs ahead of the broker's (ms, negative when behind), from (append, receipt)
    samples. One writer (the tracker's loop); readers read `lead_ms`, a single int."""

    def __init__(self) -> None:
        self.lead_ms = 0
        self._buckets: deque[tuple[int, int]] = deque()  # (bucket start, smallest bound in it), oldest first

    def observe(self, append_ms: int, local_ms: int) -> None:
        """A marker appended at broker time `append_ms` was read at local time `local_ms`."""
        bound = local_ms - append_ms
        start = local_ms - local_ms % _BUCKET_MS
        buckets = self._buckets
        if buckets and buckets[-1][0] == start:
            if bound < buckets[-1][1]:
                buckets[-1] = (start, bound)
        else:
            buckets.append((start, bound))
        while buckets[0][0] <= local_ms - WINDOW_MS:
            buckets.popleft()
        self.lead_ms = min(b for _, b in buckets)

    def broker_ms(self, local_ms: int) -> int:
        """The broker's time now, for a local time `local_ms`."""
        return local_ms - self.lead_ms
