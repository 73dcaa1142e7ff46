"""The range order (`ranges._RangeOrder.of`: the pairs by range and GPU start) against the
np.lexsort that gives the same order, on one report, in turn: wall time and the peak of numpy's
allocations (tracemalloc) of each.

    python scripts/bench_range_order.py REPORT.sqlite [--runs 3]

Loads the report and runs the attribution (process rule) once, then times each way
`--runs` times.
"""

from __future__ import annotations

import argparse
import time
import tracemalloc

import numpy as np

import nsyswrap.cli  # noqa: F401  (the CLI's start-up: allocator settings)
from nsyswrap.analysis.domains import library_mask
from nsyswrap.analysis.ranges import _RangeOrder, attribute
from nsyswrap.intervals import compact_ids
from nsyswrap.loader import load


def by_lexsort(att):
    """The same order by np.lexsort, and the pairs' ranges and rows in it."""
    rid = att.op_pairs["range_id"].to_numpy()
    order = compact_ids(np.lexsort((att.pair_values("start_ns"), rid)))
    return order, rid[order], att.op_pairs["event"].to_numpy()[order]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report")
    p.add_argument("--runs", type=int, default=3)
    a = p.parse_args()
    report = load(a.report)
    att = attribute(report, library_mask(report.ranges["domain"], report.ranges["name"]),
                    "process", True)
    print(f"{len(att.op_pairs)} pairs")
    for _ in range(a.runs):
        for name, make in (("lexsort", by_lexsort), ("packed", _RangeOrder.of)):
            tracemalloc.start()
            t = time.perf_counter()
            made = make(att)
            took = time.perf_counter() - t
            peak = tracemalloc.get_traced_memory()[1] / 2**20
            tracemalloc.stop()
            del made
            print(f"{name:8s} {took:.2f} s  peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
