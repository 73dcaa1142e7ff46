"""How long each device was busy with any work before a moment, answered as a time-ordered
stream of operations passes that moment: the streamed form of ranges._device_busy_within.

A range's device busy time in a window [lo, hi) is B(hi) - B(lo), where B(t) is the length
of the union of the device's operations before t. B(t) is known once every operation that
starts before t has been seen, so with operations in start order it can be answered in the
chunk whose starts reach t, from that chunk's merged intervals and what came before them:
no interval of the whole report is kept (one per operation where they never overlap, 16 B
each: 176 MB at 10 M kernels).
"""

from __future__ import annotations

import numpy as np


class _ChunkCover:
    """One device's merged intervals over one chunk (the interval carried in from earlier
    chunks included): B(t) for moments t the chunk's starts reach."""

    def __init__(self, start: np.ndarray, end: np.ndarray, before: int) -> None:
        self.start, self.end = start, end
        lengths = end - start
        # Busy time before each interval (the chunk's earlier ones, and `before` them).
        self.before = before + np.cumsum(lengths) - lengths

    def busy_before(self, t: np.ndarray) -> np.ndarray:
        """B(t) for each moment of `t` (int64)."""
        k = np.searchsorted(self.start, t, side="right") - 1  # the last starting at or before
        at = np.maximum(k, 0)
        inside = np.clip(np.minimum(self.end[at], t) - self.start[at], 0, None)
        out = self.before[at] + inside
        out[k < 0] = self.before[0] if len(self.before) else 0
        return out


class DeviceBusy:
    """B_d(t) for each device d, a chunk of operations at a time (operations in start
    order; each chunk's starts in [its lower bound, its upper bound), bounds that ascend
    from chunk to chunk). Call `chunk_merged` with a chunk's operations' merged intervals
    per device, then `busy_before` for moments in the chunk's bounds, before the next."""

    def __init__(self) -> None:
        self.closed: dict[int, int] = {}  # per device: busy time before its open interval
        self.open: dict[int, tuple[int, int]] = {}  # its last merged interval so far
        self.covers: dict[int, _ChunkCover] = {}

    @property
    def devices(self) -> list[int]:
        """The devices that ran anything so far (B is 0 on others, before their first)."""
        return list(self.open)

    def chunk_merged(self, merged: dict[int, tuple[np.ndarray, np.ndarray]]) -> None:
        """Take a chunk's operations as each device's merged intervals (merge_intervals of
        its operations in the chunk; a device without any may be left out)."""
        self.covers = {}
        for d in sorted(set(self.open) | set(merged)):
            ms, me = merged.get(d, (np.zeros(0, "int64"), np.zeros(0, "int64")))
            if d in self.open:
                # The interval carried in started before every one of the chunk's: it
                # swallows those that start by its end (touching ones too, as
                # merge_intervals merges them).
                lo, hi = self.open[d]
                k = int(np.searchsorted(ms, hi, side="right"))
                if k:
                    hi = max(hi, int(me[k - 1]))
                ms, me = np.r_[lo, ms[k:]], np.r_[hi, me[k:]]
            before = self.closed.get(d, 0)
            self.covers[d] = _ChunkCover(ms, me, before)
            # The last merged interval stays open: a later operation may reach it.
            self.closed[d] = before + int((me[:-1] - ms[:-1]).sum())
            self.open[d] = (int(ms[-1]), int(me[-1]))

    def busy_before(self, device: int, t: np.ndarray) -> np.ndarray:
        """B_device(t) for moments the current chunk's starts reach (0 on a device that
        has run nothing yet)."""
        cover = self.covers.get(device)
        if cover is None:
            return np.zeros(len(t), "int64")
        return cover.busy_before(np.asarray(t, dtype="int64"))
