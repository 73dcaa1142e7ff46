"""Each NVTX range instance's columns, once: where each comes from, its type, what a range
that launched no GPU work has, what is unknown without a GPU trace, and what it is kept
relative to. The engine (engine/totals.py, engine/analyze.py) makes the columns by this
spec; the lost-tail rule (steps.unknown_tail) and the instance table read it too.

A column comes from
  "range"   the report's range as it is (or its wall time, cpu_ns);
  "gpu"     the GPU work the range owns (engine/totals.py: float64, NaN where unknown);
  "calls"   the blocking runtime calls inside it, nested ranges included;
  "copies"  the host <-> device copies inside it, nested ranges included.

Without a GPU trace (a report with no GPU activity: CUDA not traced, or its buffers lost)
nothing is known of a range's GPU work where none was seen, nor of its calls and copies,
which CUDA's trace records with the kernels: those values are NaN, not their `no_work`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class InstanceColumn:
    name: str
    made_from: str  # "range", "gpu", "calls", "copies" (module docstring)
    dtype: str  # as the engine makes it, before the instance table packs it
    # A range that launched nothing, in a report with a GPU trace: 0 for counts and times
    # that add up, NaN (no such thing) for moments, medians and device busy time.
    no_work: float | None = None
    # Kept as an offset from this column where narrower (InstanceTable.set).
    relative_to: str | None = None


_NONE = np.nan

COLUMNS = (
    InstanceColumn("range_id", "range", "int64"),
    InstanceColumn("domain", "range", "object"),
    InstanceColumn("name", "range", "object"),
    InstanceColumn("pid", "range", "int64"),
    InstanceColumn("tid", "range", "int64"),
    InstanceColumn("style", "range", "object"),
    InstanceColumn("start_ns", "range", "int64"),
    InstanceColumn("end_ns", "range", "int64", relative_to="start_ns"),
    InstanceColumn("cpu_ns", "range", "int64"),  # end_ns - start_ns: wall time
    # The union of the range's GPU operations (overlapping streams count once).
    InstanceColumn("gpu_ops", "gpu", "float64", 0.0),
    InstanceColumn("kernels", "gpu", "float64", 0.0),
    InstanceColumn("gpu_busy_ns", "gpu", "float64", 0.0),
    InstanceColumn("gpu_span_ns", "gpu", "float64", 0.0),  # first start to last end
    InstanceColumn("gpu_idle_ns", "gpu", "float64", 0.0),  # span - busy
    InstanceColumn("gpu_first_start_ns", "gpu", "float64", _NONE, "start_ns"),
    InstanceColumn("gpu_last_end_ns", "gpu", "float64", _NONE, "start_ns"),
    InstanceColumn("gaps", "gpu", "float64", 0.0),
    InstanceColumn("max_gap_ns", "gpu", "float64", 0.0),
    # The median of its kernels' (GPU start - launching call's start).
    InstanceColumn("launch_latency_ns", "gpu", "float64", _NONE),
    InstanceColumn("first_launch_ns", "gpu", "float64", _NONE, "start_ns"),
    InstanceColumn("streams", "gpu", "float64", 0.0),  # distinct (device, stream)
    # The device of its first operation busy with any work (any thread, stream, process)
    # within its GPU span, and within its wall time.
    InstanceColumn("gpu_device_busy_ns", "gpu", "float64", _NONE),
    InstanceColumn("gpu_device_busy_cpu_ns", "gpu", "float64", _NONE),
    # What other threads' work (the process rule) added to its busy time.
    InstanceColumn("gpu_busy_other_threads_ns", "gpu", "float64", 0.0),
    InstanceColumn("syncs", "calls", "int64", 0),
    InstanceColumn("sync_ns", "calls", "int64", 0),
    InstanceColumn("copies", "copies", "int64", 0),
    InstanceColumn("copy_bytes", "copies", "int64", 0),
    InstanceColumn("copy_ns", "copies", "int64", 0),
    InstanceColumn("pageable_copies", "copies", "int64", 0),
)

BY_NAME = {c.name: c for c in COLUMNS}
# Every instance column, in the order the instance table keeps them (the families'
# columns follow: steps.with_families).
INSTANCE_COLUMNS = [c.name for c in COLUMNS]
# The report's range columns as they are (cpu_ns is made from two of them).
REPORT_RANGE_COLUMNS = [c.name for c in COLUMNS if c.made_from == "range" and c.name != "cpu_ns"]
# What the range's GPU work makes: unknown (NaN) where the report lost it (steps.unknown_tail).
GPU_INSTANCE_COLUMNS = [c.name for c in COLUMNS if c.made_from == "gpu"]
# Syncs and host copies: runtime calls and copies, known only where the CUDA trace is.
HOST_WAIT_COLUMNS = [c.name for c in COLUMNS if c.made_from in ("calls", "copies")]
RELATIVE_TO = {c.name: c.relative_to for c in COLUMNS if c.relative_to}


def known_gpu_values(column: str, values: np.ndarray, seen: np.ndarray,
                     has_gpu_trace: bool) -> np.ndarray:
    """A GPU or host-wait column as the instances keep it: `values` by row (the engine's,
    `no_work` where a range saw no GPU work), made unknown where the report has no GPU
    trace (module docstring). `seen`: whether each range saw GPU work."""
    if has_gpu_trace:
        return values
    if BY_NAME[column].made_from in ("calls", "copies"):
        return np.full(len(values), np.nan)
    values = values.astype("float64", copy=False)
    values[~seen] = np.nan
    return values
