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


def release_freed_memory() -> None:
    gc.collect()
    libc = _libc()
    if libc is not None:
        libc.malloc_trim(0)
