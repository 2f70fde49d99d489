"""A compact sorted set of int64 rows: the storage under each of `PendingSet`'s indexes.

Why not `sortedcontainers.SortedList`: it holds one Python object per entry (an int is at least 32 B, plus an 8 B
pointer), and a dict + two SortedLists of packed ints measured 209 B per pending message against the tracker's budget
of 150 B. `SortedRows` keeps SortedList's layout — a list of sorted chunks of about `load` rows, located by bisecting
the chunks' last rows — but stores each chunk's columns in `array('q')`, so a row costs 8 B per column and no objects.
Chunks are split above `2 * load` rows and merged with a neighbour below `load // 2`, so memory follows the live size.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

DEFAULT_LOAD = 1000

Row = tuple[int, ...]


class SortedRows:
    """A set of equal-width rows of signed 64-bit ints, ordered lexicographically; O(log n + load) updates."""

    def __init__(self, width: int, load: int = DEFAULT_LOAD) -> None:
        if width < 1 or load < 2:
            raise ValueError(f"width must be >= 1 and load >= 2, got width={width} load={load}")
        self._width = width
        self._load = load
        self._chunks: list[list[array[int]]] = []
        self._maxes: list[Row] = []
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def first(self) -> Row | None:
        """The smallest row, or None when empty."""
        if not self._chunks:
            return None
        return tuple(column[0] for column in self._chunks[0])

    def find(self, key: int) -> Row | None:
        """The first row whose first column equals `key`, or None."""
        k = bisect_left(self._maxes, (key,))
        if k == len(self._maxes):
            return None
        columns = self._chunks[k]
        i = bisect_left(columns[0], key)
        if columns[0][i] != key:
            return None
        return tuple(column[i] for column in columns)

    def leading(self, bound: int, column: int, limit: int) -> list[int]:
        """Values of `column` of the smallest rows whose first column is <= `bound`, at most `limit` of them."""
        found: list[int] = []
        for columns in self._chunks:
            if len(found) >= limit:
                break
            n = bisect_right(columns[0], bound)
            found.extend(columns[column][: min(n, limit - len(found))])
            if n < len(columns[0]):
                break
        return found

    def add(self, row: Row) -> None:
        """Insert `row`, which must not be present and must have `width` values."""
        if len(row) != self._width:
            raise ValueError(f"row {row!r} does not have {self._width} values")
        if not self._chunks:
            self._chunks.append([array("q", (value,)) for value in row])
            self._maxes.append(row)
        else:
            self._insert(row)
        self._len += 1

    def discard(self, row: Row) -> bool:
        """Remove `row`; True if it was present."""
        k = bisect_left(self._maxes, row)
        if k == len(self._maxes):
            return False
        columns = self._chunks[k]
        i = _position(columns, row)
        if i == len(columns[0]) or _row_at(columns, i) != row:
            return False
        for column in columns:
            del column[i]
        self._len -= 1
        self._shrunk(k, i)
        return True

    def _insert(self, row: Row) -> None:
        k = bisect_left(self._maxes, row)
        if k == len(self._maxes):
            # The common case for offsets and deadlines that grow: append to the last chunk.
            k -= 1
            columns = self._chunks[k]
            for column, value in zip(columns, row, strict=True):
                column.append(value)
            self._maxes[k] = row
        else:
            columns = self._chunks[k]
            i = _position(columns, row)
            for column, value in zip(columns, row, strict=True):
                column.insert(i, value)
        if len(columns[0]) > 2 * self._load:
            self._split(k)

    def _split(self, k: int) -> None:
        columns = self._chunks[k]
        half = len(columns[0]) // 2
        left = [column[:half] for column in columns]
        right = [column[half:] for column in columns]
        self._chunks[k : k + 1] = [left, right]
        self._maxes[k : k + 1] = [_row_at(left, half - 1), self._maxes[k]]

    def _shrunk(self, k: int, removed_at: int) -> None:
        size = len(self._chunks[k][0])
        if size == 0:
            del self._chunks[k]
            del self._maxes[k]
        elif size < self._load // 2 and len(self._chunks) > 1:
            self._merge(k - 1 if k > 0 else k)
        elif removed_at == size:
            self._maxes[k] = _row_at(self._chunks[k], size - 1)

    def _merge(self, k: int) -> None:
        """Join chunks k and k + 1 into fresh, exactly sized arrays; split again if the result is too big."""
        merged = [left + right for left, right in zip(self._chunks[k], self._chunks[k + 1], strict=True)]
        self._chunks[k : k + 2] = [merged]
        self._maxes[k : k + 2] = [_row_at(merged, len(merged[0]) - 1)]
        if len(merged[0]) > 2 * self._load:
            self._split(k)


def _row_at(columns: list[array[int]], i: int) -> Row:
    return tuple(column[i] for column in columns)


def _position(columns: list[array[int]], row: Row) -> int:
    """Where `row` is, or would be inserted, in one chunk: bisect column by column within the run of equal values."""
    lo, hi = 0, len(columns[0])
    for column, value in zip(columns, row, strict=True):
        lo = bisect_left(column, value, lo, hi)
        hi = bisect_right(column, value, lo, hi)
        if lo == hi:
            break
    return lo
