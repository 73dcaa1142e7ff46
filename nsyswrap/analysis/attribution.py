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
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..read.chunks import compact_ids
from ..read.report import empty
from .lanes import assign_lanes
from .range_search import RangeSearch, no_pairs, range_starts, with_innermost

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
    other_threads: pd.DataFrame = field(default_factory=lambda: empty(("thread", "gpu_ops")))
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



def other_threads_frame(threads: np.ndarray, counts: np.ndarray) -> pd.DataFrame:
    """Attribution.other_threads from each thread and its count, in the order given."""
    return pd.DataFrame({"thread": np.asarray(threads, dtype="int64"),
                         "gpu_ops": np.asarray(counts, dtype="int64")})



class Attributor:
    """The report's ranges prepared once to attribute launches under a rule (see the module
    docstring), for all operations at once (attribute) or a chunk at a time (the streamed
    analysis): the range searches by thread and, for the process rule, the user's ranges by
    process, each sorted once (range_search.RangeSearch)."""

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
