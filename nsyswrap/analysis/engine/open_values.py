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


# Values a group's batches reach before they are counted into its distinct values (at
# least as many as it has distinct values, so that each merge costs what was added).
FOLD_VALUES = 1 << 16


class PooledCounts:
    """Per group (a range family): how many times each value occurred, from values given a
    batch at a time; kept as sorted distinct values and their counts, merged once the batches
    outgrow them, so that the memory is the distinct values', not every value's (a report's
    latencies repeat: grown and real alike, a kernel's latency takes far fewer values than
    it has launches). `median` is pandas' median of all the values, bit for bit."""

    def __init__(self) -> None:
        self.counts: dict[int, tuple[np.ndarray, np.ndarray]] = {}
        self.pending: dict[int, list[np.ndarray]] = {}
        self.pending_size: dict[int, int] = {}

    def add(self, groups: np.ndarray, values: np.ndarray) -> None:
        """Values with their groups (-1: none)."""
        if len(values) == 0:
            return
        order = np.argsort(groups, kind="stable")
        groups, values = groups[order], values[order]
        if values.dtype.itemsize > 4 and values.dtype.kind == "i" \
                and int(values.min()) >= -2**31 and int(values.max()) < 2**31:
            # Latencies of under two seconds: kept as int32 until counted (the same
            # integers; half the bytes while they wait, ~17 MB at 10 M kernels).
            values = values.astype(np.int32)
        present, bounds = np.unique(groups, return_index=True)
        bounds = np.r_[bounds, len(groups)]
        for i, g in enumerate(present.tolist()):
            if g < 0:
                continue
            part = values[bounds[i]:bounds[i + 1]]
            self.pending.setdefault(g, []).append(part)
            self.pending_size[g] = self.pending_size.get(g, 0) + len(part)
            have = len(self.counts.get(g, ((),))[0])
            if self.pending_size[g] >= max(FOLD_VALUES, have):
                self._fold(g)

    def _fold(self, g: int) -> None:
        parts = self.pending.pop(g, [])
        self.pending_size.pop(g, None)
        if not parts:
            return
        # Counted by hashing (a few distinct values among many), then the few sorted.
        codes, values = pd.factorize(np.concatenate(parts))
        counts = np.bincount(codes, minlength=len(values))
        order = np.argsort(values, kind="stable")
        values, counts = np.asarray(values)[order], counts[order]
        if g in self.counts:
            old_values, old_counts = self.counts[g]
            values = np.concatenate([old_values, values])
            counts = np.concatenate([old_counts, counts])
            order = np.argsort(values, kind="stable")
            values, counts = values[order], counts[order]
            heads = np.flatnonzero(np.r_[True, values[1:] != values[:-1]])
            values, counts = values[heads], np.add.reduceat(counts, heads)
        self.counts[g] = (values, counts)

    def medians(self) -> pd.Series:
        """The median of each group's values, by group (groups with values, ascending)."""
        for g in list(self.pending):
            self._fold(g)
        groups = sorted(self.counts)
        out = []
        for g in groups:
            values, counts = self.counts[g]
            total = np.cumsum(counts)
            n = int(total[-1])
            below = values[np.searchsorted(total, (n - 1) // 2, side="right")]
            above = values[np.searchsorted(total, n // 2, side="right")]
            # As pandas: each middle value as a float, then their mean (intervals.middle_of).
            out.append((np.float64(below) + np.float64(above)) / 2)
        return pd.Series(np.array(out, dtype="float64"), index=pd.Index(groups, dtype="int64"))
