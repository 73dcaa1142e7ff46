"""Give freed memory back to the operating system between the big steps of `compare`.

glibc keeps freed heap memory for reuse; after the loader drops its intermediate tables a
million-kernel report leaves ~200 MB of such memory behind, which later steps then count
on top of (measured in docs/performance.md). malloc_trim returns it. Elsewhere a no-op."""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import gc


@functools.lru_cache(maxsize=1)
def _libc():
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return None
    return libc if libc is not None and hasattr(libc, "malloc_trim") else None


M_ARENA_MAX = -8  # mallopt parameter (malloc.h)


def limit_malloc_arenas(arenas: int = 2) -> None:
    """Cap glibc's per-thread heaps for this process. The loader's reader threads would each
    get one, and memory freed in them is not reused by the main thread (measured: 8 reader
    threads raise the peak by ~70 MB at 1M kernels, with no gain in speed from more heaps).
    For the CLI process only: a library must not change its host's allocator."""
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_ARENA_MAX, arenas)


# Below this many rows (operations, ranges) there is little to give back, and a full
# garbage collection costs ~70 ms of a small report's ~1.4 s.
SMALL_REPORT_ROWS = 200_000


def trim_heap(rows: int | None = None) -> None:
    """Give the heap's free pages back to the system: malloc_trim alone, without a
    garbage collection (a few ms), for the loader between its big joins. The reader
    threads' slices are arrays of a few MB, which glibc places on the heap; freed as the
    loader joins them, they would stay resident beside the joined columns (10 M kernels,
    16 cores: the load's peak 1388-1413 MiB with, 1685-1762 MiB without). `rows`: how
    big the data just freed was (operations, ranges); below SMALL_REPORT_ROWS the trim is
    skipped: malloc_trim walks the whole heap, 1-2 ms in a process that has grown large,
    ten times per small report (5% of analysing the test fixtures, for nothing)."""
    if rows is not None and rows < SMALL_REPORT_ROWS:
        return
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)


def release_freed_memory(rows: int | None = None) -> None:
    """A garbage collection, then trim_heap. `rows`: how big the data just dropped was;
    small reports skip the work."""
    if rows is not None and rows < SMALL_REPORT_ROWS:
        return
    gc.collect()
    trim_heap()
