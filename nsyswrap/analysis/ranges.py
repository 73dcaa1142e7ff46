"""NVTX ranges and the GPU work they launched (the "GPU projection").

A GPU operation (kernel, memcpy, memset, whole graph) belongs to a range when the runtime
call that launched it started inside the range on the same thread (joined by correlation
id in the loader): nsys's rule (`nvtx_gpu_proj_sum`), the "thread" attribution. A range
holds the work of the ranges nested in it. Busy time is the union of the operations'
intervals, so kernels that overlap on two streams count once; span runs from the first start
to the last end.

The "process" attribution (the default) adds the work that other threads of the same
process launched while the range was open, when the launching thread had no range of the
user's own open at that moment (a library's range, such as NCCL's around each collective,
is no ownership: analysis/domains.py). PyTorch runs backward on its autograd device
threads and DDP launches its all-reduces from autograd hooks there: under nsys's rule a
range around `loss.backward()` owns almost none of backward's kernels.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .._memory import release_freed_memory
from ..chunks import STEP_ROWS, ascending, cores, map_chunks, sort_in_place, steps
from ..intervals import (
    FEW_GROUPS,
    RangeSearch,
    assign_lanes,
    coded_by_steps,
    compact_ids,
    distinct_pairs_per_group,
    few_groups_median,
    group_bounds,
    group_order,
    grouped_median,
    grouped_median_by_steps,
    middle_of,
    no_pairs,
    range_starts,
    with_innermost,
)
from ..report import Report
from ..union import Cover, merge_intervals, union_stats_sorted
from .instance_table import InstanceTable

# Copies between host and device (what a timed window should rarely contain).
HOST_COPY_KINDS = frozenset({"HtoD", "DtoH", "HtoA", "AtoH", "HtoH", "UVM HtoD", "UVM DtoH"})


@dataclass
class Attribution:
    """Which range holds what: the raw pairs behind the per-range numbers."""

    gpu_ops: pd.DataFrame  # every GPU operation (kind, times, launch, name, copy details)
    op_pairs: pd.DataFrame  # range_id, event (row of gpu_ops), innermost, other_thread;
    #                         the op's own columns: pair_values (and kernel_ops)
    call_pairs: pd.DataFrame  # range_id, event (row of blocking_calls), innermost
    blocking_calls: pd.DataFrame  # report.api_calls plus range_id of the innermost range or -1
    host_copies: pd.DataFrame  # host<->device memcpy rows plus range_id (innermost) or -1
    rule: str = "process"  # ATTRIBUTION_RULES
    # Threads whose GPU work went to ranges of other threads (process rule): thread, gpu_ops
    other_threads: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(
        {"thread": pd.Series(dtype="int64"), "gpu_ops": pd.Series(dtype="int64")}))
    # How many GPU operations the report has: len(gpu_ops), unless the analysis streamed
    # them from the export and kept none (gpu_ops is then an empty frame).
    operations: int | None = None
    # Whether op_pairs holds every (range, operation) pair: only where asked for the
    # formats that draw them (analysis.analyze's keep_pairs); else an empty frame.
    pairs_kept: bool = True

    def __post_init__(self) -> None:
        if self.operations is None:
            self.operations = len(self.gpu_ops)


    def kernel_ops(self) -> np.ndarray:
        """Whether each gpu_ops row is a kernel (a pair's: kernel_ops()[event]). Per
        operation, not per pair: the pairs carry no such flag (20 MB at 10 M kernels)."""
        return (self.gpu_ops["kind"] == "kernel").to_numpy()

    def host_copy_ops(self) -> np.ndarray:
        """Whether each gpu_ops row is a host<->device copy (one of host_copies)."""
        mask = np.zeros(len(self.gpu_ops), dtype=bool)
        mask[self.host_copies.index.to_numpy()] = True
        return mask

    def pair_values(self, column: str, pairs: pd.DataFrame | None = None) -> np.ndarray:
        """A gpu_ops column for each pair (of op_pairs, or of a subset of it). Pairs carry
        only their event's row, not copies of its columns: a report has millions of pairs."""
        pairs = self.op_pairs if pairs is None else pairs
        return self.gpu_ops[column].to_numpy()[pairs["event"].to_numpy()]


# "process": a range also owns the work other threads of its process launched while it was
# open (see the module docstring); "thread": nsys's rule, as nvtx_gpu_proj_sum.
ATTRIBUTION_RULES = ("process", "thread")


OP_KINDS = ["kernel", "memcpy", "memset", "graph"]
_TIME_COLUMNS = ("start_ns", "end_ns", "thread", "launch_start_ns")
# Small ids, and the launching calls' durations (the trace draws them): in the narrowest
# integer type that holds them (_narrowest_int).
_ID_COLUMNS = ("device_id", "stream_id", "launch_ns")
_INT_COLUMNS = _TIME_COLUMNS + _ID_COLUMNS
# What gpu_ops reads of the report's kernels.
GPU_OPS_KERNEL_INPUT = [*_INT_COLUMNS, "short_name"]


def gpu_ops(report: Report, consume: bool = False) -> pd.DataFrame:
    """Kernels and transfers in one frame (RangeIndex: kernels first, in the report's order):
    kind, start_ns, end_ns, thread, launch_start_ns, device_id, stream_id, launch_ns, name,
    copy_kind, bytes, src_kind, dst_kind. Text columns and the launching thread are
    categorical: a million kernels share a few hundred names and a few dozen threads.
    `consume`: drop each kernel column from the report once it (and transfer column) is
    stacked, so that ten million kernels are not held twice."""
    k, t = report.kernels, report.transfers
    n = len(k)
    data = {}
    for c in _INT_COLUMNS:
        parts = [k[c].to_numpy(), t[c].to_numpy()]
        if c == "thread":
            # The launching thread: a few dozen distinct 64-bit ids, so a categorical (a
            # byte or two per operation, not eight: 77 MB fewer at 10 M kernels, held from
            # here to the end). `.to_numpy()` gives the ids back as numbers.
            data[c] = _int_categorical(parts)
            del parts
            if consume:
                del k[c], t[c]
            continue
        dtype = "int64" if c in _TIME_COLUMNS else _narrowest_int(parts)
        data[c] = np.concatenate(parts, dtype=dtype)
        del parts
        if consume:
            del k[c], t[c]
    # Kernels move no bytes: their part of the column is left unwritten, so its pages are
    # never made resident (np.zeros; 80 MB at 10 M kernels).
    data["bytes"] = np.zeros(n + len(t), "int64")
    data["bytes"][n:] = t["bytes"].to_numpy(dtype="int64")
    # Categoricals built from codes: factorizing a million repeated strings would cost more
    # than everything else here.
    data["kind"] = _stack_categoricals([("kernel", n)], t["op"], OP_KINDS)
    short = text_categorical(k["short_name"])
    ops = text_categorical(t["op"])
    names = list(short.categories) + [c for c in ops.categories if c not in set(short.categories)]
    data["name"] = pd.Categorical.from_codes(
        np.concatenate([short.codes, pd.Index(names).get_indexer(ops.categories)[ops.codes]
                        if len(ops) else np.array([], "int64")]).astype("int32"),
        categories=names)
    for c in ("copy_kind", "src_kind", "dst_kind"):
        data[c] = _stack_categoricals([("", n)], t[c])
    # copy=False: the columns are fresh arrays; pandas would otherwise copy them into one
    # block, holding every operation twice for a moment.
    return pd.DataFrame(data, copy=False)


def _narrowest_int(parts: list[np.ndarray]) -> np.dtype:
    """The narrowest signed integer type that holds every value of `parts` (devices and
    streams: a handful of small numbers, a byte or two per operation rather than four:
    ~60 MB fewer at 10 M kernels, held to the end). Whoever computes with them widens
    them first."""
    lo = min((int(p.min()) for p in parts if len(p)), default=0)
    hi = max((int(p.max()) for p in parts if len(p)), default=0)
    for dtype in (np.int8, np.int16, np.int32):
        if np.iinfo(dtype).min <= lo and hi <= np.iinfo(dtype).max:
            return np.dtype(dtype)
    return np.dtype(np.int64)


def _int_categorical(parts: list[np.ndarray]) -> pd.Categorical:
    """The parts' integers, joined, as a categorical with sorted categories (codes in the
    values' order), made a step at a time: no joined 64-bit copy of the values."""
    parts = [p.astype("int64", copy=False) for p in parts]
    codes, categories = coded_by_steps(
        lambda: (p[s] for p in parts for s in steps(len(p))), sum(len(p) for p in parts))
    return pd.Categorical.from_codes(codes, categories=pd.Index(categories, dtype="int64"))


def _stack_categoricals(constant: list[tuple[str, int]], values: pd.Series,
                        categories: list[str] | None = None) -> pd.Categorical:
    """`n` copies of a constant followed by `values`, as one categorical, from codes."""
    (fill, n), = constant
    vals = text_categorical(values)
    cats = list(categories or [])
    for c in [fill, *vals.categories]:
        if c not in cats:
            cats.append(c)
    index = pd.Index(cats)
    codes = np.empty(n + len(vals), dtype="int32")
    codes[:n] = index.get_loc(fill)
    if len(vals):
        codes[n:] = index.get_indexer(vals.categories)[vals.codes]
    return pd.Categorical.from_codes(codes, categories=cats)


def text_categorical(values: pd.Series) -> pd.Categorical:
    """A categorical of text whose categories are plain object strings, so that any two
    of them (also from empty frames) can be unioned."""
    cat = pd.Categorical(values.astype(str) if not isinstance(values.dtype, pd.CategoricalDtype)
                         else values)
    return cat.set_categories(pd.Index(cat.categories.astype(str), dtype=object), rename=True)


def attribute(report: Report, library: np.ndarray, rule: str = "process",
              consume: bool = False) -> Attribution:
    """Which range holds which GPU operation and blocking call, under `rule`. `library`:
    domains.library_mask of the report's ranges (the process rule gives library ranges no
    ownership; analyze computes it once for this and for the findings). `consume`: the
    report's kernel columns may be dropped as they are copied (see gpu_ops)."""
    attributor = Attributor(report.ranges, library, rule)
    ops = gpu_ops(report, consume)
    launches = _launches(ops)
    op_pairs, taken = attributor.op_pairs(launches)
    other_threads = None
    if rule == "process":
        # In event order, as np.unique would list them (value_counts breaks ties by order).
        other_threads = other_thread_counts(
            _thread_ids(launches["thread"], np.flatnonzero(taken[launches.index.to_numpy()]))
            if taken is not None else np.zeros(0, "int64"))
    calls = report.api_calls.reset_index(drop=True)
    call_pairs = attributor.call_pairs(calls)
    calls["range_id"] = innermost_of(call_pairs, np.arange(len(calls)))
    is_copy = host_copy_mask(ops)
    # The launching calls' durations are the trace's: the copies keep what the streamed
    # analysis keeps of them.
    copies = ops.loc[is_copy, [c for c in ops.columns if c != "launch_ns"]].copy()
    copies["range_id"] = innermost_of(op_pairs, copies.index.to_numpy())
    att = Attribution(ops, op_pairs, call_pairs, calls, copies, rule)
    if other_threads is not None:
        att.other_threads = other_threads
    return att


def host_copy_mask(ops: pd.DataFrame) -> np.ndarray:
    """Which operations are copies between host and device (HOST_COPY_KINDS)."""
    return ((ops["kind"] == "memcpy") & ops["copy_kind"].isin(HOST_COPY_KINDS)).to_numpy()


def other_thread_counts(threads: np.ndarray) -> pd.DataFrame:
    """Attribution.other_threads from the launching thread of each operation that went to
    other threads' ranges, in the operations' order: per thread how many, most first, ties
    in order of first appearance (value_counts')."""
    by_thread = pd.Series(threads, dtype="int64").value_counts()
    return other_threads_frame(by_thread.index.to_numpy(), by_thread.to_numpy())


def other_threads_frame(threads: np.ndarray, counts: np.ndarray) -> pd.DataFrame:
    """Attribution.other_threads from each thread and its count, in the order given."""
    return pd.DataFrame({"thread": np.asarray(threads, dtype="int64"),
                         "gpu_ops": np.asarray(counts, dtype="int64")})


class Attributor:
    """The report's ranges prepared once to attribute launches under a rule (see the module
    docstring), for all operations at once (attribute) or a chunk at a time (the streamed
    analysis): the range searches by thread and, for the process rule, the user's ranges by
    process, each sorted once (intervals.RangeSearch)."""

    def __init__(self, report_ranges: pd.DataFrame, library: np.ndarray,
                 rule: str = "process") -> None:
        if rule not in ATTRIBUTION_RULES:
            raise ValueError(f"attribution rule {rule!r}: choose from {ATTRIBUTION_RULES}")
        self.rule = rule
        # Shallow: the columns added below are the copy's own (a deep copy of ten million
        # ranges with their texts cost a second and 800 MB).
        ranges = report_ranges.copy(deep=False)
        ranges["lane"] = assign_lanes(ranges)
        self.starts = range_starts(ranges)
        self.by_thread = RangeSearch(ranges)
        self._user_ranges = self._user_by_process = None
        self._building = threading.Lock()
        if rule == "process":
            user = ~np.asarray(library, dtype=bool)
            self.is_user = np.zeros(int(ranges["range_id"].max()) + 1 if len(ranges) else 0,
                                    dtype=bool)
            self.is_user[ranges["range_id"].to_numpy()[user]] = True
            # Selected and sorted for its search on first use: a report whose every launch
            # is in a range of its own thread (the range-heavy one: 1 s and a copy of the
            # ranges at 10 M) needs none.
            self._user_ranges = (ranges, user)

    def calls_only(self) -> None:
        """Keep only what call_pairs needs (the search by thread): the process rule's search
        and its inputs are let go (the streamed analysis, once every operation is in)."""
        self._user_ranges = self._user_by_process = None
        self.is_user = None

    def user_by_process(self) -> RangeSearch:
        """The user's ranges prepared for the process rule's search (by process), once:
        the streamed analysis's chunks ask for it on several worker threads at once (four
        builds at the stream's start would be a ~300 MB spike on 16 cores)."""
        with self._building:
            return self._user_by_process_once()

    def _user_by_process_once(self) -> RangeSearch:
        if self._user_by_process is None and self._user_ranges[1].all():
            # Every range is the user's: the search by thread, keyed by process.
            self._user_by_process = self.by_thread.by_process()
            self._user_ranges = None
        if self._user_by_process is None:
            ranges, user = self._user_ranges
            # The process of each range: made here, for the rule that searches by it.
            ranges = ranges[user].copy(deep=False)
            ranges["process"] = ranges["thread"].to_numpy(dtype="int64") >> 24
            self._user_by_process = RangeSearch(ranges, key="process")
            self._user_ranges = None
        return self._user_by_process

    def call_pairs(self, calls: pd.DataFrame) -> pd.DataFrame:
        """The ranges of each call's thread that hold its start (range_id, event: the
        call's row, innermost), sorted by event."""
        return self._sorted(self.by_thread.pairs(
            pd.DataFrame({"thread": calls["thread"], "time_ns": calls["start_ns"]})))

    def op_pairs(self, launches: pd.DataFrame, release: bool = True
                 ) -> tuple[pd.DataFrame, np.ndarray | None]:
        """(pairs, taken): every (range, operation) pair of the launches (_launches: thread
        and time_ns, labelled by operation row) under the rule, sorted by event with
        `innermost` and `other_thread` (with_innermost); and, under the process rule, which
        operation rows went to other threads' ranges (a mask by row), else None.
        `release`: give the search's temporaries back to the system between the searches
        (a collection and a trim: for a whole report's, not a chunk's)."""
        # nsys's rule: the launching thread's ranges. In the search's order: sorted by event
        # once, with the process rule's pairs.
        own = self.by_thread.pairs(launches)
        own = pd.DataFrame(own, copy=False) if own is not None else no_pairs()
        own["other_thread"] = np.zeros(len(own), dtype=bool)
        if release:
            release_freed_memory(len(own))  # the search's temporaries, before the next one
        if self.rule != "process":
            return with_innermost(self.starts, own), None
        return self._with_other_threads_work(launches, own)

    def _with_other_threads_work(self, launches: pd.DataFrame, pairs: pd.DataFrame
                                 ) -> tuple[pd.DataFrame, np.ndarray | None]:
        """The process rule: launches whose thread had no range of the user's own open go
        to the user's ranges of the same process that were open at that moment (on other
        threads: on its own thread there was none). Returns all pairs, sorted by event
        (with_innermost), and which operation rows went to other threads' ranges (None
        for none). `pairs`, the launching threads' own (in any order), is emptied: its
        columns move into the returned pairs."""
        # Lookups by position (range ids and event rows are small integers), not np.isin
        # and np.unique: sorting tens of millions of pairs cost seconds.
        n_events = int(launches.index.max()) + 1 if len(launches) else 0
        owned = np.zeros(n_events, dtype=bool)
        owned[pairs["event"].to_numpy()[self.is_user[pairs["range_id"].to_numpy()]]] = True
        # The orphans as the search reads them: process, time and row label (32-bit where it
        # fits), not a boolean-indexed copy of the launches (thread, time, 64-bit labels)
        # with the process added (~50 MB more at 10 M kernels, held through the search).
        label = launches.index.to_numpy()
        orphan = np.flatnonzero(~owned[label])
        orphans = pd.DataFrame({"process": _thread_ids(launches["thread"], orphan) >> 24,
                                "time_ns": launches["time_ns"].to_numpy()[orphan]},
                               index=pd.Index(compact_ids(label[orphan])), copy=False)
        del label, orphan
        extra = self.user_by_process().pairs(orphans) if len(orphans) else None
        del orphans
        if extra is None:
            return with_innermost(self.starts, pairs), None
        extra = pd.DataFrame(extra, copy=False)
        extra["other_thread"] = np.ones(len(extra), dtype=bool)
        taken = np.zeros(n_events, dtype=bool)
        taken[extra["event"].to_numpy()] = True
        combined = with_innermost(self.starts, pairs, extra)
        return combined, taken

    def _sorted(self, columns: dict[str, np.ndarray] | None) -> pd.DataFrame:
        if columns is None:
            return no_pairs("innermost")
        return with_innermost(self.starts, pd.DataFrame(columns, copy=False))


def _launches(ops: pd.DataFrame) -> pd.DataFrame:
    """The GPU operations whose launching call is in the report, as events for the range
    search: thread and time_ns (the call's start), labelled by their gpu_ops row. When every
    launch is known (the usual case) the columns are gpu_ops' own arrays, not copies: at
    10 M kernels the copies (and a process column, now made for the orphans alone) were
    ~300 MB beside the pairs at the attribution's peak."""
    launch = ops["launch_start_ns"].to_numpy()
    # The categorical as it is: the search makes the 64-bit ids for its sort alone, where
    # a copy here was held through the whole search (88 MB at 10 M kernels).
    thread = ops["thread"].array
    known = launch >= 0
    if known.all():
        return pd.DataFrame({"thread": thread, "time_ns": launch}, copy=False)
    return pd.DataFrame({"thread": thread[known], "time_ns": launch[known]},
                        index=np.flatnonzero(known), copy=False)


def _thread_ids(thread: pd.Series, rows: np.ndarray) -> np.ndarray:
    """The 64-bit thread ids at `rows` of gpu_ops' thread column (a categorical): gathered
    from the categories, not from every row's id made first."""
    return thread.cat.categories.to_numpy(dtype="int64")[thread.cat.codes.to_numpy()[rows]]


def innermost_of(pairs: pd.DataFrame, events: np.ndarray) -> np.ndarray:
    """The innermost range holding each event, -1 for none. Pairs are sorted by event with
    one innermost pair per event (with_innermost), so each event's pairs are found by a
    binary search and its innermost among them, one nesting level at a time: temporaries
    of the events' size, not of the pairs' (the innermost pairs' events and ranges drawn
    from 20 M pairs were 88 MB on the attribution's peak at 10 M kernels, for the host
    copies' few rows)."""
    out = np.full(len(events), -1, dtype="int64")
    pair_event = pairs["event"].to_numpy()
    if len(pair_event) == 0 or len(events) == 0:
        return out
    inner, range_id = pairs["innermost"].to_numpy(), pairs["range_id"].to_numpy()
    # Searched in the pairs' own integer type: a wider probe would make numpy convert
    # every pair's event to it.
    probe = np.asarray(events)
    if probe.dtype != pair_event.dtype and len(probe) and (
            probe.min() >= np.iinfo(pair_event.dtype).min
            and probe.max() <= np.iinfo(pair_event.dtype).max):
        probe = probe.astype(pair_event.dtype)
    lo = np.searchsorted(pair_event, probe, side="left")
    hi = np.searchsorted(pair_event, probe, side="right")
    todo = np.flatnonzero(hi > lo)
    at = lo[todo]
    while len(todo):
        found = inner[at]
        out[todo[found]] = range_id[at[found]]
        at += 1
        more = ~found & (at < hi[todo])
        todo, at = todo[more], at[more]
    return out


INSTANCE_COLUMNS = [
    "range_id", "domain", "name", "pid", "tid", "style", "start_ns", "end_ns", "cpu_ns",
    "gpu_ops", "kernels", "gpu_busy_ns", "gpu_span_ns", "gpu_idle_ns",
    "gpu_first_start_ns", "gpu_last_end_ns", "gaps", "max_gap_ns", "launch_latency_ns",
    "first_launch_ns", "streams", "gpu_device_busy_ns", "gpu_device_busy_cpu_ns",
    "gpu_busy_other_threads_ns",
    "syncs", "sync_ns", "copies", "copy_bytes", "copy_ns", "pageable_copies",
]


# The union's numbers (union_stats) and the instance columns they make.
UNION_INSTANCE_COLUMNS = {
    "count": "gpu_ops", "busy_ns": "gpu_busy_ns", "span_ns": "gpu_span_ns",
    "idle_ns": "gpu_idle_ns", "first_start_ns": "gpu_first_start_ns",
    "last_end_ns": "gpu_last_end_ns", "gaps": "gaps", "max_gap_ns": "max_gap_ns",
}


# What an instance's GPU work makes: unknown (NaN) where the report lost it.
GPU_INSTANCE_COLUMNS = [
    "gpu_ops", "kernels", "gpu_busy_ns", "gpu_span_ns", "gpu_idle_ns", "gpu_first_start_ns",
    "gpu_last_end_ns", "gaps", "max_gap_ns", "launch_latency_ns", "first_launch_ns",
    "streams", "gpu_device_busy_ns", "gpu_device_busy_cpu_ns", "gpu_busy_other_threads_ns",
]


def range_instances(report: Report, att: Attribution, consume: bool = False) -> InstanceTable:
    """One row per NVTX range instance with its wall time and its GPU projection.

    GPU columns are NaN when the report has no CUDA trace (unknown), 0 when the range
    launched nothing. syncs/copies count what happened anywhere inside the range, nested
    ranges included. Rows are the report's ranges, in their order. `index` (the instance's
    number in its family) is analyze's, once families are known.
    """
    r = report.ranges
    # Every column is packed as soon as it exists (InstanceTable), so that the ranges'
    # float64 numbers are never all held at once (1.6 GB at 10 M ranges); the report's own
    # columns too, which `consume` then drops from the report (330 MB at 10 M ranges).
    out = InstanceTable(len(r))
    for c in REPORT_RANGE_COLUMNS:
        out.set(c, r[c], relative_to="start_ns" if c == "end_ns" else None)
    out["cpu_ns"] = r["end_ns"].to_numpy() - r["start_ns"].to_numpy()
    if consume:
        report.ranges = r = r.iloc[:0].copy()
    del r

    pairs = att.op_pairs
    # One sort of the pairs by (range, GPU start) serves every per-range number below:
    # the unions, each range's first operation, and the streams and launch latencies,
    # which read it a chunk of whole ranges at a time (each range's number needs only its
    # own pairs), so that none of them holds a pair-sized array of its own beside the
    # order. (Made from the pairs apart, the latencies and the streams' keys were three
    # pair-sized arrays, ~400 MB at 10 M kernels, on the analysis's peak.) The blocking
    # calls and host copies inside each range (few rows, mostly pandas) go on a thread.
    has_gpu = report.info.has_gpu_activity
    ids = compact_ids(out.values("range_id"))
    position = lookup_table(ids, np.arange(len(out)))

    def fill(col: str) -> float:
        """What a range without GPU work has: 0 for its counts and busy, span, idle and
        gap times, where the report traced CUDA; unknown (NaN) otherwise, and for its
        first and last GPU times, launch latency and first launch."""
        zero = has_gpu and col in ("gpu_ops", "kernels", "gpu_busy_ns", "gpu_span_ns",
                                   "gpu_idle_ns", "gaps", "max_gap_ns", "streams")
        return 0.0 if zero else np.nan

    # Each per-range result is put at its instances' rows as soon as it is made (_by_row)
    # and packed.
    with ThreadPoolExecutor(max_workers=1) as pool:
        host_waits = pool.submit(_host_waits, att)
        by_range = _RangeOrder.of(att)
        out["streams"] = _by_row(_distinct_streams(by_range, att), ids, position,
                                 fill("streams"), fresh=True)
        out["launch_latency_ns"] = _by_row(_kernel_latency_medians(by_range, att), ids,
                                           position, fill("launch_latency_ns"), fresh=True)

    # The unions write their numbers into arrays at each range's row; the span and idle
    # time follow from them (_span_and_idle), so that two fewer range-sized arrays are held
    # while the union runs.
    union = {c: _filled(len(out), fill(col)) for c, col in UNION_INSTANCE_COLUMNS.items()
             if col not in ("gpu_span_ns", "gpu_idle_ns")}
    by_range.union(into=(position, union))
    out.set_many({UNION_INSTANCE_COLUMNS[c]: union.pop(c) for c in list(union)}, RELATIVE_TO)
    _span_and_idle(out, fill("gpu_span_ns"))
    own_busy = None
    if by_range.other_thread is not None:
        # What the other threads' work added to each range's busy time (process rule).
        own_busy = np.zeros(len(out))
        by_range.union(own_only=True, into=(position, {"busy_ns": own_busy}))
    firsts = by_range.firsts()
    out.set("first_launch_ns", _by_row(
        by_range.min_per_range(att.gpu_ops["launch_start_ns"].to_numpy()), ids, position,
        fill("first_launch_ns"), fresh=True), relative_to="start_ns")
    out["kernels"] = _by_row(by_range.count_per_range(att.kernel_ops()), ids, position,
                             fill("kernels"), fresh=True)
    del by_range
    release_freed_memory(len(pairs))  # the order's arrays and the unions' temporaries

    device_busy = _device_busy_within(
        out, position, att, firsts,
        [("gpu_first_start_ns", "gpu_last_end_ns"), ("start_ns", "end_ns")])
    out["gpu_device_busy_ns"] = device_busy.pop(0)
    out["gpu_device_busy_cpu_ns"] = device_busy.pop(0)
    if own_busy is not None:
        out["gpu_busy_other_threads_ns"] = np.subtract(out.values("gpu_busy_ns"), own_busy,
                                                       out=own_busy)
    else:
        out["gpu_busy_other_threads_ns"] = zero_where_known(out.values("gpu_busy_ns"))
    del own_busy

    # Blocking calls and host copies inside the range, nested ranges included.
    waits = host_waits.result()
    for col in HOST_WAIT_COLUMNS:
        if has_gpu:
            out[col] = _by_row(waits.pop(col), ids, position, 0, "int64")
        else:
            # Unknown without a CUDA trace, or when it was lost: the blocking calls are CUDA
            # runtime records, buffered and lost with the kernels (docs/nsys-quirks.md).
            out[col] = np.nan
    return out.reordered(INSTANCE_COLUMNS)


# Columns of range_instances that come from the report's ranges as they are.
REPORT_RANGE_COLUMNS = ["range_id", "domain", "name", "pid", "tid", "style", "start_ns", "end_ns"]

# Instance columns that are moments of the GPU's, kept as offsets from the range's start
# where narrower (InstanceTable.set).
RELATIVE_TO = {"gpu_first_start_ns": "start_ns", "gpu_last_end_ns": "start_ns",
               "first_launch_ns": "start_ns"}


def _span_and_idle(out: InstanceTable, fill: float) -> None:
    """gpu_span_ns (last end - first start) and gpu_idle_ns (span - busy) of the ranges with
    GPU work, as union_stats has them (exact: whole numbers below 2**53), `fill` for the
    others."""
    first = out.values("gpu_first_start_ns")
    known = ~np.isnan(first)
    span = np.full(len(out), fill)
    span[known] = out.values("gpu_last_end_ns")[known] - first[known]
    del first
    idle = np.full(len(out), fill)
    idle[known] = span[known] - out.values("gpu_busy_ns")[known]
    out["gpu_span_ns"] = span
    del span
    out["gpu_idle_ns"] = idle


def zero_where_known(values: np.ndarray) -> np.ndarray:
    """`values * 0`: 0 where known, NaN where not (never -0.0)."""
    out = np.zeros(len(values))
    unknown = np.isnan(values)
    if unknown.any():
        out[unknown] = np.nan
    return out


def _by_row(values: pd.Series, ids: np.ndarray, position: np.ndarray, fill: float,
            dtype: str = "float64", fresh: bool = False) -> np.ndarray:
    """`values` (by range id) as `dtype` at the rows of `ids` (range ids), `fill` elsewhere:
    `values.reindex(ids).astype(dtype).fillna(fill)` by gathers through `position` (row by
    range id: lookup_table), not a hash lookup of every id for each column. When every
    range has a value, in the same order (a range-heavy report), a copy (`fresh`: the
    values' own array, when they are the caller's to give away). A fill of 0 starts
    from np.zeros: pages the OS has not handed over yet, resident only where a value is
    written (most ranges have no blocking call or host copy: at 10 M ranges, six columns of
    76 MB, none of it resident, as long as the caller does not copy the array)."""
    keys = values.index.to_numpy()
    if len(keys) == len(ids) and np.array_equal(keys, ids):
        # `fresh`: the caller made `values` and drops it, so its array may be the result.
        return values.to_numpy(dtype=dtype, copy=not fresh)
    out = _filled(len(ids), fill, dtype)
    at = position.take(keys.astype("int64", copy=False), mode="clip")
    known = at >= 0
    out[at[known]] = values.to_numpy(dtype=dtype)[known]
    return out


def _filled(n: int, fill: float, dtype: str = "float64") -> np.ndarray:
    """`n` values of `fill`. A fill of 0 comes from np.zeros: pages the OS has not handed
    over yet, resident only where a value is later written."""
    return np.zeros(n, dtype) if fill == 0 else np.full(n, fill, dtype)


# Syncs and host copies: runtime calls and copies, known only where the CUDA trace is.
HOST_WAIT_COLUMNS = ("syncs", "sync_ns", "copies", "copy_bytes", "copy_ns", "pageable_copies")

def _host_waits(att: Attribution) -> dict[str, pd.Series]:
    """HOST_WAIT_COLUMNS per range id (only ranges that have any): the blocking calls and
    host copies inside each range, nested ranges included."""
    return {**call_waits(att), **_copy_waits(att)}


def call_waits(att: Attribution) -> dict[str, pd.Series]:
    """syncs and sync_ns per range id (only ranges that have any): the blocking calls
    inside each range, nested ranges included."""
    calls = att.blocking_calls
    call_pairs = att.call_pairs.merge(calls[["start_ns", "end_ns"]], left_on="event",
                                      right_index=True)
    call_ns = call_pairs["end_ns"] - call_pairs["start_ns"]
    return {"syncs": call_pairs.groupby("range_id").size(),
            "sync_ns": call_ns.groupby(call_pairs["range_id"]).sum()}


def _copy_waits(att: Attribution) -> dict[str, pd.Series]:
    """copies, copy_bytes, copy_ns and pageable_copies per range id (only ranges that
    have any): the host copies inside each range, nested ranges included."""
    out = {}
    pairs, ops = att.op_pairs, att.gpu_ops
    copy_pairs = pairs[att.host_copy_ops()[pairs["event"].to_numpy()]]
    row = copy_pairs["event"].to_numpy()
    copy_pairs = copy_pairs.assign(start_ns=ops["start_ns"].to_numpy()[row],
                                   end_ns=ops["end_ns"].to_numpy()[row],
                                   bytes=ops["bytes"].to_numpy()[row],
                                   src_kind=ops["src_kind"].to_numpy()[row],
                                   dst_kind=ops["dst_kind"].to_numpy()[row])
    g = copy_pairs.groupby("range_id")
    out["copies"] = g.size()
    out["copy_bytes"] = g["bytes"].sum()
    out["copy_ns"] = (copy_pairs["end_ns"] - copy_pairs["start_ns"]).groupby(
        copy_pairs["range_id"]).sum()
    pageable = (copy_pairs["src_kind"] == "pageable") | (copy_pairs["dst_kind"] == "pageable")
    out["pageable_copies"] = pageable.groupby(copy_pairs["range_id"]).sum()
    return out


def _kernel_latency_medians(order: _RangeOrder, att: Attribution) -> pd.Series:
    """Median launch latency (GPU start - launching call's start) of the kernels of each
    range that has any, by range id: a chunk of whole ranges of `order` at a time."""
    kernel_op = att.kernel_ops()
    start = att.gpu_ops["start_ns"].to_numpy()
    launch = att.gpu_ops["launch_start_ns"].to_numpy()

    def medians(range_id: np.ndarray, rows: np.ndarray) -> pd.Series:
        kernel = kernel_op[rows]
        rows = rows[kernel]
        latency = start[rows]  # a gather: the chunk's own array
        latency -= launch[rows]
        return grouped_median(range_id[kernel], latency, consume=True)

    return order.per_range(medians)


def _kernel_latency_median(att: Attribution, group_of_range: np.ndarray) -> pd.Series:
    """Median launch latency (GPU start - launching call's start) of the kernels pooled
    per group of ranges, by group id (`group_of_range`: indexed by range id, -1 for none;
    range ids past its end are in none). The pairs are read a step at a time, and the
    groups made anew in each of the median's passes: only the latencies are pair-sized
    (no gathered ranges or groups beside them: 80 MB at 10 M kernels)."""
    groups_past = int(group_of_range.max()) + 1 if len(group_of_range) else 0
    if 0 < groups_past <= FEW_GROUPS:
        return _few_groups_latency_median(att, group_of_range, groups_past)
    pairs, ops = att.op_pairs, att.gpu_ops
    kernel_op = att.kernel_ops()
    event, range_id = pairs["event"].to_numpy(), pairs["range_id"].to_numpy()
    start, launch = ops["start_ns"].to_numpy(), ops["launch_start_ns"].to_numpy()
    parts = steps(len(pairs))
    latency = np.empty(sum(int(np.count_nonzero(kernel_op[event[p]])) for p in parts),
                       dtype="int64")
    at = 0
    for part in parts:
        rows = event[part]
        rows = rows[kernel_op[rows]]
        latency[at:at + len(rows)] = start[rows]
        latency[at:at + len(rows)] -= launch[rows]
        at += len(rows)

    def groups():
        for part in parts:
            ids = range_id[part][kernel_op[event[part]]]
            yield group_of_range.take(ids, mode="clip")

    return grouped_median_by_steps(latency, groups)


def _few_groups_latency_median(att: Attribution, group_of_range: np.ndarray,
                               groups_past: int) -> pd.Series:
    """_kernel_latency_median for a few groups (a report's few range families, the usual
    case): each pair's group as one byte, then each group's latencies gathered into an
    array of their own and its middle values found by selection (few_groups_median's
    rule, pandas' median bit for bit), where a packed sort held every kernel pair's
    latency and the sort's merge buffer (~250 MB at 10 M kernels, on the analysis's peak):
    here the largest group's latencies (80 MB where one family holds every kernel)."""
    pairs, ops = att.op_pairs, att.gpu_ops
    kernel_op = att.kernel_ops()
    event, range_id = pairs["event"].to_numpy(), pairs["range_id"].to_numpy()
    start, launch = ops["start_ns"].to_numpy(), ops["launch_start_ns"].to_numpy()
    parts = steps(len(pairs))
    pair_group = np.empty(len(pairs), dtype=np.int8)  # -1: no group, or not a kernel
    counts = np.zeros(groups_past, dtype="int64")
    for part in parts:
        g = group_of_range.take(range_id[part], mode="clip")
        g[~kernel_op[event[part]]] = -1
        pair_group[part] = g
        counts += np.bincount(g[g >= 0], minlength=groups_past)
    present, medians = [], []
    for g in np.flatnonzero(counts).tolist():
        values = np.empty(int(counts[g]), dtype="int64")
        at = 0
        for part in parts:
            rows = event[part][pair_group[part] == g]
            values[at:at + len(rows)] = start[rows]
            values[at:at + len(rows)] -= launch[rows]
            at += len(rows)
        present.append(g)
        medians.append(middle_of(values))
    return pd.Series(np.array(medians, dtype="float64"), index=pd.Index(present, dtype="int64"))


@dataclass
class _RangeOrder:
    """The (range, operation) pairs sorted once by (range, GPU start), ties in pair order:
    the order that each range's union sweep reads. It holds each pair's range, operation
    row and whether another thread launched it, not the operations' times in that order:
    the unions gather those chunk by chunk (two 20 M-element int64 arrays fewer, 330 MB, at
    10 M kernels)."""

    range_id: np.ndarray
    rows: np.ndarray  # each one's row of gpu_ops
    other_thread: np.ndarray | None  # None: no pair is another thread's (a thread's own)
    start_ns: np.ndarray  # gpu_ops' columns, by row
    end_ns: np.ndarray
    _heads: np.ndarray | None = None  # heads() and ranges(), once made
    _ranges: np.ndarray | None = None

    @classmethod
    def of(cls, att: Attribution) -> _RangeOrder:
        """np.lexsort((each pair's GPU start, range_id)), in the pairs' order. Where it fits
        in 63 bits, each pair is one integer, (range, its operation's place in GPU start
        order, other thread), sorted in place: no gathered starts and no 64-bit
        permutation beside the pairs, and what is held through the unions is each pair's
        range, row and flag, not also the permutation (62 MB fewer at 10 M kernels; the
        peak while it is made is about lexsort's: the packed keys beside the columns drawn
        from them, 388 against 315 MiB of numpy allocations). That is lexsort's order
        because the pairs come sorted by operation (with_innermost) and each operation's
        place breaks ties in start by its row."""
        pairs, ops = att.op_pairs, att.gpu_ops
        start = ops["start_ns"].to_numpy(dtype="int64")
        end = ops["end_ns"].to_numpy(dtype="int64")
        rid, event = pairs["range_id"].to_numpy(), pairs["event"].to_numpy()
        other = pairs["other_thread"].to_numpy()
        other = other if other.any() else None
        place_bits = max(len(ops) - 1, 1).bit_length()
        range_bits = (int(rid.max()) if len(rid) else 0).bit_length()
        if range_bits + place_bits + 1 > 63 or not ascending(event):
            order = np.lexsort((start[event], rid))
            return cls(rid[order], event[order], None if other is None else other[order],
                       start, end)
        # The operations in GPU start order, ties by row (a stable sort: they are exported
        # nearly in that order), and each one's place in it.
        by_start = compact_ids(np.argsort(start, kind="stable"))
        place = np.empty(len(by_start), dtype=by_start.dtype)
        place[by_start] = np.arange(len(by_start), dtype=by_start.dtype)
        key = np.empty(len(rid), dtype="int64")
        for part in steps(len(rid)):
            k = key[part]
            k[:] = rid[part]
            k <<= place_bits
            k |= place[event[part]]
            k <<= 1
            if other is not None:
                k |= other[part]
        del place
        sort_in_place(key)
        n = len(key)
        range_id = np.empty(n, dtype=rid.dtype)
        in_rows = by_start.dtype == np.int32 and np.little_endian
        # The rows go into the front half of the keys' own memory where they are 32-bit
        # (below): no third pair-sized array beside the keys and the ranges (82 MB at
        # 10 M kernels, on the analysis's peak).
        rows = key.view(np.int32)[:n] if in_rows else np.empty(n, dtype=by_start.dtype)
        in_order = None if other is None else np.empty(n, dtype=bool)
        mask = (1 << place_bits) - 1
        k = None
        for part in steps(n):
            k = key[part]
            range_id[part] = k >> (place_bits + 1)
            if in_order is not None:
                in_order[part] = (k & 1).astype(bool)
            # Read before written: this step's rows land on bytes of keys at or before
            # its own, which later steps no longer read.
            rows[part] = by_start[(k >> 1) & mask]
        del by_start
        if in_rows:
            del rows, k
            # The keys' memory shrunk to the rows (realloc keeps the front, gives back
            # the rest); nothing else views it.
            key.resize((n + 1) // 2, refcheck=False)
            rows = key.view(np.int32)[:n]
        return cls(range_id, rows, in_order, start, end)

    def union(self, own_only: bool = False,
              into: tuple[np.ndarray, dict[str, np.ndarray]] | None = None
              ) -> pd.DataFrame | None:
        """union_stats per range of all pairs, or of the launching thread's own only;
        `into`: written into the caller's arrays instead (union_stats_sorted)."""
        keep = None
        if own_only and self.other_thread is not None:
            keep = ~self.other_thread
        return union_stats_sorted(self.range_id, self.start_ns, self.end_ns, keep,
                                  rows=self.rows, into=into)

    def heads(self) -> np.ndarray:
        """Where each range's pairs begin (its earliest operation's place in the order),
        made once for every per-range pass: 32-bit where it fits (a range-heavy report has
        a range per pair or two: an array of 40 MB, not 80, at 10 M ranges)."""
        if self._heads is None:
            rid = self.range_id
            change = np.empty(len(rid), dtype=bool)
            if len(rid):
                change[0] = True
                np.not_equal(rid[1:], rid[:-1], out=change[1:])
            self._heads = compact_ids(np.flatnonzero(change))
        return self._heads

    def ranges(self) -> np.ndarray:
        """Each range's id, in the order's (ascending): one array for the first operations
        and every per-range Series (40 MB each at 10 M ranges)."""
        if self._ranges is None:
            self._ranges = self.range_id[self.heads()]
        return self._ranges

    def chunks(self, size: int = STEP_ROWS) -> list[tuple[int, int, int, int]]:
        """(lo, hi, first head, last head + 1): the order's rows [lo, hi) of chunks of
        whole ranges, about `size` pairs each, with their places among heads()."""
        heads = self.heads()
        bounds = group_bounds(self.range_id, size, heads)
        places = np.searchsorted(heads, [lo for lo, _ in bounds]).tolist() + [len(heads)]
        return [(lo, hi, a, b) for (lo, hi), a, b in zip(bounds, places[:-1], places[1:],
                                                          strict=True)]

    def _reduced(self, ufunc: np.ufunc, op_values: np.ndarray, dtype) -> np.ndarray:
        """ufunc.reduceat of `op_values` (per gpu_ops row) over each range's operations, in
        the order of ranges(). Whole ranges a step at a time into one array of the ranges'
        size: each step's gathered values, not a pair-sized array (165 MB at 10 M
        kernels), nor a list of parts joined into a second copy (80 MB at 10 M ranges, on
        that report's peak)."""
        heads = self.heads()
        out = np.empty(len(heads), dtype=dtype)
        for lo, hi, a, b in self.chunks():
            ufunc.reduceat(op_values[self.rows[lo:hi]], heads[a:b] - lo, dtype=dtype,
                           out=out[a:b])
        return out

    def min_per_range(self, op_values: np.ndarray) -> pd.Series:
        """The least of `op_values` (per gpu_ops row) among each range's operations, indexed
        by range id."""
        return pd.Series(self._reduced(np.minimum, op_values, op_values.dtype),
                         index=self.ranges(), copy=False)

    def count_per_range(self, op_mask: np.ndarray) -> pd.Series:
        """How many of each range's operations are in `op_mask` (per gpu_ops row), for the
        ranges with any, by range id. (Counted from the pairs in their own order, a
        bincount of each step held two arrays of the largest range id's size: 160 MB at
        10 M ranges.)"""
        counts, ids = self._reduced(np.add, op_mask, np.int64), self.ranges()
        if not counts.all():  # else every range has some (a range-heavy report): no copies
            some = counts > 0
            counts, ids = counts[some], ids[some]
        return pd.Series(counts, index=ids, copy=False)

    def per_range(self, numbers: Callable[[np.ndarray, np.ndarray], pd.Series]
                  ) -> pd.Series:
        """numbers(range ids, gpu_ops rows) of chunks of whole ranges on every core, each
        a Series by range id, joined in range order: for a per-range number that needs only
        each range's own operations, a chunk's temporaries instead of pair-sized arrays.
        About two steps of pairs in flight over all cores (a step per chunk on 16 cores
        held ~30 MB of temporaries per core)."""
        rid, rows = self.range_id, self.rows
        size = max(1, 2 * STEP_ROWS // cores())
        parts = map_chunks(lambda lo, hi: numbers(rid[lo:hi], rows[lo:hi]),
                           [(lo, hi) for lo, hi, _, _ in self.chunks(size)])
        parts = [p for p in parts if len(p)]
        return pd.concat(parts) if parts else pd.Series([], dtype="float64")

    def firsts(self) -> tuple[np.ndarray, np.ndarray]:
        """(range id, gpu_ops row) of each range's earliest operation."""
        return self.ranges(), self.rows[self.heads()]


def _distinct_streams(order: _RangeOrder, att: Attribution) -> pd.Series:
    """How many (device, stream) pairs each range's operations ran on, for the ranges
    with any, by range id: a chunk of whole ranges of `order` at a time."""
    ops = att.gpu_ops
    # Streams numbered per operation, then gathered per pair: the numbering reads the
    # operations once (not every pair). The count of distinct streams per range does not
    # depend on the numbering: here each (device, stream)'s place among the distinct ones
    # (a report has a few dozen streams), the one operation-sized array.
    device, stream = ops["device_id"].to_numpy(), ops["stream_id"].to_numpy()
    codes, distinct = coded_by_steps(
        lambda: ((device[p].astype("int64") << 32) | stream[p].astype("int64")
                 for p in steps(len(ops))), len(ops))
    width = max(len(distinct), 1)

    def counts(range_id: np.ndarray, rows: np.ndarray) -> pd.Series:
        # Ranges counted from the chunk's first: the chunk's few ranges make a small
        # table of places.
        first = int(range_id[0])
        out = distinct_pairs_per_group(range_id - first, codes[rows], width)
        out.index += first
        return out

    return order.per_range(counts)


def _device_busy_within(inst: InstanceTable, row_of_range: np.ndarray, att: Attribution,
                        firsts: tuple[np.ndarray, np.ndarray],
                        windows: list[tuple[str, str]]) -> list[np.ndarray]:
    """Per window [lo, hi) of columns of `inst` (its GPU span, or its wall time): GPU time
    busy with *any* work (any thread, stream or process) inside each range's window, on the
    device of its first operation; NaN for ranges without GPU work. A range's own gaps are
    not idle GPU time when other threads fill them. Each device's busy intervals are merged
    once for all windows. `row_of_range`: each range id's row of `inst` (lookup_table);
    `firsts`: (range id, gpu_ops row) of each range's earliest operation."""
    out = [np.full(len(inst), np.nan) for _ in windows]
    pairs, ops = att.op_pairs, att.gpu_ops
    if pairs.empty:
        return out
    # Positions, not labels: assigning by label into a frame of a million ranges is slow.
    # Range-sized arrays are copied only where some ranges are left out (without GPU work,
    # or on another device): with ten million ranges each copy is 40-80 MB. Looked up by
    # gathers, not by the index's hash table (~300 MB at 10 M ranges).
    first_range, first_op = firsts
    position = row_of_range.take(first_range.astype("int64"), mode="clip")
    device_of_op = ops["device_id"].to_numpy()
    device = device_of_op[first_op]
    if (position < 0).any():
        device, position = device[position >= 0], position[position >= 0]
    start, end = ops["start_ns"].to_numpy(dtype="int64"), ops["end_ns"].to_numpy(dtype="int64")
    one_device = len(device_of_op) > 0 and device_of_op.min() == device_of_op.max()
    if len(position) == len(inst) and np.array_equal(position, np.arange(len(inst))):
        position = None  # every range, in order (a range-heavy report): no gathers
    for dev in np.unique(device):
        if one_device:  # the usual process: every operation and range, without copies
            rows, busy = position, Cover(*merge_intervals(start, end), consume=True)
        else:
            on_device = device_of_op == dev  # a mask, not a copy of every operation's row
            rows = np.flatnonzero(device == dev) if position is None else \
                position[device == dev]
            busy = Cover(*merge_intervals(start[on_device], end[on_device]), consume=True)
        for values, (lo, hi) in zip(out, windows, strict=True):
            # Each window's edges decoded at its ranges' rows only (packed columns).
            if rows is None:
                busy.within(inst.values(lo), inst.values(hi), None, values)
            else:
                values[rows] = busy.within(inst.values(lo, rows), inst.values(hi, rows))
        del busy
    return out


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


def pooled_latency(att: Attribution) -> Callable[[np.ndarray], pd.Series]:
    """range_summary's pooled launch latency from the attribution's pairs: for a group per
    range id (-1 for none), the median latency of every kernel of each group's ranges."""
    return lambda group_of_range: _kernel_latency_median(att, group_of_range)


def range_summary(instances: InstanceTable, att: Attribution | Callable,
                  by_process: bool = False) -> pd.DataFrame:
    """Instances grouped by (domain, family), or by (pid, domain, family) when
    `by_process`, heaviest CPU total first; `name` is the family's (analysis/families.py:
    `step {n}` for `step 0`, `step 1`, ...), `names` how many distinct names it holds.
    `processes` counts the processes a group's instances ran in. Reads the `family` and
    `family_id` columns that analyze gives the instances. `att`: the attribution, or a
    function of each range id's group (summary_groups, by range id) that gives the median
    launch latency of every kernel of each group's ranges, by group (pooled_latency)."""
    keys = ["pid", "domain", "family"] if by_process else ["domain", "family"]
    columns = (["pid"] if by_process else []) + SUMMARY_COLUMNS
    if instances.empty:
        return pd.DataFrame(columns=columns)
    group = summary_groups(instances, by_process)
    # Launch latency pooled over every kernel of every instance, not a median of medians
    # (pairs of ranges that are not among `instances` have no group). First, before the
    # grouped columns below exist: its pair-sized array on top of them set a 10 M-range
    # report's peak.
    latency = pooled_latency(att) if isinstance(att, Attribution) else att
    latency_by_group = latency(lookup_table(instances["range_id"].to_numpy(), group))
    # A column at a time, each decoded from the packed instances only while it is read:
    # a frame of the thirteen columns was 1 GB at 10 M ranges.
    grouped = _Grouped(group)
    out = pd.DataFrame({"count": grouped.sizes()})

    def aggregated(column: str, aggregates: tuple) -> dict[str, np.ndarray]:
        values = instances.values(column)
        got = {name: grouped.aggregate(values, how) for name, how in aggregates}
        if column == "gpu_busy_ns":
            # Sums of unknowns are unknown (no CUDA trace), not zero.
            got["unknown"] = grouped.known(values) == 0
        return got

    # Two columns at a time (numpy's passes run without the GIL): each holds two arrays of
    # the instances' size while it is aggregated.
    with ThreadPoolExecutor(max_workers=max(1, min(cores(), 2))) as pool:
        for got in pool.map(lambda spec: aggregated(*spec), _SUMMED):
            for name, values in got.items():
                if name == "unknown":
                    unknown = values
                else:
                    out[name] = values
    # Medians a column at a time, by packed sort where the values are whole numbers (times
    # are): pandas' grouped median of five columns held ~300 MB over the instances and
    # took 2 s at 10 M ranges, on that report's peak.
    for name, column in (("cpu_median_ns", "cpu_ns"), ("gpu_busy_median_ns", "gpu_busy_ns"),
                         ("gpu_busy_other_threads_median_ns", "gpu_busy_other_threads_ns"),
                         ("gpu_span_median_ns", "gpu_span_ns")):
        out[name] = _whole_median(group, instances.values(column)).reindex(out.index)
    # Not kept among the instance columns: freed once its median is taken. One array
    # (NaN written where the span is not positive), not the quotient and its masked copy.
    span = instances.values("gpu_span_ns")
    with np.errstate(divide="ignore", invalid="ignore"):
        share = instances.values("gpu_idle_ns") / span
    share[~(span > 0)] = np.nan
    del span
    out["gpu_idle_share_median"] = _whole_median(group, share).reindex(out.index)
    del share
    out["launch_latency_median_ns"] = latency_by_group.reindex(out.index)
    out["names"] = _distinct_by_group(group, _name_codes(instances["name"])).reindex(out.index)
    out["processes"] = _distinct_by_group(group, instances.values("pid")).reindex(out.index)
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


def _work_per_thread(ops: pd.DataFrame) -> pd.DataFrame:
    """work_per_thread of gpu_ops, its threads numbered by its categorical: its own codes,
    not its ids made again per operation."""
    return work_per_thread(ops["thread"].cat.codes.to_numpy(),
                           pd.Index(ops["thread"].cat.categories, dtype="int64"),
                           (ops["kind"] == "kernel").to_numpy(),
                           *(ops[c].to_numpy() for c in ("start_ns", "end_ns", "device_id")))


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


def process_summary(report: Report, att: Attribution | pd.DataFrame,
                    range_pids: pd.Series | None = None) -> pd.DataFrame:
    """One row per process that launched GPU work or opened NVTX ranges: what it ran, on
    which devices. Worker processes and torchrun ranks show up here. `att`: the
    attribution, or its operations' work per launching thread (_work_per_thread's frame);
    `range_pids`: the report's ranges' pid column, for a caller that lets the report's
    ranges go while this runs."""
    per_thread = _work_per_thread(att.gpu_ops) if isinstance(att, Attribution) else att
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
    pids = report.ranges["pid"] if range_pids is None else range_pids
    ranges = pids.groupby(pids).size()
    out = out.reindex(out.index.union(ranges.index))
    out["nvtx_ranges"] = ranges.reindex(out.index).fillna(0).astype("int64")
    for col in ("kernels", "kernel_ns", "gpu_ops"):
        out[col] = out[col].fillna(0).astype("int64")
    out["devices"] = out["devices"].apply(lambda d: d if isinstance(d, list) else [])
    out["name"] = [report.info.processes.get(int(p), "") for p in out.index]
    return out.rename_axis("pid").reset_index()[PROCESS_COLUMNS]
