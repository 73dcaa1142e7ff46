"""Grouped sorts and statistics of per-row values, vectorised: stable orders of few-valued
keys (a radix sort), medians (of one array: median; per group: grouped_median,
few_groups_median; each as pandas takes it, through middle_of), distinct counts per group,
and the runs of a sorted key."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

from ..read.chunks import (
    compact_ids,
    small_code_type,
    sort_in_place,
    steps,
)

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


def median(values: np.ndarray) -> float:
    """`pd.Series(values).median()`: NaN left out, NaN when nothing is left, the mean of the
    two middle values for an even count. `values` is left as it is."""
    if values.dtype.kind == "f":
        values = values[~np.isnan(values)]  # a copy
    else:
        values = values.copy()
    return middle_of(values)


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
    groups, bounds = key_runs(key)
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
    return order, key_runs(group[order])[1]


def key_runs(sorted_keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct values of sorted keys and the bounds of their runs: values[i] fills
    [bounds[i], bounds[i + 1])."""
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]]) if len(
        sorted_keys) else np.array([], "int64")
    return sorted_keys[starts], np.r_[starts, len(sorted_keys)]
