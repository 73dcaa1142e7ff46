"""The plain data object the loader produces and every later layer reads.

Frames hold integer nanoseconds on the report's session clock. Column names carry units.
Ids that cross tables are normalised here so that no later layer needs to know the schema:
``pid`` is the OS process id, ``tid`` the OS thread id, ``thread`` a key unique per
(process, thread) across the report.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .redact import redact_args


@dataclass(frozen=True)
class GpuInfo:
    device_id: int
    name: str
    sm_count: int | None = None
    l2_bytes: int | None = None
    compute_capability: str | None = None
    max_clock_mhz: float | None = None


@dataclass
class ReportInfo:
    """What the report is: where it came from, which nsys wrote it, what was traced."""

    path: Path  # the SQLite file actually read
    source: Path  # what the user named (a .nsys-rep is exported to `path`)
    nsys_version: str | None
    schema_version: str | None
    start_ns: int | None
    end_ns: int | None
    gpus: list[GpuInfo] = field(default_factory=list)
    processes: dict[int, str] = field(default_factory=dict)  # pid -> name, for traced ones
    threads: dict[int, str] = field(default_factory=dict)  # thread key -> name (ThreadNames)
    has_cuda: bool = False
    # CUDA launches were traced but no GPU activity reached the report (a process killed
    # before its CUDA buffers were written): GPU times are unknown, not zero.
    gpu_trace_lost: bool = False
    # GPU operations but no runtime call that launched them (the runtime table empty or
    # missing): which range launched what is unknown, not nothing.
    launches_missing: bool = False
    last_cuda_call_ns: int | None = None  # the last launching or blocking CUDA call
    has_nvtx: bool = False
    has_osrt: bool = False
    has_gpu_metrics: bool = False
    notes: list[str] = field(default_factory=list)  # what was missing or skipped while loading
    # The note on names that were not UTF-8, shown with U+FFFD (in `notes` too): the views of
    # many reports repeat it for the report it concerns (multi/ranks.py).
    text_note: str | None = None
    alerts: list[str] = field(default_factory=list)  # notes that change what the numbers mean
    # For comparing reports (nsyswrap/multi): the capture's UTC start (session times are
    # relative to it), the driver, and the rank variables of the environment nsys recorded
    # (RANK, LOCAL_RANK, WORLD_SIZE, SLURM_PROCID, ...).
    session_start_utc_ns: int | None = None
    driver_version: str | None = None
    rank_env: dict[str, str] = field(default_factory=dict)
    # The profiled command line, where the report keeps it (or `nsyswrap run` ran it), its
    # credentials redacted: set it through `show_command`.
    command: list[str] | None = None

    def show_command(self, args: list[str]) -> None:
        """`args` as the profiled command line, with what looks like a credential redacted
        (redact.py) and a note saying so: nothing that shows the command shows a secret."""
        redacted = redact_args(args)
        self.command = redacted.args
        note = redacted.note("the profiled command line")
        if note and note not in self.notes:
            self.notes.append(note)

    def alert(self, text: str) -> None:
        """A note that every output shows prominently (and in `notes`, for JSON)."""
        self.alerts.append(text)
        self.notes.append(text)

    @property
    def has_gpu_activity(self) -> bool:
        """GPU times of ranges are measurements: CUDA was traced, its GPU records are there,
        and so are the calls that launched them."""
        return self.has_cuda and not self.gpu_trace_lost and not self.launches_missing

    @property
    def duration_ns(self) -> int | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return self.end_ns - self.start_ns


# Column layouts, for empty frames and documentation. Every frame below has exactly these.
KERNEL_COLUMNS = [
    "start_ns", "end_ns", "device_id", "stream_id", "pid", "correlation_id",
    "short_name", "name", "launch_start_ns", "thread", "launch_ns",
]
# memcpy / memset / whole CUDA graphs (graph-level trace): GPU work that is not a kernel row.
TRANSFER_COLUMNS = [
    "start_ns", "end_ns", "device_id", "stream_id", "pid", "correlation_id",
    "op", "copy_kind", "bytes", "src_kind", "dst_kind", "launch_start_ns", "thread",
    "launch_ns",
]
API_COLUMNS = ["start_ns", "end_ns", "pid", "thread", "correlation_id", "api"]
RANGE_COLUMNS = [
    "range_id", "start_ns", "end_ns", "pid", "tid", "thread", "domain", "name", "style",
]
MARK_COLUMNS = ["time_ns", "pid", "thread", "domain", "text"]
# cudaEventRecord ("record") and cudaStreamWaitEvent ("wait") calls: the stream an event was
# recorded on, or the stream made to wait (-1 where the export does not say: nsys 2022.4,
# or 2025.x without --cuda-event-trace).
EVENT_CALL_COLUMNS = ["start_ns", "end_ns", "pid", "thread", "correlation_id", "stream_id",
                      "api"]
METRIC_COLUMNS = ["time_ns", "device_id", "metric", "value"]
# The call summaries (summaries.py), the numbers of nsys stats' cuda_api_sum and osrt_sum:
# one row per API name (CUDA: its version suffix off), heaviest first; `share` of the
# table's total time. std_ns is the sample standard deviation, 0 for a single call.
CALL_SUMMARY_COLUMNS = ["name", "calls", "total_ns", "mean_ns", "median_ns", "min_ns",
                        "max_ns", "std_ns", "share"]
# The slowest single CUDA API calls, slowest first (ties in export order).
SLOWEST_CALL_COLUMNS = ["name", "start_ns", "end_ns", "duration_ns", "pid", "tid", "thread_name"]
# GPU copies by kind ("memcpy HtoD", ...) and memsets ("memset"), the numbers of
# cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum in one row: heaviest first, `share` of the
# copies' and memsets' total time; throughput is total bytes over total time.
MEMORY_OP_COLUMNS = ["operation", "count", "total_ns", "mean_ns", "median_ns", "min_ns",
                     "max_ns", "std_ns", "share", "total_bytes", "mean_bytes",
                     "median_bytes", "min_bytes", "max_bytes", "std_bytes",
                     "throughput_bytes_per_s"]


# nsys's globalTid: marker | pid << 24 | tid; `thread` columns hold it as is.
_TID_BITS = 24
_ID_MASK = (1 << _TID_BITS) - 1


def thread_ids(thread: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(pid, tid) arrays from `thread` keys."""
    key = np.asarray(thread, dtype="int64")
    return (key >> _TID_BITS) & _ID_MASK, key & _ID_MASK


def broken_times(start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Where a record's times cannot be used: it ends before it starts, or lasts longer
    than an int64 holds (a start near the least int64: its end - start wraps negative, in
    int64 as numpy computes it). Seen in reports merged or edited by other tools, and
    possible from a clock that stepped; such records are left out, and counted."""
    return (end < start) | (end - start < 0)


BROKEN_TIMES = "end before they start or last longer than 64 bits of ns hold (broken timestamps)"


def empty(columns, dtype="int64") -> pd.DataFrame:
    """A frame of no rows with these columns, each of `dtype`: a copy of one made once per
    column list. Made anew each time it took 0.25 ms (of empty Series, ten times that), and
    an analysis of a small report makes dozens (a fifth of the test suite's analyses)."""
    return _empty_frame(tuple(columns), dtype).copy()


@functools.cache
def _empty_frame(columns: tuple, dtype) -> pd.DataFrame:
    return pd.DataFrame({c: np.empty(0, dtype) for c in columns})


@dataclass
class CallSummaries:
    """What a report's calls add up to (summaries.py): CUDA API calls (cuda_api and the
    slowest of them), GPU copies and memsets (memory_ops), OS runtime calls (os_runtime;
    empty unless osrt was traced). Empty frames where the report has no such calls."""

    cuda_api: pd.DataFrame = field(default_factory=lambda: empty(CALL_SUMMARY_COLUMNS))
    slowest_api_calls: pd.DataFrame = field(
        default_factory=lambda: empty(SLOWEST_CALL_COLUMNS))
    memory_ops: pd.DataFrame = field(default_factory=lambda: empty(MEMORY_OP_COLUMNS))
    os_runtime: pd.DataFrame = field(default_factory=lambda: empty(CALL_SUMMARY_COLUMNS))


@dataclass
class Report:
    """Everything an analysis needs from one Nsight Systems export.

    kernels:   one row per kernel (KERNEL_COLUMNS). ``thread``/``launch_start_ns``/
               ``launch_ns`` (its duration) come from the runtime call that launched it
               (joined on correlation id); -1 when unknown.
    transfers: memcpy, memset and whole-graph rows (TRANSFER_COLUMNS); ``op`` is
               "memcpy" | "memset" | "graph"; copy_kind "HtoD", "DtoH", "DtoD", ...
    api_calls: CUDA API calls that block the host or copy synchronously (API_COLUMNS).
    ranges:    NVTX ranges, push/pop and start/end (RANGE_COLUMNS); ``style`` "pushpop" |
               "startend".
    marks:     NVTX marks (MARK_COLUMNS); the harness stores its CUDA-event timings in them,
               `nsyswrap run`'s runner the program's own (analysis/user_events.py).
    gpu_metrics: sampled GPU metrics such as the GPC clock (METRIC_COLUMNS), when captured.
    event_calls: the CUDA event records and stream waits (EVENT_CALL_COLUMNS), read only
               for reports whose marks hold the runner's records; event_call_count says how
               many event records any report holds (None: not counted).
    call_summaries: the CUDA API, copy and memset, and OS runtime summaries (CallSummaries).
    kernel_grids: each kernel's launch grid, for reports whose marks hold the runner's
               records (what tells a sweep's windows apart): start_ns, stream_id (the
               trace's), grid (21 bits a dimension: x << 42 | y << 21 | z), by start.
    """

    info: ReportInfo
    kernels: pd.DataFrame
    transfers: pd.DataFrame
    api_calls: pd.DataFrame
    ranges: pd.DataFrame
    marks: pd.DataFrame
    gpu_metrics: pd.DataFrame
    event_calls: pd.DataFrame = field(default_factory=lambda: empty(EVENT_CALL_COLUMNS))
    event_call_count: int | None = None
    call_summaries: CallSummaries = field(default_factory=CallSummaries)
    kernel_grids: pd.DataFrame | None = None

    def __repr__(self) -> str:
        i = self.info
        return (
            f"<Report {i.source.name}: nsys {i.nsys_version}, {len(self.kernels)} kernels, "
            f"{len(self.transfers)} copies/memsets/graphs, {len(self.ranges)} NVTX ranges>"
        )
