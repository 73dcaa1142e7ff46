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

from ..chunks import cores, steps
from ..intervals import (
    FEW_GROUPS,
    RangeSearch,
    assign_lanes,
    coded_by_steps,
    compact_ids,
    distinct_pairs_per_group,
    few_groups_median,
    group_order,
    grouped_median,
    no_pairs,
    range_starts,
    with_innermost,
)
from ..report import Report
from .instance_table import InstanceTable

# Copies between host and device (what a timed window should rarely contain).
HOST_COPY_KINDS = frozenset({"HtoD", "DtoH", "HtoA", "AtoH", "HtoH", "UVM HtoD", "UVM DtoH"})


@dataclass
class Attribution:
    """Which range holds what: the raw pairs behind the per-range numbers."""

    gpu_ops: pd.DataFrame  # every GPU operation (kind, times, launch, name, copy details)
    op_pairs: pd.DataFrame  # range_id, event (row of gpu_ops), innermost, other_thread;
    #                         the op's own columns: pair_values
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
        and its inputs are let go (the engine, once every operation is in)."""
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

    def op_pairs(self, launches: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray | None]:
        """(pairs, taken): every (range, operation) pair of the launches (a chunk's: thread
        and time_ns, labelled by the operation's row) under the rule, sorted by event with
        `innermost` and `other_thread` (with_innermost); and, under the process rule, which
        operation rows went to other threads' ranges (a mask by row), else None."""
        # nsys's rule: the launching thread's ranges. In the search's order: sorted by event
        # once, with the process rule's pairs.
        own = self.by_thread.pairs(launches)
        own = pd.DataFrame(own, copy=False) if own is not None else no_pairs()
        own["other_thread"] = np.zeros(len(own), dtype=bool)
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


def call_waits(att: Attribution) -> dict[str, pd.Series]:
    """syncs and sync_ns per range id (only ranges that have any): the blocking calls
    inside each range, nested ranges included."""
    calls = att.blocking_calls
    call_pairs = att.call_pairs.merge(calls[["start_ns", "end_ns"]], left_on="event",
                                      right_index=True)
    call_ns = call_pairs["end_ns"] - call_pairs["start_ns"]
    return {"syncs": call_pairs.groupby("range_id").size(),
            "sync_ns": call_ns.groupby(call_pairs["range_id"]).sum()}


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
    `family_id` columns that analyze gives the instances. `latency`: a function of each
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
