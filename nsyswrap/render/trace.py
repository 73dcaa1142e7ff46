"""The capture as Chrome trace-event JSON, for Perfetto (ui.perfetto.dev) and chrome://tracing.

CPU: one process per traced process, one thread per OS thread, holding the NVTX ranges
(push/pop ranges as complete slices, start/end ranges as async slices, since they need not
nest), the CUDA calls that block the host, and the launch calls (each as long as the
runtime call was: what launching cost the host). GPU: one process per device, one thread per stream
(operations that overlap on a stream go to an extra lane), holding kernels, copies, memsets
and whole graphs. A flow arrow runs from each launch to its GPU operation. Findings are
instant events on the range they concern (for a harness benchmark: its first timed
iteration; for the whole report: a global instant at the start).

Times: `ts`/`dur` in µs (the format's unit) from the report's start, to the ns.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from .._version import __version__
from ..analysis.lanes import assign_lanes
from ..comparison.document import origin_ns, plain, refuse_without_pairs
from ..comparison.result import Comparison
from ..diagnose import range_label
from ..read.report import thread_ids
from .base import Renderer

# Synthetic pids for GPUs: above any Linux pid (pid_max is at most 2^22).
GPU_PID_BASE = 10_000_000
LANE_TID_STEP = 1_000_000  # tid of an overflow lane: stream + lane * step


class TraceRenderer(Renderer):
    def render(self, c: Comparison, **_) -> str:
        refuse_without_pairs(c, "a trace")
        return json.dumps(trace_document(c), ensure_ascii=False, separators=(",", ":"),
                          allow_nan=False) + "\n"


def trace_document(c: Comparison) -> dict[str, Any]:
    origin = _origin_ns(c)
    events: list[dict[str, Any]] = []
    events += _process_metadata(c)
    events += _nvtx_events(c, origin)
    events += _blocking_calls(c, origin)
    events += _gpu_ops_and_launches(c, origin)
    events += _marks(c, origin)
    events += _findings(c, origin)
    info = c.info
    return {
        "traceEvents": events,
        "displayTimeUnit": "ns",
        "otherData": plain({
            "tool": f"nsyswrap {__version__}", "source": str(info.source),
            "nsys_version": info.nsys_version, "origin_ns": origin,
            "note": "ts are µs from origin_ns on the report's session clock",
        }),
    }


def _origin_ns(c: Comparison) -> int:
    """The report's start, or its first event if that came earlier (document.origin_ns):
    no event before 0."""
    return origin_ns(c)


def _us(ns: np.ndarray | float, origin: int) -> np.ndarray:
    return np.round((np.asarray(ns, dtype="float64") - origin) / 1e3, 3)


def _json_numbers(us: np.ndarray) -> list[float | None]:
    """Times as JSON numbers: one that is not finite (a time the report lacks) is null."""
    if np.isfinite(us).all():
        return us.tolist()
    return [x if np.isfinite(x) else None for x in us.tolist()]


def _process_metadata(c: Comparison) -> list[dict[str, Any]]:
    """Names and order: the traced processes first, then one process per GPU."""
    a = c.analysis
    out = []
    pids = set(a.instances["pid"].astype(int).tolist())
    ops = a.attribution.gpu_ops
    pid, tid = thread_ids(ops["thread"].to_numpy()[ops["thread"].to_numpy() >= 0])
    pids |= set(pid.tolist())
    threads = set(zip(a.instances["pid"].astype(int).tolist(),
                      a.instances["tid"].astype(int).tolist(), strict=True))
    threads |= set(zip(pid.tolist(), tid.tolist(), strict=True))
    cpid, ctid = thread_ids(a.attribution.blocking_calls["thread"].to_numpy())
    pids |= set(cpid.tolist())
    threads |= set(zip(cpid.tolist(), ctid.tolist(), strict=True))
    for p in sorted(pids):
        name = c.info.processes.get(p, f"process {p}")
        out.append(_meta("process_name", p, 0, {"name": f"{name} (pid {p})"}))
        out.append(_meta("process_sort_index", p, 0, {"sort_index": len(out)}))
    for p, t in sorted(threads):
        out.append(_meta("thread_name", p, t, {"name": f"thread {t}"
                                                 + (" (main)" if p == t else "")}))
    gpus = {g.device_id: g.name for g in c.info.gpus}
    for device in sorted(set(ops["device_id"].astype(int).tolist()) | set(gpus)):
        gpid = GPU_PID_BASE + device
        out.append(_meta("process_name", gpid, 0,
                         {"name": f"GPU {device}" + (f": {gpus[device]}" if device in gpus
                                                      else "")}))
        out.append(_meta("process_sort_index", gpid, 0, {"sort_index": 1_000 + device}))
    return out


def _meta(name: str, pid: int, tid: int, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "ph": "M", "pid": int(pid), "tid": int(tid), "args": args}


def _nvtx_events(c: Comparison, origin: int) -> list[dict[str, Any]]:
    inst = c.analysis.instances.frame()
    out: list[dict[str, Any]] = []
    if inst.empty:
        return out
    names = [range_label(d or "", str(n)) for d, n in
             zip(inst["domain"].fillna(""), inst["name"], strict=True)]
    # Ends rounded like starts: slices that nest in ns nest in µs too.
    ts = _json_numbers(_us(inst["start_ns"].to_numpy(), origin))
    end = _json_numbers(_us(inst["end_ns"].to_numpy(), origin))
    busy = inst["gpu_busy_ns"].to_numpy(dtype="float64")
    for name, r, t0, t1, b in zip(names, inst.itertuples(index=False), ts, end, busy.tolist(),
                                  strict=True):
        args = {"domain": r.domain or None, "range_id": int(r.range_id),
                "instance": int(r.index), "wall_ns": int(r.cpu_ns)}
        if np.isfinite(b):
            args["gpu_busy_ns"] = int(b)
        if r.benchmark:
            args["harness_benchmark"] = str(r.benchmark)
        base = {"name": name, "cat": "nvtx", "pid": int(r.pid), "tid": int(r.tid)}
        if r.style == "startend":
            # Start/end ranges may overlap without nesting: async slices, one id each.
            ident = f"nvtx-{int(r.range_id)}"
            out.append({**base, "ph": "b", "ts": t0, "id2": {"local": ident}, "args": args})
            out.append({**base, "ph": "e", "ts": t1, "id2": {"local": ident}})
        else:
            dur = None if t0 is None or t1 is None else round(t1 - t0, 3)
            out.append({**base, "ph": "X", "ts": t0, "dur": dur, "args": args})
    return out


def _blocking_calls(c: Comparison, origin: int) -> list[dict[str, Any]]:
    calls = c.analysis.attribution.blocking_calls
    if calls.empty:
        return []
    pid, tid = thread_ids(calls["thread"].to_numpy())
    ts = _us(calls["start_ns"].to_numpy(), origin)
    dur = np.round(_us(calls["end_ns"].to_numpy(), origin) - ts, 3)
    return [{"name": str(api), "cat": "cuda_api", "ph": "X", "pid": int(p), "tid": int(t),
             "ts": s, "dur": d, "args": {"blocks_host": True}}
            for api, p, t, s, d in zip(calls["api"].astype(str), pid.tolist(), tid.tolist(),
                                       _json_numbers(ts), _json_numbers(dur), strict=True)]


def _gpu_ops_and_launches(c: Comparison, origin: int) -> list[dict[str, Any]]:
    """Every GPU operation once, and its launch with a flow (v2: bind_id) to it."""
    ops = c.analysis.attribution.gpu_ops
    if ops.empty:
        return []
    start = ops["start_ns"].to_numpy()
    end = ops["end_ns"].to_numpy()
    device = ops["device_id"].to_numpy().astype("int64")
    stream = ops["stream_id"].to_numpy().astype("int64")
    # Ops that overlap on one stream (programmatic dependent launch, graph nodes) cannot
    # share a track of slices: those go to further lanes.
    lanes = assign_lanes(pd.DataFrame({"thread": device * (1 << 32) + stream,
                                       "start_ns": start, "end_ns": end}))
    tid = stream + lanes * LANE_TID_STEP
    ts_us = _us(start, origin)
    ts = _json_numbers(ts_us)
    dur = _json_numbers(np.round(_us(end, origin) - ts_us, 3))
    launch = ops["launch_start_ns"].to_numpy()
    has_launch = launch >= 0
    lpid, ltid = thread_ids(ops["thread"].to_numpy())
    launch_us = _us(launch, origin)
    launch_ts = _json_numbers(launch_us)
    # The launching call's own duration (-1: unknown; a slice of 0 then), its end rounded
    # like its start, as every slice's.
    launch_ns = ops["launch_ns"].to_numpy().astype("int64")
    launch_dur = _json_numbers(np.where(launch_ns >= 0, np.round(
        _us(launch + np.maximum(launch_ns, 0), origin) - launch_us, 3), 0.0))
    out: list[dict[str, Any]] = []
    kinds = ops["kind"].astype(str).tolist()
    names = ops["name"].astype(str).tolist()
    copy_kind = ops["copy_kind"].astype(str).tolist()
    src = ops["src_kind"].astype(str).tolist()
    dst = ops["dst_kind"].astype(str).tolist()
    nbytes = ops["bytes"].to_numpy().tolist()
    # The program's line that launched each operation, where the report traced its lines.
    places = c.analysis.lines.op_places(ops["thread"].to_numpy(), launch)
    for i in range(len(ops)):
        kind = kinds[i]
        args: dict[str, Any] = {"device": int(device[i]), "stream": int(stream[i])}
        if places[i] is not None:
            args["line"] = places[i]
        name = names[i]
        if kind in ("memcpy", "memset"):
            args["bytes"] = int(nbytes[i])
            if kind == "memcpy":
                args.update(copy_kind=copy_kind[i], src=src[i], dst=dst[i])
                name = f"memcpy {copy_kind[i]}"
        event = {"name": name, "cat": kind, "ph": "X", "pid": GPU_PID_BASE + int(device[i]),
                 "tid": int(tid[i]), "ts": ts[i], "dur": dur[i], "args": args}
        if has_launch[i]:
            flow = f"op-{i}"
            event["bind_id"] = flow
            event["flow_in"] = True
            args = {"gpu_start_after_ns": int(start[i] - launch[i])}
            if launch_ns[i] >= 0:
                args["launch_ns"] = int(launch_ns[i])
            out.append({"name": f"launch {name}", "cat": "cuda_launch", "ph": "X",
                        "pid": int(lpid[i]), "tid": int(ltid[i]), "ts": launch_ts[i],
                        "dur": launch_dur[i], "bind_id": flow, "flow_out": True,
                        "args": args})
        out.append(event)
    for lane_tid in sorted({(int(d), int(s), int(t)) for d, s, t in
                            zip(device.tolist(), stream.tolist(), tid.tolist(), strict=True)}):
        d, s, t = lane_tid
        label = f"stream {s}" + (f" (overlap lane {t // LANE_TID_STEP})" if t != s else "")
        out.append(_meta("thread_name", GPU_PID_BASE + d, t, {"name": label}))
        out.append(_meta("thread_sort_index", GPU_PID_BASE + d, t, {"sort_index": t}))
    return out


def _marks(c: Comparison, origin: int) -> list[dict[str, Any]]:
    """The program's NVTX marks (analysis.marks: nsyswrap's own left out) as instants on
    their threads."""
    marks = c.analysis.marks
    ts = _json_numbers(_us(marks["time_ns"].to_numpy(), origin))
    return [{"name": str(text), "cat": "nvtx_mark", "ph": "i", "s": "t", "pid": int(pid),
             "tid": int(tid), "ts": t, "args": {"domain": str(domain) or None}}
            for text, pid, tid, domain, t in zip(marks["text"], marks["pid"], marks["tid"],
                                                 marks["domain"], ts, strict=True)]


def _earliest(inst: pd.DataFrame, column: str, labels: set[str]) -> dict[str, int]:
    """Per label among `labels` that some instance's (domain, `column`) reads as
    (range_label), the index of its earliest such instance (the first of equal starts)."""
    if not labels or not len(inst):
        return {}
    # Only names that could make one of the labels: the label itself, or what follows one
    # of its colons (a domain's name may hold colons too).
    names = labels | {label[i + 1:] for label in labels
                      for i, ch in enumerate(label) if ch == ":"}
    inst = inst[inst[column].isin(names).to_numpy()]
    text = pd.Series([range_label(d or "", str(n)) for d, n in
                      zip(inst["domain"].fillna(""), inst[column], strict=True)],
                     index=inst.index, dtype="object")
    inst = inst[text.isin(labels).to_numpy()]
    starts = inst["start_ns"].groupby(text[inst.index], sort=False).idxmin()
    return {str(label): int(rid) for label, rid in starts.items()}


def _findings(c: Comparison, origin: int) -> list[dict[str, Any]]:
    """Each finding as an instant on the first instance of each range it concerns (the
    first timed iteration of a benchmark); findings about the whole report as global
    instants."""
    inst = c.analysis.instances.frame()
    its = c.analysis.iterations
    # Each label a finding names, to the instance it is drawn on: the earliest range of that
    # name, else of that family ("step {n}"), each found in one pass over the instances (a
    # search of every instance per label was findings × instances: a name per range).
    wanted = {label for f in c.findings for label in f.ranges}
    by_name = _earliest(inst, "name", wanted)
    by_family = _earliest(inst, "family", wanted - set(by_name))
    first_iteration = {}
    if not its.empty:
        for name, g in its.groupby("benchmark", sort=False, observed=True):
            first_iteration[f"nsyswrap:{name}"] = int(g.sort_values("start_ns")["range_id"]
                                                      .iloc[0])
    out = []
    for f in c.findings:
        args = plain({"severity": f.severity, "message": f.message,
                      "suggestion": f.suggestion, "evidence": f.evidence})
        by_range = f.evidence.get("by_range") or {}
        placed = False
        for label in f.ranges:
            rid = first_iteration.get(label)
            if rid is None:
                rid = by_name.get(label, by_family.get(label))
            if rid is None or rid not in inst.index:
                continue
            r = inst.loc[rid]
            out.append({"name": f.code, "cat": "finding", "ph": "i", "s": "t",
                        "pid": int(r["pid"]), "tid": int(r["tid"]),
                        "ts": _json_numbers(_us([r["start_ns"]], origin))[0],
                        # a merged finding: each range's instant carries its own numbers
                        "args": {**args, "range": label,
                                 **({"evidence": plain(by_range[label])}
                                    if label in by_range else {})}})
            placed = True
        if not placed:
            pid = min(c.info.processes, default=0)
            out.append({"name": f.code, "cat": "finding", "ph": "i", "s": "g", "pid": pid,
                        "tid": pid, "ts": 0.0, "args": {**args, "range": f.range}})
    return out
