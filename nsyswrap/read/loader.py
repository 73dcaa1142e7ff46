"""Read an Nsight Systems SQLite export into a `Report`: Arrow tables to pandas frames.

Exports differ between nsys versions (see docs/nsys-schema.md): tables exist only for what
was traced, NVTX text sits in `text` or in `textId` -> StringIds, the metadata table was
renamed, kernel names are ids into StringIds. Every column beyond the core ones is optional.

The file is opened read-only (SQLite URI `mode=ro`, or `immutable=1` for a WAL-mode file:
database.Database): nothing is ever written next to it.
database.py opens it and runs the bulk reads (their SQL is queries.py's) as Arrow tables
through the ADBC SQLite driver; small lookups here use sqlite3.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ..common.memory import release_freed_memory, trim_heap
from ..common.progress import NO_PROGRESS, Progress
from ..instrument.schema import USER_EVENTS_MARK_PREFIX
from . import cuda_api
from .chunks import ascending, compact_ids, small_code_type, steps
from .cuda_api import COPY_KINDS, MEMORY_KINDS
from .database import Database, OpenReport, open_report
from .launches import (
    Launches,
    attach_launches,
    correlation_ids,
    device_ids,
    full_name_ids,
    short_name_ids,
    stream_ids,
    string_labels,
    strings_of,
    with_launch_ids,
)
from .queries import (
    ID_MASK,
    KERNEL_TABLE,
    NVTX_TABLE,
    RUNTIME_TABLE,
    TID_BITS,
    BulkQueries,
    RuntimeQuery,
    pandas_frame,
)
from .report import (
    API_COLUMNS,
    BROKEN_TIMES,
    EVENT_CALL_COLUMNS,
    KERNEL_COLUMNS,
    MARK_COLUMNS,
    METRIC_COLUMNS,
    RANGE_COLUMNS,
    TRANSFER_COLUMNS,
    GpuInfo,
    Report,
    ReportInfo,
    broken_times,
    empty,
)
from .summaries import SummaryQueries
from .summaries import collect as collect_summaries


def load(path: str | os.PathLike | OpenReport, *,
         cache_dir: str | os.PathLike | None = None, nsys: str | None = None,
         progress: Progress = NO_PROGRESS) -> Report:
    """Load an nsys report (`.sqlite` export, or `.nsys-rep`, exported on the fly), or one
    that database.open_report opened already (its reads under way; closed here).

    A `.nsys-rep` is exported with `nsys export --type sqlite` into the cache folder
    (`cache_dir`, else $NSYSWRAP_CACHE, else ~/.cache/nsyswrap), never beside the original.
    Raises BadInputError with a one-line message for anything that is not a usable report.
    """
    opened = path if isinstance(path, OpenReport) else open_report(
        path, cache_dir=cache_dir, nsys=nsys, progress=progress)
    with opened, progress.step(f"loading {opened.db.path.name}"):
        report = _read_report(opened)
    release_freed_memory(len(report.kernels) + len(report.transfers) + len(report.ranges))
    return report


def _read_report(opened: OpenReport) -> Report:
    db, queries = opened.db, opened.queries
    runtime = queries.runtime
    kernels = _kernels(db, queries.kernels)
    # The kernel slices' arrays, freed as they were joined (memory.trim_heap).
    trim_heap(len(kernels))
    transfers = _transfers(db, queries.transfers)
    launches, api_calls = _runtime_calls(db, runtime)
    trim_heap(len(kernels) + len(transfers))  # the merge's parts, before the lookups' results
    kernels, transfers = attach_launches(db, launches, kernels, transfers)
    last_call_ns = int(launches.start_ns.max()) if len(launches.start_ns) else None
    # Not held through the NVTX reads: 17 bytes a launch (175 MB at 10 M kernels).
    del launches
    with_launch_ids(kernels)
    kernels, transfers = kernels[KERNEL_COLUMNS], transfers[TRANSFER_COLUMNS]
    report, rest = read_without_operations(opened)
    operation_notes: list[str] = []
    kernels = _drop_reversed(kernels, "kernel", operation_notes)
    transfers = _drop_reversed(transfers, "copy or memset", operation_notes)
    report.kernels, report.transfers, report.api_calls = kernels, transfers, api_calls
    # By hashing (pd.unique), not sorting: ten million kernels share a few pids.
    pids = set().union(*(pd.unique(f["pid"].to_numpy(dtype="int64")).tolist()
                         for f in (kernels, transfers)))
    rest.complete(report, operation_notes, last_call_ns, len(kernels) + len(transfers), pids)
    return report


# A report without CUDA tables. Where CUDA was traced (nsyswrap run), the program made no
# CUDA call: pipeline.py says that instead.
NO_CUDA_TRACE_NOTE = "no CUDA trace in this report (profile with -t cuda): GPU columns are empty"
NO_NVTX_NOTE = ("no NVTX events in this report (profile with -t nvtx and annotate code with "
                "nsyswrap.annotate): no per-range analysis")


@dataclass
class WithoutOperations:
    """What read_without_operations leaves to say once the operations are read (complete):
    the notes around theirs, and the processes with NVTX ranges."""

    db: Database
    notes_before: list[str]  # the file's, and the unended ranges'
    notes_after: list[str]  # the ranges' with broken timestamps
    range_pids: set[int]
    summaries: SummaryQueries | None = None  # the call summaries' reads, under way

    def complete(self, report: Report, operation_notes: list[str], last_call_ns: int | None,
                 operations: int, operation_pids: set[int]) -> None:
        """Finish `report`'s info once its GPU operations are known: notes in the order the
        reads made them, a lost GPU trace, the names of the processes that did anything.
        `operations`: how many GPU operations; `operation_pids`: the processes that ran
        them; `last_call_ns`: the start of the last runtime call that could launch GPU work
        or block (None without any)."""
        info = report.info
        notes = [*self.notes_before, *operation_notes, *self.notes_after]
        if not info.has_cuda:
            notes.append(NO_CUDA_TRACE_NOTE)
        if not info.has_nvtx:
            notes.append(NO_NVTX_NOTE)
        info.notes[:0] = notes  # before any alert already raised
        _check_gpu_trace(info, last_call_ns, operations, len(report.ranges))
        _check_launches(info, self.db, operations, len(report.ranges))
        active = self.range_pids | operation_pids
        info.processes = {pid: name for pid, name in _process_names(self.db).items()
                          if pid in active}
        # Last: their reads ran on a thread of their own while everything else was read.
        report.call_summaries = collect_summaries(
            self.db, self.summaries or SummaryQueries.of(self.db), info.threads, info.notes)
        # After every read of the report's text (the summaries' names were the last).
        if note := self.db.texts.note():
            info.text_note = note
            info.notes.append(note)


def read_without_operations(opened: OpenReport) -> tuple[Report, WithoutOperations]:
    """The report but its GPU operations and runtime calls (empty frames), and what is left
    to do once they are read (WithoutOperations.complete): the reads the streamed analysis
    needs whole (ranges, marks, clock samples, the report's description)."""
    db, queries = opened.db, opened.queries
    notes = list(opened.notes)
    for missing in queries.missing:  # rows every bulk read leaves out (queries.times_present)
        n = int(_frame(db, missing.sql)["n"].iloc[0])
        if n:
            notes.append(missing.note(n))
    domains = _nvtx_domains(db, queries)
    ranges, unterminated = _nvtx_ranges(db, queries, domains)
    if unterminated:
        notes.append(f"{unterminated} NVTX range(s) never ended (program exited inside them); "
                     "left out")
    range_notes: list[str] = []
    ranges = _drop_reversed(ranges, "NVTX range", range_notes)
    marks = _nvtx_marks(db, queries, domains)
    gpu_metrics = _gpu_clock_metrics(db)
    grids_sql = _kernel_grids_sql(db) if has_runner_records(marks) else None
    db.prefetch(grids_sql)  # on the reader threads, while the event calls are read
    event_calls, event_call_count = _event_calls(db, marks)
    kernel_grids = _kernel_grids(db, grids_sql)
    if grids_sql is not None:
        # Their Arrow reads, freed as they were joined: ~150 MB a million records.
        trim_heap(event_call_count)

    info = _report_info(db, opened.source)
    info.has_cuda = KERNEL_TABLE in db.tables or RUNTIME_TABLE in db.tables
    info.has_nvtx = NVTX_TABLE in db.tables
    info.has_osrt = "OSRT_API" in db.tables
    info.has_gpu_metrics = not gpu_metrics.empty
    info.threads = _thread_names(db)
    report = Report(info, empty(KERNEL_COLUMNS), empty(TRANSFER_COLUMNS), empty(API_COLUMNS),
                    ranges, marks, gpu_metrics, event_calls, event_call_count,
                    kernel_grids=kernel_grids)
    pids = set(pd.unique(ranges["pid"].to_numpy(dtype="int64")).tolist())
    return report, WithoutOperations(db, notes, range_notes, pids, opened.summaries)


def _frame(db: Database, sql: str, ids: tuple[str, ...] = ()) -> pd.DataFrame:
    """A bulk query's result (database.Database.arrow) as a DataFrame; `ids`: its integer
    columns whose NULLs read as -1, unknown (_known_ids)."""
    return pandas_frame(_known_ids(db.arrow(sql), ids))


def _known_ids(table, ids: tuple[str, ...]):
    """The Arrow table with NULL in the `ids` columns (a table another tool rebuilt) as -1,
    unknown, as the loader takes any id it cannot place. pandas would make such a column
    float64, NaN where NULL: its cast back to int64 warns and gives the least int64, and
    ids past 2**53 (a globalTid's high bits) lose their last digits on the way."""
    import pyarrow as pa
    import pyarrow.compute as pc

    for name in ids:
        column = table[name]
        if column.null_count:
            table = table.set_column(table.schema.get_field_index(name), name,
                                     pc.fill_null(column.cast(pa.int64()), -1))
    return table


def _drop_reversed(frame: pd.DataFrame, what: str, notes: list[str]) -> pd.DataFrame:
    """Leave out records whose times cannot be used (report.broken_times) and say so: they
    would count as negative time, or as more than int64 holds."""
    reversed_ = broken_times(frame["start_ns"].to_numpy(), frame["end_ns"].to_numpy())
    n = int(reversed_.sum())
    if not n:
        return frame
    notes.append(f"{n} {what}(s) {BROKEN_TIMES}; left out")
    return frame[~reversed_].reset_index(drop=True)


def _check_gpu_trace(info: ReportInfo, last_call_ns: int | None, operations: int,
                     ranges: int) -> None:
    """Say loudly when CUDA was traced and NVTX ranges are there but no GPU activity is: a
    process that dies by a signal never writes the CUDA activity it buffered (kernels, and
    the runtime calls too), while its NVTX ranges all reach the report (docs/nsys-quirks.md,
    "Signals"). GPU times are then unknown, not 0. `last_call_ns`: the start of the last
    runtime call that could launch GPU work, None without any; `operations`, `ranges`: how
    many GPU operations and NVTX ranges."""
    if last_call_ns is not None:
        info.last_cuda_call_ns = last_call_ns
    if not info.has_cuda or not ranges or operations:
        return
    info.gpu_trace_lost = True
    info.alert(
        f"no GPU activity in this report although CUDA was traced and there are {ranges} "
        "NVTX ranges: if the program launched GPU work, its GPU trace was lost (a program "
        "ended by a signal never writes the CUDA activity it buffered); GPU times are "
        "unknown, not 0. Profile again and let the program exit normally (nsyswrap run "
        "makes Ctrl-C and SIGTERM end a Python program that way)")


def _check_launches(info: ReportInfo, db: Database, operations: int, ranges: int) -> None:
    """Say loudly when GPU operations and NVTX ranges are there but not one runtime call:
    operations reach ranges through the calls that launched them, so which range launched
    what is unknown, not nothing (the ranges' GPU columns are then unknown, as for a lost
    GPU trace). Seen in reports whose runtime table was emptied or left out by another
    tool."""
    if not operations or not ranges or db.row_estimate(RUNTIME_TABLE):
        return
    info.launches_missing = True
    info.alert(
        f"no CUDA runtime calls in this report although it has {operations} GPU operations "
        f"and {ranges} NVTX ranges: which range launched what is unknown, so the ranges' "
        "GPU columns are unknown, not 0 (the kernels' own times stand). Profile with "
        "-t cuda (CUDA API tracing on)")


def _pid(global_id: pd.Series) -> np.ndarray:
    """The pid in a 32-bit column (it has 24 bits): held by every range and its instance;
    -1 for an unknown thread (-1: _known_ids)."""
    ids = global_id.to_numpy(dtype="int64")
    pid = ((ids >> TID_BITS) & ID_MASK).astype(np.int32)
    pid[ids < 0] = -1
    return pid


def _kernels(db: Database, sql: str | None) -> pd.DataFrame:
    if sql is None:
        return empty(KERNEL_COLUMNS + ["launch_key"])
    # As numpy from the reader threads (queries.numpy_columns), in export order: nothing
    # downstream needs kernels sorted. Unpacked here with numpy (pandas' column setting
    # cost more than the arithmetic).
    slices = db.slices(sql)
    data = {c: _joined(slices, c) for c in ("start_ns", "end_ns", "device_stream")}
    device_stream = data.pop("device_stream")
    # Small ids as int32 (40 MB fewer each at 10 M kernels): always for the high 32 bits,
    # where they fit for the low 32 bits (compact_ids).
    data["device_id"] = device_ids(device_stream).astype(np.int32)
    data["stream_id"] = compact_ids(stream_ids(device_stream))
    del device_stream
    # pid and correlation id come from the launch key once the launches are joined
    # (_read_report): made here, they were 80 MB at 10 M kernels beside the runtime
    # slices' merge, the load's peak on a many-core host.
    data["launch_key"] = _joined(slices, "launch_key")
    # Distinct (short, full) name pairs are a few hundred among millions of kernels.
    codes, pairs = pd.factorize(_joined(slices, "name_ids"), sort=False)
    pairs = np.asarray(pairs, dtype="int64")
    short_ids, full_ids = short_name_ids(pairs), full_name_ids(pairs)
    strings = strings_of(db, np.concatenate([short_ids, full_ids]))
    data["short_name"] = _as_category(short_ids, strings, codes)
    data["name"] = _as_category(full_ids, strings, codes)
    return pd.DataFrame(data, copy=False)


def _as_category(ids: np.ndarray, strings: dict[int, str],
                 codes: np.ndarray | None = None) -> pd.Categorical:
    """Map string ids to a categorical: a million kernels share a few hundred names.
    With `codes`, the rows hold ids[codes] (ids already factorized)."""
    if codes is None:
        codes, ids = pd.factorize(ids, sort=False)
    labels = string_labels(ids, strings)
    # Two ids can carry the same text; categories must be unique.
    labels_unique, inverse = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(inverse[codes], categories=list(labels_unique))


def kind_names(ids, names: dict[int, str]) -> pd.Series:
    """CUPTI enum values (a memcpy's kind, a memory kind) as their names (COPY_KINDS,
    MEMORY_KINDS), "unknown" for values past the enum."""
    return pd.Series(ids).map(names).fillna("unknown")


def _transfers(db: Database, queries: dict[str, str]) -> pd.DataFrame:
    parts = []
    for op, sql in queries.items():
        df = _frame(db, sql)
        for c in ("device_id", "stream_id", "launch_key"):
            if df[c].isna().any():  # NULL ids (a table another tool rebuilt): unknown, -1
                df[c] = df[c].fillna(-1).astype("int64")
        df["op"] = op
        if op == "memcpy":
            df["copy_kind"] = kind_names(df.pop("copy_kind_id"), COPY_KINDS)
            df["src_kind"] = kind_names(df.pop("src_id"), MEMORY_KINDS)
            df["dst_kind"] = kind_names(df.pop("dst_id"), MEMORY_KINDS)
        parts.append(df)
    if not parts:
        return empty(TRANSFER_COLUMNS + ["launch_key"])
    df = pd.concat(parts, ignore_index=True)
    for col in ("copy_kind", "src_kind", "dst_kind"):
        df[col] = df[col].fillna("") if col in df else ""
    df = df.sort_values("start_ns", kind="stable", ignore_index=True)
    with_launch_ids(df)
    for col in ("device_id", "stream_id"):
        df[col] = compact_ids(df[col].to_numpy(dtype="int64"))
    return df


def _runtime_calls(db: Database, query: RuntimeQuery) -> tuple[Launches, pd.DataFrame]:
    """The runtime calls that may have launched GPU work (joined to it by
    attach_launches), and those that block the host, in time order (API_COLUMNS): one
    read of the calls that can launch GPU work or block (a filter on their name ids, in
    SQLite), split slice by slice on the reader threads (queries.RuntimeSlice)."""
    if query.calls_sql is None:
        return Launches(*(np.array([], dtype="int64") for _ in range(5))), empty(API_COLUMNS)
    parts = db.slices(query.calls_sql)
    calls = blocking_calls([p.blocking for p in parts], query)
    return _merged_launches(parts), calls


def blocking_calls(tables: list, query: RuntimeQuery) -> pd.DataFrame:
    """The blocking calls (API_COLUMNS, in time order) from the runtime read's slices'
    tables of them (queries.RuntimeSlice.blocking)."""
    import pyarrow as pa

    if query.calls_sql is None or not tables:
        return empty(API_COLUMNS)
    calls = pandas_frame(_known_ids(pa.concat_tables(tables), ("launch_key", "thread")))
    calls = calls.sort_values("start_ns", kind="stable", ignore_index=True)
    calls["correlation_id"] = correlation_ids(calls.pop("launch_key").to_numpy(dtype="int64"))
    calls["pid"] = _pid(calls["thread"])
    calls["api"] = calls.pop("name_id").map(query.blocking)
    return calls[API_COLUMNS]


def _merged_launches(parts: list) -> Launches:
    """The slices' launches (each sorted by key, in rowid order) as one table sorted by key,
    as one stable sort of all of them would give. `parts` are emptied as they are joined."""
    launches = [p.launches for p in parts]
    # The slices' thread codes renumbered into one set of ids (a few dozen threads).
    threads = np.unique(np.concatenate([s["threads"] for s in launches]
                                       or [np.array([], "int64")]))
    code_type = small_code_type(len(threads))
    for s in launches:
        s["thread_code"] = np.searchsorted(threads, s.pop("threads")).astype(code_type)[
            s["thread_code"]]
    key = _joined(launches, "launch_key")
    trim_heap(len(key))  # the slices' keys, before the sort's arrays
    if len(parts) == 1:
        return Launches(key, _joined(launches, "start_ns"), _joined(launches, "duration_ns"),
                        _joined(launches, "thread_code"), threads)
    # Sorted runs, one per slice: a stable sort merges them (timsort finds the runs). The
    # order 32-bit, held through four gathers (40 MB fewer at 10 M launches, on the load's
    # peak on a many-core host, where every slice of every table is read at once).
    order = compact_ids(np.argsort(key, kind="stable"))
    key = key[order]
    start = _joined(launches, "start_ns")[order]
    duration = _joined(launches, "duration_ns")[order]
    return Launches(key, start, duration, _joined(launches, "thread_code")[order], threads)


def _joined(slices: list[dict[str, np.ndarray]], column: str) -> np.ndarray:
    """One column of the slices' columns (database.Database.slices), joined in rowid order;
    each slice's array is dropped as it is joined."""
    arrays = [s.pop(column) for s in slices]
    return arrays[0] if len(arrays) == 1 else np.concatenate(arrays)


def _nvtx_domains(db: Database, queries: BulkQueries) -> dict[tuple[int, int], str]:
    """(process_key, domainId) -> domain name. Domain ids are per process; 0 is the default."""
    if NVTX_TABLE not in db.tables:
        return {}
    df = _frame(db, queries.nvtx_domains)
    return {(int(tid) >> TID_BITS, int(dom)): str(name)
            for tid, dom, name in zip(df["thread"], df["domain_id"], df["name"], strict=True)}


def _domain_names(df: pd.DataFrame, domains: dict[tuple[int, int], str]) -> pd.Series:
    """Each row's domain name, from (process, domain id); "" for the default domain. As a
    categorical whose categories are the distinct names in sorted order (so it sorts and
    groups as the text column would): a code per row where text held 8 bytes of offset
    and the text (a domain, shared by millions of ranges). A step of rows at a time: the
    keys and their lookups were three range-sized int64 arrays (240 MB at 10 M ranges)."""
    thread = df["thread"].to_numpy(dtype="int64")
    domain_id = df.pop("domain_id").to_numpy(dtype="int64")
    known = pd.Index([(p << 32) | d for p, d in domains], dtype="int64")
    labels, inverse = np.unique(np.array(["", *domains.values()], dtype=object),
                                return_inverse=True)
    codes = np.empty(len(thread), dtype="int8" if len(labels) < 128 else "int32")
    for part in steps(len(thread)):
        # The process as the global id's high bits: unique across hosts, where pids repeat.
        key = ((thread[part] >> TID_BITS) << 32) | domain_id[part]
        codes[part] = inverse[known.get_indexer(key) + 1]
    return pd.Series(pd.Categorical.from_codes(codes, categories=labels.tolist()),
                     index=df.index, copy=False)


def _range_names(slices: list, order: np.ndarray | None, index: pd.Index) -> pd.Series:
    """The ranges' names from the slices' dictionary-encoded names (queries.RangeSlice),
    in the rows' `order` (None: as read): as a categorical with sorted categories where
    names repeat (a step's or a layer's range, millions of times: a code per range where
    the text took ~13 bytes, 128 MB at 10 M ranges, held by the ranges and their instances
    to the end, and every later grouping by name works on the codes); as text where most
    are distinct (emit_nvtx's one name per operator call), which a categorical would only
    make larger. The slices are emptied."""
    import pyarrow as pa
    import pyarrow.compute as pc

    dictionaries = [s.names for s in slices]
    # One dictionary for all slices: each slice's codes become codes into it.
    common = pc.dictionary_encode(
        pa.concat_arrays([d.cast(pa.large_string()) for d in dictionaries])
        if dictionaries else pa.array([], pa.large_string()))
    distinct = common.dictionary
    to_common = common.indices.to_numpy()
    codes, at = [], 0
    for s, d in zip(slices, dictionaries, strict=True):
        codes.append(to_common[at:at + len(d)][s.name_codes])
        at += len(d)
        s.name_codes = None
    del dictionaries, common, to_common
    codes = (np.concatenate(codes) if codes else np.array([], "int32")).astype(
        "int32", copy=False)
    if order is not None:
        codes = codes[order]
    if len(distinct) > len(codes) // 2:  # (never with no ranges: 0 > 0 is false)
        text = distinct.take(pa.array(codes))
        del codes
        return pd.Series(text.to_pandas(), index=index, copy=False).astype(str)
    sort = pc.array_sort_indices(distinct)
    # Each code's place among the sorted names.
    rank = np.empty(len(distinct), dtype="int32")  # codes are int32 (queries.RangeSlice)
    rank[sort.to_numpy()] = np.arange(len(distinct))
    codes = rank[codes]
    return pd.Series(pd.Categorical.from_codes(
        codes, categories=distinct.take(sort).to_pylist()), index=index, copy=False)


def _nvtx_ranges(db: Database, queries: BulkQueries,
                 domains: dict[tuple[int, int], str]) -> tuple[pd.DataFrame, int]:
    if NVTX_TABLE not in db.tables:
        return empty(RANGE_COLUMNS), 0
    # Slice by slice, as the reader threads made them compact (queries.RangeSlice), in
    # start order (stable: rowid order among equal starts) by one permutation, a column at
    # a time: sorting a frame copies all of its columns at once.
    slices = db.slices(queries.nvtx_ranges)
    columns = [s.columns for s in slices]
    start = _joined(columns, "start_ns")
    order = None if ascending(start) else np.argsort(start, kind="stable")
    data = {"start_ns": start if order is None else start[order]}
    del start
    for c in ("end_ns", "thread", "domain_id", "startend"):
        values = _joined(columns, c)
        data[c] = values if order is None else values[order]
        del values
    df = pd.DataFrame(data, copy=False)
    del data, columns
    name = _range_names(slices, order, df.index)
    del slices, order
    # The slices' arrays, freed a million rows at a time, stay with the allocator.
    release_freed_memory(len(df))
    unterminated = int(_frame(db, queries.unterminated)["n"].iloc[0])
    df["range_id"] = np.arange(len(df), dtype="int64")
    df["pid"] = _pid(df["thread"])
    df["tid"] = (df["thread"].to_numpy(dtype="int64") & ID_MASK).astype(np.int32)
    df["domain"] = _domain_names(df, domains)
    # Two values: a categorical (one byte a range), where text took 15 bytes (144 MB at
    # 10 M ranges, held by the ranges and their instances to the end).
    df["style"] = pd.Series(pd.Categorical.from_codes(
        df.pop("startend").to_numpy(), ["pushpop", "startend"]), index=df.index, copy=False)
    df["name"] = name
    return df[RANGE_COLUMNS], int(unterminated)


def _nvtx_marks(db: Database, queries: BulkQueries,
                domains: dict[tuple[int, int], str]) -> pd.DataFrame:
    if NVTX_TABLE not in db.tables:
        return empty(MARK_COLUMNS)
    df = _frame(db, queries.nvtx_marks, ids=("thread",))
    df["pid"] = _pid(df["thread"])
    df["domain"] = _domain_names(df, domains)
    df["text"] = df["text"].astype(str)
    return df[MARK_COLUMNS]


# Runtime calls of the CUDA event API that the reconciliation of a program's own timings
# reads (analysis/user_events.py); nsys names them with a version suffix.
EVENT_RECORD_APIS = ("cudaEventRecord", "cudaEventRecordWithFlags", "cuEventRecord",
                     "cuEventRecordWithFlags")
STREAM_WAIT_APIS = ("cudaStreamWaitEvent", "cuStreamWaitEvent")
CUDA_EVENT_TABLE = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
SYNC_TABLE = "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"
# Runtime calls at most that are scanned just to count a report's event records (a full
# scan of the runtime table: about a second per 10 M rows).
COUNT_SCAN_ROWS = 2_000_000


def has_runner_records(marks: pd.DataFrame) -> bool:
    """Whether the report's marks hold `nsyswrap run`'s records of the program's own CUDA
    event timings (analysis/user_events.py)."""
    return bool(len(marks)) and bool(
        marks["text"].astype(str).str.startswith(USER_EVENTS_MARK_PREFIX).any())


# 21 bits a grid dimension (CUDA's largest, gridDim.x < 2**31, is cut to its low 21 bits:
# the grid only tells shapes of work apart).
_GRID_BITS = 21


def _kernel_grids_sql(db: Database) -> str | None:
    """The read of each kernel's launch grid, packed (Report.kernel_grids); None without a
    kernel table or its grid columns. Read only for reports with the runner's records: a
    third of a second of one core a million kernels."""
    if KERNEL_TABLE not in db.tables or not {"gridX", "gridY", "gridZ"} <= set(
            db.columns(KERNEL_TABLE)):
        return None
    mask = (1 << _GRID_BITS) - 1
    return f"""SELECT start AS start_ns, streamId AS stream_id,
                      ((gridX & {mask}) << {2 * _GRID_BITS})
                      | ((gridY & {mask}) << {_GRID_BITS}) | (gridZ & {mask}) AS grid
               FROM {KERNEL_TABLE} WHERE start IS NOT NULL AND {BulkQueries.ROWS}"""


def _kernel_grids(db: Database, sql: str | None) -> pd.DataFrame | None:
    """The kernels' grids (_kernel_grids_sql) by start."""
    if sql is None:
        return None
    frame = _frame(db, sql, ("start_ns", "stream_id", "grid"))
    return frame.sort_values("start_ns", kind="stable").reset_index(drop=True)


def _event_calls(db: Database, marks: pd.DataFrame) -> tuple[pd.DataFrame, int | None]:
    """The program's CUDA event records and stream waits (EVENT_CALL_COLUMNS), for reports
    whose marks hold `nsyswrap run`'s records of them; for any other report only how many
    event records it holds (None where counting would scan a big runtime table)."""
    if RUNTIME_TABLE not in db.tables or "StringIds" not in db.tables:
        return empty(EVENT_CALL_COLUMNS), None
    names = {}
    for i, value in db.rows("SELECT id, value FROM StringIds WHERE value LIKE 'cu%Event%'"):
        api = cuda_api.base_name(value)
        if api in EVENT_RECORD_APIS:
            names[int(i)] = "record"
        elif api in STREAM_WAIT_APIS:
            names[int(i)] = "wait"
    record_ids = [i for i, kind in names.items() if kind == "record"]
    if not record_ids:
        return empty(EVENT_CALL_COLUMNS), 0
    has_records = has_runner_records(marks)
    if not has_records:
        if CUDA_EVENT_TABLE in db.tables:
            return empty(EVENT_CALL_COLUMNS), int(
                db.rows(f"SELECT count(*) FROM {CUDA_EVENT_TABLE}")[0][0])
        if db.row_estimate(RUNTIME_TABLE) > COUNT_SCAN_ROWS:
            return empty(EVENT_CALL_COLUMNS), None
        ids = ",".join(map(str, record_ids))
        return empty(EVENT_CALL_COLUMNS), int(db.rows(
            f"SELECT count(*) FROM {RUNTIME_TABLE} WHERE nameId IN ({ids})")[0][0])
    ids = ",".join(map(str, names))
    # The calls and their streams read apart, on the reader threads, and joined here: SQLite
    # joining the runtime table to the stream tables took 1.5 s of a million-record report,
    # its scans of the three tables alone 0.6 s.
    calls_sql = f"""SELECT start AS start_ns, "end" AS end_ns, globalTid AS thread,
                           correlationId AS correlation_id, nameId AS name_id
                    FROM {RUNTIME_TABLE}
                    WHERE nameId IN ({ids}) AND start IS NOT NULL AND "end" IS NOT NULL
                      AND {BulkQueries.ROWS}"""
    # The stream of each record (CUDA_EVENT, with --cuda-event-trace) and of each wait
    # (SYNCHRONIZATION: the stream made to wait), by correlation id within the process.
    stream_sqls = [f"""SELECT correlationId AS correlation_id, globalPid AS process_key,
                              coalesce(streamId, -1) AS stream_id
                       FROM {table}
                       WHERE correlationId IS NOT NULL AND globalPid IS NOT NULL
                         AND {BulkQueries.ROWS}"""
                   for table in (CUDA_EVENT_TABLE, SYNC_TABLE)
                   if table in db.tables
                   and {"correlationId", "streamId", "globalPid"} <= db.columns(table)]
    db.prefetch(calls_sql, *stream_sqls)
    df = _frame(db, calls_sql, ids=("thread", "correlation_id"))
    df["process_key"] = df["thread"] - (df["thread"] & ID_MASK)
    streams = pd.concat([_frame(db, sql) for sql in stream_sqls] or [
        pd.DataFrame({c: np.array([], "int64") for c in ("correlation_id", "process_key",
                                                             "stream_id")})],
        ignore_index=True)
    # A left join, as SQL's: a call without a stream row keeps -1, one with two rows is two.
    df = df.merge(streams, on=["correlation_id", "process_key"], how="left", sort=False)
    df["stream_id"] = df["stream_id"].fillna(-1).astype("int64")
    df = df.sort_values("start_ns", kind="stable", ignore_index=True)
    df["pid"] = _pid(df["thread"])
    # A few names over a million rows: as a categorical (1 byte a row, compared by code).
    df["api"] = df["name_id"].map(names).astype("category")
    return df[EVENT_CALL_COLUMNS], int((df["api"] == "record").sum())


def _gpu_clock_metrics(db: Database) -> pd.DataFrame:
    """Clock samples from --gpu-metrics-devices (GPC/SYS clock), in MHz."""
    if "GPU_METRICS" not in db.tables or "TARGET_INFO_GPU_METRICS" not in db.tables:
        return empty(METRIC_COLUMNS)
    metric_ids = dict(db.rows(
        "SELECT DISTINCT metricId, metricName FROM TARGET_INFO_GPU_METRICS "
        "WHERE metricName LIKE '%Clock Frequency%'"
    ))
    if not metric_ids:
        return empty(METRIC_COLUMNS)
    df = _frame(db,
        f"""SELECT timestamp AS time_ns, typeId AS type_id, metricId AS metric_id,
                   value FROM GPU_METRICS
            WHERE metricId IN ({','.join(str(int(i)) for i in metric_ids)})
            ORDER BY timestamp"""
    )
    # typeId names the sampled GPU; number them in order, as nsys lists GPUs.
    df["device_id"] = pd.factorize(df.pop("type_id"), sort=True)[0].astype("int64")
    df["metric"] = df.pop("metric_id").map(metric_ids).str.replace(" Frequency [MHz]", "")
    # nsys 2025.3 stores clock values in Hz although the metric name says MHz.
    value = df["value"].astype("float64")
    df["value"] = np.where(value > 1e5, value / 1e6, value)
    return df[METRIC_COLUMNS]


def _meta(db: Database) -> dict[str, str]:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):  # 2025.x, 2022.x
        if table in db.tables:
            return {str(k): str(v) for k, v in db.rows(f"SELECT name, value FROM {table}")}
    return {}


def _report_info(db: Database, source: Path) -> ReportInfo:
    meta = _meta(db)
    start = end = None
    if "ANALYSIS_DETAILS" in db.tables and {"startTime", "stopTime"} <= db.columns(
        "ANALYSIS_DETAILS"
    ):
        row = db.rows("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")
        if row and row[0][0] is not None:
            start, end = int(row[0][0]), int(row[0][1])
    info = ReportInfo(
        path=db.path,
        source=source,
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        start_ns=start,
        end_ns=end,
        gpus=_gpus(db),
        session_start_utc_ns=_session_start(db),
        driver_version=_driver_version(db),
        rank_env=_rank_env(db),
    )
    command = _command(db)
    if command:
        info.show_command(command)
    return info


# Variables that number a process among its peers, as launchers set them: torchrun
# (RANK, LOCAL_RANK), Slurm, Open MPI, MPICH/PMI.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
                  "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK")


def _session_start(db: Database) -> int | None:
    if "TARGET_INFO_SESSION_START_TIME" not in db.tables or "utcEpochNs" not in db.columns(
            "TARGET_INFO_SESSION_START_TIME"):
        return None
    row = db.rows("SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME")
    return int(row[0][0]) if row and row[0][0] is not None else None


def _system_env(db: Database) -> dict[str, str]:
    """TARGET_INFO_SYSTEM_ENV as name -> value (driver, the nsys CLI's environment, ...)."""
    if "TARGET_INFO_SYSTEM_ENV" not in db.tables or not {"name", "value"} <= db.columns(
            "TARGET_INFO_SYSTEM_ENV"):
        return {}
    return {str(k): str(v) for k, v in db.rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")
            if k is not None and v is not None}


def _driver_version(db: Database) -> str | None:
    value = _system_env(db).get("NvDriverVersion")
    return value if value not in (None, "", "0") else None  # 2022.4 CPU exports write "0"


def _rank_env(db: Database) -> dict[str, str]:
    """The rank variables of the profiled program: from the environment nsys launched it
    with (META_DATA_CAPTURE, 2023+), else from the nsys CLI's own environment (the
    DeviceEnvironment entry: under torchrun, nsys runs inside each rank's environment).
    Empty where nsys ran around the launcher (all ranks in one report)."""
    found: dict[str, str] = {}
    if "META_DATA_CAPTURE" in db.tables:
        for (value,) in db.rows("SELECT value FROM META_DATA_CAPTURE "
                                "WHERE name LIKE '%ENVIRONMENT_VARIABLE'"):
            key, sep, val = str(value).partition("=")
            if sep and key in RANK_VARIABLES and key not in found:
                found[key] = val.strip('"')
    if not found:
        for item in _system_env(db).get("DeviceEnvironment", "").split(";"):
            key, sep, val = item.partition("=")
            if sep and key in RANK_VARIABLES:
                found.setdefault(key, val)
    return found


def _command(db: Database) -> list[str] | None:
    """The profiled command line, where nsys kept it (META_DATA_CAPTURE, 2023 and later)."""
    if "META_DATA_CAPTURE" not in db.tables:
        return None
    args: dict[int, str] = {}
    command = None
    for name, value in db.rows("SELECT name, value FROM META_DATA_CAPTURE "
                               "WHERE name LIKE 'PROCESS_0:%'"):
        key = str(name).split(":", 1)[1]
        if key == "COMMAND":
            command = str(value)
        elif key.startswith("ARGUMENT_") and key[9:].isdigit():
            args[int(key[9:])] = str(value)
    return [command, *(args[i] for i in sorted(args))] if command else None


def _gpus(db: Database) -> list[GpuInfo]:
    if "TARGET_INFO_GPU" not in db.tables:
        return []
    cols = db.columns("TARGET_INFO_GPU")
    want = ["id", "name", "smCount", "l2CacheSize", "computeMajor", "computeMinor", "clockRate"]
    select = ", ".join(c if c in cols else "NULL" for c in want)
    gpus = []
    for id_, name, sms, l2, major, minor, clock in db.rows(
        f"SELECT DISTINCT {select} FROM TARGET_INFO_GPU ORDER BY 1"
    ):
        gpus.append(GpuInfo(
            device_id=int(id_) if id_ is not None else len(gpus),
            name=str(name),
            sm_count=int(sms) if sms is not None else None,
            l2_bytes=int(l2) if l2 is not None else None,
            compute_capability=(f"{major}.{minor}" if major is not None and minor is not None
                                else None),
            max_clock_mhz=float(clock) / 1e6 if clock else None,  # clockRate is in Hz
        ))
    return gpus


def _thread_names(db: Database) -> dict[int, str]:
    """globalTid -> the thread's name (what `pthread_setname_np` or the OS called it)."""
    if "ThreadNames" not in db.tables or "globalTid" not in db.columns("ThreadNames"):
        return {}
    return {int(tid): str(name) for tid, name in db.rows(
        "SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN StringIds AS s "
        "ON s.id = t.nameId WHERE t.globalTid IS NOT NULL")}


def _process_names(db: Database) -> dict[int, str]:
    if "PROCESSES" not in db.tables:
        return {}
    # A process without a pid (NULL: a table another tool rebuilt) names nothing.
    return {int(pid): str(name) for pid, name in db.rows(
        "SELECT pid, coalesce(name, '') FROM PROCESSES WHERE pid IS NOT NULL")}
