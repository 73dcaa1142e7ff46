"""The program's own CUDA-event timings, reconciled with what the GPU did between the records.

An interval is one `elapsed_time()` result whose two records the report holds
(user_events.match_records). The events read the time between the moments the GPU reached
each record on its stream. What lies between them on that stream is the GPU work launched
onto it between the two record calls (any thread's: backward's kernels come from autograd
threads), plus work on streams it was made to wait for (`wait_stream`) before the end record.
Each interval is then described as a harness iteration is (reconcile.ITERATION_COLUMNS), so
the same checks judge it (diagnose/window.py and the others), and with what only an
unmodified program has:

  prior_busy_ns     work on the stream from before the start record, still running when it
                    was recorded: the start event waited for it (the window then holds no
                    launch overhead: back-pressure)
  lead_idle_ns      the GPU idle between the window's start and its first operation: the host
                    launching it (and the events' own dispatch)
  tail_idle_ns      the GPU idle between the last operation and the end record reaching it:
                    the host issuing the end record late (host work after the last launch)
  uncovered_busy_ns work the recording thread launched on other streams in the window, that
                    the end event does not wait for: the events miss it
  predicted_ns      the window the trace implies (from the start record, or the work it
                    waited for, to the end record or the last operation); the events should
                    read it plus nothing but their own small cost: residual_ns says how far

Intervals are grouped by call-site pair (start file:line -> end file:line), within the
do_bench call or Timer measurement that made them. `triton.testing.do_bench` and
`torch.utils.benchmark.Timer` are reconciled as the tools report: do_bench's returned figure
against the same statistic of the kernel time of its timed calls, Timer's figure per call
against the GPU work per call of each measurement (an NVTX range the runner opens).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..report import Report, thread_ids
from ..union import union_length
from .reconcile import BENCHMARK_COLUMNS
from .timing_groups import (
    GROUP_COLUMNS,
    USER_INTERVAL_COLUMNS,
    SiteLabels,
    grouped,
)
from .user_events import UserEvents, match_records

# How far back from a start record host copies on its stream are said to precede it.
COPIES_BEFORE_NS = 10_000_000
@dataclass
class UserTimings:
    """What `nsyswrap run` recorded of the program's own timing code, reconciled."""

    # One row per reconciled interval (USER_INTERVAL_COLUMNS): as harness iterations, per
    # group ("benchmark" is the group's label, "run" its number).
    intervals: pd.DataFrame = field(default_factory=lambda: _empty(USER_INTERVAL_COLUMNS))
    # One row per group (GROUP_COLUMNS), and the harness-shaped summary the checks read
    # (reconcile.benchmark_summary: event_median_ns, busy_median_ns, floor_ns, ...).
    groups: pd.DataFrame = field(default_factory=lambda: _empty(GROUP_COLUMNS))
    summary: pd.DataFrame = field(default_factory=lambda: _empty(
        [*BENCHMARK_COLUMNS, "label", "kind", "measured_by", "floor_source"]))
    # Records no elapsed_time() measured: pid, label (call site), records.
    unmeasured: pd.DataFrame = field(default_factory=pd.DataFrame)
    # elapsed_time() calls that raised or whose records the report lacks: label, reason, n.
    unreconciled: pd.DataFrame = field(default_factory=pd.DataFrame)
    records: int = 0  # record() calls the runner saw
    measured: int = 0  # elapsed_time() calls
    hook_cost_ns: float | None = None  # what the hooks add per record() (the runner's figure)
    notes: list[str] = field(default_factory=list)
    # Reports without the runner's records: how many CUDA event records they hold (None:
    # not counted), for the line that says `nsyswrap run` would reconcile them.
    event_records_in_report: int | None = None

    def __bool__(self) -> bool:
        return self.records > 0 or self.measured > 0 or not self.groups.empty


def _empty(columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="float64") for c in columns})


@dataclass
class GpuOps:
    """The report's GPU operations as the reconciliation reads them (numpy columns):
    start_ns, end_ns, launch_ns (the launching call's start; -1 unknown), thread (the
    launching thread's key), stream (the trace's stream id), kernel, host_copy, pageable
    (bool), bytes, name (a code into `names`)."""

    columns: dict[str, np.ndarray]
    names: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, gpu_ops: pd.DataFrame) -> GpuOps:
        """From an attribution's gpu_ops (analysis/gpu_ops.py)."""
        copy_kind = gpu_ops["copy_kind"].astype(str).to_numpy()
        src = gpu_ops["src_kind"].astype(str).to_numpy()
        dst = gpu_ops["dst_kind"].astype(str).to_numpy()
        host_copy = np.isin(copy_kind, ("HtoD", "DtoH"))
        names = pd.Categorical(gpu_ops["name"].astype(str))
        return cls({
            "start_ns": gpu_ops["start_ns"].to_numpy("int64"),
            "end_ns": gpu_ops["end_ns"].to_numpy("int64"),
            "launch_ns": gpu_ops["launch_start_ns"].to_numpy("int64"),
            "thread": np.asarray(gpu_ops["thread"].to_numpy(), dtype="int64"),
            "stream": gpu_ops["stream_id"].to_numpy("int64"),
            "kernel": (gpu_ops["kind"].astype(str) == "kernel").to_numpy(),
            "host_copy": host_copy,
            "pageable": host_copy & ((src == "pageable") | (dst == "pageable")),
            "bytes": gpu_ops["bytes"].to_numpy("int64"),
            "name": np.asarray(names.codes, dtype="int64"),
        }, [str(c) for c in names.categories])

    def __len__(self) -> int:
        return len(self.columns["start_ns"])


class _ByKey:
    """Operations (or calls) sorted by (key, launch time), with prefix sums for windows."""

    def __init__(self, key: np.ndarray, time: np.ndarray, values: dict[str, np.ndarray]):
        order = np.lexsort((time, key))
        self.key, self.time = key[order], time[order]
        self.values = {k: v[order] for k, v in values.items()}
        self.keys, self.starts = np.unique(self.key, return_index=True)
        self.ends = np.append(self.starts[1:], len(self.key))

    def bounds(self, key: np.ndarray, low: np.ndarray, high: np.ndarray,
               ) -> tuple[np.ndarray, np.ndarray]:
        """Rows [lo, hi) of each key whose time lies in (low, high)."""
        at = np.searchsorted(self.keys, key)
        at = np.minimum(at, max(len(self.keys) - 1, 0))
        known = (len(self.keys) > 0) & (self.keys[at] == key) if len(self.keys) else \
            np.zeros(len(key), bool)
        lo = np.zeros(len(key), "int64")
        hi = np.zeros(len(key), "int64")
        # A search per distinct key (a few streams or threads), not per window: a million
        # windows are a million Python steps otherwise.
        for k in np.unique(at[known]):
            rows = np.flatnonzero(known & (at == k))
            s, e = self.starts[k], self.ends[k]
            lo[rows] = s + np.searchsorted(self.time[s:e], low[rows], side="right")
            hi[rows] = s + np.searchsorted(self.time[s:e], high[rows], side="left")
        return lo, np.maximum(hi, lo)

    def cumulative(self, name: str) -> np.ndarray:
        return np.concatenate([[0], np.cumsum(self.values[name])])


def user_timings(report: Report, ops: GpuOps | None, blocking: pd.DataFrame,
                 floor_windows: pd.DataFrame | None = None) -> UserTimings:
    """The program's own timings in `report` (its marks hold the runner's records), against
    the GPU operations `ops` (None: a report without CUDA trace), the blocking calls
    (report.api_calls' columns) and the runner's event-floor windows (range instances named
    USER_FLOOR_RANGE: pid, start_ns, gpu_busy_ns)."""
    out = UserTimings(event_records_in_report=report.event_call_count)
    events = match_records(report)
    out.notes.extend(events.notes)
    if not events:
        return out
    out.records = int(sum(len(p.records) for p in events.processes))
    out.measured = int(sum(len(p.elapsed) for p in events.processes))
    costs = [p.hook_cost_ns for p in events.processes if p.hook_cost_ns is not None]
    out.hook_cost_ns = float(np.median(costs)) if costs else None
    if ops is None or not len(ops):
        out.notes.append("the report has no GPU operations: the program's timings are listed, "
                         "not reconciled")
    labels = SiteLabels(events)
    rows, unreconciled = _intervals(events, labels)
    out.unmeasured = _unmeasured(events, labels)
    out.unreconciled = unreconciled
    if not rows.empty and ops is not None and len(ops):
        _reconcile(rows, events, ops, blocking, report.event_calls)
    timers = _timer_measurements(events, labels, ops)
    if rows.empty and timers.empty:
        return out
    intervals, groups, summary = grouped(rows, timers, events, floor_windows, labels)
    out.intervals, out.groups, out.summary = intervals, groups, summary
    return out


def _intervals(events: UserEvents, labels: SiteLabels) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per elapsed_time() whose two records were matched; the others, counted by
    reason, in the second frame."""
    rec = events.records
    key = pd.MultiIndex.from_arrays([rec["pid"], rec["event"], rec["nth"]]) if len(rec) \
        else None
    frames, missing = [], []
    for p in events.processes:
        e = p.elapsed
        if not len(e):
            continue
        pid = np.full(len(e), p.pid, "int64")
        if key is None:
            start = end = np.full(len(e), -1)
        else:
            start = key.get_indexer(pd.MultiIndex.from_arrays(
                [pid, e["start_event"].to_numpy("int64"), e["start_nth"].to_numpy("int64")]))
            end = key.get_indexer(pd.MultiIndex.from_arrays(
                [pid, e["end_event"].to_numpy("int64"), e["end_nth"].to_numpy("int64")]))
        value = e["value_ms"].to_numpy("float64") * 1e6
        error = e["error"].to_numpy()
        ok = (start >= 0) & (end >= 0) & ~np.isnan(value)
        if len(rec):
            calls = rec["call"].to_numpy()
            ok &= (calls[np.maximum(start, 0)] >= 0) & (calls[np.maximum(end, 0)] >= 0)
        for i in np.flatnonzero(~ok):
            site = labels.site(p.pid, int(e["site"].iloc[i]))
            if error[i]:
                reason = f"raised {error[i].split(':')[0]}: {error[i].partition(': ')[2]}"
            elif start[i] < 0 or end[i] < 0:
                reason = "an event the runner did not see recorded (recorded from C++ or " \
                    "through torch.Event)"
            else:
                reason = "a record the report does not hold (outside the capture range?)"
            missing.append({"pid": p.pid, "label": f"elapsed_time at {site}",
                            "reason": reason})
        e_ok = np.flatnonzero(ok)
        frames.append(pd.DataFrame({
            "pid": p.pid, "start_record": start[e_ok], "end_record": end[e_ok],
            "elapsed_row": e_ok, "value_ns": value[e_ok],
            "measured_at_ns": e["before_ns"].to_numpy("int64")[e_ok]}))
    rows = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
    unreconciled = (pd.DataFrame(missing).groupby(["pid", "label", "reason"], sort=False)
                    .size().rename("count").reset_index() if missing else pd.DataFrame(
                        columns=["pid", "label", "reason", "count"]))
    if rows.empty:
        return rows, unreconciled
    # elapsed_time() called again on the same pair measures the same interval: once.
    rows = rows.drop_duplicates(["pid", "start_record", "end_record"], keep="first")
    s, t = rows["start_record"].to_numpy(), rows["end_record"].to_numpy()
    for col in ("thread", "tid", "site", "stream_id", "time_ns", "call_end_ns",
                "stream_handle"):
        values = rec[col].to_numpy("int64")
        rows[f"start_{col}"] = values[s]
        rows[f"end_{col}"] = values[t]
    return rows.reset_index(drop=True), unreconciled


def _unmeasured(events: UserEvents, labels: SiteLabels) -> pd.DataFrame:
    """Record call sites no elapsed_time() measured (torch's own Python records left out:
    wait_stream's, record_event's)."""
    rec = events.records
    if not len(rec):
        return pd.DataFrame(columns=["pid", "label", "records"])
    used = set()
    for p in events.processes:
        e = p.elapsed
        used |= {(p.pid, int(a), int(b)) for a, b in zip(e["start_event"], e["start_nth"],
                                                        strict=True)}
        used |= {(p.pid, int(a), int(b)) for a, b in zip(e["end_event"], e["end_nth"],
                                                        strict=True)}
    keys = zip(rec["pid"], rec["event"], rec["nth"], strict=True)
    lonely = np.array([(int(p), int(ev), int(n)) not in used for p, ev, n in keys])
    if not lonely.any():
        return pd.DataFrame(columns=["pid", "label", "records"])
    r = rec[lonely]
    out = r.groupby(["pid", "site"], sort=False).size().rename("records").reset_index()
    out["file"] = [labels.file(p, s) for p, s in zip(out["pid"], out["site"], strict=True)]
    out = out[~out["file"].map(_is_torch_file)]
    out["label"] = [labels.site(p, s) for p, s in zip(out["pid"], out["site"], strict=True)]
    return out[["pid", "label", "records"]].reset_index(drop=True)


def _is_torch_file(path: str) -> bool:
    return f"{os.sep}torch{os.sep}" in path or f"{os.sep}triton{os.sep}" in path


def _reconcile(rows: pd.DataFrame, events: UserEvents, ops: GpuOps, blocking: pd.DataFrame,
               event_calls: pd.DataFrame) -> None:
    """Fill each interval's GPU columns (see the module docstring), in place."""
    n = len(rows)
    col = ops.columns
    t0 = rows["start_time_ns"].to_numpy("int64")
    t1 = rows["end_time_ns"].to_numpy("int64")
    start_call_end = rows["start_call_end_ns"].to_numpy("int64")
    end_call_end = rows["end_call_end_ns"].to_numpy("int64")
    stream = rows["start_stream_id"].to_numpy("int64").copy()
    end_stream = rows["end_stream_id"].to_numpy("int64").copy()
    thread = rows["start_thread"].to_numpy("int64")
    pid = rows["pid"].to_numpy("int64")
    _unknown_streams(rows, stream, end_stream, thread, t0, t1, ops)

    launched = col["launch_ns"] >= 0
    dur = col["end_ns"] - col["start_ns"]
    op_pid, _ = thread_ids(col["thread"])
    # Per (process, stream), in launch order: on one stream the operations run one after
    # another, so busy time is a sum and the last launched ends last.
    stream_key = op_pid[launched] * (1 << 32) + (col["stream"][launched] & 0xFFFFFFFF)
    by_stream = _ByKey(stream_key, col["launch_ns"][launched], {
        "start": col["start_ns"][launched], "end": col["end_ns"][launched],
        "dur": dur[launched], "kernel": col["kernel"][launched].astype("int64"),
        "copy": col["host_copy"][launched].astype("int64"),
        "copy_ns": np.where(col["host_copy"], dur, 0)[launched],
        "bytes": np.where(col["host_copy"], col["bytes"], 0)[launched],
        "pageable": col["pageable"][launched].astype("int64"),
        "launch": col["launch_ns"][launched], "name": col["name"][launched]})
    key = pid * (1 << 32) + (stream & 0xFFFFFFFF)
    lo, hi = by_stream.bounds(key, t0, t1)
    v = by_stream.values
    count = hi - lo
    has = count > 0
    csum = {name: by_stream.cumulative(name) for name in ("dur", "kernel", "copy", "copy_ns",
                                                          "bytes", "pageable")}
    busy = (csum["dur"][hi] - csum["dur"][lo]).astype("float64")
    first = np.where(has, v["start"][np.minimum(lo, len(v["start"]) - 1)] if len(v["start"])
                     else 0, 0)
    # One stream runs its operations one after another: the last launched ends last.
    last_end = np.where(has, v["end"][np.maximum(hi - 1, 0)] if len(v["end"]) else 0, 0)
    # The last operation launched on the stream before the start record (same key only).
    key_start = _key_starts(by_stream, key)
    before = lo - 1
    prior = (before >= key_start) & (before >= 0)
    prior_end = np.where(prior, v["end"][np.maximum(before, 0)] if len(v["end"]) else 0, 0)
    first_launch = np.where(has, v["launch"][np.minimum(lo, max(len(v["launch"]) - 1, 0))]
                            if len(v["launch"]) else 0, 0)
    gaps, max_gap = _segment_gaps(v["start"], v["end"], lo, hi)
    # Host copies on the stream just before the start record: people read a slow window
    # that follows them as the copy's time (they are not in it when they ended before).
    # (Launched up to 5x as long before, for copies big enough to take that long.)
    blo, bhi = by_stream.bounds(key, t0 - 5 * COPIES_BEFORE_NS, t0)
    copies_before = np.zeros(n, "int64")
    copies_before_end = np.zeros(n, "int64")
    for i in np.flatnonzero(csum["copy"][bhi] > csum["copy"][blo]):
        s = slice(blo[i], bhi[i])
        near = (v["copy"][s] > 0) & (v["end"][s] >= t0[i] - COPIES_BEFORE_NS)
        if near.any():
            copies_before[i] = int(v["bytes"][s][near].sum())
            copies_before_end[i] = int(v["end"][s][near].max())

    # Work the recording thread launched on other streams in the window: joined when the
    # stream waited for it (a cudaStreamWaitEvent after its launch, before the end record),
    # else uncovered.
    uncovered_busy = np.zeros(n)
    uncovered_ops = np.zeros(n, "int64")
    joined_ops = np.zeros(n, "int64")
    joined_busy = np.zeros(n)
    joined_last = np.zeros(n, "int64")
    by_thread = _ByKey(col["thread"][launched], col["launch_ns"][launched], {
        "stream": col["stream"][launched], "start": col["start_ns"][launched],
        "end": col["end_ns"][launched], "dur": dur[launched]})
    tlo, thi = by_thread.bounds(thread, t0, t1)
    waits = event_calls[event_calls["api"] == "wait"]
    wait_thread = waits["thread"].to_numpy("int64")
    wait_time = waits["start_ns"].to_numpy("int64")
    wait_stream = waits["stream_id"].to_numpy("int64")
    tv = by_thread.values
    for i in np.flatnonzero((thi - tlo) > count):
        s = slice(tlo[i], thi[i])
        other = tv["stream"][s] != stream[i]
        if not other.any():
            continue
        launches = by_thread.time[s][other]
        mine = (wait_thread == thread[i]) & (wait_time < t1[i]) & (wait_time > t0[i]) & (
            (wait_stream == stream[i]) | (wait_stream == end_stream[i]) | (wait_stream < 0))
        last_wait = wait_time[mine].max() if mine.any() else -1
        # Work on the end record's own stream (start and end on two streams) is what the
        # end event waits for; other streams' only where the stream was made to wait.
        joined = (launches < last_wait) | (tv["stream"][s][other] == end_stream[i])
        starts, ends, durs = tv["start"][s][other], tv["end"][s][other], tv["dur"][s][other]
        joined_ops[i] = int(joined.sum())
        joined_busy[i] = float(durs[joined].sum())
        joined_last[i] = int(ends[joined].max()) if joined.any() else 0
        uncovered_ops[i] = int((~joined).sum())
        uncovered_busy[i] = float(union_length(starts[~joined], ends[~joined]))

    # The window the trace implies: from the start record (or the work it waited for) to
    # the end record (or the last operation, joined ones included).
    last_all = np.maximum(last_end, joined_last)
    est_start = np.maximum(start_call_end, prior_end)
    est_end = np.maximum(end_call_end, last_all)
    predicted = (est_end - est_start).astype("float64")
    lead = np.where(has, first - est_start, 0).astype("float64")
    tail = np.where(has | (joined_ops > 0), est_end - last_all, 0).astype("float64")
    span_end = np.maximum(last_end, joined_last)
    span = np.where(has, span_end - first, 0).astype("float64")
    covered_busy = busy + joined_busy

    # Blocking calls of the recording thread between the two records.
    b_thread = np.asarray(blocking["thread"].to_numpy(), dtype="int64") if len(blocking) \
        else np.zeros(0, "int64")
    by_call = _ByKey(b_thread, blocking["start_ns"].to_numpy("int64") if len(blocking)
                     else np.zeros(0, "int64"),
                     {"dur": (blocking["end_ns"] - blocking["start_ns"]).to_numpy("int64")
                      if len(blocking) else np.zeros(0, "int64")})
    clo, chi = by_call.bounds(thread, t0, t1)
    sync_ns = (by_call.cumulative("dur")[chi] - by_call.cumulative("dur")[clo]).astype("float64")

    value = rows["value_ns"].to_numpy("float64")
    rows["gpu_busy_ns"] = np.where(has | (joined_ops > 0), covered_busy, np.nan)
    rows["gpu_first_start_ns"] = np.where(has, first, np.nan)
    rows["gpu_last_end_ns"] = np.where(has, span_end, np.nan)
    rows["gpu_span_ns"] = np.where(has, span, np.nan)
    # The harness's span: what the work launched in the window spans, missed streams too,
    # so that UNCOVERED_STREAM reads it as for the harness.
    rows["gpu_span_ns"] = np.maximum(rows["gpu_span_ns"].fillna(0),
                                     uncovered_busy).where(has | (uncovered_ops > 0), np.nan)
    rows["internal_idle_ns"] = np.where(has, np.maximum(span - covered_busy, 0), np.nan)
    rows["gaps"] = gaps
    rows["max_gap_ns"] = max_gap.astype("float64")
    rows["gpu_ops"] = count + joined_ops
    rows["kernels"] = csum["kernel"][hi] - csum["kernel"][lo]
    rows["streams"] = 1 + (joined_ops > 0) + (uncovered_ops > 0)
    rows["launch_latency_ns"] = np.where(has, first - first_launch, np.nan)
    rows["copies"] = csum["copy"][hi] - csum["copy"][lo]
    rows["copy_ns"] = (csum["copy_ns"][hi] - csum["copy_ns"][lo]).astype("float64")
    rows["copy_bytes"] = csum["bytes"][hi] - csum["bytes"][lo]
    rows["pageable_copies"] = csum["pageable"][hi] - csum["pageable"][lo]
    rows["syncs"] = chi - clo
    rows["sync_ns"] = sync_ns
    rows["host_lead_ns"] = np.where(has, first_launch - t0, np.nan)
    rows["first_launch_ns"] = np.where(has, first_launch, np.nan)
    rows["predicted_ns"] = predicted
    rows["residual_ns"] = value - predicted
    rows["lead_idle_ns"] = lead
    rows["tail_idle_ns"] = tail
    rows["prior_busy_ns"] = np.maximum(prior_end - start_call_end, 0).astype("float64")
    rows["uncovered_busy_ns"] = uncovered_busy
    rows["uncovered_ops"] = uncovered_ops
    rows["joined_ops"] = joined_ops
    rows["copies_before_bytes"] = copies_before
    rows["copies_before_gap_ns"] = np.where(copies_before > 0, t0 - copies_before_end,
                                            np.nan)
    # The names of the window's operations, in order: windows timing the same work.
    rows["work"] = [" | ".join(ops.names[c] for c in v["name"][a:b]) if b - a <= 16
                    else f"{b - a} operations" for a, b in zip(lo, hi, strict=True)]


def _unknown_streams(rows, stream, end_stream, thread, t0, t1, ops: GpuOps) -> None:
    """Without CUDA event trace (nsys 2022.4, or --cuda-event-trace off) the records' streams
    in the trace are unknown (-1). torch gives each record its stream's handle: each handle
    is the trace's stream that most of its windows' first operations (launched by the
    recording thread after the start record) ran on (in place)."""
    unknown = (stream < 0) | (end_stream < 0)
    if not unknown.any():
        return
    col = ops.columns
    launched = col["launch_ns"] >= 0
    by_thread = _ByKey(col["thread"][launched], col["launch_ns"][launched],
                       {"stream": col["stream"][launched]})
    lo, hi = by_thread.bounds(thread, t0, t1)
    first = np.where(hi > lo, by_thread.values["stream"][np.minimum(
        lo, max(len(by_thread.key) - 1, 0))] if len(by_thread.key) else -1, -1)
    pid = rows["pid"].to_numpy("int64")
    handles = rows["start_stream_handle"].to_numpy("int64")
    votes = pd.DataFrame({"pid": pid, "handle": handles, "stream": first})
    votes = votes[votes["stream"] >= 0]
    best = (votes.groupby(["pid", "handle"])["stream"].agg(lambda v: v.value_counts().index[0])
            if len(votes) else pd.Series(dtype="int64"))
    lookup = best.to_dict()
    end_handles = rows["end_stream_handle"].to_numpy("int64")
    for i in np.flatnonzero(stream < 0):
        stream[i] = lookup.get((pid[i], handles[i]), first[i])
    for i in np.flatnonzero(end_stream < 0):
        end_stream[i] = lookup.get((pid[i], end_handles[i]), stream[i])
    rows["start_stream_id"] = stream
    rows["end_stream_id"] = end_stream


def _key_starts(by: _ByKey, key: np.ndarray) -> np.ndarray:
    """The first row of each key's block (the number of rows where the key is absent)."""
    at = np.searchsorted(by.keys, key)
    at = np.minimum(at, max(len(by.keys) - 1, 0))
    if not len(by.keys):
        return np.zeros(len(key), "int64")
    found = by.keys[at] == key
    return np.where(found, by.starts[at], len(by.key))


def _segment_gaps(start: np.ndarray, end: np.ndarray, lo: np.ndarray, hi: np.ndarray,
                  ) -> tuple[np.ndarray, np.ndarray]:
    """Per window, the idle gaps between consecutive operations (count, longest)."""
    gaps = np.zeros(len(lo), "int64")
    longest = np.zeros(len(lo), "int64")
    for i in np.flatnonzero(hi - lo > 1):
        s, e = start[lo[i]:hi[i]], end[lo[i]:hi[i]]
        idle = s[1:] - np.maximum.accumulate(e)[:-1]
        idle = idle[idle > 0]
        gaps[i] = len(idle)
        longest[i] = idle.max() if len(idle) else 0
    return gaps, longest


def _timer_measurements(events: UserEvents, labels: SiteLabels,
                        ops: GpuOps | None) -> pd.DataFrame:
    """One row per measurement behind a Timer's figure (timeit, blocked_autorange,
    adaptive_autorange): the seconds it timed for `number` calls, against the GPU work its
    thread launched meanwhile, on any stream (Timer's clock waits for the whole device)."""
    out = []
    for p in events.processes:
        if p.offset_ns is None:
            continue
        measurements = [sc for sc in p.scopes if sc.get("kind") == "timer_measurement"]
        for sc in p.scopes:
            if not str(sc.get("kind", "")).startswith("timer."):
                continue
            returned = sc.get("returned") or {}
            raw = [float(x) for x in returned.get("raw_times") or []
                   if isinstance(x, (int, float))]
            number = int(returned.get("number_per_run") or 0)
            inside = [m for m in measurements
                      if sc["before_ns"] <= m.get("before_ns", -1) <= sc["after_ns"]
                      and m.get("thread") == sc.get("thread") and m.get("number") == number
                      and isinstance(m.get("returned"), float)]
            taken = []
            for seconds in raw:  # the measurements whose results Timer kept, in order
                match = next((m for m in inside if m not in taken
                              and abs(m["returned"] - seconds) <= 1e-12 * max(1, seconds)),
                             None)
                if match is not None:
                    taken.append(match)
            label = (f"Timer({sc.get('label') or '?'}) at "
                     f"{labels.site(p.pid, int(sc.get('site', -1)))}")
            tid = p.threads[int(sc.get("thread", 0))] if p.threads else -1
            for m in taken:
                out.append({
                    "pid": p.pid, "label": label, "kind": "timer", "calls": number,
                    "tid": tid, "start_time_ns": int(m["before_ns"] + p.offset_ns),
                    "end_time_ns": int(m["after_ns"] + p.offset_ns),
                    "value_ns": float(m["returned"]) * 1e9,
                    "measured_at_ns": int(m["before_ns"]),
                    "start_site": int(sc.get("site", -1)), "end_site": int(sc.get("site", -1)),
                    "scope": p.scopes.index(sc)})
    frame = pd.DataFrame(out)
    if frame.empty or ops is None or not len(ops):
        return frame
    col = ops.columns
    op_pid, op_tid = thread_ids(col["thread"])
    for i, r in frame.iterrows():
        mine = ((op_pid == r["pid"]) & (op_tid == r["tid"])
                & (col["launch_ns"] > r["start_time_ns"]) & (col["launch_ns"] < r["end_time_ns"]))
        starts, ends = col["start_ns"][mine], col["end_ns"][mine]
        has = bool(mine.any())
        frame.loc[i, "gpu_busy_ns"] = float(union_length(starts, ends)) if has else np.nan
        frame.loc[i, "gpu_first_start_ns"] = starts.min() if has else np.nan
        frame.loc[i, "gpu_last_end_ns"] = ends.max() if has else np.nan
        frame.loc[i, "gpu_span_ns"] = (ends.max() - starts.min()) if has else np.nan
        frame.loc[i, "gpu_ops"] = int(mine.sum())
        frame.loc[i, "kernels"] = int(col["kernel"][mine].sum())
        frame.loc[i, "streams"] = len(np.unique(col["stream"][mine]))
        order = np.argsort(starts)
        idle = starts[order][1:] - np.maximum.accumulate(ends[order])[:-1] if has else []
        idle = np.asarray(idle)[np.asarray(idle) > 0] if has else np.zeros(0)
        frame.loc[i, "gaps"] = len(idle)
        frame.loc[i, "max_gap_ns"] = float(idle.max()) if len(idle) else 0.0
        frame.loc[i, "internal_idle_ns"] = (
            frame.loc[i, "gpu_span_ns"] - frame.loc[i, "gpu_busy_ns"]) if has else np.nan
        frame.loc[i, "host_lead_ns"] = (col["launch_ns"][mine].min() - r["start_time_ns"]
                                        if has else np.nan)
        frame.loc[i, "copies"] = int(col["host_copy"][mine].sum())
        frame.loc[i, "copy_ns"] = float((ends - starts)[col["host_copy"][mine]].sum())
        frame.loc[i, "copy_bytes"] = int(col["bytes"][mine][col["host_copy"][mine]].sum())
        frame.loc[i, "pageable_copies"] = int(col["pageable"][mine].sum())
    # Timer synchronises around each measurement by design: its own syncs are no finding.
    frame["syncs"] = 0
    frame["sync_ns"] = 0.0
    frame["predicted_ns"] = frame["end_time_ns"] - frame["start_time_ns"]
    frame["residual_ns"] = frame["value_ns"] - frame["predicted_ns"]
    return frame

