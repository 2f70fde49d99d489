"""SortedRows, the chunked int64 storage under PendingSet: against a sorted list, and its chunk bounds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kmq_tracker._index import Row, SortedRows

_VALUES = st.integers(min_value=-3, max_value=5)
_INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


class SortedRowsModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.width = 1
        self.load = 2
        self.rows = SortedRows(self.width, self.load)
        self.model: list[Row] = []

    @initialize(width=st.integers(min_value=1, max_value=3), load=st.integers(min_value=2, max_value=6))
    def shape(self, width: int, load: int) -> None:
        self.width, self.load = width, load
        self.rows = SortedRows(width, load)

    @rule(data=st.data(), wide=st.booleans())
    def add(self, data: st.DataObject, wide: bool) -> None:
        row = data.draw(st.tuples(*[_INT64 if wide else _VALUES] * self.width))
        self.rows.add(row)
        self.model = sorted([*self.model, row])

    @rule(data=st.data())
    def discard(self, data: st.DataObject) -> None:
        row = data.draw(st.tuples(*[_VALUES] * self.width) | st.sampled_from(self.model or [(0,) * self.width]))
        present = row in self.model
        if present:
            self.model.remove(row)
        assert self.rows.discard(row) == present

    @rule(key=_VALUES)
    def pop(self, key: int) -> None:
        expected = next((row for row in self.model if row[0] == key), None)
        if expected is not None:
            self.model.remove(expected)
        assert self.rows.pop(key) == expected

    @rule(key=_VALUES)
    def find(self, key: int) -> None:
        assert self.rows.find(key) == next((row for row in self.model if row[0] == key), None)

    @rule(bound=_VALUES, limit=st.integers(min_value=0, max_value=12), column=st.integers(min_value=0, max_value=2))
    def leading(self, bound: int, limit: int, column: int) -> None:
        column = min(column, self.width - 1)
        expected = [row[column] for row in self.model if row[0] <= bound][:limit]
        assert self.rows.leading(bound, column, limit) == expected

    @invariant()
    def same_rows(self) -> None:
        assert len(self.rows) == len(self.model)
        assert self.rows.first() == (self.model[0] if self.model else None)
        chunks = self.rows._chunks
        flattened = [tuple(column[i] for column in chunk) for chunk in chunks for i in range(len(chunk[0]))]
        assert flattened == self.model

    @invariant()
    def chunks_stay_within_bounds(self) -> None:
        chunks = self.rows._chunks
        assert self.rows._maxes == [tuple(column[-1] for column in chunk) for chunk in chunks]
        for chunk in chunks:
            assert 1 <= len(chunk[0]) <= 2 * self.load
            assert {len(column) for column in chunk} == {len(chunk[0])}
        if len(chunks) > 1:
            # No sparse chunks left behind by deletions: memory follows the live size.
            assert all(len(chunk[0]) >= self.load // 2 for chunk in chunks)


SortedRowsModel.TestCase.settings = settings(max_examples=200, stateful_step_count=80, deadline=None)
TestSortedRowsModel = SortedRowsModel.TestCase


def test_rows_of_the_wrong_width_are_refused() -> None:
    rows = SortedRows(2)
    with pytest.raises(ValueError, match="2 values"):
        rows.add((1, 2, 3))
    assert len(rows) == 0


def test_a_bad_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="width"):
        SortedRows(0)
    with pytest.raises(ValueError, match="load"):
        SortedRows(1, load=1)


def test_deletions_merge_sparse_chunks() -> None:
    rows = SortedRows(1, load=8)
    for value in range(1_000):
        rows.add((value,))
    chunks_when_full = len(rows._chunks)

    for value in range(1_000):
        if value % 50:
            assert rows.discard((value,))

    assert [value for chunk in rows._chunks for value in chunk[0]] == list(range(0, 1_000, 50))
    assert len(rows._chunks) <= 20 // (8 // 2) + 1 < chunks_when_full
    assert all(len(chunk[0]) >= 8 // 2 for chunk in rows._chunks)


def test_draining_returns_to_empty() -> None:
    rows = SortedRows(2, load=4)
    for value in range(100):
        rows.add((value % 7, value))
    for value in range(100):
        assert rows.discard((value % 7, value))
    assert len(rows) == 0
    assert rows._chunks == []
    assert rows.first() is None


@given(st.sets(st.integers(0, 200), max_size=80), st.integers(2, 5), st.integers(-5, 205), st.integers(-5, 205))
def test_floor_and_rows_between_agree_with_a_sorted_list(keys: set[int], load: int, lo: int, hi: int) -> None:
    rows = SortedRows(2, load)
    for key in keys:
        rows.add((key, key * 10))
    ordered = sorted((key, key * 10) for key in keys)
    assert rows.rows_between(lo, hi) == [row for row in ordered if lo <= row[0] < hi]
    below = [row for row in ordered if row[0] <= lo]
    assert rows.floor(lo) == (below[-1] if below else None)


@given(
    st.sets(st.integers(0, 200), max_size=80),
    st.integers(2, 5),
    st.integers(0, 200),
    st.integers(0, 60),
    st.sets(st.integers(0, 60), max_size=30),
)
def test_replace_between_agrees_with_a_sorted_list(
    keys: set[int], load: int, lo: int, width: int, new: set[int]
) -> None:
    rows = SortedRows(2, load)
    for key in keys:
        rows.add((key, -key))
    hi = lo + width
    replacement = sorted((lo + n, n) for n in new if lo + n < hi)
    rows.replace_between(lo, hi, replacement)
    expected = sorted([(k, -k) for k in keys if not lo <= k < hi] + replacement)
    assert rows.rows_between(-1, 10**6) == expected
    assert len(rows) == len(expected)
    assert rows.first() == (expected[0] if expected else None)
