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

from ..read.report import Report, empty, thread_ids
from .engine.windows import THREAD_BITS, pairs_in_windows, sorted_isin, stream_key
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
    return empty(columns, "float64")


@dataclass
class UserWindows:
    """The program's timed windows as the report's marks give them, before any GPU work is
    read: what the engine measures (`to_measure`, engine/windows.WindowTotals) and what
    user_timings needs besides the numbers."""

    events: UserEvents = field(default_factory=UserEvents)
    labels: SiteLabels | None = None
    # One row per matched elapsed_time() (see _intervals), and per Timer measurement:
    # user_timings takes both (they are left empty).
    rows: pd.DataFrame = field(default_factory=pd.DataFrame)
    timers: pd.DataFrame = field(default_factory=pd.DataFrame)
    unreconciled: pd.DataFrame = field(default_factory=pd.DataFrame)
    # Record call sites no elapsed_time() measured (_unmeasured), and how many
    # elapsed_time() calls the runner saw.
    unmeasured: pd.DataFrame = field(default_factory=pd.DataFrame)
    measured: int = 0

    def unknown_streams(self) -> bool:
        """Whether a record's stream is not in the trace (no CUDA event trace: nsys 2022.4,
        or --cuda-event-trace off): it is found by `vote`, from the GPU operations."""
        r = self.rows
        return bool(len(r)) and bool(((r["start_stream_id"] < 0)
                                      | (r["end_stream_id"] < 0)).any())

    def vote(self, thread: np.ndarray, launch: np.ndarray, stream: np.ndarray) -> None:
        """Without CUDA event trace the records' streams are unknown (-1). torch gives each
        record its stream's handle: each handle is the trace's stream that most of its
        windows' first operations (launched by the recording thread after the start
        record) ran on. In place; `thread`, `launch`, `stream`: every GPU operation's."""
        rows = self.rows
        known = launch >= 0
        t0 = rows["start_time_ns"].to_numpy("int64")
        t1 = rows["end_time_ns"].to_numpy("int64")
        w, e = pairs_in_windows(rows["start_thread"].to_numpy("int64") & THREAD_BITS, t0, t1,
                                thread[known] & THREAD_BITS, launch[known])
        first = np.full(len(rows), -1, "int64")
        if len(w):
            order = np.lexsort((e, launch[known][e], w))
            w, e = w[order], e[order]
            heads = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
            first[w[heads]] = stream[known][e[heads]]
        stream_now = rows["start_stream_id"].to_numpy("int64").copy()
        end_stream = rows["end_stream_id"].to_numpy("int64").copy()
        pid = rows["pid"].to_numpy("int64")
        handles = rows["start_stream_handle"].to_numpy("int64")
        votes = pd.DataFrame({"pid": pid, "handle": handles, "stream": first})
        votes = votes[votes["stream"] >= 0]
        best = (votes.groupby(["pid", "handle"])["stream"].agg(
            lambda v: v.value_counts().index[0]) if len(votes) else pd.Series(dtype="int64"))
        lookup = best.to_dict()
        end_handles = rows["end_stream_handle"].to_numpy("int64")
        for i in np.flatnonzero(stream_now < 0):
            stream_now[i] = lookup.get((pid[i], handles[i]), first[i])
        for i in np.flatnonzero(end_stream < 0):
            end_stream[i] = lookup.get((pid[i], end_handles[i]), stream_now[i])
        rows["start_stream_id"] = stream_now
        rows["end_stream_id"] = end_stream

    def to_measure(self, event_calls: pd.DataFrame) -> pd.DataFrame:
        """The windows as engine/windows.WindowTotals takes them: the event windows (with
        the last wait that joins other streams' work to each), then the Timer
        measurements."""
        r, t = self.rows, self.timers
        columns = {c: np.zeros(0, "int64") for c in ("start_ns", "end_ns", "stream_key",
                                                     "end_stream", "thread", "wait_ns")}
        parts = [pd.DataFrame(columns | {"by_stream": np.zeros(0, bool)})]
        if len(r):
            stream = r["start_stream_id"].to_numpy("int64")
            end_stream = r["end_stream_id"].to_numpy("int64")
            parts.append(pd.DataFrame({
                "start_ns": r["start_time_ns"].to_numpy("int64"),
                "end_ns": r["end_time_ns"].to_numpy("int64"),
                "stream_key": np.where(stream >= 0, stream_key(r["pid"], stream), -1),
                "end_stream": end_stream, "thread": r["start_thread"].to_numpy("int64"),
                "wait_ns": _last_waits(r, stream, end_stream, event_calls),
                "by_stream": True}))
        if len(t):
            thread = (t["pid"].to_numpy("int64") << 24) | t["tid"].to_numpy("int64")
            parts.append(pd.DataFrame({
                "start_ns": t["start_time_ns"].to_numpy("int64"),
                "end_ns": t["end_time_ns"].to_numpy("int64"), "stream_key": -1,
                "end_stream": -1, "thread": thread, "wait_ns": -1, "by_stream": False}))
        return pd.concat(parts, ignore_index=True)


def user_windows(report: Report) -> UserWindows:
    """The program's timed windows in `report`'s marks (the runner's records): its
    elapsed_time() intervals and Timer measurements."""
    events = match_records(report)
    out = UserWindows(events=events)
    if not events:
        return out
    out.labels = SiteLabels(events)
    out.rows, out.unreconciled = _intervals(events, out.labels)
    out.timers = _timer_measurements(events, out.labels)
    out.unmeasured = _unmeasured(events, out.labels)
    out.measured = int(sum(len(p.elapsed) for p in events.processes))
    # The windows' rows hold what each window needs of its records now, and of the records
    # only their contexts are left to read (timing_keys.identify); the elapsed_time() rows
    # are counted. 56 bytes a record and 40 an elapsed_time(), held through the engine
    # and the grouping otherwise.
    events.records = events.records[[c for c in events.records.columns if c == "context"]]
    for p in events.processes:
        p.elapsed = p.elapsed.iloc[:0].copy()
    return out


def user_timings(report: Report, windows: UserWindows, numbers: pd.DataFrame | None,
                 blocking: pd.DataFrame, host_copies: pd.DataFrame,
                 floor_windows: pd.DataFrame | None = None) -> UserTimings:
    """The program's own timings in `report`: its windows (user_windows) with the numbers
    the engine measured of them (WindowTotals.numbers, the event windows' rows then the
    Timer measurements'; None: a report without CUDA trace), the blocking calls
    (report.api_calls' columns), the host copies (Attribution.host_copies) and the
    runner's event-floor windows (range instances named USER_FLOOR_RANGE: pid, start_ns,
    gpu_busy_ns). Takes the windows' rows and Timer measurements from `windows` (left
    empty) and lets go of them and of `numbers` once read: at half a million windows they
    were ~150 MB held beside the intervals made of them while those were grouped."""
    out = UserTimings(event_records_in_report=report.event_call_count)
    events = windows.events
    out.notes.extend(events.notes)
    if not events:
        return out
    out.records = int(sum(p.record_count for p in events.processes))
    out.measured = windows.measured
    costs = [p.hook_cost_ns for p in events.processes if p.hook_cost_ns is not None]
    out.hook_cost_ns = float(np.median(costs)) if costs else None
    measured = numbers is not None and report.info.has_gpu_activity
    if not measured:
        out.notes.append("the report has no GPU operations: the program's timings are listed, "
                         "not reconciled")
    labels = windows.labels
    rows, timers = windows.rows, windows.timers
    # Copies of no rows: a view of none would keep the whole columns alive.
    windows.rows, windows.timers = rows.iloc[:0].copy(), timers.iloc[:0].copy()
    out.unmeasured = windows.unmeasured
    out.unreconciled = windows.unreconciled
    if measured:
        n = len(rows)
        if n:
            rows = _event_numbers(rows, numbers.iloc[:n].reset_index(drop=True), blocking,
                                  host_copies)
        if len(timers):
            _timer_numbers(timers, numbers.iloc[n:].reset_index(drop=True))
    numbers = None
    if rows.empty and timers.empty:
        return out
    frames = {"rows": rows, "timers": timers}
    del rows, timers
    out.intervals, out.groups, out.summary = grouped(frames, events, floor_windows, labels)
    return out


def _last_waits(rows: pd.DataFrame, stream: np.ndarray, end_stream: np.ndarray,
                event_calls: pd.DataFrame) -> np.ndarray:
    """Per window, the last cudaStreamWaitEvent of its recording thread between its records
    on its stream or the end record's (or on a stream not traced): the recording thread's
    work on other streams launched before it is joined; -1 none."""
    out = np.full(len(rows), -1, "int64")
    waits = event_calls[event_calls["api"] == "wait"]
    if not len(waits):
        return out
    wait_stream = waits["stream_id"].to_numpy("int64")
    wait_time = waits["start_ns"].to_numpy("int64")
    w, e = pairs_in_windows(rows["start_thread"].to_numpy("int64") & THREAD_BITS,
                            rows["start_time_ns"].to_numpy("int64"),
                            rows["end_time_ns"].to_numpy("int64"),
                            waits["thread"].to_numpy("int64") & THREAD_BITS, wait_time)
    mine = ((wait_stream[e] == stream[w]) | (wait_stream[e] == end_stream[w])
            | (wait_stream[e] < 0))
    np.maximum.at(out, w[mine], wait_time[e[mine]])
    return out


def _intervals(events: UserEvents, labels: SiteLabels) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One row per elapsed_time() whose two records were matched; the others, counted by
    reason, in the second frame."""
    rec = events.records
    rec_pid = rec["pid"].to_numpy("int64") if len(rec) else np.zeros(0, "int64")
    rec_key = _record_keys(rec["event"], rec["nth"]) if len(rec) else rec_pid
    frames, missing = [], []
    for p in events.processes:
        e = p.elapsed
        if not len(e):
            continue
        # Each elapsed_time()'s two records (rows of `rec`; -1: not recorded), by the
        # process's (event, nth) keys in order.
        mine = np.flatnonzero(rec_pid == p.pid)
        mine = mine[np.argsort(rec_key[mine], kind="stable")]
        start = _record_rows(rec_key[mine], mine, _record_keys(e["start_event"], e["start_nth"]))
        end = _record_rows(rec_key[mine], mine, _record_keys(e["end_event"], e["end_nth"]))
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
            "measured_at_ns": e["before_ns"].to_numpy("int64")[e_ok]}, copy=False))
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
        if col not in ("thread", "tid"):  # the recording thread is the start record's
            rows[f"end_{col}"] = values[t]
    return rows.reset_index(drop=True), unreconciled


def _unmeasured(events: UserEvents, labels: SiteLabels) -> pd.DataFrame:
    """Record call sites no elapsed_time() measured (torch's own Python records left out:
    wait_stream's, record_event's)."""
    rec = events.records
    if not len(rec):
        return pd.DataFrame(columns=["pid", "label", "records"])
    # Each record as one integer per process (event << 32 | nth: both are uint32).
    rec_pid = rec["pid"].to_numpy("int64")
    rec_key = _record_keys(rec["event"], rec["nth"])
    lonely = np.ones(len(rec), bool)
    for p in events.processes:
        e = p.elapsed
        mine = np.flatnonzero(rec_pid == p.pid)
        used = np.concatenate([_record_keys(e["start_event"], e["start_nth"]),
                               _record_keys(e["end_event"], e["end_nth"])])
        lonely[mine] = ~sorted_isin(rec_key[mine], np.sort(used))
    if not lonely.any():
        return pd.DataFrame(columns=["pid", "label", "records"])
    r = rec[lonely]
    out = r.groupby(["pid", "site"], sort=False).size().rename("records").reset_index()
    out["file"] = [labels.file(p, s) for p, s in zip(out["pid"], out["site"], strict=True)]
    out = out[~out["file"].map(_is_torch_file)]
    out["label"] = [labels.site(p, s) for p, s in zip(out["pid"], out["site"], strict=True)]
    return out[["pid", "label", "records"]].reset_index(drop=True)


def _record_keys(event: pd.Series, nth: pd.Series) -> np.ndarray:
    return (event.to_numpy("int64") << 32) | nth.to_numpy("int64")


def _record_rows(keys: np.ndarray, rows: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The row (of `rows`, in the order of the sorted `keys`) of each wanted key; -1 where
    none."""
    at = np.minimum(np.searchsorted(keys, wanted), max(len(keys) - 1, 0))
    found = (at < len(keys)) & (keys[at] == wanted) if len(keys) else np.zeros(len(wanted),
                                                                               bool)
    return np.where(found, rows[at] if len(rows) else -1, -1)


def _is_torch_file(path: str) -> bool:
    return f"{os.sep}torch{os.sep}" in path or f"{os.sep}triton{os.sep}" in path


def _event_numbers(rows: pd.DataFrame, m: pd.DataFrame, blocking: pd.DataFrame,
                   host_copies: pd.DataFrame) -> pd.DataFrame:
    """The event windows `rows` with their GPU columns (see the module docstring) from what
    the engine measured of each (`m`: WindowTotals.numbers)."""
    t0 = rows["start_time_ns"].to_numpy("int64")
    t1 = rows["end_time_ns"].to_numpy("int64")
    start_call_end = rows["start_call_end_ns"].to_numpy("int64")
    end_call_end = rows["end_call_end_ns"].to_numpy("int64")
    thread = rows["start_thread"].to_numpy("int64") & THREAD_BITS
    own = m["own_ops"].to_numpy("int64")
    has = own > 0
    joined_ops = m["joined_ops"].to_numpy("int64")
    uncovered_ops = m["uncovered_ops"].to_numpy("int64")
    first = np.nan_to_num(m["first_start_ns"].to_numpy("float64")).astype("int64")
    first_launch = np.nan_to_num(m["first_launch_ns"].to_numpy("float64")).astype("int64")
    # The last end of the work the window covers (its own and the joined operations).
    last_all = np.nan_to_num(m["last_end_ns"].to_numpy("float64")).astype("int64")
    prior_end = m["prior_end_ns"].to_numpy("int64")
    busy = m["gpu_busy_ns"].to_numpy("float64")
    uncovered_busy = m["uncovered_busy_ns"].to_numpy("float64")
    # The window the trace implies: from the start record (or the work it waited for) to
    # the end record (or the last operation, joined ones included).
    est_start = np.maximum(start_call_end, prior_end)
    est_end = np.maximum(end_call_end, last_all)
    predicted = (est_end - est_start).astype("float64")
    span = np.where(has, last_all - first, 0).astype("float64")
    sync_count, sync_ns = _syncs(thread, t0, t1, blocking)
    copies_before, copies_before_end = _copies_before(rows, t0, host_copies)

    value = rows["value_ns"].to_numpy("float64")
    # Made apart and joined once: 34 columns set one by one took ~2.5 ms each at half a
    # million windows (pandas inserts each into the frame's blocks).
    out: dict = {}
    out["gpu_busy_ns"] = np.where(has | (joined_ops > 0), busy, np.nan)
    out["gpu_first_start_ns"] = np.where(has, first, np.nan)
    out["gpu_last_end_ns"] = np.where(has, last_all, np.nan)
    # The harness's span: what the work launched in the window spans, missed streams too,
    # so that UNCOVERED_STREAM reads it as for the harness.
    out["gpu_span_ns"] = np.where(has | (uncovered_ops > 0),
                                  np.maximum(span, uncovered_busy), np.nan)
    out["internal_idle_ns"] = np.where(has, np.maximum(span - busy, 0), np.nan)
    out["gaps"] = m["gaps"].to_numpy("int64")
    out["max_gap_ns"] = m["max_gap_ns"].to_numpy("float64")
    out["gpu_ops"] = own + joined_ops
    for c in ("kernels", "streams", "copies", "copy_ns", "copy_bytes", "pageable_copies",
              "uncovered_busy_ns", "uncovered_ops", "joined_ops", "work_ops",
              "work_signature", "main_kernel", "main_grid", "work"):
        out[c] = m[c].values  # the text columns stay categorical
    out["launch_latency_ns"] = np.where(has, first - first_launch, np.nan)
    out["syncs"] = sync_count
    out["sync_ns"] = sync_ns
    out["host_lead_ns"] = np.where(has, first_launch - t0, np.nan)
    out["first_launch_ns"] = np.where(has, first_launch, np.nan)
    out["predicted_ns"] = predicted
    out["residual_ns"] = value - predicted
    out["lead_idle_ns"] = np.where(has, first - est_start, 0).astype("float64")
    out["tail_idle_ns"] = np.where(has | (joined_ops > 0), est_end - last_all,
                                   0).astype("float64")
    out["prior_busy_ns"] = np.maximum(prior_end - start_call_end, 0).astype("float64")
    out["copies_before_bytes"] = copies_before
    out["copies_before_gap_ns"] = np.where(copies_before > 0, t0 - copies_before_end,
                                           np.nan)
    # Read by the engine and above only: 12 MB at half a million windows, held through the
    # grouping otherwise.
    rows = rows.drop(columns=["end_stream_id", "start_call_end_ns", "end_call_end_ns"])
    return pd.concat([rows, pd.DataFrame(out, index=rows.index, copy=False)], axis=1)


def _syncs(thread: np.ndarray, t0: np.ndarray, t1: np.ndarray, blocking: pd.DataFrame
           ) -> tuple[np.ndarray, np.ndarray]:
    """The recording thread's blocking calls between the two records: count and time."""
    count, time = np.zeros(len(t0), "int64"), np.zeros(len(t0))
    if not len(blocking):
        return count, time
    start = blocking["start_ns"].to_numpy("int64")
    w, e = pairs_in_windows(thread, t0, t1,
                            np.asarray(blocking["thread"].to_numpy(), "int64") & THREAD_BITS,
                            start)
    count += np.bincount(w, minlength=len(t0))
    time += np.bincount(w, weights=blocking["end_ns"].to_numpy("int64")[e] - start[e],
                        minlength=len(t0))
    return count, time


def _copies_before(rows: pd.DataFrame, t0: np.ndarray, host_copies: pd.DataFrame
                   ) -> tuple[np.ndarray, np.ndarray]:
    """Host copies on the window's stream just before its start record (bytes, last end):
    people read a slow window that follows them as the copy's time (they are not in it
    when they ended before). Launched up to 5x COPIES_BEFORE_NS before, for copies big
    enough to take that long, ended at most COPIES_BEFORE_NS before."""
    total, last = np.zeros(len(t0), "int64"), np.zeros(len(t0), "int64")
    copies = host_copies[host_copies["copy_kind"].astype(str).isin(("HtoD", "DtoH"))
                         & (host_copies["launch_start_ns"] >= 0)]
    if not len(copies):
        return total, last
    stream = rows["start_stream_id"].to_numpy("int64")
    keys = np.where(stream >= 0, stream_key(rows["pid"], stream), -1)
    pid, _ = thread_ids(copies["thread"].to_numpy())
    end = copies["end_ns"].to_numpy("int64")
    w, e = pairs_in_windows(keys, t0 - 5 * COPIES_BEFORE_NS, t0,
                            stream_key(pid, copies["stream_id"].to_numpy("int64")),
                            copies["launch_start_ns"].to_numpy("int64"))
    near = end[e] >= t0[w] - COPIES_BEFORE_NS
    w, e = w[near], e[near]
    total += np.bincount(w, weights=copies["bytes"].to_numpy("int64")[e],
                         minlength=len(t0)).astype("int64")
    np.maximum.at(last, w, end[e])
    return total, last


def _timer_measurements(events: UserEvents, labels: SiteLabels) -> pd.DataFrame:
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
    return pd.DataFrame(out)


def _timer_numbers(frame: pd.DataFrame, m: pd.DataFrame) -> None:
    """Each Timer measurement's GPU columns from what the engine measured of it (the GPU
    work its thread launched meanwhile, on any stream), in place."""
    has = m["own_ops"].to_numpy("int64") > 0
    first = m["first_start_ns"].to_numpy("float64")
    last = m["own_last_end_ns"].to_numpy("float64")
    busy = m["gpu_busy_ns"].to_numpy("float64")
    frame["gpu_busy_ns"] = np.where(has, busy, np.nan)
    frame["gpu_first_start_ns"] = np.where(has, first, np.nan)
    frame["gpu_last_end_ns"] = np.where(has, last, np.nan)
    frame["gpu_span_ns"] = np.where(has, last - first, np.nan)
    frame["gpu_ops"] = m["own_ops"].to_numpy("int64")
    for c in ("kernels", "streams", "gaps", "max_gap_ns", "copies", "copy_ns", "copy_bytes",
              "pageable_copies", "work_ops", "work_signature", "main_kernel", "main_grid"):
        frame[c] = m[c].values
    frame["internal_idle_ns"] = np.where(has, last - first - busy, np.nan)
    frame["host_lead_ns"] = np.where(
        has, m["first_launch_ns"].to_numpy("float64") - frame["start_time_ns"], np.nan)
    # Timer synchronises around each measurement by design: its own syncs are no finding.
    frame["syncs"] = 0
    frame["sync_ns"] = 0.0
    frame["predicted_ns"] = frame["end_time_ns"] - frame["start_time_ns"]
    frame["residual_ns"] = frame["value_ns"] - frame["predicted_ns"]
