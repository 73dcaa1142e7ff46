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


# Durations summed up by one grouping: names are batched until they hold this many, so that
# a report of many small names pays pandas' per-call cost once a batch, not once a name (a
# grouping per name was 7% of a small report's analysis), while memory stays one batch.
BATCH_DURATIONS = 1 << 20


def summary_of_names(groups: Iterable[tuple[str, str, np.ndarray]]) -> pd.DataFrame:
    """kernel_summary from each name's durations on their own: (name, short name, its
    durations in export order, an int64 array the caller gives away) per name. The same
    numbers as durations_summary (pandas' statistics of one group do not depend on the
    others, and middle_of is its median), holding a batch of names' durations at a time
    rather than a grouping of every kernel (10 M kernels: ~300 MB more at the streamed
    analysis's end)."""
    names, shorts, medians, parts = [], [], [], []
    batch: list[np.ndarray] = []
    held = 0

    def summed() -> None:
        codes = np.repeat(np.arange(len(batch), dtype=np.int32), [len(d) for d in batch])
        values = batch[0] if len(batch) == 1 else np.concatenate(batch)
        parts.append(pd.Series(values).groupby(codes).agg(**_STATISTICS))
        del values
        # Once summed up, in export order: middle_of reorders the durations.
        medians.extend(middle_of(d) for d in batch)
        batch.clear()

    for name, short, durations in groups:
        names.append(name)
        shorts.append(short)
        batch.append(durations)
        held += len(durations)
        if held >= BATCH_DURATIONS:
            summed()
            held = 0
    if batch:
        summed()
    if not names:
        return pd.DataFrame(columns=KERNEL_SUMMARY_COLUMNS)
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else parts[0]
    out.index = pd.Index(names, name="name")
    out["median_ns"] = medians
    out["short_name"] = shorts
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


