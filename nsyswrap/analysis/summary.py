"""The per-family range summary (range_summary: instances grouped by (domain, family), or
by (pid, domain, family)) and the per-process table (process_summary), from the instance
table and the engine's totals."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext

import numpy as np
import pandas as pd

from ..read.chunks import cores, steps
from ..read.report import Report
from .grouped import (
    FEW_GROUPS,
    distinct_pairs_per_group,
    few_groups_median,
    group_order,
    grouped_median,
)
from .instance_table import InstanceTable

# Instances from which range_summary aggregates its columns on two threads.
THREADED_INSTANCES = 100_000
SUMMARY_COLUMNS = [
    "domain", "name", "names", "count", "processes", "cpu_total_ns", "cpu_median_ns", "cpu_min_ns",
    "cpu_max_ns",
    "gpu_busy_total_ns", "gpu_busy_median_ns", "gpu_busy_min_ns", "gpu_busy_max_ns",
    "gpu_busy_other_threads_median_ns",
    "gpu_span_median_ns", "gpu_idle_share_median", "gpu_ops", "kernels",
    "launch_latency_median_ns", "syncs", "sync_ns", "copies", "copy_bytes", "pageable_copies",
]



def summary_groups(instances: pd.DataFrame, by_process: bool = False) -> np.ndarray:
    """Each instance's group in range_summary, numbered in order of first appearance as
    groupby(keys, sort=False) numbers its groups: by family id, or by (pid, family id).
    Grouped by integers: hashing text keys (and counting distinct names as text) of ten
    million instances cost seconds."""
    group = instances["family_id"].to_numpy(dtype="int64")
    if by_process:
        group = pd.factorize((instances["pid"].to_numpy(dtype="int64") << 32) | group)[0]
    return group



def range_summary(instances: InstanceTable, latency: Callable[[np.ndarray], pd.Series],
                  by_process: bool = False) -> pd.DataFrame:
    """Instances grouped by (domain, family), or by (pid, domain, family) when
    `by_process`, heaviest CPU total first; `name` is the family's (analysis/families.py:
    `step {n}` for `step 0`, `step 1`, ...), `names` how many distinct names it holds.
    `processes` counts the processes a group's instances ran in. Reads the `family` and
    `family_id` columns that steps.families gives the instances. `latency`: a function of each
    range id's group (summary_groups, by range id) that gives the median launch latency of
    every kernel of each group's ranges, by group (the engine pools them as ranges close:
    engine/open_values.PooledCounts)."""
    keys = ["pid", "domain", "family"] if by_process else ["domain", "family"]
    columns = (["pid"] if by_process else []) + SUMMARY_COLUMNS
    if instances.empty:
        return pd.DataFrame(columns=columns)
    group = summary_groups(instances, by_process)
    # Launch latency pooled over every kernel of every instance, not a median of medians
    # (pairs of ranges that are not among `instances` have no group).
    latency_by_group = latency(lookup_table(instances["range_id"].to_numpy(), group))
    # A column at a time, each decoded from the packed instances only while it is read:
    # a frame of the thirteen columns was 1 GB at 10 M ranges.
    grouped = _Grouped(group)
    # The columns gathered, then made one frame: a column set at a time cost ~5 ms of a
    # small report's analysis.
    cols = {"count": grouped.sizes()}
    index = pd.RangeIndex(len(cols["count"]))

    def aggregated(column: str, aggregates: tuple) -> dict[str, np.ndarray]:
        values = instances.values(column)
        got = {name: grouped.aggregate(values, how) for name, how in aggregates}
        if column == "gpu_busy_ns":
            # Sums of unknowns are unknown (no CUDA trace), not zero.
            got["unknown"] = grouped.known(values) == 0
        return got

    # Two columns at a time (numpy's passes run without the GIL): each holds two arrays of
    # the instances' size while it is aggregated. A few instances: in this thread.
    workers = max(1, min(cores(), 2)) if len(group) >= THREADED_INSTANCES else 1
    with ThreadPoolExecutor(max_workers=workers) if workers > 1 else nullcontext() as pool:
        mapped = pool.map if pool is not None else map
        for got in mapped(lambda spec: aggregated(*spec), _SUMMED):
            for name, values in got.items():
                if name == "unknown":
                    unknown = values
                else:
                    cols[name] = values
    # Medians a column at a time, by packed sort where the values are whole numbers (times
    # are): pandas' grouped median of five columns held ~300 MB over the instances and
    # took 2 s at 10 M ranges, on that report's peak.
    for name, column in (("cpu_median_ns", "cpu_ns"), ("gpu_busy_median_ns", "gpu_busy_ns"),
                         ("gpu_busy_other_threads_median_ns", "gpu_busy_other_threads_ns"),
                         ("gpu_span_median_ns", "gpu_span_ns")):
        cols[name] = _whole_median(group, instances.values(column)).reindex(index)
    # Not kept among the instance columns: freed once its median is taken. One array
    # (NaN written where the span is not positive), not the quotient and its masked copy.
    span = instances.values("gpu_span_ns")
    with np.errstate(divide="ignore", invalid="ignore"):
        share = instances.values("gpu_idle_ns") / span
    share[~(span > 0)] = np.nan
    del span
    cols["gpu_idle_share_median"] = _whole_median(group, share).reindex(index)
    del share
    cols["launch_latency_median_ns"] = latency_by_group.reindex(index)
    cols["names"] = _distinct_by_group(group, _name_codes(instances["name"])).reindex(index)
    cols["processes"] = _distinct_by_group(group, instances.values("pid")).reindex(index)
    out = pd.DataFrame(cols, index=index)
    del cols
    out.loc[unknown, ["gpu_busy_total_ns", "gpu_ops", "kernels", "syncs", "sync_ns", "copies",
                      "copy_bytes", "pageable_copies"]] = np.nan
    # Each group's keys, from its first instance.
    rows = _first_rows(group)[out.index.to_numpy()]
    for key in reversed(keys):
        # Only the rows taken: a whole text column as an array is ten million Python strings.
        values = np.asarray(instances.values(key, rows))
        out.insert(0, "name" if key == "family" else key, values)
    out = out.reset_index(drop=True)
    return out.sort_values("cpu_total_ns", ascending=False, kind="stable", ignore_index=True)[
        columns
    ]



# range_summary's sums, minima and maxima: (instance column, ((summary column, how), ...)).
_SUMMED = (
    ("cpu_ns", (("cpu_total_ns", "sum"), ("cpu_min_ns", "min"), ("cpu_max_ns", "max"))),
    ("gpu_busy_ns", (("gpu_busy_total_ns", "sum"), ("gpu_busy_min_ns", "min"),
                     ("gpu_busy_max_ns", "max"))),
    ("gpu_ops", (("gpu_ops", "sum"),)), ("kernels", (("kernels", "sum"),)),
    ("syncs", (("syncs", "sum"),)), ("sync_ns", (("sync_ns", "sum"),)),
    ("copies", (("copies", "sum"),)), ("copy_bytes", (("copy_bytes", "sum"),)),
    ("pageable_copies", (("pageable_copies", "sum"),)),
)



class _Grouped:
    """Grouped sums, minima and maxima of columns by one grouping (group numbers 0..k-1,
    each present, numbered in order of first appearance as summary_groups numbers them), as
    pandas' `groupby(group, sort=False)` gives them
    (NaN left out; a group's sum of nothing is 0, its minimum NaN), from one stable sort
    of the groups shared by every column: a groupby per column hashed the ten million
    groups each time."""

    def __init__(self, group: np.ndarray):
        self.group = group
        self.order, self.bounds = group_order(group)
        self.heads = self.bounds[:-1]

    def sizes(self) -> np.ndarray:
        return np.diff(self.bounds)

    def known(self, values: np.ndarray) -> np.ndarray:
        """Values other than NaN, per group."""
        if values.dtype.kind != "f":
            return self.sizes()
        return np.add.reduceat((~np.isnan(values[self.order])).astype("int64"), self.heads)

    def aggregate(self, values: np.ndarray, how: str) -> np.ndarray:
        """`how` ("sum", "min" or "max") of `values` per group."""
        ordered = values[self.order]
        floats = values.dtype.kind == "f"
        if how == "sum":
            if floats:
                ordered = np.nan_to_num(ordered, nan=0.0, copy=False)
                # pandas adds floats with a compensated sum: the same exactly when every
                # partial sum is a whole number below 2**53 (nanoseconds, counts).
                if not (np.abs(ordered).sum() < EXACT_FLOAT_SUM
                        and np.array_equal(ordered, np.trunc(ordered))):
                    return pd.Series(values).groupby(self.group, sort=False).sum().to_numpy()
            return np.add.reduceat(ordered, self.heads)
        if floats:  # NaN left out, NaN where a group has nothing else
            return (np.fmin if how == "min" else np.fmax).reduceat(ordered, self.heads)
        return (np.minimum if how == "min" else np.maximum).reduceat(ordered, self.heads)



def _whole_median(group: np.ndarray, values: np.ndarray) -> pd.Series:
    """`pd.Series(values).groupby(group).median()` (NaN left out; groups with no value
    absent) for non-negative integer groups and integer or float values: floats that are
    whole numbers below 2**53 (nanoseconds) are medians of the same integers, in one packed
    array sorted in place (grouped_median); other floats by pandas. A few groups (the
    usual few range names) each by selection (few_groups_median), any values."""
    if len(group) and int(group.max()) < FEW_GROUPS and int(group.min()) >= 0:
        return few_groups_median(group, values).dropna()
    if values.dtype.kind == "f":
        known = ~np.isnan(values)
        whole = values[known]
        if not (np.all(np.abs(whole) < EXACT_FLOAT_SUM) and np.all(whole == np.trunc(whole))):
            return pd.Series(values).groupby(group).median().dropna()
        return grouped_median(group[known], whole.astype("int64"), consume=True)
    return grouped_median(group, values)



def _distinct_by_group(group: np.ndarray, values: np.ndarray) -> pd.Series:
    """`pd.Series(values).groupby(group).nunique()` for non-negative integer groups and
    values (name codes, pids): distinct_pairs_per_group, where pandas' nunique held five
    arrays of the instances' size, the peak of a 10 M-range report's summary."""
    width = int(values.max()) + 1
    if int(values.min()) < 0 or (int(group.max()) + 1) * width >= 2**63:
        return pd.Series(values).groupby(group).nunique()
    return distinct_pairs_per_group(group, values, width)



def _first_rows(group: np.ndarray) -> np.ndarray:
    """Each group's first row, by group id (non-negative integers; -1 for ids absent): a
    step of rows at a time, where pandas' grouped min of every row's number (an array of
    them and the groupby's own) set the 10 M-range summary's peak."""
    first = np.full(int(group.max()) + 1 if len(group) else 0, -1, dtype="int64")
    for part in reversed(steps(len(group))):  # later steps first: earlier rows overwrite
        ids, at = np.unique(group[part], return_index=True)
        first[ids] = at + part.start
    return first



def _name_codes(names: pd.Series) -> np.ndarray:
    """A number per distinct name (-1 for none): a categorical's own codes (a byte or two a
    row, where a factorization made 8), else pd.factorize's."""
    if isinstance(names.dtype, pd.CategoricalDtype):
        return names.cat.codes.to_numpy()
    return pd.factorize(names)[0]



def lookup_table(keys: np.ndarray, values: np.ndarray) -> np.ndarray:
    """values by key as an array indexed by key (keys are small non-negative integers, such
    as range ids), -1 for absent keys and for one slot past the largest (`take` with
    mode="clip" sends keys beyond it there): a gather instead of a hash lookup per pair."""
    top = int(keys.max()) + 2 if len(keys) else 1
    # 32-bit where the values fit: what it gives is gathered per pair (80 MB fewer at 20 M).
    small = len(values) == 0 or int(values.max()) < 2**31
    table = np.full(top, -1, dtype="int32" if small else "int64")
    table[keys] = values
    return table



# Integers up to which float64 sums are exact (np.bincount's weights are floats).
EXACT_FLOAT_SUM = 2**53



def work_per_thread(thread: np.ndarray, threads: pd.Index, kernel: np.ndarray,
                    start: np.ndarray, end: np.ndarray, device: np.ndarray) -> pd.DataFrame:
    """Per launching thread (-1: launch unknown): gpu_ops, kernels, kernel_ns and the set of
    devices it ran on, from each operation's thread (`thread`: its place in `threads`,
    the sorted ids), whether it is a kernel, its times and device. Threads and devices are
    few: numbered once, then everything is counts over the numbers, a step of operations
    at a time (whole-table codes, durations and keys were ~400 MB of temporaries at 10 M
    kernels, the analysis' peak)."""
    devices = pd.Index(pd.unique(device))
    n, width = len(threads), max(len(devices), 1)
    gpu_ops = np.zeros(n, dtype="int64")
    kernels = np.zeros(n, dtype="int64")
    kernel_ns = np.zeros(n, dtype="int64")
    thread_devices = []
    for part in steps(len(thread)):
        codes = thread[part].astype("int64")
        gpu_ops += np.bincount(codes, minlength=n)
        is_kernel = kernel[part]
        kernel_codes = codes[is_kernel]
        kernels += np.bincount(kernel_codes, minlength=n)
        duration = end[part][is_kernel] - start[part][is_kernel]
        if duration.sum() < EXACT_FLOAT_SUM:  # exact: every partial sum is an integer
            kernel_ns += np.bincount(kernel_codes, weights=duration,
                                     minlength=n).astype("int64")
        else:
            kernel_ns += pd.Series(duration).groupby(kernel_codes).sum().reindex(
                range(n), fill_value=0).to_numpy(dtype="int64")
        thread_devices.append(pd.unique(codes * width + devices.get_indexer(device[part])))
    device_sets: list[set[int]] = [set() for _ in range(n)]
    pairs = pd.unique(np.concatenate(thread_devices or [np.array([], "int64")]))
    thread_of, device_of = np.divmod(pairs, width)
    for t, d in zip(thread_of.tolist(), devices[device_of].tolist(), strict=True):
        device_sets[t].add(d)
    return pd.DataFrame({
        "gpu_ops": gpu_ops, "kernels": kernels, "kernel_ns": kernel_ns,
        "devices": device_sets,
    }, index=pd.Index(threads, dtype="int64"))



PROCESS_COLUMNS = ["pid", "name", "devices", "kernels", "kernel_ns", "gpu_ops", "nvtx_ranges"]



def process_summary(report: Report, per_thread: pd.DataFrame) -> pd.DataFrame:
    """One row per process that launched GPU work or opened NVTX ranges: what it ran, on
    which devices. Worker processes and torchrun ranks show up here. `per_thread`: the
    operations' work per launching thread (work_per_thread's frame)."""
    thread = per_thread.index.to_numpy()
    # The launching thread's process (-1: launch not in the report).
    pid = np.where(thread >= 0, (thread >> 24) & 0xFFFFFF, -1)
    g = per_thread[pid > 0].groupby(pid[pid > 0])
    out = pd.DataFrame({
        "devices": g["devices"].agg(lambda d: sorted(set().union(*d))),
        "kernels": g["kernels"].sum(),
        "kernel_ns": g["kernel_ns"].sum(),
        "gpu_ops": g["gpu_ops"].sum(),
    })
    pids = report.ranges["pid"]
    ranges = pids.groupby(pids).size()
    out = out.reindex(out.index.union(ranges.index))
    out["nvtx_ranges"] = ranges.reindex(out.index).fillna(0).astype("int64")
    for col in ("kernels", "kernel_ns", "gpu_ops"):
        out[col] = out[col].fillna(0).astype("int64")
    out["devices"] = out["devices"].apply(lambda d: d if isinstance(d, list) else [])
    out["name"] = [report.info.processes.get(int(p), "") for p in out.index]
    return out.rename_axis("pid").reset_index()[PROCESS_COLUMNS]
