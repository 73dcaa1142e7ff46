"""Integer arrays kept compressed until they are read, for the streamed analysis: each
kernel name's durations, which the kernel table needs in export order (pandas' standard
deviation sums in that order, so the exact numbers need the sequence, not value counts),
the closed ranges' packed instance columns, the host copies and the blocking calls while
the stream goes on.

Such integers are close to one another (a loop runs the same kernels; a range's counts are
small), so their bytes, grouped by significance (the low bytes of every value, then the
next ones...), compress well with zlib at its fastest level: about half the bytes for the
fixtures' real kernel durations, far less on grown reports, whose durations repeat. zlib is
in Python's standard library and releases the GIL while it works.
"""

from __future__ import annotations

import zlib

import numpy as np

# Values gathered before they are compressed as one block (larger blocks compress better;
# a block's values are held uncompressed until then, 256 KB as uint32).
BLOCK_VALUES = 1 << 16


def compressed(values: np.ndarray) -> tuple[np.dtype, int, bytes]:
    """An integer array as (dtype, length, its byte planes compressed)."""
    dtype = values.dtype
    # Byte planes: the values' lowest bytes, then the next ones (transposed).
    planes = np.ascontiguousarray(values.view(np.uint8).reshape(-1, dtype.itemsize).T)
    return dtype, len(values), zlib.compress(planes.tobytes(), 1)


def decompressed(kept: tuple[np.dtype, int, bytes]) -> np.ndarray:
    """The array `compressed` gave."""
    dtype, n, data = kept
    planes = np.frombuffer(zlib.decompress(data), dtype=np.uint8)
    return planes.reshape(dtype.itemsize, n).T.copy().view(dtype).ravel()


class CompressedSequence:
    """Integer arrays appended in order; `values()` gives them back, joined, as int64."""

    def __init__(self) -> None:
        self.blocks: list[tuple[np.dtype, int, bytes]] = []
        self.pending: list[np.ndarray] = []
        self.pending_values = 0
        self.count = 0

    def add(self, values: np.ndarray) -> None:
        self.pending.append(values)
        self.pending_values += len(values)
        self.count += len(values)
        if self.pending_values >= BLOCK_VALUES:
            self._compress()

    def _compress(self) -> None:
        parts, self.pending, self.pending_values = self.pending, [], 0
        self.blocks.append(compressed(np.concatenate(parts).astype(np.result_type(*parts),
                                                                   copy=False)))

    def values(self) -> np.ndarray:
        """Every value in the order added, as int64; the sequence is emptied."""
        out = np.empty(self.count, dtype=np.int64)
        at = 0
        for block in self.blocks:
            n = block[1]
            out[at:at + n] = decompressed(block)
            at += n
        for part in self.pending:
            out[at:at + len(part)] = part
            at += len(part)
        self.blocks, self.pending, self.pending_values, self.count = [], [], 0, 0
        return out

    @property
    def nbytes(self) -> int:
        return sum(len(b[2]) for b in self.blocks) + sum(p.nbytes for p in self.pending)
