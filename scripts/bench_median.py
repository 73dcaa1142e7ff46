"""grouped.grouped_median against pandas' grouped median: time and memory over the input.

    python scripts/bench_median.py [--values 20600000] [--groups 1160000] [--pandas]

Groups (sorted random ids, int32 as the pairs hold them) and integer values (launch
latencies' scale) are drawn first; then one of the two runs in this process, and the peak
RSS it adds over the input is printed. Run it twice, with and without --pandas: each run
measures one, since a process's peak never comes down.
"""

from __future__ import annotations

import argparse
import resource
import time

import numpy as np
import pandas as pd

from nsyswrap.analysis.grouped import grouped_median


def peak_mib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--values", type=int, default=20_600_000)
    p.add_argument("--groups", type=int, default=1_160_000)
    p.add_argument("--pandas", action="store_true")
    a = p.parse_args()
    rng = np.random.default_rng(1)
    groups = np.sort(rng.integers(0, a.groups, a.values)).astype("int32")
    values = rng.integers(1_000, 5_000_000, a.values)
    base = peak_mib()
    t = time.perf_counter()
    if a.pandas:
        pd.Series(values).groupby(groups).median()
    else:
        grouped_median(groups, values)
    print(f"{'pandas' if a.pandas else 'grouped_median'}: {a.values:,} values, "
          f"{a.groups:,} groups: {time.perf_counter() - t:.2f} s, "
          f"{peak_mib() - base} MiB over the input")


if __name__ == "__main__":
    main()
