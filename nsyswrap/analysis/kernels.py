"""Per-kernel totals, the numbers of NVIDIA's `cuda_gpu_kern_sum` report."""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

from ..intervals import grouped_median, middle_of

KERNEL_SUMMARY_COLUMNS = [
    "name", "short_name", "count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns",
    "std_ns", "share",
]

def kernel_durations(kernels: pd.DataFrame) -> pd.DataFrame:
    """What kernel_summary needs of the report's kernels: name, short_name and duration.
    The names are the report's own columns (not copies); the durations one array, where
    the start and end columns are two (80 MB fewer at 10 M kernels while the summary is
    made beside the attribution)."""
    duration = kernels["end_ns"].to_numpy() - kernels["start_ns"].to_numpy()
    return pd.DataFrame({"name": kernels["name"], "short_name": kernels["short_name"],
                         "duration": pd.Series(duration, index=kernels.index, copy=False)},
                        copy=False)


def kernel_summary(kernels: pd.DataFrame) -> pd.DataFrame:
    """One row per kernel (demangled) name, heaviest first; `share` of all kernel time."""
    return durations_summary(kernel_durations(kernels))


# What each name's durations are summed up to (pandas' names), beside the median.
_STATISTICS = {"count": "size", "total_ns": "sum", "mean_ns": "mean", "min_ns": "min",
               "max_ns": "max", "std_ns": "std"}


def durations_summary(frame: pd.DataFrame, consume: bool = False) -> pd.DataFrame:
    """kernel_summary from kernel_durations' frame. `consume`: the frame is the caller's
    to give away, so its durations may be overwritten (by the medians' packed sort)."""
    if frame.empty:
        return pd.DataFrame(columns=KERNEL_SUMMARY_COLUMNS)
    g = frame.groupby("name", observed=True, sort=False)
    out = g["duration"].agg(**_STATISTICS)
    # Last: it may overwrite the durations.
    out["median_ns"] = _median_by_name(frame, out.index, consume)
    out["short_name"] = g["short_name"].first()
    return _summary(out)


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


def _median_by_name(frame: pd.DataFrame, names: pd.Index, consume: bool) -> np.ndarray:
    """The median duration of each of `names` (the groupby's, categorical), pandas' grouped
    median bit for bit (intervals.grouped_median): with the frame's durations to give away,
    sorted in place as (name code, duration) keys, where pandas' grouped median held ~230 MB
    over 10 M durations (beside the attribution, on the analysis's peak)."""
    name, duration = frame["name"], frame["duration"].to_numpy()
    if (consume and isinstance(name.dtype, pd.CategoricalDtype)
            and isinstance(names, pd.CategoricalIndex)
            and names.categories.equals(name.cat.categories)
            and (codes := name.cat.codes.to_numpy()).min() >= 0):
        # pandas hands its column out read-only (copy-on-write); the frame is the caller's
        # to give away, so its array may be overwritten, not copied (80 MB at 10 M).
        duration.flags.writeable = True
        medians = grouped_median(codes, duration, consume=True)
        return medians.reindex(names.codes).to_numpy(dtype="float64")
    return frame.groupby("name", observed=True, sort=False)["duration"].median().reindex(
        names).to_numpy(dtype="float64")

