"""The one per-range engine: a report's GPU operations in time-ordered chunks (from a
source: sources.py) in, every per-range number out (`Measured`), the same whichever the
source. Each chunk is attributed to the ranges open then and added to running numbers per
range (totals.RangeTotals): only the ranges open at the moment hold running numbers, so
memory is bounded by the ranges and the chunks, not by the operations
(docs/performance.md, "The analysis engine").

Over a loaded report (LoadedOperations) it keeps every operation for the formats that
draw them, and every (range, operation) pair where asked; over the export as it is read
(ExportOperations) it keeps what the outputs need of the operations (the host copies, the
blocking calls, per-thread totals, the kernels' durations for the kernel table) and no
operation or pair rows. What it needs besides the operations (each range's summary group,
the program's timed windows) and what is made of its numbers afterwards are the steps
around it (analysis/steps.py).
"""

from __future__ import annotations

from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...common.memory import trim_heap
from ...read.chunks import cores
from ...read.compressed import decompressed
from ...read.cuda_api import COPY_KINDS, MEMORY_KINDS
from ...read.loader import kind_names
from ...read.operations import StreamFallback
from ...read.report import Report
from ..attribution import (
    Attribution,
    Attributor,
    call_waits,
    innermost_of,
    other_threads_frame,
)
from ..code_lines import LineTotals
from ..columns import (
    BY_NAME,
    HOST_WAIT_COLUMNS,
    INSTANCE_COLUMNS,
    RELATIVE_TO,
    REPORT_RANGE_COLUMNS,
    known_gpu_values,
)
from ..gpu_ops import OP_KINDS
from ..instance_table import InstanceTable
from ..kernels import summary_of_names
from ..summary import process_summary
from ..user_timings import UserWindows
from .sources import LoadedOperations, OperationSource
from .totals import RangeTotals
from .windows import WindowTotals

# Chunks prepared at once at most, beside the one applied (each holds its pairs' arrays,
# ~10 MB at 64 k operations, and waits for its turn once prepared). 10 M kernels on 16
# cores: one worker ~1.5 s slower than two or three, each ~10 MB more (docs/performance.md,
# "The analysis engine"). On 2 cores: one.
MAX_PREPARING = 3

# Operations applied between two trims of the heap (malloc_trim walks the whole heap:
# ~8 ms a call, 1.4 s of 18.5 at 10 M kernels when every 64 k-operation chunk trimmed;
# every 256 k: 16.8 s and the same peak, 575 MiB).
TRIM_OPERATIONS = 1 << 18


@dataclass
class Measured:
    """What the engine measured of one report, which the steps after it (analysis/steps.py)
    read and complete into the Analysis."""

    instances: InstanceTable  # the instance columns (columns.py), the report's ranges' rows
    kernels: pd.DataFrame  # the kernel table (kernels.summary_of_names)
    attribution: Attribution  # the blocking calls, host copies and pairs behind the numbers
    processes: pd.DataFrame  # summary.process_summary
    # Each summary group's median launch latency, pooled over every kernel of its ranges
    # (open_values.PooledCounts), by the groups given (`groups`).
    launch_latency: pd.Series
    # The program's timed windows' numbers (WindowTotals.numbers: the event windows' rows,
    # then the Timer measurements'); None where the report has no GPU operation.
    windows: pd.DataFrame | None


def measure(report: Report, source: OperationSource, *, library: np.ndarray,
            groups: np.ndarray, windows: UserWindows, attribution: str, consume: bool,
            lines: LineTotals | None = None) -> Measured:
    """The engine: `report` without its operations (or with them, already copied by a
    LoadedOperations `source`), its operations from `source`. `library`: each range's flag
    of a library's NVTX range (domains.library_mask); `groups`: each range's summary group
    (summary.summary_groups: launch latencies are pooled by it as ranges close, held
    through the stream); `windows`: the program's timed windows (user_timings.
    user_windows), measured in the same pass; `lines`: the program's lines
    (code_lines.LineTotals), their GPU work summed in the same pass. `attribution` and
    `consume` as
    analysis.analyze's. Raises operations.StreamFallback where the source cannot be
    streamed."""
    ranges = report.ranges
    attributor = Attributor(ranges, library, attribution)
    totals = RangeTotals(ranges, attributor, groups, source.lag_ns)
    if windows.unknown_streams():
        # Without CUDA event trace the records' streams are voted from every operation
        # before any window can be measured: only a loaded report holds them all.
        if not isinstance(source, LoadedOperations):
            raise StreamFallback("the program's event records name no stream (no CUDA "
                                 "event trace)")
        windows.vote(*source.launches())
    measured = WindowTotals(windows.to_measure(report.event_calls), report.kernel_grids)
    if consume:  # matched and measured: 72 bytes a record, held till the end otherwise
        report.event_calls = report.event_calls.iloc[:0].copy()
        report.kernel_grids = None
    lines = lines or LineTotals(None, set())
    _add_chunks(totals, measured, lines, source)
    size = source.operations + len(ranges)  # what the trims below could give back
    totals.finish()
    pooled = totals.pooled.medians()
    # What only the stream needed (the open ranges' slots, the edges, the process rule's
    # search), let go before the blocking calls are read and attributed (~60 MB at 10 M
    # kernels).
    totals.release_stream_state()
    attributor.calls_only()
    trim_heap(size)
    source.complete(report)
    window_numbers = (measured.numbers(source.kernel_names()[1]) if source.operations
                      else None)
    if lines.trace is not None:
        lines.names = source.kernel_names()[1]
    del measured
    att = _attribution(report, attributor, totals, source)
    # The range search: the blocking calls' ranges were its last use.
    del attributor
    trim_heap(size)
    kernels = _kernel_summary(totals, source)
    # The kernels' durations, grouped a name at a time, are freed to glibc's heap, which
    # keeps them resident (~100 MB at 10 M kernels) under the instances' packing.
    trim_heap(size)
    instances = _instances(report, totals, att)
    processes = process_summary(report, _per_thread(totals))
    # What is left of the totals, and the report's ranges (the instances hold their
    # columns; 48 MB at 1.2 M ranges): freed before the summary and the findings decode
    # their columns.
    del totals, ranges
    if consume:
        report.ranges = report.ranges.iloc[:0].copy()
    trim_heap(size)
    return Measured(instances=instances, kernels=kernels, attribution=att,
                    processes=processes, launch_latency=pooled, windows=window_numbers)


def _add_chunks(totals: RangeTotals, windows: WindowTotals, lines: LineTotals,
                source: OperationSource) -> None:
    """Every chunk of the source into the totals: each chunk prepared on a worker thread
    (its attribution, sorts and per-range numbers: numpy and SQLite work, mostly without
    the GIL) while this thread reads the next ones and applies the prepared ones in order
    (and hands its pairs to the source, which keeps them where asked). Prepared on this
    thread too, the chunks' work took 21.8 s at 10 M kernels on 16 cores, against 12.9 s
    for all of it spread over the cores; the reads run on the reader threads."""
    workers = max(1, min(cores() - 1, MAX_PREPARING))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        prepared: deque = deque()
        try:
            for chunk in source:
                prepared.append(pool.submit(_prepare, totals, windows, lines, chunk))
                del chunk
                while len(prepared) > workers:
                    _apply(totals, windows, lines, prepared.popleft(), source)
            while prepared:
                _apply(totals, windows, lines, prepared.popleft(), source)
            trim_heap(source.operations)
        finally:
            for future in prepared:
                future.cancel()


def _prepare(totals: RangeTotals, windows: WindowTotals, lines: LineTotals, chunk
             ) -> tuple[dict, dict | None, dict | None]:
    return totals.prepare(chunk), windows.prepare(chunk), lines.prepare(chunk)


def _apply(totals: RangeTotals, windows: WindowTotals, lines: LineTotals, prepared,
           source: OperationSource) -> None:
    chunk, in_windows, in_lines = prepared.result()
    source.take_pairs(chunk["chunk"], chunk.pop("attributed", None))
    totals.apply(chunk)
    windows.apply(in_windows, chunk["chunk"])
    lines.apply(in_lines, chunk["chunk"])
    # The chunks' temporaries are freed to glibc's heap, which keeps them resident; the
    # next ones do not always fit there (10 M kernels: ~140 MB more at the peak untrimmed).
    totals.untrimmed += len(chunk["chunk"])
    if totals.untrimmed >= TRIM_OPERATIONS:
        trim_heap()
        totals.untrimmed = 0


def _attribution(report: Report, attributor: Attributor, totals: RangeTotals,
                 source: OperationSource) -> Attribution:
    """The Attribution: blocking calls and host copies with their innermost ranges, the
    threads whose work went to other threads' ranges, and the operations and pairs where
    the source kept them."""
    calls = report.api_calls.reset_index(drop=True)
    call_pairs = attributor.call_pairs(calls)
    calls["range_id"] = innermost_of(call_pairs, np.arange(len(calls)))
    gpu_ops, op_pairs = source.kept()
    att = Attribution(gpu_ops, op_pairs, call_pairs, calls,
                      _host_copies(totals, source.kernels), attributor.rule,
                      operations=source.operations, pairs_kept=source.keeps_pairs)
    if attributor.rule == "process":
        # Most first, ties in order of first appearance: other_thread_counts' order, from
        # the counts themselves (not a value count of every taken operation's thread
        # again: 140 MB at 10 M kernels, on that report's peak).
        taken = sorted(totals.taken.items(), key=lambda t: (-t[1][0], t[1][1]))
        att.other_threads = other_threads_frame([t for t, _ in taken],
                                                [n for _, (n, _) in taken])
    return att


def _host_copies(totals: RangeTotals, kernels: int) -> pd.DataFrame:
    """Attribution.host_copies: the host copies' rows as gpu_ops has them (indexed by its
    rows: the kernels', then the transfers' in order), with their innermost range."""
    parts = totals.copy_parts
    # Each column's parts let go as it is joined.
    columns = {c: np.concatenate([decompressed(p.pop(c)) for p in parts]) if parts
               else np.zeros(0, "int64")
               for c in ("start_ns", "end_ns", "thread", "launch_start_ns", "device_id",
                         "stream_id", "bytes", "copy_kind", "src_kind", "dst_kind", "rank",
                         "range_id")}
    totals.copy_parts = []
    n = len(columns["start_ns"])
    index = pd.Index(kernels + columns.pop("rank"))
    frame = pd.DataFrame({
        "start_ns": columns["start_ns"], "end_ns": columns["end_ns"],
        "thread": columns["thread"], "launch_start_ns": columns["launch_start_ns"],
        "device_id": columns["device_id"], "stream_id": columns["stream_id"],
        "bytes": columns["bytes"],
        "kind": pd.Categorical(["memcpy"] * n, categories=OP_KINDS),
        "name": pd.Categorical(["memcpy"] * n),
        "copy_kind": pd.Categorical(kind_names(columns["copy_kind"], COPY_KINDS)),
        "src_kind": pd.Categorical(kind_names(columns["src_kind"], MEMORY_KINDS)),
        "dst_kind": pd.Categorical(kind_names(columns["dst_kind"], MEMORY_KINDS)),
        "range_id": columns["range_id"].astype("int64", copy=False),
    }, index=index, copy=False)  # the columns as they are, not copied into one block
    return frame


def _kernel_summary(totals: RangeTotals, source: OperationSource) -> pd.DataFrame:
    """The kernel table from the kernels the chunks held, a demangled name at a time
    (kernels.summary_of_names): each name's durations (kept compressed, in order) are
    dropped once summed up."""
    full, short = source.kernel_names()
    parts = totals.kernel_durations

    def groups():
        for code in list(parts):
            durations = parts.pop(code).values()
            yield full[code], short[totals.kernel_first_pair[code]], durations

    return summary_of_names(groups())


def _per_thread(totals: RangeTotals) -> pd.DataFrame:
    """summary.work_per_thread's frame from the totals per launching thread."""
    threads = sorted(totals.threads)
    rows = [totals.threads[t] for t in threads]
    return pd.DataFrame({
        "gpu_ops": np.array([r[0] for r in rows], dtype="int64"),
        "kernels": np.array([r[1] for r in rows], dtype="int64"),
        "kernel_ns": np.array([r[2] for r in rows], dtype="int64"),
        "devices": [r[3] for r in rows],
    }, index=pd.Index(threads, dtype="int64"))


def _instances(report: Report, totals: RangeTotals, att: Attribution) -> InstanceTable:
    """The instance table (columns.py: the report's ranges' rows, in order): the closed
    ranges' columns put together a column at a time (RangeTotals.instance_columns) and
    packed whole; what those batches could not know is added here (a report without a GPU
    trace: unknown where a range saw no work; the blocking calls; the other threads' busy
    time where none of their work went to other threads' ranges)."""
    r = report.ranges
    has_gpu = report.info.has_gpu_activity
    out = InstanceTable(len(r))
    for c in REPORT_RANGE_COLUMNS:
        out.set(c, r[c], relative_to=RELATIVE_TO.get(c))
    out["cpu_ns"] = r["end_ns"].to_numpy() - r["start_ns"].to_numpy()
    seen = None
    for c, values in totals.instance_columns():
        if c == "gpu_first_start_ns":  # the first: no GPU work where NaN
            seen = ~np.isnan(values)
        out.set(c, known_gpu_values(c, values, seen, has_gpu), relative_to=RELATIVE_TO.get(c))
        del values
    if not (totals.has_own and totals.other_thread_pairs):
        # No other thread's work in any range: 0 where the busy time is known.
        busy = out.values("gpu_busy_ns")
        out["gpu_busy_other_threads_ns"] = np.where(np.isnan(busy), np.nan, 0.0)
        del busy
    waits = call_waits(att)
    for c in HOST_WAIT_COLUMNS:
        if c in out:  # the totals' own
            continue
        values = np.zeros(len(out), dtype=BY_NAME[c].dtype)
        by_range = waits[c]
        values[totals.rows_of(by_range.index.to_numpy(dtype="int64"))] = by_range.to_numpy()
        out[c] = known_gpu_values(c, values, seen, has_gpu)
        del values
    return out.reordered(INSTANCE_COLUMNS)
