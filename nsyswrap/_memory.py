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


M_MMAP_THRESHOLD = -3  # mallopt parameter (malloc.h)
# Blocks from this size get pages of their own (mmap) while a report is read, so they go
# back to the system when freed. The reader threads make many blocks of a few MB (a slice's
# columns), and glibc's threshold, which rises by itself to the size of the blocks freed,
# put them on the heap, where freed blocks stayed resident: 10 M kernels, 2 cores, the
# load's peak 1380-1413 MiB against 1182-1197 MiB with 1 MiB (docs/performance.md, stop 26).
READ_MMAP_THRESHOLD = 1 << 20
# And after the reads, for the analysis: glibc's own highest (DEFAULT_MMAP_THRESHOLD_MAX).
# Its passes go in steps of a million rows (8 MB arrays, made and freed over and over): a
# threshold under their size maps and faults in fresh pages each time (1 MiB: +4 s of CPU
# at 10 M kernels).
ANALYSIS_MMAP_THRESHOLD = 32 << 20
_tuned = False


def tune_allocator() -> None:
    """This process's allocator, tuned for `compare`: capped heaps (limit_malloc_arenas),
    and big blocks mapped while reports are read (reading, analysing). For the CLI
    process only: a library must not change its host's allocator."""
    global _tuned
    limit_malloc_arenas()
    _tuned = True
    reading()


def reading() -> None:
    """A report's reads begin (database.open_report); see READ_MMAP_THRESHOLD."""
    _mmap_threshold(READ_MMAP_THRESHOLD)


def analysing() -> None:
    """The reads are done (loader.load); see ANALYSIS_MMAP_THRESHOLD."""
    _mmap_threshold(ANALYSIS_MMAP_THRESHOLD)


def _mmap_threshold(size: int) -> None:
    libc = _libc()
    if _tuned and libc is not None and hasattr(libc, "mallopt"):
        libc.mallopt(M_MMAP_THRESHOLD, size)


# Below this many rows (operations, ranges) there is little to give back, and a full
# garbage collection costs ~70 ms of a small report's ~1.4 s.
SMALL_REPORT_ROWS = 200_000


def release_freed_memory(rows: int | None = None) -> None:
    """`rows`: how big the data just dropped was; small reports skip the work."""
    if rows is not None and rows < SMALL_REPORT_ROWS:
        return
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
