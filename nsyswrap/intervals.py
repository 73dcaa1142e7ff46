"""Interval arithmetic on DataFrames, vectorised: which range holds which event, and how
much time a set of possibly overlapping intervals covers.

Both are sort-based (merge_asof, grouped cumulative max): O(n log n) in the number of rows,
never a Python loop over ranges x events.
"""

from __future__ import annotations

import heapq

import numpy as np
import pandas as pd


def assign_lanes(ranges: pd.DataFrame) -> np.ndarray:
    """A lane per range such that ranges of one thread in one lane never overlap.

    Push/pop ranges nest, so the lane is the nesting depth: the number of the thread's ranges
    still open when the range starts. Start/end ranges may overlap without nesting; where
    depth does not give disjoint lanes, that thread falls back to greedy interval colouring.
    Expects columns thread, start_ns, end_ns; returns lanes aligned with `ranges`' rows.
    """
    lanes = np.zeros(len(ranges), dtype="int64")
    if ranges.empty:
        return lanes
    order = np.lexsort((-ranges["end_ns"].to_numpy(), ranges["start_ns"].to_numpy(),
                        ranges["thread"].to_numpy()))
    thread = ranges["thread"].to_numpy()[order]
    start = ranges["start_ns"].to_numpy()[order]
    end = ranges["end_ns"].to_numpy()[order]
    bounds = np.flatnonzero(np.diff(thread)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, len(order)], strict=True):
        s, e = start[lo:hi], end[lo:hi]
        depth = np.arange(hi - lo) - np.searchsorted(np.sort(e), s, side="right")
        if not _lanes_disjoint(s, e, depth):
            depth = _greedy_lanes(s, e)
        lanes[order[lo:hi]] = depth
    return lanes


def _lanes_disjoint(start: np.ndarray, end: np.ndarray, lane: np.ndarray) -> bool:
    by_lane = np.lexsort((start, lane))
    same_lane = lane[by_lane][1:] == lane[by_lane][:-1]
    return bool(np.all(start[by_lane][1:][same_lane] >= end[by_lane][:-1][same_lane]))


def _greedy_lanes(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Interval colouring for ranges sorted by start: reuse the lane that freed up first."""
    lanes = np.empty(len(start), dtype="int64")
    busy: list[tuple[int, int]] = []  # (end, lane) of lanes in use
    free: list[int] = []
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist(), strict=True)):
        while busy and busy[0][0] <= s:
            heapq.heappush(free, heapq.heappop(busy)[1])
        lane = heapq.heappop(free) if free else len(busy) + len(free)
        lanes[i] = lane
        heapq.heappush(busy, (e, lane))
    return lanes


def events_in_ranges(ranges: pd.DataFrame, events: pd.DataFrame) -> pd.DataFrame:
    """All (range, event) pairs where the event happened on the range's thread inside it.

    ranges: range_id, thread, start_ns, end_ns (and lane, from assign_lanes).
    events: thread, time_ns; the row label identifies the event.
    Returns columns range_id, event (the event's row label), range_start_ns, innermost
    (True for the latest-starting range that holds the event: with nesting, the innermost).
    """
    cols = {"range_id": "int64", "event": "int64", "range_start_ns": "int64", "innermost": bool}
    if ranges.empty or events.empty:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in cols.items()})
    ev = pd.DataFrame({
        "event": events.index.to_numpy(),
        "thread": events["thread"].to_numpy(dtype="int64"),
        "time_ns": events["time_ns"].to_numpy(dtype="int64"),
    }).sort_values("time_ns", kind="stable")
    ev = ev[ev["thread"].isin(ranges["thread"].unique())]
    pairs = []
    for _, lane in ranges.groupby("lane", sort=True):
        right = lane[["thread", "start_ns", "end_ns", "range_id"]].sort_values("start_ns")
        hit = pd.merge_asof(ev, right, left_on="time_ns", right_on="start_ns", by="thread",
                            direction="backward")
        hit = hit[hit["time_ns"] <= hit["end_ns"]]
        pairs.append(pd.DataFrame({
            "range_id": hit["range_id"].to_numpy(dtype="int64"),
            "event": hit["event"].to_numpy(dtype="int64"),
            "range_start_ns": hit["start_ns"].to_numpy(dtype="int64"),
        }))
    out = pd.concat(pairs, ignore_index=True)
    out = out.sort_values(["event", "range_start_ns"], kind="stable", ignore_index=True)
    out["innermost"] = ~out["event"].duplicated(keep="last")
    return out


def union_stats(intervals: pd.DataFrame, key: str) -> pd.DataFrame:
    """Per `key` group of [start_ns, end_ns) intervals: busy (length of their union, so
    overlapping streams count once), span (first start to last end), idle inside the span,
    the number of gaps and the largest one, and the count.
    """
    out_cols = ["busy_ns", "span_ns", "idle_ns", "first_start_ns", "last_end_ns", "gaps",
                "max_gap_ns", "count"]
    if intervals.empty:
        return pd.DataFrame(columns=out_cols, index=pd.Index([], name=key), dtype="int64")
    df = intervals[[key, "start_ns", "end_ns"]].sort_values([key, "start_ns"], kind="stable")
    g = df[key].to_numpy()
    start = df["start_ns"].to_numpy(dtype="int64")
    end = df["end_ns"].to_numpy(dtype="int64")
    first = np.r_[True, g[1:] != g[:-1]]
    # Running max of ends within each group, shifted by one: the covered horizon before row i.
    running = pd.Series(end).groupby(g).cummax().to_numpy()
    horizon = np.r_[0, running[:-1]]
    covered = np.where(first, end - start, np.clip(end - np.maximum(start, horizon), 0, None))
    gap = np.where(first, 0, np.clip(start - horizon, 0, None))
    stats = pd.DataFrame({key: g, "covered": covered, "gap": gap, "has_gap": gap > 0,
                          "start": start, "end": end})
    agg = stats.groupby(key, sort=True).agg(
        busy_ns=("covered", "sum"),
        first_start_ns=("start", "min"),
        last_end_ns=("end", "max"),
        max_gap_ns=("gap", "max"),
        gaps=("has_gap", "sum"),
        count=("covered", "size"),
    )
    agg["span_ns"] = agg["last_end_ns"] - agg["first_start_ns"]
    agg["idle_ns"] = agg["span_ns"] - agg["busy_ns"]
    return agg[out_cols].astype("int64")


def merge_intervals(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of [start, end) intervals as sorted, disjoint intervals."""
    if len(start) == 0:
        return np.array([], dtype="int64"), np.array([], dtype="int64")
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    running = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > running[:-1]]
    group = np.cumsum(new) - 1
    merged_start = s[new]
    merged_end = np.zeros(len(merged_start), dtype=e.dtype)
    np.maximum.at(merged_end, group, e)
    return merged_start, merged_end


def covered_within(merged_start: np.ndarray, merged_end: np.ndarray, lo: np.ndarray,
                   hi: np.ndarray) -> np.ndarray:
    """For each window [lo, hi): how much of it the merged intervals cover."""
    if len(merged_start) == 0:
        return np.zeros(len(lo), dtype="int64")
    cum = np.r_[0, np.cumsum(merged_end - merged_start)]
    i = np.searchsorted(merged_end, lo, side="right")  # first interval ending after lo
    j = np.searchsorted(merged_start, hi, side="left")  # intervals before j start before hi
    total = cum[np.maximum(j, i)] - cum[i]
    some = j > i
    first = np.minimum(i, len(merged_start) - 1)
    last = np.maximum(j - 1, 0)
    head = np.clip(lo - merged_start[first], 0, None)
    tail = np.clip(merged_end[last] - hi, 0, None)
    return np.where(some, total - head - tail, 0)
