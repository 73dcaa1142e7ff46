"""Values kept per range until the range can receive no more (its kernels' launch latencies,
its streams), and value counts pooled per group: what the engine needs for
medians and distinct counts, which do not add up chunk by chunk."""

from __future__ import annotations

import numpy as np
import pandas as pd


class OpenValues:
    """(range row, value) entries held until their range closes: runs (one per chunk)
    sorted by the range's end, so that closing the ranges that ended before a moment takes a
    prefix of each run. A range's entries may lie in several runs; they close together."""

    def __init__(self) -> None:
        self.runs: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (end, row, value)

    def __len__(self) -> int:
        return sum(len(r[0]) for r in self.runs)

    def add(self, end: np.ndarray, row: np.ndarray, value: np.ndarray) -> None:
        if len(row) == 0:
            return
        order = np.argsort(end, kind="stable")
        self.runs.append((end[order], row[order], value[order]))
        if len(self.runs) > 64:  # a long report: few long runs, not thousands of short ones
            self._merge()

    def _merge(self) -> None:
        end, row, value = (np.concatenate([r[i] for r in self.runs]) for i in range(3))
        self.runs = []
        self.add(end, row, value)

    def close(self, before: int) -> tuple[np.ndarray, np.ndarray]:
        """(rows, values) of the entries of ranges that ended before `before`, removed."""
        taken, kept = [], []
        for end, row, value in self.runs:
            k = int(np.searchsorted(end, before, side="left"))
            if k:
                taken.append((row[:k], value[:k]))
            if k < len(end):
                kept.append((end[k:], row[k:], value[k:]))
        self.runs = kept
        if not taken:
            return np.zeros(0, "int64"), np.zeros(0, "int64")
        return (np.concatenate([t[0] for t in taken]), np.concatenate([t[1] for t in taken]))


# Values the batches reach before they are counted into the distinct (group, value) pairs (at
# least as many as there are such pairs, so that each merge costs what was added).
FOLD_VALUES = 1 << 16


class PooledCounts:
    """Per group (a range family): how many times each value occurred, from values given a
    batch at a time; kept as the distinct (group, value) pairs, sorted, with their counts,
    merged once the batches outgrow them, so that the memory is the distinct pairs', not
    every value's (a report's latencies repeat: grown and real alike, a kernel's latency
    takes far fewer values than it has launches). `median` is pandas' median of all the
    values, bit for bit. Every step works on all groups at once: a report whose ranges
    all have names of their own has as many groups as ranges (a Python step per group
    took 10 s at 100 k of them)."""

    def __init__(self) -> None:
        # The distinct pairs, by group then value, and how many times each occurred.
        self.groups = np.zeros(0, "int64")
        self.values = np.zeros(0, "int64")
        self.counts = np.zeros(0, "int64")
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.pending_size = 0

    def add(self, groups: np.ndarray, values: np.ndarray) -> None:
        """Values with their groups (-1: none)."""
        mine = groups >= 0
        groups, values = groups[mine], values[mine]
        if len(values) == 0:
            return
        if values.dtype.itemsize > 4 and values.dtype.kind == "i" \
                and int(values.min()) >= -2**31 and int(values.max()) < 2**31:
            # Latencies of under two seconds: kept as int32 until counted (the same
            # integers; half the bytes while they wait, ~17 MB at 10 M kernels).
            values = values.astype(np.int32)
        self.pending.append((groups, values))
        self.pending_size += len(values)
        if self.pending_size >= max(FOLD_VALUES, len(self.values)):
            self._fold()

    def _fold(self) -> None:
        if not self.pending:
            return
        groups = np.concatenate([self.groups, *(g for g, _ in self.pending)]).astype("int64")
        values = np.concatenate([self.values, *(v for _, v in self.pending)]).astype("int64")
        weights = np.concatenate([self.counts, np.ones(self.pending_size, "int64")])
        self.pending, self.pending_size = [], 0
        if int(values.min()) >= -2**31 and int(values.max()) < 2**31 \
                and int(groups.max()) < 2**31:
            # (group, value) as one integer: counted by hashing (a few distinct pairs among
            # many), then only the distinct ones sorted.
            key = (groups << 32) | (values + 2**31)
            codes, distinct = pd.factorize(key)
            counts = np.bincount(codes, weights=weights, minlength=len(distinct))
            order = np.argsort(distinct)
            distinct = np.asarray(distinct)[order]
            self.groups = distinct >> 32
            self.values = (distinct & 0xFFFFFFFF) - 2**31
            self.counts = counts[order].astype("int64")
            return
        order = np.lexsort((values, groups))
        groups, values, weights = groups[order], values[order], weights[order]
        heads = np.flatnonzero(np.r_[True, (groups[1:] != groups[:-1])
                                     | (values[1:] != values[:-1])])
        self.groups, self.values = groups[heads], values[heads]
        self.counts = np.add.reduceat(weights, heads) if len(heads) else weights[:0]

    def medians(self) -> pd.Series:
        """The median of each group's values, by group (groups with values, ascending)."""
        self._fold()
        groups, values, counts = self.groups, self.values, self.counts
        if len(groups) == 0:
            return pd.Series(np.zeros(0, "float64"), index=pd.Index([], dtype="int64"))
        heads = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]])
        total = np.cumsum(counts)  # values up to and including each pair, all groups
        before = total[heads] - counts[heads]  # values of the groups before each one
        n = np.add.reduceat(counts, heads)
        below = values[np.searchsorted(total, before + (n - 1) // 2, side="right")]
        above = values[np.searchsorted(total, before + n // 2, side="right")]
        # As pandas: each middle value as a float, then their mean (grouped.middle_of).
        middle = (below.astype("float64") + above.astype("float64")) / 2
        return pd.Series(middle, index=pd.Index(groups[heads], dtype="int64"))
