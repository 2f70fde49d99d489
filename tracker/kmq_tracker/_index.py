"""A compact sorted multiset of int64 rows: the storage under each of `PendingSet`'s indexes.

Why not `sortedcontainers.SortedList`: it holds one Python object per entry (an int is at least 32 B, plus an 8 B
pointer), and a dict + two SortedLists of packed ints measured 209 B per pending message against the tracker's budget
of 150 B. `SortedRows` keeps SortedList's layout — a list of sorted chunks of about `load` rows, located by bisecting
the chunks' last rows — but stores each chunk's columns in `array('q')`, so a row costs 8 B per column and no objects.
Chunks are split above `2 * load` rows and merged with a neighbour below `load // 2`, so memory follows the live size
and nothing is deleted lazily.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left, bisect_right

DEFAULT_LOAD = 1000

Row = tuple[int, ...]

# `zip(columns, row, strict=False)` on the hot paths: add() checks a row's width once, and a strict zip measured 15%
# slower ingestion.


class SortedRows:
    """Equal-width rows of signed 64-bit ints in lexicographic order; O(log n + load) updates."""

    def __init__(self, width: int, load: int = DEFAULT_LOAD) -> None:
        if width < 1 or load < 2:
            raise ValueError(f"width must be >= 1 and load >= 2, got width={width} load={load}")
        self._width = width
        self._load = load
        self._min_size = load // 2
        self._chunks: list[list[array[int]]] = []
        self._maxes: list[Row] = []  # the last row of each chunk
        self._len = 0

    def __len__(self) -> int:
        return self._len

    def first(self) -> Row | None:
        """The smallest row, or None when empty."""
        return _row_at(self._chunks[0], 0) if self._chunks else None

    def find(self, key: int) -> Row | None:
        """The first row whose first column equals `key`, or None."""
        at = self._locate_key(key)
        return None if at is None else _row_at(self._chunks[at[0]], at[1])

    def pop(self, key: int) -> Row | None:
        """Remove and return the first row whose first column equals `key`, or None."""
        at = self._locate_key(key)
        if at is None:
            return None
        row = _row_at(self._chunks[at[0]], at[1])
        self._remove_at(*at)
        return row

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

    def leading_rows(self, bound: int, limit: int) -> list[Row]:
        """The smallest rows whose first column is <= `bound`, at most `limit` of them."""
        found: list[Row] = []
        for columns in self._chunks:
            n = min(bisect_right(columns[0], bound), limit - len(found))
            found.extend(zip(*(column[:n] for column in columns), strict=True))
            if len(found) >= limit or n < len(columns[0]):
                break
        return found

    def floor(self, key: int) -> Row | None:
        """The last row whose first column is <= `key`, or None."""
        k = bisect_left(self._maxes, (key + 1,))
        if k < len(self._chunks):
            first = self._chunks[k][0]
            i = bisect_right(first, key)
            if i > 0:
                return _row_at(self._chunks[k], i - 1)
        if k > 0:
            columns = self._chunks[k - 1]
            return _row_at(columns, len(columns[0]) - 1)
        return None

    def rows_between(self, lo: int, hi: int) -> list[Row]:
        """Rows whose first column v has lo <= v < hi, ascending."""
        found: list[Row] = []
        k = bisect_left(self._maxes, (lo,))
        for columns in self._chunks[k:]:
            first = columns[0]
            i, j = bisect_left(first, lo), bisect_left(first, hi)
            found.extend(zip(*(column[i:j] for column in columns), strict=True))
            if j < len(first):
                break
        return found

    def replace_between(self, lo: int, hi: int, rows: list[Row]) -> None:
        """Replace the rows whose first column is in lo..hi-1 by `rows` (sorted, first columns in lo..hi-1).

        One slice assignment per column when they all sit in one chunk (the common case: a batch's runs); else row by
        row."""
        k = bisect_left(self._maxes, (lo,))
        if k < len(self._chunks):
            columns = self._chunks[k]
            first = columns[0]
            i, j = bisect_left(first, lo), bisect_left(first, hi)
            if j < len(first) or k == len(self._chunks) - 1:  # nothing in range beyond this chunk
                for c, column in enumerate(columns):
                    column[i:j] = array("q", [row[c] for row in rows])
                self._len += len(rows) - (j - i)
                self._rebalance(k)
                return
        for row in self.rows_between(lo, hi):
            self.discard(row)
        for row in rows:
            self.add(row)

    def _rebalance(self, k: int) -> None:
        """Chunk k changed size in place: fix its last row, then split or merge it as add/remove would."""
        size = len(self._chunks[k][0])
        if size > 2 * self._load:
            self._maxes[k] = _row_at(self._chunks[k], size - 1)
            self._split(k)
        elif size < self._min_size:
            self._shrunk(k)
        else:
            self._maxes[k] = _row_at(self._chunks[k], size - 1)

    def keys_between(self, lo: int, hi: int) -> list[int]:
        """First-column values v with lo <= v < hi, ascending."""
        found: list[int] = []
        k = bisect_left(self._maxes, (lo,))
        for columns in self._chunks[k:]:
            first = columns[0]
            found.extend(first[bisect_left(first, lo) : bisect_left(first, hi)])
            if first[-1] >= hi:
                break
        return found

    def add(self, row: Row) -> None:
        """Insert `row`, which must have `width` values (an equal row may already be present)."""
        if len(row) != self._width:
            raise ValueError(f"row {row!r} does not have {self._width} values")
        if not self._chunks:
            self._chunks.append([array("q", (value,)) for value in row])
            self._maxes.append(row)
        else:
            self._insert(row)
        self._len += 1

    def discard(self, row: Row) -> bool:
        """Remove `row` (one of them, if added more than once); True if it was present."""
        k = bisect_left(self._maxes, row)
        if k == len(self._maxes):
            return False
        i, found = _position(self._chunks[k], row)
        if found:
            self._remove_at(k, i)
        return found

    def _locate_key(self, key: int) -> tuple[int, int] | None:
        if not self._maxes or key > self._maxes[-1][0]:
            return None  # the common case of a START for a new message: its key is past every pending one
        k = bisect_left(self._maxes, (key,))
        first = self._chunks[k][0]
        # The chunk's last row is >= (key,), so its first column holds a value >= key: i is in range.
        i = bisect_left(first, key)
        return (k, i) if first[i] == key else None

    def _remove_at(self, k: int, i: int) -> None:
        columns = self._chunks[k]
        for column in columns:
            del column[i]
        self._len -= 1
        size = len(columns[0])
        if size < self._min_size:
            self._shrunk(k)
        elif i == size:
            self._maxes[k] = _row_at(columns, size - 1)

    def _insert(self, row: Row) -> None:
        k = len(self._maxes) - 1
        if row >= self._maxes[k]:
            # The common case for offsets and deadlines that grow: append to the last chunk.
            columns = self._chunks[k]
            for column, value in zip(columns, row, strict=False):
                column.append(value)
            self._maxes[k] = row
        else:
            k = bisect_left(self._maxes, row)
            columns = self._chunks[k]
            i = _position(columns, row)[0]
            for column, value in zip(columns, row, strict=False):
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

    def _shrunk(self, k: int) -> None:
        size = len(self._chunks[k][0])
        if size == 0:
            del self._chunks[k]
            del self._maxes[k]
        elif len(self._chunks) > 1:
            self._merge(k - 1 if k > 0 else k)
        else:
            self._maxes[k] = _row_at(self._chunks[k], size - 1)

    def _merge(self, k: int) -> None:
        """Join chunks k and k + 1 into fresh, exactly sized arrays; split again if the result is too big."""
        merged = [left + right for left, right in zip(self._chunks[k], self._chunks[k + 1], strict=True)]
        self._chunks[k : k + 2] = [merged]
        self._maxes[k : k + 2] = [_row_at(merged, len(merged[0]) - 1)]
        if len(merged[0]) > 2 * self._load:
            self._split(k)


def _row_at(columns: list[array[int]], i: int) -> Row:
    return tuple([column[i] for column in columns])


def _position(columns: list[array[int]], row: Row) -> tuple[int, bool]:
    """Where `row` is (True), or would be inserted (False), in one chunk.

    Bisects each column within the run of rows equal to `row` on the columns before it.
    """
    lo, hi = 0, len(columns[0])
    for column, value in zip(columns, row, strict=False):
        lo = bisect_left(column, value, lo, hi)
        if lo == hi or column[lo] != value:
            return lo, False
        # Runs are mostly of one row (offsets are unique); look at the next row before bisecting for the run's end.
        hi = lo + 1 if lo + 1 == hi or column[lo + 1] != value else bisect_right(column, value, lo + 2, hi)
    return lo, True
