"""numpy's two sorts, and nsyswrap's chunks.sort_in_place, on the key shapes the analysis sorts.

    python scripts/bench_sort.py [--rows 20000000] [--runs 3]

Prints, per shape, the best of RUNS for: the default sort (values.sort(), quicksort/introsort,
vectorized on CPUs numpy has kernels for), timsort (kind="stable"), and sort_in_place (the
trial of both on a slice, then the quicker, in parts on every core for timsort). The shapes:
- sorted: keys already in order (GPU starts of one stream);
- interleaved: two sorted halves dealt alternately (two threads' events in one order);
- packed groups: (group << 32 | value), groups ascending in runs of ~20 with small random
  values inside each (range id and launch latency, as the packed medians sort them);
- random: keys in no order.
Why it exists: which sort wins depends on the CPU (see sort_in_place's docstring and
docs/performance.md, "The analysis"); run it on a new machine before trusting either.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from nsyswrap.read.chunks import cores, sort_in_place  # noqa: E402


def shapes(n: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    ordered = np.cumsum(rng.integers(1, 1000, n, dtype=np.int64))
    interleaved = np.empty(n, dtype=np.int64)
    interleaved[0::2] = ordered[: (n + 1) // 2]
    interleaved[1::2] = ordered[(n + 1) // 2:][: n // 2] - ordered[n // 2] // 2
    groups = np.arange(n, dtype=np.int64) // 20
    packed = (groups << 32) | rng.integers(0, 50_000, n, dtype=np.int64)
    return {
        "sorted": ordered,
        "interleaved": interleaved,
        "packed groups": packed,
        "random": rng.integers(0, 1 << 62, n, dtype=np.int64),
    }


def best_of(runs: int, values: np.ndarray, sort) -> float:
    took = []
    for _ in range(runs):
        copy = values.copy()
        t = time.perf_counter()
        sort(copy)
        took.append(time.perf_counter() - t)
    return min(took)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=20_000_000)
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"{a.rows:,} int64 keys, best of {a.runs}, {cores()} cores, numpy {np.__version__}")
    print(f"{'shape':<14} {'default':>9} {'timsort':>9} {'sort_in_place':>14}")
    for name, values in shapes(a.rows, rng).items():
        default = best_of(a.runs, values, lambda v: v.sort())
        timsort = best_of(a.runs, values, lambda v: v.sort(kind="stable"))
        ours = best_of(a.runs, values, sort_in_place)
        expected = np.sort(values)
        check = values.copy()
        sort_in_place(check)
        assert np.array_equal(check, expected), name
        print(f"{name:<14} {default:>8.3f}s {timsort:>8.3f}s {ours:>13.3f}s")


if __name__ == "__main__":
    main()
