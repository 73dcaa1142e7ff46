"""One window of the capture laid out as rows of marks: the data behind a timeline picture.

A window is one NVTX range instance (a harness iteration, or one instance of a user range),
with everything the findings talk about inside it: the range and the ranges nested in it on
the CPU, the launch calls (known only by their start), the host's syncs, the CUDA-event
window of a harness iteration, the GPU operations per device and stream, and the idle gaps
between the range's own operations. This module decides what is drawn; `charts.py` draws it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ..compare import Comparison
from ..diagnose import range_label
from ..intervals import assign_lanes, merge_intervals
from ..report import thread_ids
from ..units import fmt_bytes, fmt_ns

# What one timeline draws at most: a browser stays responsive with a few thousand marks.
MAX_OPS = 2000
MAX_RANGES = 300
MAX_LABELLED_GAPS = 3
LABEL_MIN_SHARE = 0.03  # of the window: shorter gaps and other work go unlabelled
EVENTS_NOTE = ("The report holds the CUDA events' duration, not their GPU timestamps: the event "
               "window is drawn ending where the timed stream's last operation (or the range) "
               "ends.")

# Legend entries, in legend order; charts.py gives each a colour.
KIND_NVTX = "NVTX range"
KIND_EVENTS = "CUDA events (estimated)"
KIND_LAUNCH = "launch call"
KIND_SYNC = "host blocked (sync)"
KIND_KERNEL = "kernel"
KIND_COPY_HOST = "memcpy host↔device"
KIND_COPY_DEVICE = "memcpy on device"
KIND_MEMSET = "memset"
KIND_GRAPH = "CUDA graph"
KIND_OTHER = "other GPU work"
KIND_GAP = "GPU idle gap"
KINDS = [KIND_NVTX, KIND_EVENTS, KIND_LAUNCH, KIND_SYNC, KIND_KERNEL, KIND_COPY_HOST,
         KIND_COPY_DEVICE, KIND_MEMSET, KIND_GRAPH, KIND_OTHER, KIND_GAP]
_HOST_COPIES = {"HtoD", "DtoH", "HtoA", "AtoH", "HtoH", "UVM HtoD", "UVM DtoH"}


@dataclass
class Window:
    """A timeline's data. Times in marks are µs from `origin_ns` (the range's start)."""

    anchor: str  # id of the page element that shows it
    title: str
    origin_ns: int
    rows: list[str]  # row labels, top to bottom (numbers and fixed words only: no names)
    marks: list[dict[str, Any]] = field(default_factory=list)
    flows: list[dict[str, Any]] = field(default_factory=list)  # launch -> GPU op
    notes: list[str] = field(default_factory=list)  # what was capped or estimated

    @property
    def span_us(self) -> tuple[float, float]:
        ends = [m["end_us"] for m in self.marks] or [0.0]
        starts = [m["start_us"] for m in self.marks] or [0.0]
        return min(starts), max(ends)


def _us(ns: float, origin: int) -> float:
    return round((float(ns) - origin) / 1e3, 4)


def _op_kind(kind: str, copy_kind: str) -> str:
    if kind == "kernel":
        return KIND_KERNEL
    if kind == "memcpy":
        return KIND_COPY_HOST if copy_kind in _HOST_COPIES else KIND_COPY_DEVICE
    return {"memset": KIND_MEMSET, "graph": KIND_GRAPH}.get(kind, KIND_KERNEL)


def _op_label(op, mine: bool, is_copy: bool, long: bool) -> str:
    """Copies of the range say what they move; long work of others says what it is."""
    if is_copy and mine:
        pageable = " pageable" if "pageable" in (op.src_kind, op.dst_kind) else ""
        return f"{op.copy_kind or op.kind} {fmt_bytes(op.bytes)}{pageable}"
    if not mine and long:
        return f"{op.name} (not this range's)"
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

    def ops_of(self, range_id: int) -> np.ndarray:
        """Rows of gpu_ops launched inside the range (nested ranges included)."""
        where = self.pairs_by_range.get(range_id)
        return np.array([], dtype="int64") if where is None else self.pair_events[where]

    def build(self, inst: pd.Series, anchor: str, title: str,
              event_ns: float | None = None) -> Window:
        own = self.ops_of(int(inst["range_id"]))
        origin = int(inst["start_ns"])
        end = int(inst["end_ns"])
        if len(own):
            end = max(end, int(self.op_end[own].max()))
        events = self._event_window(inst, own, event_ns)
        if events is not None:
            end = max(end, events[1])
        win = Window(anchor, title, origin, [])
        in_window = np.flatnonzero((self.op_start < end) & (self.op_end > origin))
        drawn = self._cap_ops(own, in_window, win)
        self._cpu_rows(inst, origin, end, win)
        if events is not None:
            win.rows.append("CUDA events")
            win.marks.append({
                "row": len(win.rows) - 1, "kind": KIND_EVENTS, "name": "CUDA-event window",
                "start_us": _us(events[0], origin), "end_us": _us(events[1], origin),
                "label": f"events {fmt_ns(event_ns)}",
                "detail": f"{fmt_ns(event_ns)} as the events read; placed by estimate"})
        self._launch_rows(inst, drawn, own, origin, end, win)
        self._gpu_rows(drawn, own, origin, win)
        self._gap_row(own, origin, win)
        return win

    # -- pieces -------------------------------------------------------------------------

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

    def _cap_ops(self, own: np.ndarray, in_window: np.ndarray, win: Window) -> np.ndarray:
        """The range's own operations first, then other work in the same time span; the
        longest ones when there are more than MAX_OPS."""
        others = np.setdiff1d(in_window, own, assume_unique=False)
        total = len(own) + len(others)
        if total <= MAX_OPS:
            return np.concatenate([own, others])
        dur = self.op_end - self.op_start
        keep_own = own[np.argsort(-dur[own], kind="stable")[:MAX_OPS]]
        room = MAX_OPS - len(keep_own)
        keep_others = others[np.argsort(-dur[others], kind="stable")[:room]] if room else []
        win.notes.append(f"{total:,} GPU operations fall in this window; the {MAX_OPS:,} "
                         "longest are drawn (the range's own first).")
        return np.concatenate([keep_own, np.asarray(keep_others, dtype="int64")])

    def _cpu_rows(self, inst: pd.Series, origin: int, end: int, win: Window) -> None:
        """NVTX ranges of the instance's thread inside the window, one row per nesting
        depth; the instance itself is marked `selected`."""
        inst_all = self.instances
        mine = inst_all[(inst_all["pid"] == inst["pid"]) & (inst_all["tid"] == inst["tid"])
                        & (inst_all["start_ns"] < end) & (inst_all["end_ns"] > origin)]
        if len(mine) > MAX_RANGES:
            win.notes.append(f"{len(mine):,} NVTX ranges on this thread overlap the window; "
                             f"the {MAX_RANGES} longest are drawn.")
            mine = mine.nlargest(MAX_RANGES, "cpu_ns")
        lanes = assign_lanes(mine.assign(thread=0)) if len(mine) else np.array([], int)
        depth_rows = {}
        for depth in sorted(set(lanes.tolist())):
            win.rows.append(f"CPU thread {int(inst['tid'])} · NVTX"
                            + (f" (depth {depth})" if depth else ""))
            depth_rows[depth] = len(win.rows) - 1
        for r, depth in zip(mine.itertuples(index=False), lanes.tolist(), strict=True):
            name = range_label(r.domain or "", r.name)
            win.marks.append({
                "row": depth_rows[depth], "kind": KIND_NVTX, "name": name,
                "start_us": _us(max(r.start_ns, origin), origin),
                "end_us": _us(min(r.end_ns, end), origin),
                "label": name, "detail": f"CPU {fmt_ns(r.cpu_ns)}",
                "selected": bool(r.range_id == inst["range_id"])})

    def _launch_rows(self, inst: pd.Series, drawn: np.ndarray, own: np.ndarray, origin: int,
                     end: int, win: Window) -> None:
        """A row per launching thread (and the range's own thread): a tick per launch call,
        the host's syncs as bars, and a flow from each of the range's launches to its op."""
        ops = self.ops.iloc[drawn]
        launch = ops["launch_start_ns"].to_numpy()
        thread = ops["thread"].to_numpy()
        known = (launch >= origin) & (launch <= end)
        calls = self.calls[(self.calls["start_ns"] < end) & (self.calls["end_ns"] > origin)]
        call_pid, call_tid = thread_ids(calls["thread"].to_numpy())
        own_thread = (call_pid == inst["pid"]) & (call_tid == inst["tid"])
        keys = sorted(set(thread[known].tolist())
                      | set(calls["thread"].to_numpy()[own_thread].tolist()))
        rows = {}
        for key in keys:
            _, tid = thread_ids(np.array([key], dtype="int64"))
            win.rows.append(f"CPU thread {int(tid[0])} · CUDA calls")
            rows[key] = len(win.rows) - 1
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

    def _gpu_rows(self, drawn: np.ndarray, own: np.ndarray, origin: int, win: Window) -> None:
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
            win.marks.append({
                "row": stream_rows[(op.device_id, op.stream_id)], "kind": kind,
                "name": str(op.name), "start_us": _us(op.start_ns, origin),
                "end_us": _us(op.end_ns, origin),
                "label": _op_label(op, mine, is_copy, (op.end_ns - op.start_ns) / 1e3 >= long_us),
                "detail": detail if mine else f"{detail}; not launched by this range"})
        for flow in win.flows:
            op = self.ops.iloc[flow["op"]]
            flow["row2"] = stream_rows[(op["device_id"], op["stream_id"])]

    def _gap_row(self, own: np.ndarray, origin: int, win: Window) -> None:
        """Idle time between the range's own operations (any stream): the gaps that
        LAUNCH_OVERHEAD, HOST_WORK_IN_WINDOW and GPU_IDLE_IN_RANGE count."""
        if len(own) < 2:
            return
        start, end = merge_intervals(self.op_start[own], self.op_end[own])
        gap_start, gap_end = end[:-1], start[1:]
        if not len(gap_start):
            return
        win.rows.append("GPU idle (this range)")
        row = len(win.rows) - 1
        length = gap_end - gap_start
        lo, hi = win.span_us
        big = length >= (hi - lo) * 1e3 * LABEL_MIN_SHARE
        labelled = {i for i in np.argsort(-length, kind="stable")[:MAX_LABELLED_GAPS].tolist()
                    if big[i]}
        for i, (s, e) in enumerate(zip(gap_start.tolist(), gap_end.tolist(), strict=True)):
            win.marks.append({"row": row, "kind": KIND_GAP, "name": "idle",
                              "start_us": _us(s, origin), "end_us": _us(e, origin),
                              "label": f"idle {fmt_ns(e - s)}" if i in labelled else "",
                              "detail": f"no GPU work of this range for {fmt_ns(e - s)}"})
        if len(gap_start) > len(labelled):
            win.notes.append(f"{len(gap_start)} idle gaps between this range's GPU operations "
                             f"(hover for each); {len(labelled) or 'none'} labelled.")
