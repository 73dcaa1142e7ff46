"""Interval arithmetic on DataFrames, vectorised: which range holds which event (the range
search, the pairs sorted by event, lanes of nesting ranges), and the grouped sorts and
medians the per-range numbers are made with. How much time a set of possibly overlapping
intervals covers (their union) is union.py's.

Sort-based: O(n log n) in the number of rows, never a Python loop over ranges x events.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from .chunks import map_chunks, small_code_type, sort_in_place, steps


def assign_lanes(ranges: pd.DataFrame) -> np.ndarray:
    """A lane per range such that ranges of one thread in one lane never overlap.

    Push/pop ranges nest, so the lane is the nesting depth: the number of the thread's ranges
    still open when the range starts. Start/end ranges may overlap without nesting; where
    depth does not give disjoint lanes, that thread falls back to greedy interval colouring.
    Expects columns thread, start_ns, end_ns; returns lanes aligned with `ranges`' rows.
    """
    # 32-bit lanes and order, and no differenced copies: every array here is range-sized
    # (40-80 MB at 10 M ranges) and this runs while the attribution holds the most.
    lanes = np.zeros(len(ranges), dtype="int32")
    if ranges.empty:
        return lanes
    thread = ranges["thread"].to_numpy()
    start = ranges["start_ns"].to_numpy()
    end = ranges["end_ns"].to_numpy()
    # Ranges come from the loader in start order: then (thread, start, -end) is a stable
    # sort by thread alone (see small_key_order), a fraction of the three-key lexsort.
    order = small_key_order(thread) if _in_start_order(start, end) else None
    if order is None:
        order = np.lexsort((-end, start, thread))
    order = compact_ids(order)
    thread = thread[order]
    cuts = np.r_[0, np.flatnonzero(thread[1:] != thread[:-1]) + 1, len(order)]
    del thread
    start, end = start[order], end[order]

    def thread_lanes(lo: int, hi: int) -> None:
        s, e = start[lo:hi], end[lo:hi]
        depth = np.searchsorted(np.sort(e), s, side="right")
        np.subtract(np.arange(hi - lo), depth, out=depth)
        if not _lanes_disjoint(s, e, depth):
            depth = _greedy_lanes(s, e)
        lanes[order[lo:hi]] = depth  # each thread's own rows

    # Threads on every core (their sorts and searches run without the GIL).
    map_chunks(thread_lanes, list(zip(cuts[:-1].tolist(), cuts[1:].tolist(), strict=True)),
               np.diff(cuts))
    return lanes


def _in_start_order(start: np.ndarray, end: np.ndarray) -> bool:
    """Sorted by start, and by end descending where starts tie (outer ranges first)."""
    later, tied = start[1:] > start[:-1], start[1:] == start[:-1]
    return bool(np.all(later | (tied & (end[1:] <= end[:-1]))))


def _lanes_disjoint(start: np.ndarray, end: np.ndarray, lane: np.ndarray) -> bool:
    """Whether no two ranges of one lane overlap; `start` is sorted (so a stable sort by
    lane is np.lexsort((start, lane)))."""
    by_lane = small_key_order(lane)
    if by_lane is None:
        by_lane = np.lexsort((start, lane))
    by_lane = compact_ids(by_lane)
    ordered = lane[by_lane]
    same_lane = ordered[1:] == ordered[:-1]
    del ordered
    starts = start[by_lane][1:][same_lane]
    return bool(np.all(starts >= end[by_lane][:-1][same_lane]))


# Distinct values of the keys together, at most, for small_key_order's radix sort.
SMALL_KEYS = 1 << 16


def small_key_order(*keys: np.ndarray) -> np.ndarray | None:
    """The stable sort by `keys` (the last one primary, as in np.lexsort), when together
    they take at most SMALL_KEYS values (threads, lanes): a radix sort of one 16-bit code
    (numpy's kind="stable" sorts 16-bit integers by radix, in linear time). None when they
    take more. A caller whose data are already in order of a minor key (ranges by start)
    gets the full lexsort's permutation with that key left out."""
    if len(keys) == 1 and _fits_16_bits(keys[0]):
        # Already small numbers (family or group ids): sorted as they are, without the
        # code array and its lookups (three key-sized arrays at 20 M values).
        return np.argsort(keys[0].astype(np.uint16), kind="stable")
    code = np.zeros(len(keys[0]), dtype="int64")
    width = 1
    for key in keys:  # least significant first
        distinct = pd.unique(key)
        width_before, width = width, width * max(len(distinct), 1)
        if width > SMALL_KEYS:  # before sorting them: a million family ids took 1 s
            return None
        values = np.sort(distinct)  # the few distinct values, sorted
        code += np.searchsorted(values, key) * width_before
    return np.argsort(code.astype(np.uint16), kind="stable")


def _fits_16_bits(key: np.ndarray) -> bool:
    return (key.dtype.kind in "iu" and len(key) > 0 and int(key.min()) >= 0
            and int(key.max()) < SMALL_KEYS)


def grouped_median(groups: np.ndarray, values: np.ndarray, consume: bool = False
                   ) -> pd.Series:
    """`pd.Series(values).groupby(groups).median()`, bit for bit: per group present, in
    ascending order, the median as float64 (the mean of the two middle values for an even
    count). For integer values and groups that are non-negative integers (range or family
    ids), each (group, value) packed into one int64 and sorted in place: one array of the
    input's size, where pandas' grouped median took ~790 MB over its input at 20.6 M values
    (launch latencies at 10 M kernels, per range and per family). Otherwise, or when the
    two do not fit in 63 bits together, pandas. `consume`: `values` is the caller's own
    array, which may be overwritten: an int64 one then holds the packed keys (no second
    input-sized array; 165 MB at 10 M kernels)."""
    key = _packed_group_values(groups, values, consume)
    if key is None:
        return pd.Series(values).groupby(groups).median()
    packed, value_bits, low = key
    return _medians_of_packed(packed, np.bincount(groups), value_bits, low)


# Groups up to which few_groups_median finds each group's median on its own.
FEW_GROUPS = 64


def few_groups_median(groups: np.ndarray, values: np.ndarray) -> pd.Series:
    """`pd.Series(values).groupby(groups).median()`, bit for bit, for groups that are
    non-negative integers below FEW_GROUPS (a report's few range names): each group's
    values picked by a mask and its two middle values found by selection (np.partition,
    linear time), where a grouped sort orders every row (10 M instances: one 80 MB packed
    array and the sort's buffer, ~1 s a column). NaN is left out; a group with none but
    NaN has NaN. As pandas, each middle value is a float before their mean (a monotone
    conversion, so the same elements)."""
    present, medians = [], []
    for g in range(int(groups.max()) + 1 if len(groups) else 0):
        mask = groups == g
        if not mask.any():
            continue
        if values.dtype.kind == "f":
            mask &= ~np.isnan(values)  # one copy of the group's values, not two
        v = values[mask]
        del mask
        present.append(g)
        medians.append(middle_of(v))  # v is a copy of the group's values
    return pd.Series(np.array(medians, dtype="float64"), index=pd.Index(present, dtype="int64"))


def middle_of(values: np.ndarray) -> float:
    """The median of `values` (no NaN; NaN when empty) as pandas takes it: each middle
    value as a float, then their mean. By selection (np.partition, linear time), which
    reorders `values`: the caller's own copy."""
    if len(values) == 0:
        return np.nan
    below, above = (len(values) - 1) // 2, len(values) // 2  # one place for an odd count
    values.partition(sorted({below, above}))
    return (np.float64(values[below]) + np.float64(values[above])) / 2


def coded_by_steps(values: Callable[[], Iterator[np.ndarray]], n: int
                   ) -> tuple[np.ndarray, np.ndarray]:
    """(codes, sorted distinct values) of `n` integers that take a few values, given a step
    at a time (each call of `values` yields them anew, in order, in consecutive parts):
    the distinct ones hashed step by step, then each value's place among them, in the
    narrowest integer type (small_code_type). No array of the values' own width and size
    (a factorization of every value held three: 200 MB at 10 M operations)."""
    distinct = np.unique(np.concatenate([pd.unique(v) for v in values()]
                                        or [np.zeros(0, "int64")]))
    codes = np.empty(n, dtype=small_code_type(len(distinct)))
    at = 0
    for v in values():
        codes[at:at + len(v)] = np.searchsorted(distinct, v)
        at += len(v)
    return codes, distinct


def distinct_per_group(key: np.ndarray, width: int) -> pd.Series:
    """How many distinct values each group holds, from one integer per row, key = group *
    width + value (0 <= value < width): by group id, for the groups present. Where every
    (group, value) has a place in a table no longer than the rows (a few streams or
    processes per range: the usual case), the table marks those present, in linear time;
    otherwise `key` is sorted in place. Either way at most one array of the rows' size
    beside `key`, where pandas' grouped nunique (a factorization and a lexsort of the
    pairs) held five."""
    places = (int(key.max()) // width + 1) * width if len(key) else 0
    if places <= len(key):
        seen = np.zeros(places, dtype=bool)
        for part in steps(len(key)):
            seen[key[part]] = True
        return _present_per_group(seen, width)
    sort_in_place(key)
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key  # distinct pairs
    key //= width  # the group of each distinct (group, value), in order
    groups, bounds = _runs(key)
    return pd.Series(np.diff(bounds), index=groups)


def distinct_pairs_per_group(group: np.ndarray, values: np.ndarray, width: int) -> pd.Series:
    """distinct_per_group of group * width + value (0 <= value < width), without that
    array where its presence table is no longer than the rows: the table is marked from
    the two columns a step at a time (at 10 M range instances, 160 MB of keys and a
    factorization fewer on the summary's peak)."""
    places = (int(group.max()) + 1) * width if len(group) else 0
    if places > len(group):
        key = group.astype("int64")
        key *= width
        key += values
        return distinct_per_group(key, width)
    seen = np.zeros(places, dtype=bool)
    for part in steps(len(group)):
        key = group[part].astype("int64")
        key *= width
        key += values[part]
        seen[key] = True
    return _present_per_group(seen, width)


def _present_per_group(seen: np.ndarray, width: int) -> pd.Series:
    """How many places each group's row of the presence table marks, for the groups with
    any."""
    counts = np.count_nonzero(seen.reshape(-1, width), axis=1)
    groups = np.flatnonzero(counts)
    return pd.Series(counts[groups].astype("int64"), index=groups)


def _medians_of_packed(packed: np.ndarray, counts: np.ndarray, value_bits: int, low: int
                       ) -> pd.Series:
    """Per group with values (counts: values per group, by group id), the median of its
    slice of the sorted packed keys (group << value_bits | value - low)."""
    present = np.flatnonzero(counts)
    counts = counts[present]
    starts = np.cumsum(counts) - counts
    mask = (1 << value_bits) - 1
    below = (packed[starts + (counts - 1) // 2] & mask) + low
    above = (packed[starts + counts // 2] & mask) + low
    # As pandas: each middle value as a float (a monotone conversion, so the same
    # elements), then their mean.
    medians = (below.astype("float64") + above.astype("float64")) / 2
    return pd.Series(medians, index=present)


def _packed_group_values(groups: np.ndarray, values: np.ndarray, consume: bool = False
                         ) -> tuple[np.ndarray, int, int] | None:
    """(group << value_bits | value - low, sorted; value_bits; low), or None when the
    groups are not non-negative integers or the pair does not fit in 63 bits."""
    if (values.dtype.kind not in "iu" or groups.dtype.kind not in "iu" or len(groups) == 0
            or int(groups.min()) < 0):
        return None
    low, high = int(values.min()), int(values.max())
    value_bits = (high - low).bit_length()
    if int(groups.max()).bit_length() + value_bits > 63 or high >= 2**63:
        return None  # (unsigned values past int64: their median is read back as int64)
    if consume and values.dtype == np.int64 and values.flags.writeable:
        return (_packed_in_place(values, (groups[part] for part in steps(len(groups))),
                                 value_bits, low), value_bits, low)
    packed = groups.astype("int64")
    packed <<= value_bits
    for part in steps(len(packed)):  # no input-sized temporary beside it
        packed[part] |= (values[part] - low).astype("int64", copy=False)
    sort_in_place(packed)
    return packed, value_bits, low


def _packed_in_place(values: np.ndarray, group_parts: Iterator[np.ndarray], value_bits: int,
                     low: int) -> np.ndarray:
    """`values` (int64, the caller's own) overwritten with group << value_bits | value -
    low, the groups given in consecutive parts, and sorted. (value - low) fits value_bits,
    so no step overflows."""
    at = 0
    for g in group_parts:
        part = slice(at, at + len(g))
        values[part] -= low
        values[part] |= g.astype("int64") << value_bits
        at += len(g)
    sort_in_place(values)
    return values


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


def no_pairs(*flags: str) -> pd.DataFrame:
    """A frame of no (range, event) pairs: range_id and event, and the boolean `flags`."""
    return pd.DataFrame({"range_id": pd.Series(dtype="int64"), "event": pd.Series(dtype="int64"),
                         **{f: pd.Series(dtype=bool) for f in flags}})


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
        key_values, key_bounds = _runs(ev_key[order])
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


def ids_are_rows(ids: np.ndarray) -> bool:
    """Whether `ids` are 0, 1, ..., n-1 in order (then a lookup by id is the identity)."""
    n = len(ids)
    return (n > 0 and int(ids[0]) == 0 and int(ids[-1]) == n - 1
            and bool(np.all(ids[1:] > ids[:-1])))


def rows_of_runs(first: np.ndarray, counts: np.ndarray, dtype=np.int64) -> np.ndarray:
    """Every index of the runs [first[i], first[i] + counts[i]), run after run, as `dtype`
    (which must hold every index and the number of them). The place of each row is added a
    step at a time: no second array of the rows' size."""
    rows = np.repeat((first - (np.cumsum(counts) - counts)).astype(dtype), counts)
    for part in steps(len(rows)):
        rows[part] += np.arange(part.start, min(part.stop, len(rows)), dtype=dtype)
    return rows


def group_order(group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The stable sort of group numbers (a radix sort where there are few:
    small_key_order; else numpy's stable argsort), 32-bit where it fits, and where each
    group's run begins in it: run i is order[bounds[i]:bounds[i + 1]]."""
    order = small_key_order(group)
    if order is None:
        order = np.argsort(group, kind="stable")
    order = compact_ids(order)
    return order, _runs(group[order])[1]


def _runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of sorted keys and the bounds of their runs: values[i] fills
    [bounds[i], bounds[i + 1])."""
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if len(
        sorted_keys) else np.array([], "int64")
    return sorted_keys[starts], np.r_[starts, len(sorted_keys)]


def compact_ids(ids: np.ndarray) -> np.ndarray:
    """Ids or row numbers as int32 when all fit (half the memory of int64), else as they
    are. Only storage changes: ids index arrays and key groupings the same either way."""
    if len(ids) and ids.dtype.itemsize > 4 and int(ids.min()) >= 0 and int(ids.max()) < 2**31:
        return ids.astype(np.int32)
    return ids


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


