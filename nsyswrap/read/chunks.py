"""Array work split into chunks on threads. numpy's sorts, binary searches and ufunc loops
release the GIL while they run, so the chunks of one big array job share every core
(docs/performance.md, "The analysis")."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from itertools import groupby
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import numpy as np

T = TypeVar("T")

# Rows per chunk, at least: below this a chunk's Python overhead, and sixteen threads
# taking turns at the GIL between numpy calls, outweigh its share of the cores. Measured on
# the 16-core host at 1 M kernels: 64 k rows made `compare` 4-8% slower than one thread,
# 256 k rows 6% faster (docs/performance.md).
MIN_ROWS = 1 << 18
# Threads at most: a 128-core host gains nothing from 128 of them on one array.
MAX_THREADS = 32


# Rows per step of a pass that writes into one big array: the step's temporaries (a
# gather, a difference) stay at this size instead of the array's.
STEP_ROWS = 1 << 20


def steps(n: int) -> list[slice]:
    """Consecutive slices of STEP_ROWS rows covering n rows (for one thread: the point is
    memory, not cores)."""
    return [slice(lo, lo + STEP_ROWS) for lo in range(0, n, STEP_ROWS)]


# Elements from which sort_in_place spreads one sort over the cores: below this, a part's
# sort is too short to pay for the threads and the final merge.
PARALLEL_SORT_ROWS = 1 << 21
# Elements of the slice on which sort_in_place times numpy's two sorts (~1-5 ms), and the
# least array it does this for (below, the default sort: the choice saves little there).
SORT_TRIAL_ROWS = 1 << 16
SORT_TRIAL_FROM = 1 << 18


def small_code_type(n: int) -> type:
    """The narrowest signed integer type for codes 0 .. n - 1."""
    import numpy as np

    return np.int8 if n <= 2**7 else np.int16 if n <= 2**15 else np.int32


def ascending(values: np.ndarray) -> bool:
    """Whether `values` never decrease, a step at a time (each step one row into the next):
    no array-sized temporaries."""
    for part in steps(max(len(values) - 1, 0)):
        v = values[part.start:part.stop + 1]
        if not (v[1:] >= v[:-1]).all():
            return False
    return True


def sort_in_place(values: np.ndarray) -> None:
    """values.sort() for integers, by whichever of numpy's two sorts is quicker on them on
    this machine: the analysis sorts keys that mostly follow time (pairs in event order,
    each range's GPU work after the last's), where timsort (kind="stable") finds the runs
    already in order, but the default sort is vectorized where numpy finds AVX2 or AVX-512
    and then several times quicker than timsort on keys in no order. Which wins depends on
    the CPU (20 M int64, scripts/bench_sort.py):
    where numpy used no vectorized sort, the default sort took 1.3-1.5 s on any keys and
    timsort 0.15 s on packed latencies; on an AVX2 Zen 3 and the 16-core Intel host the
    default sort takes 0.23-0.39 s on any keys, timsort 0.01-0.03 s on sorted keys, about
    as long on packed groups, and 2.1-3.5 s on random ones. So both are timed on a slice
    from the middle of the array, and the quicker one sorts it. Timsort goes over
    consecutive parts on threads of their own (numpy's sorts release the GIL), and one
    more timsort merges their runs. The result is the same array
    either way: integers that compare equal are the same value."""
    if values.dtype.kind not in "iu" or len(values) < SORT_TRIAL_FROM or not _timsort_quicker(
            values):
        values.sort()
        return
    parts = min(cores(), MAX_THREADS, len(values) // PARALLEL_SORT_ROWS)
    if parts > 1:
        n = len(values)
        cuts = [n * i // parts for i in range(parts + 1)]
        map_chunks(lambda lo, hi: values[lo:hi].sort(kind="stable"),
                   list(zip(cuts[:-1], cuts[1:], strict=True)))
    values.sort(kind="stable")


def _timsort_quicker(values: np.ndarray) -> bool:
    """Whether timsort beats the default sort on a slice from the middle of `values`."""
    mid = len(values) // 2
    trial = values[mid - SORT_TRIAL_ROWS // 2:mid + SORT_TRIAL_ROWS // 2]
    took = {}
    for kind in ("stable", "quicksort"):
        copy = trial.copy()
        t = time.perf_counter()
        copy.sort(kind=kind)
        took[kind] = time.perf_counter() - t
    return took["stable"] < took["quicksort"]


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def even_bounds(n: int, min_rows: int = MIN_ROWS, *,
                max_rows: int | None = None) -> list[tuple[int, int]]:
    """[lo, hi) bounds splitting n rows into about two chunks per core (so that one slow
    chunk does not hold the rest), each of at least min_rows; and, with max_rows, into
    more chunks where needed for none to exceed it (each chunk's temporaries bounded)."""
    parts = max(1, min(2 * cores(), n // min_rows))
    if max_rows is not None:
        parts = max(parts, -(-n // max_rows))
    cuts = [n * i // parts for i in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def map_chunks(fn: Callable[[int, int], T], bounds: list[tuple[int, int]],
               weights: np.ndarray | None = None) -> list[T]:
    """fn(lo, hi) for each bound, in order; on threads when there is enough work. Bounds
    of unequal work (`weights`, per bound: such as rows) go to the threads in runs of
    consecutive bounds of about equal weight, at least MIN_ROWS each: a thread per tiny
    task costs more in Python than it saves."""
    import numpy as np  # here: database.py reads `cores` before numpy is needed

    if weights is None:
        runs = [[b] for b in bounds]
    else:
        total = int(np.sum(weights))
        share = max(MIN_ROWS, -(-total // (2 * cores())))
        # Cut before a bound where the running weight crosses a multiple of the share.
        before = np.cumsum(weights) - weights
        group = (before // share).tolist()
        runs = [[b for b, _ in run] for _, run in
                groupby(zip(bounds, group, strict=True), key=lambda bg: bg[1])]
    if len(runs) <= 1:
        return [fn(lo, hi) for lo, hi in bounds]
    with ThreadPoolExecutor(max_workers=min(cores(), MAX_THREADS, len(runs))) as pool:
        done = pool.map(lambda run: [fn(lo, hi) for lo, hi in run], runs)
        return [out for run in done for out in run]


def ids_are_rows(ids: np.ndarray) -> bool:
    """Whether `ids` are 0, 1, ..., n-1 in order (then a lookup by id is the identity)."""
    import numpy as np

    n = len(ids)
    return (n > 0 and int(ids[0]) == 0 and int(ids[-1]) == n - 1
            and bool(np.all(ids[1:] > ids[:-1])))


def compact_ids(ids: np.ndarray) -> np.ndarray:
    """Ids or row numbers as int32 when all fit (half the memory of int64), else as they
    are. Only storage changes: ids index arrays and key groupings the same either way."""
    import numpy as np

    if len(ids) and ids.dtype.itemsize > 4 and int(ids.min()) >= 0 and int(ids.max()) < 2**31:
        return ids.astype(np.int32)
    return ids
