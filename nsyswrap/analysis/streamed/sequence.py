"""Integers kept in their order, compressed: each kernel name's durations, which the kernel
table needs in export order (pandas' standard deviation sums in that order, so the exact
numbers need the sequence, not value counts).

A kernel's durations are close to one another (a loop runs the same kernels), so their
bytes, grouped by significance (the low bytes of every value, then the next ones...),
compress well with zlib at its fastest level: about half the bytes on the fixtures' real
kernels, far less on grown reports whose durations repeat. zlib is in Python's standard
library and releases the GIL while it works.
"""

from __future__ import annotations

import zlib

import numpy as np

# Values gathered before they are compressed as one block (larger blocks compress better;
# a block's values are held uncompressed until then, 256 KB as uint32).
BLOCK_VALUES = 1 << 16


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
        dtype = np.result_type(*parts)
        values = np.concatenate(parts).astype(dtype, copy=False)
        # Byte planes: the values' lowest bytes, then the next ones (transposed).
        planes = np.ascontiguousarray(values.view(np.uint8).reshape(-1, dtype.itemsize).T)
        self.blocks.append((dtype, len(values), zlib.compress(planes.tobytes(), 1)))

    def values(self) -> np.ndarray:
        """Every value in the order added, as int64; the sequence is emptied."""
        out = np.empty(self.count, dtype=np.int64)
        at = 0
        for dtype, n, data in self.blocks:
            planes = np.frombuffer(zlib.decompress(data), dtype=np.uint8)
            out[at:at + n] = planes.reshape(dtype.itemsize, n).T.copy().view(dtype).ravel()
            at += n
        for part in self.pending:
            out[at:at + len(part)] = part
            at += len(part)
        self.blocks, self.pending, self.pending_values, self.count = [], [], 0, 0
        return out

    @property
    def nbytes(self) -> int:
        return sum(len(b[2]) for b in self.blocks) + sum(p.nbytes for p in self.pending)
