"""Per-kernel totals, the numbers of NVIDIA's `cuda_gpu_kern_sum` report."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from .grouped import middle_of

KERNEL_SUMMARY_COLUMNS = [
    "name", "short_name", "count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns",
    "std_ns", "share",
]


# What each name's durations are summed up to (pandas' names), beside the median.
_STATISTICS = {"count": "size", "total_ns": "sum", "mean_ns": "mean", "min_ns": "min",
               "max_ns": "max", "std_ns": "std"}


def summary_of_names(groups: Iterable[tuple[str, str, np.ndarray]]) -> pd.DataFrame:
    """kernel_summary from each name's durations on their own: (name, short name, its
    durations in export order, an int64 array the caller gives away) per name. The same
    numbers as durations_summary (pandas' statistics of one group do not depend on the
    others, and middle_of is its median), holding one name's durations at a time rather
    than a grouping of every kernel (10 M kernels: ~300 MB more at the streamed
    analysis's end)."""
    names, rows = [], []
    for name, short, durations in groups:
        one = pd.Series(durations).groupby(np.zeros(len(durations), np.int8)).agg(
            **_STATISTICS)
        row = {c: one[c].iloc[0] for c in one.columns}
        row["median_ns"] = middle_of(durations)
        row["short_name"] = short
        names.append(name)
        rows.append(row)
    if not rows:
        return pd.DataFrame(columns=KERNEL_SUMMARY_COLUMNS)
    out = pd.DataFrame(rows, index=pd.Index(names, name="name"))
    for c in ("count", "total_ns", "min_ns", "max_ns"):
        out[c] = out[c].astype("int64")
    return _summary(out)


def _summary(out: pd.DataFrame) -> pd.DataFrame:
    """The kernel table from its statistics per name (the index): shares, heaviest first."""
    out["std_ns"] = out["std_ns"].fillna(0.0)
    out["share"] = out["total_ns"] / out["total_ns"].sum()
    out = out.reset_index()
    out["name"] = out["name"].astype(str)
    out["short_name"] = out["short_name"].astype(str)
    return out.sort_values(["total_ns", "name"], ascending=[False, True], ignore_index=True)[
        KERNEL_SUMMARY_COLUMNS
    ]


