"""Running numbers for the ranges open now: arrays with one slot per open range, reused
once a range closes (the engine's RangeTotals), so that they take the most
ranges open at once, not every range of the report."""

from __future__ import annotations

import numpy as np

# Slots made at first (they double as more ranges are open at once).
FIRST_SLOTS = 1024


class Slots:
    """Arrays of running numbers with one slot per open range: a slot is taken when the
    range opens and given back, reset to its starting values, when it closes. They grow
    (doubling) to the most ranges open at once."""

    def __init__(self, columns: dict) -> None:
        capacity = FIRST_SLOTS
        self.fills: dict = {}
        self.arrays: dict[object, np.ndarray] = {}
        self.capacity = capacity
        self.free = np.arange(capacity - 1, -1, -1, dtype=np.int64)  # a stack
        self.free_count = capacity
        for name, (dtype, fill) in columns.items():
            self.add(name, dtype, fill)

    def add(self, name, dtype: str, fill: float) -> None:
        self.fills[name] = (dtype, fill)
        self.arrays[name] = np.full(self.capacity, fill, dtype=dtype)

    def take(self, k: int) -> np.ndarray:
        if k > self.free_count:
            self._grow(max(2 * self.capacity, self.capacity + k - self.free_count))
        self.free_count -= k
        return self.free[self.free_count:self.free_count + k].copy()

    def give_back(self, slots: np.ndarray) -> None:
        for name, (_, fill) in self.fills.items():
            self.arrays[name][slots] = fill
        self.free[self.free_count:self.free_count + len(slots)] = slots
        self.free_count += len(slots)

    def _grow(self, capacity: int) -> None:
        old = self.capacity
        for name, (dtype, fill) in self.fills.items():
            grown = np.full(capacity, fill, dtype=dtype)
            grown[:old] = self.arrays[name]
            self.arrays[name] = grown
        free = np.empty(capacity, dtype=np.int64)
        free[:self.free_count] = self.free[:self.free_count]
        added = np.arange(capacity - 1, old - 1, -1, dtype=np.int64)
        free[self.free_count:self.free_count + len(added)] = added
        self.free, self.free_count, self.capacity = free, self.free_count + len(added), capacity
