"""Which range holds which event, vectorised: the range search (RangeSearch), the pairs it
finds sorted by event with the innermost range first (with_innermost), and the ranges'
start order. Sort-based: O(n log n) in the rows, never a Python loop over ranges x events."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..read.chunks import (
    compact_ids,
    ids_are_rows,
    map_chunks,
    sort_in_place,
    steps,
)
from .grouped import key_runs, rows_of_runs, small_key_order


def no_pairs(*flags: str) -> pd.DataFrame:
    """A frame of no (range, event) pairs: range_id and event, and the boolean `flags`."""
    return pd.DataFrame({"range_id": np.empty(0, "int64"), "event": np.empty(0, "int64"),
                         **{f: np.empty(0, bool) for f in flags}})


class RangeSearch:
    """Ranges prepared for events_in_ranges' search once, for any number of event sets:
    sorted by (lane, thread, start) and cut into (lane, thread) segments, whose ranges never
    overlap. The engine searches each chunk of operations in turn; a search
    looks only at the ranges of each segment that reach the events' time span (binary
    searches of the segment's starts and ends), so a chunk costs its own pairs, not a pass
    over every range.

    ranges: range_id, thread, start_ns, end_ns, lane (from assign_lanes) and `key`."""

    def __init__(self, ranges: pd.DataFrame, key: str = "thread") -> None:
        self.key = key
        r_thread = ranges["thread"].to_numpy(dtype="int64")
        r_lane = ranges["lane"].to_numpy()
        r_start = ranges["start_ns"].to_numpy(dtype="int64")
        # By (lane, thread, start); ranges come in start order, so a stable sort by the
        # other two alone (small_key_order) usually does it.
        order = (small_key_order(r_thread, r_lane.astype("int64", copy=False))
                 if np.all(r_start[1:] >= r_start[:-1]) else None)
        if order is None:
            order = np.lexsort((r_start, r_thread, r_lane))
        # Every array here is range-sized (76 MB each at 10 M ranges, on the attribution's
        # peak there): the order 32-bit, and the sorted threads and lanes compared in place
        # rather than differenced.
        order = compact_ids(order)
        self.start = r_start[order]
        del r_start
        self.end = ranges["end_ns"].to_numpy(dtype="int64")[order]
        # The pairs' range ids as 32-bit where they fit: at 10 M kernels a report has
        # ~20 M pairs, where a format keeps every pair.
        self.range_id = compact_ids(ranges["range_id"].to_numpy(dtype="int64")[order])
        n = len(order)
        # Segment bounds: 0, each row whose lane or thread differs from the row before, n.
        same = np.ones(n + 1, dtype=bool)
        same[0] = same[n] = False
        for column in (r_thread, r_lane):
            ordered = column[order]
            same[1:n] &= ordered[1:] == ordered[:-1]
            del ordered
        seg = np.flatnonzero(~same) if n else np.zeros(1, "int64")
        del same
        self.bounds = list(zip(seg[:-1].tolist(), seg[1:].tolist(), strict=True))
        # Each segment's key (its thread's, or process).
        self.segment_key = ranges[key].to_numpy(dtype="int64")[order[seg[:-1]]]
        self._key_at = dict(zip(seg[:-1].tolist(), self.segment_key.tolist(), strict=True))
        del order, r_thread, r_lane

    def __len__(self) -> int:
        return len(self.start)

    def by_process(self) -> RangeSearch:
        """This search (by thread) keyed by each segment's process instead (the thread id's
        bits above 24, as loader._pid): the same ranges, in the same segments and order,
        shared rather than sorted and copied again (~23 MB at 1.2 M ranges)."""
        if self.key != "thread":
            raise ValueError("by_process: a search by thread")
        other = object.__new__(RangeSearch)
        other.key = "process"
        other.start, other.end, other.range_id = self.start, self.end, self.range_id
        other.bounds = self.bounds
        other.segment_key = self.segment_key >> 24
        other._key_at = dict(zip([lo for lo, _ in self.bounds], other.segment_key.tolist(),
                                 strict=True))
        return other

    def pairs(self, events: pd.DataFrame) -> dict[str, np.ndarray] | None:
        """range_id and event (the event's row label) of every pair, in the search's order
        (segment by segment), or None for none. events: time_ns and the search's key."""
        if len(self) == 0 or events.empty:
            return None
        ev_key, key_ids = _sort_keys(events[self.key])
        ev_time = events["time_ns"].to_numpy(dtype="int64")
        order = np.lexsort((ev_time, ev_key))
        ev_time = ev_time[order]
        # The events of each key: a slice of the sorted events, found from a few bounds (the
        # sorted keys themselves, an event-sized array, are not kept through the search).
        key_values, key_bounds = key_runs(ev_key[order])
        del ev_key
        if key_ids is not None:
            key_values = key_ids[key_values]
        # The labels in that order, 32-bit where they fit; a RangeIndex's labels are the
        # order itself. At 10 M launches each event-sized copy held through the search (the
        # order, the keys, 64-bit labels) was 80 MB on the attribution's peak.
        index = events.index
        if isinstance(index, pd.RangeIndex) and index.start == 0 and index.step == 1:
            ev_label = compact_ids(order)
        else:
            ev_label = compact_ids(index.to_numpy())[order]
        del order
        r_start, r_end, r_id = self.start, self.end, self.range_id

        def events_of(k: int) -> tuple[int, int]:
            """[lo, hi) of key k's events (empty when it has none)."""
            i = int(np.searchsorted(key_values, k))
            if i < len(key_values) and key_values[i] == k:
                return int(key_bounds[i]), int(key_bounds[i + 1])
            return 0, 0

        def segment(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray] | None:
            """The pairs of one (lane, thread) segment of the ranges: its ranges are disjoint
            and sorted, so each holds a slice of its key's events (sorted by time), found by
            binary searches of the ranges' edges. An event goes to the last range starting
            at or before it, when it is inside (a range that ends where the next starts
            gives that event to the next). Only the segment's ranges that reach the events'
            time span are searched (their ends ascend too): the temporaries scale with the
            pairs, not with all the key's events or all the segment's ranges."""
            e_lo, e_hi = events_of(self._key_at[lo])
            if e_lo == e_hi:
                return None
            times = ev_time[e_lo:e_hi]
            hi = lo + int(np.searchsorted(r_start[lo:hi], times[-1], side="right"))
            lo += int(np.searchsorted(r_end[lo:hi], times[0], side="left"))
            if lo >= hi:
                return None
            first = np.searchsorted(times, r_start[lo:hi], side="left")
            last = np.searchsorted(times, r_end[lo:hi], side="right")
            np.minimum(last[:-1], first[1:], out=last[:-1])
            counts = np.maximum(last - first, 0)
            total = int(counts.sum())
            if total == 0:
                return None
            # Each pair's range, repeated from the ids themselves, and its event: its range's
            # first event plus its place in the range's slice, 32-bit where the key's events
            # and the pairs number under 2**31. A segment can hold most of a report's pairs
            # (the outermost lane of the main thread, under the process rule): every
            # pair-sized temporary here is 4 bytes a pair, not 8 (a 64-bit range number per
            # pair, and 64-bit rows and their offsets, were ~190 MB at 6 M pairs).
            rows = rows_of_runs(first, counts,
                                np.int32 if max(e_hi - e_lo, total) < 2**31 else np.int64)
            return np.repeat(r_id[lo:hi], counts), ev_label[e_lo:e_hi][rows]

        # Segments of (lane, thread) among the ranges, on every core (chunks.py), weighed by
        # the events of their key; those whose key has no events are not visited.
        weight = np.array([hi - lo for lo, hi in map(events_of, self.segment_key.tolist())],
                          dtype="int64")
        busy = np.flatnonzero(weight)
        found = [list(p) for p in map_chunks(segment, [self.bounds[i] for i in busy.tolist()],
                                             weight[busy]) if p is not None]
        if not found:
            return None
        # Column by column, each segment's part dropped once joined: the pairs and one column,
        # not the pairs twice (the segments' arrays beside their concatenation).
        columns = {}
        for i, c in enumerate(("range_id", "event")):
            columns[c] = np.concatenate([p[i] for p in found])
            for p in found:
                p[i] = None
        return columns


def _sort_keys(key: pd.Series) -> tuple[np.ndarray, np.ndarray | None]:
    """(what to sort the events by, the key each of its values stands for, or None where
    they are the keys): a categorical of sorted integer ids (gpu_ops' threads) sorts by its
    codes, in the ids' order, where the ids made for every event were 88 MB at 10 M
    kernels beside the search's sort."""
    if isinstance(key.dtype, pd.CategoricalDtype):
        ids = key.cat.categories
        codes = key.cat.codes.to_numpy()
        if (ids.dtype.kind in "iu" and ids.is_monotonic_increasing
                and (len(codes) == 0 or codes.min() >= 0)):
            return codes, ids.to_numpy(dtype="int64")
    return key.to_numpy(dtype="int64"), None


def range_starts(ranges: pd.DataFrame) -> np.ndarray:
    """Each range's start, indexed by range id (ids are small integers): what orders the
    pairs of one event, looked up where needed rather than carried as a pair-sized column
    (165 MB at 10 M kernels). Read only: where the ids are the rows (as the loader numbers
    them) it is the ranges' own column, not a copy."""
    ids = ranges["range_id"].to_numpy()
    start = ranges["start_ns"].to_numpy(dtype="int64")
    if ids_are_rows(ids):
        out = start.view()
    else:
        out = np.zeros(int(ids.max()) + 1 if len(ids) else 0, dtype="int64")
        out[ids] = start
    out.flags.writeable = False
    return out


def with_innermost(starts: np.ndarray, *frames: pd.DataFrame) -> pd.DataFrame:
    """Pairs (the rows of each frame in turn: range_id, event and any other columns, the
    same in each) sorted by (event, range start), ties in that order, with `innermost`
    marking each event's latest-starting range (the innermost of nested ranges). `starts`:
    each range's start by range id (range_starts). The frames are emptied column by
    column as each is joined: with tens of millions of pairs, the parts and a joined copy
    of every column at once would double the peak. All pairs sorted at once, not some
    sorted and others merged in: the sort finds the runs already in order."""
    columns = {}
    for name in list(frames[0].columns):
        parts = [f.pop(name).to_numpy() for f in frames]
        columns[name] = parts[0] if len(parts) == 1 else np.concatenate(parts)
        del parts
    return _sorted_by_event(columns, starts)


def _sorted_by_event(columns: dict[str, np.ndarray], starts: np.ndarray) -> pd.DataFrame:
    """The pairs' columns (range_id, event and any others) sorted by (event, range start:
    `starts` by range id), ties in their given order (np.lexsort's permutation), with
    `innermost`. `columns` is emptied as each column is sorted, so an array nothing else
    holds is freed as its sorted copy is made: the peak is the pairs and one column more,
    not the pairs twice.

    Pairs arrive lane by lane (outermost first) with each lane's events in time order, so
    within one event they are mostly in range-start order already: a stable sort by event
    alone (quick on such nearly sorted input) gives lexsort's order there, ties included.
    The events where it does not (the process rule's pairs, joined after the launching
    thread's own, hold ranges that started earlier) are found, not assumed, and only their
    rows sorted again by range start, stably: the same permutation as lexsort's (a full
    lexsort of the 20 M pairs at 10 M kernels cost 1.5 s)."""
    dtype = columns["event"].dtype
    order, event = _stable_order(columns.pop("event"))
    out = {c: (None if c == "event" else columns.pop(c)[order]) for c in ["range_id", "event"]
           + [c for c in columns if c != "range_id"]}
    del order
    # The labels copied out (where they are a view of the sorted keys) only once the other
    # columns are gathered: the keys, then, are the one pair-sized array beside the
    # columns (a pair-sized 32-bit array fewer at the peak: 82 MB at 10 M kernels).
    out["event"] = np.ascontiguousarray(event, dtype=dtype)
    del event
    _sort_again_by_start(out, starts)
    ev = out["event"]
    out["innermost"] = np.r_[ev[1:] != ev[:-1], True] if len(ev) else np.array([], bool)
    return pd.DataFrame(out, copy=False)


def _sort_again_by_start(out: dict[str, np.ndarray], starts: np.ndarray) -> None:
    """Pairs sorted by event (columns in `out`, rewritten in place): the rows of each event
    whose ranges' starts do not ascend sorted again by start, stably."""
    event, range_id = out["event"], out["range_id"]
    bad = events_out_of_start_order(event, range_id, starts)
    if len(bad) == 0:
        return
    lo = np.searchsorted(event, bad, side="left")
    rows = rows_of_runs(lo, np.searchsorted(event, bad, side="right") - lo)  # in order
    again = rows[np.lexsort((starts[range_id[rows]], event[rows]))]
    for values in out.values():
        values[rows] = values[again]


def events_out_of_start_order(event: np.ndarray, range_id: np.ndarray,
                              starts: np.ndarray) -> np.ndarray:
    """The events (sorted, distinct) of pairs sorted by event whose ranges' starts (`starts`
    by range id) do not ascend. A step at a time (each step one row into the next): no
    pair-sized temporaries. Where range ids follow the ranges' starts (the loader's order),
    a start is looked up only where the ids descend (a lookup per pair cost 0.4 s at 10 M
    kernels)."""
    by_id = bool(np.all(starts[1:] >= starts[:-1]))
    found = []
    for part in steps(max(len(event) - 1, 0)):
        ev = event[part.start:part.stop + 1]
        rid = range_id[part.start:part.stop + 1]
        if by_id:  # ids that ascend have starts that ascend
            at = np.flatnonzero((ev[1:] == ev[:-1]) & (rid[1:] < rid[:-1]))
            at = at[starts[rid[at + 1]] < starts[rid[at]]]
        else:
            rs = starts[rid]
            at = np.flatnonzero((ev[1:] == ev[:-1]) & (rs[1:] < rs[:-1]))
        if len(at):
            found.append(ev[at])
    return np.unique(np.concatenate(found)) if found else np.array([], dtype=event.dtype)


def _stable_order(event: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(np.argsort(event, kind="stable"), event in that order), either of them possibly a
    strided view, and the labels possibly in a narrower integer type. For row labels
    (below 2**31) and fewer than 2**32 of them, each label and its position packed into
    one int64 and sorted in place on every core (sort_in_place): the sorted labels come out
    of the high bits, not from a gather. At 10 M kernels (20 M pairs) 0.3 s against
    0.75 s."""
    n = len(event)
    if n and (int(event.min()) < 0 or int(event.max()) >= 2**31 or n >= 2**32):
        order = compact_ids(np.argsort(event, kind="stable"))
        return order, event[order]
    dtype = event.dtype
    packed = event.astype(np.int64)
    del event  # (the caller's was handed over)
    packed <<= 32
    for part in steps(n):
        packed[part] |= np.arange(part.start, min(part.stop, n))
    sort_in_place(packed)
    if n < 2**31 and np.little_endian:
        # The sorted keys' two halves as 32-bit views (positions low, labels high), not
        # copies: the caller's gathers read the order in place, and copies the labels out
        # after them (_sorted_by_event).
        halves = packed.view(np.int32)
        return halves[0::2], halves[1::2]
    order = np.empty(n, dtype=np.int32 if n < 2**31 else np.int64)
    labels = np.empty(n, dtype=dtype)
    for part in steps(n):
        order[part] = packed[part] & 0xFFFFFFFF
        labels[part] = packed[part] >> 32
    return order, labels
