"""Array work split into chunks on threads. numpy's sorts, binary searches and ufunc loops
release the GIL while they run, so the chunks of one big array job share every core: what
issue 11 asks of a 16-core host (docs/performance.md)."""

from __future__ import annotations

import os
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")

# Rows per chunk, at least: below this a chunk's Python overhead outweighs its share of
# the cores (and a small report stays on one thread).
MIN_ROWS = 1 << 16
# Threads at most: a 128-core host gains nothing from 128 of them on one array.
MAX_THREADS = 32


def cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def even_bounds(n: int, min_rows: int = MIN_ROWS) -> list[tuple[int, int]]:
    """[lo, hi) bounds splitting n rows into about two chunks per core (so that one slow
    chunk does not hold the rest), each of at least min_rows."""
    parts = max(1, min(2 * cores(), n // min_rows))
    cuts = [n * i // parts for i in range(parts + 1)]
    return list(zip(cuts[:-1], cuts[1:], strict=True))


def map_chunks(fn: Callable[[int, int], T], bounds: list[tuple[int, int]]) -> list[T]:
    """fn(lo, hi) for each bound, in order; on threads when there is more than one."""
    if len(bounds) <= 1:
        return [fn(lo, hi) for lo, hi in bounds]
    with ThreadPoolExecutor(max_workers=min(cores(), MAX_THREADS, len(bounds))) as pool:
        return list(pool.map(lambda b: fn(*b), bounds))
