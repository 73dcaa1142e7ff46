"""The union of time intervals: how much time a set of possibly overlapping intervals
(GPU operations) covers, so that work on several streams at once counts once. Every form
lives here; which one serves which case:

  merge_intervals(start, end)     one set, in any order -> the union as sorted, disjoint
                                  intervals (busy time and the gaps between). A device's
                                  operations in a chunk (DeviceBusy's input),
                                  a thread's drawn operations (the timeline).
  union_length(start, end)        one set, in any order -> its busy time only. A timed
                                  window's operations (analysis/user_timings.py).
  union_stats(frame, key)         groups, rows in any order -> per group busy, span, idle,
                                  gaps, the longest gap, count (UNION_COLUMNS). Few rows:
                                  the many-report summaries.
  union_sorted(g, start, end,     one chunk of whole sorted groups -> the same numbers as
               prior)             arrays; `prior` carries each group on from the horizon an
                                  earlier chunk reached, so that a time-ordered stream's
                                  chunks add up to the whole. Each range's operations (the
                                  engine's instance columns: analysis/engine/totals.py).
  DeviceBusy                      operations a chunk at a time, in start order -> each
                                  device's busy time before a moment (B(t)), so that busy
                                  time in [lo, hi) is B(hi) - B(lo), without every interval
                                  held. Device busy time within each range.

All are sort-based, O(n log n) in the intervals, never a Python loop over them; touching
intervals merge.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.chunks import sort_in_place, steps

UNION_COLUMNS = ["busy_ns", "span_ns", "idle_ns", "first_start_ns", "last_end_ns", "gaps",
                 "max_gap_ns", "count"]


def union_stats(intervals: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per `key` group of [start_ns, end_ns) intervals: busy (length of their union, so
    overlapping streams count once), span (first start to last end), idle inside the span,
    the number of gaps and the largest one, and the count.
    """
    if intervals.empty:
        return pd.DataFrame(columns=UNION_COLUMNS, index=pd.Index([], name=key), dtype="int64")
    g0 = intervals[key].to_numpy(dtype="int64")
    s0 = intervals["start_ns"].to_numpy(dtype="int64")
    order = np.lexsort((s0, g0))
    g, start = g0[order], s0[order]
    end = intervals["end_ns"].to_numpy(dtype="int64")[order]
    del order
    union = union_sorted(g, start, end)
    index = pd.Index(union.pop("group"), name=key)
    return pd.DataFrame({c: union[c].astype("int64", copy=False) for c in UNION_COLUMNS},
                        index=index)


def union_sorted(g: np.ndarray, start: np.ndarray, end: np.ndarray,
                  prior: tuple[np.ndarray, np.ndarray] | None = None) -> dict[str, np.ndarray]:
    """union_stats of whole groups, sorted by (group, start), as arrays (and the groups).
    `prior`: (seen, horizon), per group in order: groups seen before (in an earlier chunk of
    a time-ordered stream, whose intervals all started no later than these) carry on from
    the horizon (the latest end) their earlier intervals reached, so that a group's numbers
    over chunks add up to the numbers over all its intervals at once: its first interval
    here covers only what lies past that horizon, and a gap before it counts."""
    if len(g) == 0:  # a chunk whose rows were all left out
        return {"group": g, **{c: np.zeros(0, dtype="int64") for c in UNION_COLUMNS}}
    first = np.r_[True, g[1:] != g[:-1]]
    heads = np.flatnonzero(first)
    # Running max of ends within each group, shifted by one: the covered horizon before row i.
    running = pd.Series(end).groupby(np.cumsum(first)).cummax().to_numpy()
    if prior is not None:
        seen, reached = prior
        counts = np.diff(np.r_[heads, len(g)])
        running = np.maximum(running, np.repeat(
            np.where(seen, reached, np.iinfo(np.int64).min), counts))
        first = first.copy()
        first[heads[seen]] = False  # carried on: no group's first interval overall
    horizon = np.r_[0, running[:-1]]
    if prior is not None:
        horizon[heads[seen]] = reached[seen]
    covered = np.where(first, end - start, np.clip(end - np.maximum(start, horizon), 0, None))
    gap = np.where(first, 0, np.clip(start - horizon, 0, None))
    busy = np.add.reduceat(covered, heads)
    first_start = start[heads]  # sorted by start within each group
    last_end = np.maximum.reduceat(end, heads)
    if prior is not None:
        last_end = np.where(seen, np.maximum(last_end, reached), last_end)
    return {
        "group": g[heads],
        "busy_ns": busy,
        "span_ns": last_end - first_start,
        "idle_ns": last_end - first_start - busy,
        "first_start_ns": first_start,
        "last_end_ns": last_end,
        "gaps": np.add.reduceat((gap > 0).astype("int64"), heads),
        "max_gap_ns": np.maximum.reduceat(gap, heads),
        "count": np.diff(np.r_[heads, len(g)]),
    }


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals (end >= start, as the loader guarantees) as
    sorted, disjoint intervals, from the starts and the ends each sorted on its own (no
    argsort, no gathers: each a copy sorted in place, sort_in_place). With both sorted,
    the union breaks after the i-th start exactly where the i-th end falls short of the
    next start: then the i + 1 intervals that end before it are the i + 1 that start
    before it (an interval ends at or after its start), so none of them reaches it and
    their merged interval ends at the i-th end, the greatest of theirs. Touching intervals
    merge. Two input-sized arrays, and a mask of a byte a row: the rows picked are moved
    to the front of the sorted copies themselves (_compacted), not gathered into new
    arrays (two more input-sized arrays where most operations are apart: 170 MB at 10 M
    kernels, on that report's peak)."""
    if len(start) == 0:
        return np.array([], dtype="int64"), np.array([], dtype="int64")
    s = np.array(start, dtype="int64")
    sort_in_place(s)
    e = np.array(end, dtype="int64")
    sort_in_place(e)
    pick = np.empty(len(s), dtype=bool)
    np.greater(s[1:], e[:-1], out=pick[1:])  # a gap before row i
    pick[0] = True  # the merged intervals' first rows
    merged_start = _compacted(s, pick)
    pick[:-1] = pick[1:]  # their last rows: a gap after row i
    pick[-1] = True
    return merged_start, _compacted(e, pick)


def _compacted(values: np.ndarray, keep: np.ndarray) -> np.ndarray:
    """values[keep], made by moving the kept values to the front of `values` (the caller's
    own array, overwritten) a step at a time: a step's temporaries, not a second array of
    the input's size. Where few are kept, a copy of them, so that the whole input is not
    held for them."""
    at = 0
    for part in steps(len(values)):
        kept = values[part][keep[part]]
        values[at:at + len(kept)] = kept  # at <= part.start: nothing unread is overwritten
        at += len(kept)
    return values[:at] if 2 * at >= len(values) else values[:at].copy()


def union_length(start: np.ndarray, end: np.ndarray) -> int:
    """The length of the union of [start, end) intervals in any order: their busy time."""
    merged_start, merged_end = merge_intervals(start, end)
    return int((merged_end - merged_start).sum())


# Device busy time in a window [lo, hi) is B(hi) - B(lo), where B(t) is the length of the
# union of the device's operations before t. B(t) is known once every operation that starts
# before t has been seen, so with operations in start order it is answered in the chunk
# whose starts reach t, from that chunk's merged intervals and what came before them: no
# interval of the whole report is kept (one per operation where they never overlap, 16 B
# each: 176 MB at 10 M kernels).


class _ChunkCover:
    """One device's merged intervals over one chunk (the interval carried in from earlier
    chunks included): B(t) for moments t the chunk's starts reach."""

    def __init__(self, start: np.ndarray, end: np.ndarray, before: int) -> None:
        self.start, self.end = start, end
        lengths = end - start
        # Busy time before each interval (the chunk's earlier ones, and `before` them).
        self.before = before + np.cumsum(lengths) - lengths

    def busy_before(self, t: np.ndarray) -> np.ndarray:
        """B(t) for each moment of `t` (int64)."""
        k = np.searchsorted(self.start, t, side="right") - 1  # the last starting at or before
        at = np.maximum(k, 0)
        inside = np.clip(np.minimum(self.end[at], t) - self.start[at], 0, None)
        out = self.before[at] + inside
        out[k < 0] = self.before[0] if len(self.before) else 0
        return out


class DeviceBusy:
    """B_d(t) for each device d, a chunk of operations at a time (operations in start
    order; each chunk's starts in [its lower bound, its upper bound), bounds that ascend
    from chunk to chunk). Call `chunk_merged` with a chunk's operations' merged intervals
    per device, then `busy_before` for moments in the chunk's bounds, before the next."""

    def __init__(self) -> None:
        self.closed: dict[int, int] = {}  # per device: busy time before its open interval
        self.open: dict[int, tuple[int, int]] = {}  # its last merged interval so far
        self.covers: dict[int, _ChunkCover] = {}

    @property
    def devices(self) -> list[int]:
        """The devices that ran anything so far (B is 0 on others, before their first)."""
        return list(self.open)

    def chunk_merged(self, merged: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Take a chunk's operations as each device's merged intervals (merge_intervals of
        its operations in the chunk; a device without any may be left out)."""
        self.covers = {}
        for d in sorted(set(self.open) | set(merged)):
            ms, me = merged.get(d, (np.zeros(0, "int64"), np.zeros(0, "int64")))
            if d in self.open:
                # The interval carried in started before every one of the chunk's: it
                # swallows those that start by its end (touching ones too, as
                # merge_intervals merges them).
                lo, hi = self.open[d]
                k = int(np.searchsorted(ms, hi, side="right"))
                if k:
                    hi = max(hi, int(me[k - 1]))
                ms, me = np.r_[lo, ms[k:]], np.r_[hi, me[k:]]
            before = self.closed.get(d, 0)
            self.covers[d] = _ChunkCover(ms, me, before)
            # The last merged interval stays open: a later operation may reach it.
            self.closed[d] = before + int((me[:-1] - ms[:-1]).sum())
            self.open[d] = (int(ms[-1]), int(me[-1]))

    def busy_before(self, device: int, t: np.ndarray) -> np.ndarray:
        """B_device(t) for moments the current chunk's starts reach (0 on a device that
        has run nothing yet)."""
        cover = self.covers.get(device)
        if cover is None:
            return np.zeros(len(t), "int64")
        return cover.busy_before(np.asarray(t, dtype="int64"))
