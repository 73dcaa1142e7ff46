"""One window of the capture laid out as rows of marks: the data behind a timeline picture.

A window is drawn around a `Focus`: a span of host time on one thread and the GPU operations
that are its own. Two kinds of focus are made here: an NVTX range instance (a harness
iteration, or one instance of a user range; `WindowBuilder.build`) and one interval the
program timed itself (analysis/user_timings; `WindowBuilder.build_interval`). Either is
drawn by `WindowBuilder.draw` with everything the findings talk about inside it: the ranges
on the CPU, the launch calls (known only by their start), the host's syncs, the CUDA-event
window (or a Timer's measurement) and the program's record() calls, the GPU operations per
device and stream, and the idle gaps around and between the focus's own operations. This
module decides what is drawn; `charts.py` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..analysis.lanes import assign_lanes
from ..analysis.union import merge_intervals
from ..common.units import fmt_bytes, fmt_ns, plural
from ..comparison.result import Comparison
from ..diagnose import range_label
from ..read.report import thread_ids
from .page import finite

# What one timeline draws at most: a browser stays responsive with a few thousand marks.
MAX_OPS = 2000
MAX_INTERVAL_OPS = 500  # a Timer's measurement holds thousands of calls alike
MAX_RANGES = 300
MAX_GAPS = 500  # idle gaps drawn, the longest
MAX_LABELLED_GAPS = 3
LABEL_MIN_SHARE = 0.03  # of the window: shorter gaps and other work go unlabelled
EVENTS_NOTE = ("The report holds the CUDA events' duration, not their GPU timestamps: the event "
               "window is drawn ending where the timed stream's last operation (or the range) "
               "ends.")

# Legend entries, in legend order; charts.py gives each a colour.
KIND_NVTX = "NVTX range"
KIND_EVENTS = "CUDA events (estimated)"
KIND_TIMER = "Timer measurement"
KIND_RECORD = "event record() call"
KIND_LAUNCH = "launch call"
KIND_SYNC = "host blocked (sync)"
KIND_KERNEL = "kernel"
KIND_COPY_HOST = "memcpy host↔device"
KIND_COPY_DEVICE = "memcpy on device"
KIND_MEMSET = "memset"
KIND_GRAPH = "CUDA graph"
KIND_OTHER = "other GPU work"
KIND_GAP = "GPU idle gap"
KINDS = [KIND_NVTX, KIND_EVENTS, KIND_TIMER, KIND_RECORD, KIND_LAUNCH, KIND_SYNC, KIND_KERNEL,
         KIND_COPY_HOST, KIND_COPY_DEVICE, KIND_MEMSET, KIND_GRAPH, KIND_OTHER, KIND_GAP]
_HOST_COPIES = {"HtoD", "DtoH", "HtoA", "AtoH", "HtoH", "UVM HtoD", "UVM DtoH"}


@dataclass
class Window:
    """A timeline's data. Times in marks are µs from `origin_ns` (the focus's start)."""

    anchor: str  # id of the page element that shows it
    title: str
    origin_ns: int
    rows: list[str]  # row labels, top to bottom (numbers and fixed words only: no names)
    marks: list[dict[str, Any]] = field(default_factory=list)
    flows: list[dict[str, Any]] = field(default_factory=list)  # launch -> GPU op
    notes: list[str] = field(default_factory=list)  # what was capped or estimated
    bands: list[dict[str, Any]] = field(default_factory=list)  # shaded across every row
    x_title: str = "µs from the range's start"

    @property
    def span_us(self) -> tuple[float, float]:
        ends = [m["end_us"] for m in self.marks] or [0.0]
        starts = [m["start_us"] for m in self.marks] or [0.0]
        return min(starts), max(ends)


@dataclass
class Focus:
    """What a window is drawn around: host time on one thread (pid, tid) from `start_ns`
    (the window's origin) to `end_ns`, and `own`, the rows of gpu_ops that are its work (the
    window reaches their end too). `owner` names it in row labels and details ("GPU idle
    (this range)"), `foreign` the other work drawn beside it."""

    pid: int
    tid: int
    start_ns: int
    end_ns: int
    own: np.ndarray
    owner: str = "this range"
    foreign: str = "not this range's"
    x_title: str = "µs from the range's start"
    max_ops: int = MAX_OPS  # GPU operations drawn at most
    range_id: int | None = None  # the NVTX instance outlined among its thread's ranges
    # A mark on a row of its own (the CUDA-event window, a Timer's measurement): row (its
    # label), kind, name, start_ns, end_ns, label, detail.
    window: dict[str, Any] | None = None
    # Host calls drawn on the thread's row of CUDA calls (the program's record() calls):
    # time_ns, name, label, detail.
    host_marks: list[dict[str, Any]] = field(default_factory=list)
    # GPU idle at the edges of the window (before its first operation, after its last):
    # (start_ns, end_ns, label, detail), shaded across the rows.
    idle_edges: list[tuple[int, int, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _us(ns: float, origin: int) -> float:
    return round((float(ns) - origin) / 1e3, 4)


def _op_kind(kind: str, copy_kind: str) -> str:
    if kind == "kernel":
        return KIND_KERNEL
    if kind == "memcpy":
        return KIND_COPY_HOST if copy_kind in _HOST_COPIES else KIND_COPY_DEVICE
    return {"memset": KIND_MEMSET, "graph": KIND_GRAPH}.get(kind, KIND_KERNEL)


def _op_label(op, mine: bool, is_copy: bool, long: bool, foreign: str) -> str:
    """Copies of the focus say what they move; long work of others says what it is."""
    if is_copy and mine:
        pageable = " pageable" if "pageable" in (op.src_kind, op.dst_kind) else ""
        return f"{op.copy_kind or op.kind} {fmt_bytes(op.bytes)}{pageable}"
    if not mine and long:
        return f"{op.name} ({foreign})"
    return ""


def _op_detail(op: pd.Series) -> str:
    dur = fmt_ns(op["end_ns"] - op["start_ns"])
    if op["kind"] == "memcpy":
        route = f"{op['src_kind'] or '?'} → {op['dst_kind'] or '?'}"
        return f"{op['copy_kind']} {fmt_bytes(op['bytes'])} ({route}), {dur}"
    if op["kind"] == "memset":
        return f"memset {fmt_bytes(op['bytes'])}, {dur}"
    return dur


class WindowBuilder:
    """Builds windows from one Comparison; the lookups shared by all windows are made once."""

    def __init__(self, c: Comparison):
        a = c.analysis
        att = a.attribution
        self.ops = att.gpu_ops
        self.op_start = self.ops["start_ns"].to_numpy()
        self.op_end = self.ops["end_ns"].to_numpy()
        pairs = att.op_pairs
        self.pairs_by_range = (pd.Series(pairs["event"].to_numpy())
                               .groupby(pairs["range_id"].to_numpy()).indices
                               if not pairs.empty else {})
        self.pair_events = pairs["event"].to_numpy() if not pairs.empty else np.array([], int)
        self.instances = a.instances.frame()
        self.calls = att.blocking_calls
        self._op_threads: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None

    def ops_of(self, range_id: int) -> np.ndarray:
        """Rows of gpu_ops launched inside the range (nested ranges included)."""
        where = self.pairs_by_range.get(range_id)
        return np.array([], dtype="int64") if where is None else self.pair_events[where]

    def build(self, inst: pd.Series, anchor: str, title: str,
              event_ns: float | None = None) -> Window:
        """The window of an NVTX range instance; `event_ns`: a harness iteration's event
        time, drawn as the CUDA-event window."""
        own = self.ops_of(int(inst["range_id"]))
        focus = Focus(int(inst["pid"]), int(inst["tid"]), int(inst["start_ns"]),
                      int(inst["end_ns"]), own, range_id=int(inst["range_id"]))
        events = self._event_window(inst, own, event_ns)
        if events is not None:
            focus.window = {
                "row": "CUDA events", "kind": KIND_EVENTS, "name": "CUDA-event window",
                "start_ns": events[0], "end_ns": events[1],
                "label": f"events {fmt_ns(event_ns)}",
                "detail": f"{fmt_ns(event_ns)} as the events read; placed by estimate"}
        return self.draw(focus, anchor, title)

    def build_interval(self, iv: pd.Series, anchor: str, title: str) -> Window:
        """The window of one interval the program timed itself (a row of
        analysis.user_timings.intervals), from its start record: the two record() calls on
        the recording thread, the events' window where the trace places it (from the later
        of the start record and the work it waited for, to the later of the end record and
        the last operation), the GPU work launched between the records on the timed stream
        (and the recording thread's on other streams), the GPU idle before the first and
        after the last operation. A Timer's measurement is drawn as its host clock read it."""
        pid, t0, t1 = int(iv["pid"]), int(iv["start_ns"]), int(iv["end_ns"])
        timer = iv["kind"] == "timer"
        op_pid, op_tid, _ = self._threads()
        launch = self.ops["launch_start_ns"].to_numpy()
        stream = self.ops["stream_id"].to_numpy()
        between = (op_pid == pid) & (launch > t0) & (launch < t1)
        on_stream = between if timer else between & (stream == int(iv["stream_id"]))
        tid = self._recording_thread(pid, on_stream, launch, op_tid)
        own = np.flatnonzero(between & (op_tid == tid) if timer
                             else on_stream | (between & (op_tid == tid)))
        value = finite(iv["event_ns"])
        if timer:
            calls = int(iv["calls"] or 1)
            focus = Focus(pid, tid, t0, t1, own, owner="the measurement", foreign="not timed",
                          x_title="µs from the measurement's start", max_ops=MAX_INTERVAL_OPS)
            focus.window = {
                "row": "Timer", "kind": KIND_TIMER, "name": "Timer measurement",
                "start_ns": t0, "end_ns": t1,
                "label": f"Timer {fmt_ns(value)} for {calls:,} calls",
                "detail": f"{fmt_ns(value)} as Timer's host clock read it, "
                          f"{fmt_ns(value / calls if value is not None else None)} per call"}
            return self.draw(focus, anchor, title)
        focus = Focus(pid, tid, t0, t1, own, owner="the timed window", foreign="not timed",
                      x_title="µs from start.record()", max_ops=MAX_INTERVAL_OPS)
        first, last = finite(iv["gpu_first_start_ns"]), finite(iv["gpu_last_end_ns"])
        lead, tail = finite(iv["lead_idle_ns"]) or 0.0, finite(iv["tail_idle_ns"]) or 0.0
        predicted = finite(iv["predicted_ns"])
        prior = finite(iv["prior_busy_ns"]) or 0.0
        if first is not None and last is not None:
            start, end = int(first - lead), int(last + tail)
        else:  # no GPU work between the records: the end record bounds the window
            end = t1
            start = int(end - predicted) if predicted is not None else t0
        focus.window = {
            "row": "CUDA events", "kind": KIND_EVENTS, "name": "CUDA-event window",
            "start_ns": start, "end_ns": end, "label": f"events {fmt_ns(value)}",
            "detail": f"the events read {fmt_ns(value)}; the trace places their window "
                      f"({fmt_ns(end - start)}) from "
                      + ("the end of the work the start event waited for" if prior > 0
                         else "the start record")
                      + " to " + ("the end record" if tail > 0 or last is None
                                  else "the end of the last operation")}
        focus.host_marks = [
            {"time_ns": t0, "name": "start.record()", "label": "start.record()",
             "detail": "the program's start record (its cudaEventRecord call)"},
            {"time_ns": t1, "name": "end.record()", "label": "end.record()",
             "detail": f"the program's end record, {fmt_ns(t1 - t0)} after the start"}]
        if first is not None and lead > 0:
            focus.idle_edges.append((start, int(first), f"stream idle {fmt_ns(lead)} before",
                                     f"the timed stream idle {fmt_ns(lead)} from the window's "
                                     "start to its first operation: the host launching it"))
        if last is not None and tail > 0:
            focus.idle_edges.append((int(last), end, f"idle {fmt_ns(tail)} after",
                                     f"the GPU idle {fmt_ns(tail)} from the last operation "
                                     "to the end record: the host issuing it late"))
        if prior > 0:
            focus.notes.append(f"The start event waited {fmt_ns(prior)} for work launched "
                               "before start.record() (grey): back-pressure, "
                               "so no launch time is inside the window.")
        uncovered = finite(iv["uncovered_busy_ns"]) or 0.0
        if uncovered > 0:
            focus.notes.append(f"{fmt_ns(uncovered)} of GPU work this thread launched on "
                               "other streams between the records, which the end event does "
                               "not wait for: the events miss it.")
        if tid == pid and not on_stream.any():
            focus.notes.append("No GPU work was launched between the records; the records "
                               "are drawn on the process's main thread.")
        return self.draw(focus, anchor, title)

    def draw(self, focus: Focus, anchor: str, title: str) -> Window:
        """The window around `focus`: its origin at the focus's start, reaching the end of
        its host span, of its own GPU work and of its window mark."""
        own = focus.own
        origin = focus.start_ns
        end = focus.end_ns
        if len(own):
            end = max(end, int(self.op_end[own].max()))
        if focus.window is not None:
            end = max(end, int(focus.window["end_ns"]))
        win = Window(anchor, title, origin, [], x_title=focus.x_title)
        in_window = np.flatnonzero((self.op_start < end) & (self.op_end > origin))
        drawn = self._cap_ops(own, in_window, win, focus)
        self._cpu_rows(focus, origin, end, win)
        if focus.window is not None:
            w = focus.window
            win.rows.append(w["row"])
            win.marks.append({
                "row": len(win.rows) - 1, "kind": w["kind"], "name": w["name"],
                "start_us": _us(w["start_ns"], origin), "end_us": _us(w["end_ns"], origin),
                "label": w["label"], "detail": w["detail"]})
        self._launch_rows(focus, drawn, own, origin, end, win)
        self._gpu_rows(drawn, own, origin, win, focus.foreign)
        self._gap_row(focus, origin, win)
        win.notes.extend(focus.notes)
        return win

    # -- pieces -------------------------------------------------------------------------

    def _threads(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each operation's launching (pid, tid), and every thread key the report's
        operations and blocking calls name."""
        if self._op_threads is None:
            keys = np.asarray(self.ops["thread"].to_numpy(), dtype="int64")
            pid, tid = thread_ids(keys)
            known = np.unique(np.concatenate(
                [keys, np.asarray(self.calls["thread"].to_numpy(), dtype="int64")]))
            self._op_threads = (pid, tid, known)
        return self._op_threads

    @staticmethod
    def _recording_thread(pid: int, on_stream: np.ndarray, launch: np.ndarray,
                          op_tid: np.ndarray) -> int:
        """The thread that launched the first operation between the records onto the timed
        stream (the thread that recorded, as a rule: the interval rows do not name it);
        the process's main thread where none was launched."""
        rows = np.flatnonzero(on_stream)
        if not len(rows):
            return pid
        return int(op_tid[rows[np.argmin(launch[rows])]])

    def _thread_key(self, pid: int, tid: int) -> int:
        """The report's key of a thread (its globalTid)."""
        _, _, known = self._threads()
        kp, kt = thread_ids(known)
        hit = np.flatnonzero((kp == pid) & (kt == tid))
        return int(known[hit[0]]) if len(hit) else (pid << 24) | tid

    def _event_window(self, inst: pd.Series, own: np.ndarray,
                      event_ns: float | None) -> tuple[int, int] | None:
        """The events run on the stream they were recorded on, which the report does not
        name. Their window holds all of that stream's work in the iteration, so take a
        stream whose span fits in the event time (the closest fit: work on other streams
        may run longer, as UNCOVERED_STREAM says), else the stream of the first launch. The
        end event completes after that stream's last operation, and no earlier than it was
        recorded (the range's end)."""
        if event_ns is None or not np.isfinite(event_ns):
            return None
        end = int(inst["end_ns"])
        if len(own):
            ops = self.ops.iloc[own]
            spans = ops.groupby(["device_id", "stream_id"]).agg(
                start=("start_ns", "min"), end=("end_ns", "max"))
            fits = spans[spans["end"] - spans["start"] <= event_ns]
            if len(fits):
                key = (event_ns - (fits["end"] - fits["start"])).idxmin()
            else:
                first = ops["launch_start_ns"].where(ops["launch_start_ns"] >= 0,
                                                     ops["start_ns"]).idxmin()
                key = (ops.at[first, "device_id"], ops.at[first, "stream_id"])
            end = max(end, int(spans.at[key, "end"]))
        return end - int(event_ns), end

    def _cap_ops(self, own: np.ndarray, in_window: np.ndarray, win: Window,
                 focus: Focus) -> np.ndarray:
        """The focus's own operations first, then other work in the same time span; the
        longest ones when there are more than the focus's max_ops."""
        cap = focus.max_ops
        others = np.setdiff1d(in_window, own, assume_unique=False)
        total = len(own) + len(others)
        if total <= cap:
            return np.concatenate([own, others])
        dur = self.op_end - self.op_start
        keep_own = own[np.argsort(-dur[own], kind="stable")[:cap]]
        room = cap - len(keep_own)
        keep_others = others[np.argsort(-dur[others], kind="stable")[:room]] if room else []
        win.notes.append(f"{total:,} GPU operations fall in this window; the {cap:,} "
                         f"longest are drawn (those of {focus.owner} first).")
        return np.concatenate([keep_own, np.asarray(keep_others, dtype="int64")])

    def _cpu_rows(self, focus: Focus, origin: int, end: int, win: Window) -> None:
        """NVTX ranges of the focus's thread inside the window, one row per nesting depth;
        the focus's own instance is marked `selected`."""
        inst_all = self.instances
        mine = inst_all[(inst_all["pid"] == focus.pid) & (inst_all["tid"] == focus.tid)
                        & (inst_all["start_ns"] < end) & (inst_all["end_ns"] > origin)]
        if len(mine) > MAX_RANGES:
            win.notes.append(f"{len(mine):,} NVTX ranges on this thread overlap the window; "
                             f"the {MAX_RANGES} longest are drawn.")
            mine = mine.nlargest(MAX_RANGES, "cpu_ns")
        lanes = assign_lanes(mine.assign(thread=0)) if len(mine) else np.array([], int)
        depth_rows = {}
        for depth in sorted(set(lanes.tolist())):
            win.rows.append(f"CPU thread {focus.tid} · NVTX"
                            + (f" (depth {depth})" if depth else ""))
            depth_rows[depth] = len(win.rows) - 1
        for r, depth in zip(mine.itertuples(index=False), lanes.tolist(), strict=True):
            name = range_label(r.domain or "", r.name)
            win.marks.append({
                "row": depth_rows[depth], "kind": KIND_NVTX, "name": name,
                "start_us": _us(max(r.start_ns, origin), origin),
                "end_us": _us(min(r.end_ns, end), origin),
                "label": name, "detail": f"wall {fmt_ns(r.cpu_ns)}",
                "selected": bool(r.range_id == focus.range_id)})

    def _launch_rows(self, focus: Focus, drawn: np.ndarray, own: np.ndarray, origin: int,
                     end: int, win: Window) -> None:
        """A row per launching thread (and the focus's own thread): a tick per launch call,
        the host's syncs as bars, the focus's host calls, and a flow from each of the
        focus's launches to its op."""
        ops = self.ops.iloc[drawn]
        launch = ops["launch_start_ns"].to_numpy()
        thread = ops["thread"].to_numpy()
        known = (launch >= origin) & (launch <= end)
        calls = self.calls[(self.calls["start_ns"] < end) & (self.calls["end_ns"] > origin)]
        call_pid, call_tid = thread_ids(calls["thread"].to_numpy())
        own_thread = (call_pid == focus.pid) & (call_tid == focus.tid)
        keys = set(thread[known].tolist()) | set(calls["thread"].to_numpy()[own_thread].tolist())
        focus_key = self._thread_key(focus.pid, focus.tid) if focus.host_marks else None
        if focus_key is not None:
            keys.add(focus_key)
        rows = {}
        for key in sorted(keys):
            _, tid = thread_ids(np.array([key], dtype="int64"))
            win.rows.append(f"CPU thread {int(tid[0])} · CUDA calls")
            rows[key] = len(win.rows) - 1
        for m in focus.host_marks:
            t = _us(m["time_ns"], origin)
            win.marks.append({"row": rows[focus_key], "kind": KIND_RECORD, "name": m["name"],
                              "start_us": t, "end_us": t, "label": m["label"],
                              "detail": m["detail"]})
        own_set = set(own.tolist())
        for row, op, ok, t_ns, key in zip(drawn.tolist(), ops.itertuples(index=False),
                                         known.tolist(), launch.tolist(), thread.tolist(),
                                         strict=True):
            if not ok:
                continue
            t = _us(t_ns, origin)
            win.marks.append({"row": rows[key], "kind": KIND_LAUNCH,
                              "name": f"launch: {op.name}", "start_us": t, "end_us": t,
                              "label": "",
                              "detail": f"GPU start {fmt_ns(op.start_ns - t_ns)} later"})
            if row in own_set:
                win.flows.append({"row": rows[key], "x_us": t, "row2": None,
                                  "x2_us": _us(op.start_ns, origin), "op": row})
        for c in calls.itertuples(index=False):
            if c.thread not in rows:
                continue
            blocked = fmt_ns(c.end_ns - c.start_ns)
            win.marks.append({"row": rows[c.thread], "kind": KIND_SYNC, "name": str(c.api),
                              "start_us": _us(max(c.start_ns, origin), origin),
                              "end_us": _us(min(c.end_ns, end), origin),
                              "label": f"{c.api} {blocked}",
                              "detail": f"host blocked {blocked}"})

    def _gpu_rows(self, drawn: np.ndarray, own: np.ndarray, origin: int, win: Window,
                  foreign: str) -> None:
        ops = self.ops.iloc[drawn]
        own_set = set(own.tolist())
        streams = sorted(set(zip(ops["device_id"].tolist(), ops["stream_id"].tolist(),
                                 strict=True)))
        stream_rows = {}
        for device, stream in streams:
            win.rows.append(f"GPU {device} · stream {stream}")
            stream_rows[(device, stream)] = len(win.rows) - 1
        lo, hi = win.span_us if win.marks else (0.0, 0.0)
        long_us = max(hi - lo, 1e-3) * LABEL_MIN_SHARE * 3
        for row, op in zip(drawn.tolist(), ops.itertuples(index=False), strict=True):
            mine = row in own_set
            kind = _op_kind(op.kind, op.copy_kind) if mine else KIND_OTHER
            is_copy = op.kind in ("memcpy", "memset")
            detail = _op_detail(pd.Series(op._asdict()))
            long = (op.end_ns - op.start_ns) / 1e3 >= long_us
            win.marks.append({
                "row": stream_rows[(op.device_id, op.stream_id)], "kind": kind,
                "name": str(op.name), "start_us": _us(op.start_ns, origin),
                "end_us": _us(op.end_ns, origin),
                "label": _op_label(op, mine, is_copy, long, foreign),
                "detail": detail if mine else f"{detail}; {foreign}"})
        for flow in win.flows:
            op = self.ops.iloc[flow["op"]]
            flow["row2"] = stream_rows[(op["device_id"], op["stream_id"])]

    def _gap_row(self, focus: Focus, origin: int, win: Window) -> None:
        """Idle time between the focus's own operations (any stream): the gaps that
        LAUNCH_OVERHEAD, HOST_WORK_IN_WINDOW and GPU_IDLE_IN_RANGE count; and the idle
        edges of a timed window, each labelled and shaded across the rows."""
        own = focus.own
        gap_start = gap_end = np.array([], dtype="int64")
        if len(own) >= 2:
            start, end = merge_intervals(self.op_start[own], self.op_end[own])
            gap_start, gap_end = end[:-1], start[1:]
        edges = [e for e in focus.idle_edges if e[1] > e[0]]
        if not len(gap_start) and not edges:
            return
        win.rows.append(f"GPU idle ({focus.owner})")
        row = len(win.rows) - 1
        for s, e, label, detail in edges:
            band = {"start_us": _us(s, origin), "end_us": _us(e, origin)}
            win.bands.append(band)
            win.marks.append({"row": row, "kind": KIND_GAP, "name": "idle", **band,
                              "label": label, "detail": detail})
        if not len(gap_start):
            return
        length = gap_end - gap_start
        total = len(length)
        if total > MAX_GAPS:
            keep = np.sort(np.argsort(-length, kind="stable")[:MAX_GAPS])
            gap_start, gap_end, length = gap_start[keep], gap_end[keep], length[keep]
        lo, hi = win.span_us
        big = length >= (hi - lo) * 1e3 * LABEL_MIN_SHARE
        labelled = {i for i in np.argsort(-length, kind="stable")[:MAX_LABELLED_GAPS].tolist()
                    if big[i]}
        for i, (s, e) in enumerate(zip(gap_start.tolist(), gap_end.tolist(), strict=True)):
            win.marks.append({"row": row, "kind": KIND_GAP, "name": "idle",
                              "start_us": _us(s, origin), "end_us": _us(e, origin),
                              "label": f"idle {fmt_ns(e - s)}" if i in labelled else "",
                              "detail": f"no GPU work of {focus.owner} for {fmt_ns(e - s)}"})
        gaps = plural(total, "idle gap")
        if total > len(gap_start):
            win.notes.append(f"{gaps} between the GPU operations of {focus.owner}; the "
                             f"{len(gap_start):,} longest are drawn (hover for each), "
                             f"{len(labelled) or 'none'} labelled.")
        elif total > len(labelled):
            win.notes.append(f"{gaps} between the GPU operations of {focus.owner} (hover "
                             f"for each); {len(labelled) or 'none'} labelled.")

