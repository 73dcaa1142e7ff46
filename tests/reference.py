"""Independent reference computations for the tests: plain SQL plus simple Python loops,
written without nsyswrap's code, to check its vectorised results."""

from __future__ import annotations

import base64
import bisect
import json
import os
import statistics
import struct
import zlib
from pathlib import Path

from conftest import has_table, sql

PUSHPOP, STARTEND, DOMAIN_CREATE = 59, 60, 75


def ranges(path: Path) -> list[dict]:
    """NVTX ranges with domain names, straight from NVTX_EVENTS."""
    if not has_table(path, "NVTX_EVENTS"):
        return []
    domains = {
        (tid >> 24, dom): name
        for tid, dom, name in sql(
            path,
            "SELECT e.globalTid, e.domainId, coalesce(e.text, s.value) FROM NVTX_EVENTS e "
            "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = ?", (DOMAIN_CREATE,))
    }
    rows = sql(
        path,
        "SELECT e.start, e.end, e.globalTid, coalesce(e.domainId, 0), "
        "coalesce(e.text, s.value), e.eventType FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.eventType IN (?, ?) AND e.end IS NOT NULL ORDER BY e.start",
        (PUSHPOP, STARTEND))
    return [
        {"start": s, "end": e, "tid": t, "domain": domains.get((t >> 24, d), ""), "name": n,
         "style": "pushpop" if et == PUSHPOP else "startend"}
        for s, e, t, d, n, et in rows
    ]


def gpu_ops(path: Path) -> list[dict]:
    """Kernels, memcpys and memsets with the thread and start of their launching call."""
    ops = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if not has_table(path, table):
            continue
        for start, end, tid, launch in sql(
            path,
            f"SELECT o.start, o.end, r.globalTid, r.start FROM {table} o "
            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.correlationId "
            "AND (r.globalTid >> 24) = (o.globalPid >> 24)"):
            ops.append({"start": start, "end": end, "tid": tid, "launch": launch,
                        "kind": table.rsplit("_", 1)[-1].lower()})
    return ops


def union_length(intervals: list[tuple[int, int]]) -> int:
    total, cur_start, cur_end = 0, None, None
    for s, e in sorted(intervals):
        if cur_end is None or s > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start
            cur_start, cur_end = s, e
        else:
            cur_end = max(cur_end, e)
    if cur_end is not None:
        total += cur_end - cur_start
    return total


# The library domains present in the fixtures (NCCL's around collectives): their ranges are
# no ownership under the process rule.
LIBRARY_DOMAINS = {"nccl"}


def is_user_range(r: dict) -> bool:
    # PyTorch's operator ranges in the default domain: "aten::mm", and emit_nvtx's names
    # with a call counter ("AddmmBackward0, seq = 15, op_id = 53").
    operator = r["domain"] == "" and (r["name"].startswith("aten::") or ", op_id = " in r["name"]
                                      or ", seq = " in r["name"])
    return r["domain"].lower() not in LIBRARY_DOMAINS and not operator


def projection(path: Path, rule: str = "thread") -> list[dict]:
    """Per range: the GPU ops it owns; busy (union), span, counts.

    thread: ops launched inside the range on its thread (nsys's nvtx_gpu_proj_sum).
    process: those, plus ops launched inside the range by another thread of the same process
    while that thread was in no user range (library ranges such as NCCL's do not count).
    `other_busy` is what the second kind adds to the busy time."""
    ops = sorted(gpu_ops(path), key=lambda o: o["launch"])
    launch_times = [o["launch"] for o in ops]
    rs = ranges(path)

    def inside(r):
        lo = bisect.bisect_left(launch_times, r["start"])
        hi = bisect.bisect_right(launch_times, r["end"])
        return range(lo, hi)

    owned = [False] * len(ops)  # launched inside a user range of its own thread
    for r in rs:
        if is_user_range(r):
            for i in inside(r):
                if ops[i]["tid"] == r["tid"]:
                    owned[i] = True
    out = []
    for r in rs:
        own = [i for i in inside(r) if ops[i]["tid"] == r["tid"]]
        other = []
        if rule == "process" and is_user_range(r):
            other = [i for i in inside(r) if not owned[i] and ops[i]["tid"] != r["tid"]
                     and ops[i]["tid"] >> 24 == r["tid"] >> 24]
        mine = [ops[i] for i in own + other]
        iv = [(o["start"], o["end"]) for o in mine]
        out.append({
            **r,
            "ops": len(mine),
            "kernels": sum(o["kind"] == "kernel" for o in mine),
            "busy": union_length(iv),
            "other_busy": union_length(iv) - union_length(
                [(ops[i]["start"], ops[i]["end"]) for i in own]),
            "span": (max(e for _, e in iv) - min(s for s, _ in iv)) if iv else 0,
        })
    return out


def kernel_totals(path: Path) -> dict[str, dict]:
    """Per demangled name: count, total, min, max, median of durations."""
    if not has_table(path, "CUPTI_ACTIVITY_KIND_KERNEL"):
        return {}
    durations: dict[str, list[int]] = {}
    for name, d in sql(path, "SELECT s.value, k.end - k.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                             "JOIN StringIds s ON s.id = k.demangledName"):
        durations.setdefault(name, []).append(d)
    return {n: {"count": len(v), "total": sum(v), "min": min(v), "max": max(v),
                "median": statistics.median(v)} for n, v in durations.items()}


# -- the program's own timings (`nsyswrap run`'s runner records) ---------------------------

RUNNER_DOC = '{"nsyswrap":"nsyswrap.user-events/'  # /1, /2 and their parts
CLOCK_MARK = '{"nsyswrap":"nsyswrap.clock/1'
OS_ID = (1 << 24) - 1  # a globalTid's low 24 bits: the OS thread id; the next 24: the pid
# The runner's host clock is put on the report's by its clock marks; a record's call lies
# in the record's bracket give or take this (each mark's own bracket is ~1-2 µs wide).
RECORD_SLACK_NS = 2_000
# Work still running this long after the start record's call ended held the start event
# back (the window's start waited for it): back-pressure.
QUEUED_AHEAD_NS = 5_000
# Calls that block the calling thread until GPU work finishes: the syncs, and the copies
# synchronous by API (written out here, not taken from nsyswrap/read/cuda_api.py).
BLOCKING_CALLS = {
    "cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize",
    "cuCtxSynchronize", "cuStreamSynchronize", "cuEventSynchronize",
    "cudaMemcpy", "cudaMemcpy2D", "cudaMemcpy3D", "cudaMemcpyToSymbol", "cudaMemcpyFromSymbol",
    "cudaMemcpyPeer", "cuMemcpy", "cuMemcpyHtoD", "cuMemcpyDtoH", "cuMemcpyDtoD",
    "cuMemcpy2D", "cuMemcpy3D",
}


def _api(name: str) -> str:
    """cudaStreamSynchronize_v3020 -> cudaStreamSynchronize."""
    head, _, tail = name.rpartition("_v")
    return head if head and tail.isdigit() else name


def _marks(path: Path, prefix: str, with_time: bool = False) -> list[tuple]:
    """The texts (and times) of the NVTX events whose text starts with `prefix`: inline, or
    a registered string (nsys 2022.4 keeps the nvtx package's messages in StringIds)."""
    return sql(path, f"""
        SELECT coalesce(e.text, s.value){", e.start" if with_time else ""} FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId
        WHERE coalesce(e.text, s.value) LIKE ?""", (prefix + "%",))


def runner_documents(path: Path) -> list[dict]:
    """Every process's document of `nsyswrap run`'s runner: a mark of JSON each, or its
    parts (nsyswrap.user-events/N/part) joined in order."""
    docs, parts = [], {}
    for (text,) in _marks(path, RUNNER_DOC):
        doc = json.loads(text)
        if doc["nsyswrap"].endswith("/part"):
            parts.setdefault(doc["key"], {})[doc["part"]] = doc["text"]
        else:
            docs.append(doc)
    return docs + [json.loads("".join(p[i] for i in sorted(p))) for p in parts.values()]


def runner_rows(doc: dict, name: str) -> list[dict]:
    """'records' or 'elapsed' of a runner document: base64 of zlib of packed rows."""
    prefix = "record" if name == "records" else name
    raw = zlib.decompress(base64.b64decode(doc[name]))
    fields = doc[f"{prefix}_fields"]
    return [dict(zip(fields, row, strict=True))
            for row in struct.iter_unpack(doc[f"{prefix}_format"], raw)]


def clock_offset(path: Path, doc: dict) -> float:
    """Report time minus the runner's clock: the median, over the clock marks, of each
    mark's time less the middle of the readings taken around it."""
    times = {json.loads(text)["key"]: start
             for text, start in _marks(path, CLOCK_MARK, with_time=True)}
    return statistics.median(times[key] - (before + after) / 2
                             for before, after, key in doc["clock_marks"] if key in times)


def _calls(path: Path, pid: int, names: set[str] | None = None,
           like: str | None = None) -> list[dict]:
    """The process's runtime calls (start, end, tid, correlation id, name), in start order:
    of the API names given, or whose name matches `like`."""
    rows = sql(path, """
        SELECT r.start, r."end", r.globalTid, r.correlationId, n.value
        FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds n ON n.id = r.nameId
        WHERE ((r.globalTid >> 24) & 16777215) = ? ORDER BY r.start""", (pid,))
    return [{"start": s, "end": e, "tid": t & OS_ID, "correlation": c, "api": _api(n)}
            for s, e, t, c, n in rows
            if (names is not None and _api(n) in names)
            or (like is not None and _api(n).startswith(like))]


def _streams_of_calls(path: Path, pid: int) -> dict[int, int]:
    """correlation id -> the stream: of a record (CUDA event trace) or of the stream made to
    wait (its synchronization record), where the export has them."""
    out = {}
    for table in ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION"):
        if has_table(path, table):
            for corr, stream in sql(path, f"SELECT correlationId, streamId FROM {table} "
                                          "WHERE ((globalPid >> 24) & 16777215) = ?", (pid,)):
                out[corr] = stream
    return out


def process_ops(path: Path, pid: int) -> list[dict]:
    """The process's GPU operations (kernels, copies, memsets, and whole graphs where nsys
    traced graphs as a whole) with their stream and their launching call's start and thread,
    in launch order."""
    ops = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"):
        if not has_table(path, table):
            continue
        for start, end, stream, launch, tid in sql(path, f"""
                SELECT o.start, o."end", o.streamId, r.start, r.globalTid FROM {table} o
                JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = o.correlationId
                 AND (r.globalTid >> 24) = (o.globalPid >> 24)
                WHERE ((o.globalPid >> 24) & 16777215) = ?""", (pid,)):
            ops.append({"start": start, "end": end, "stream": stream, "launch": launch,
                        "tid": tid & OS_ID, "kind": table.rsplit("_", 1)[-1].lower()})
    return sorted(ops, key=lambda o: o["launch"])


def _record_call(calls: list[dict], starts: list[int], before: float,
                 after: float) -> dict | None:
    """The event-record call (of the record's thread) lying in the record's bracket: of the
    calls starting no earlier than the bracket less the slack and ending no later than it
    plus the slack, the one least outside the bracket itself."""
    best, best_out = None, None
    at = bisect.bisect_left(starts, before - RECORD_SLACK_NS)
    for c in calls[at:]:
        if c["start"] > after + RECORD_SLACK_NS:
            break
        if c["end"] > after + RECORD_SLACK_NS:
            continue
        outside = max(before - c["start"], 0) + max(c["end"] - after, 0)
        if best_out is None or outside < best_out:
            best, best_out = c, outside
    return best


def _do_bench_call(doc: dict, elapsed_row: int, start: dict, end: dict) -> tuple | None:
    """(the do_bench call's number, the record sites) of a window measured inside a
    do_bench call; None outside one."""
    for k, scope in enumerate(doc.get("scopes", [])):
        if scope.get("kind") == "do_bench" and \
                scope.get("first_elapsed", 0) <= elapsed_row < scope.get("end_elapsed", 0):
            return k, start["site"], end["site"]
    return None


def do_bench_estimates(windows: list[dict]) -> list[dict]:
    """The windows do_bench timed to choose how many calls to make: within one do_bench
    call, those of the record sites it used less often."""
    calls: dict[int, dict[tuple, list[dict]]] = {}
    for w in windows:
        if w["do_bench"] is not None:
            k, a, b = w["do_bench"]
            calls.setdefault((w["pid"], k), {}).setdefault((a, b), []).append(w)
    out = []
    for pairs in calls.values():
        main = max(pairs.values(), key=len)
        out += [w for ws in pairs.values() if ws is not main for w in ws]
    return out


def timed_windows(path: Path) -> list[dict]:
    """Every measured window of the report: an elapsed_time() result (each pair of records
    once, calls that raised left out) whose two records' cudaEventRecord calls the report
    holds. Per window, from SQL and the runner's records alone:

      pid, tid, start_ns / end_ns   the two record calls' starts (the window, host side)
      value_ns                      what elapsed_time() returned
      do_bench                      (call number, start site, end site) of the do_bench
                                    call that measured it; None outside one
      stream                        the start record's stream
      own                           the operations any thread of the process launched on
                                    that stream between the two record calls
      other                         those the recording thread launched on other streams
                                    then, each with `joined`: the end record's stream, or a
                                    cudaStreamWaitEvent of that thread on the window's (or
                                    the end record's) stream after the launch and before the
                                    end record
      busy_union_ns, busy_sum_ns    own + joined operations' busy time, as a union and sum
      queued_ahead                  work launched on the stream before the start record
                                    still running QUEUED_AHEAD_NS after its call ended
      uncovered_ns, uncovered_ops   the union of the other operations not joined, their count
      blocking                      the recording thread's blocking calls between the
                                    records: (api, duration)
      host_lead_ns                  start record call to the first own launch (None: none)
      max_gap_ns                    the longest idle gap between own operations
      span_ns                       first own operation's start to the last own or joined end
    """
    out = []
    for doc in runner_documents(path):
        pid = doc["pid"]
        offset = clock_offset(path, doc)
        threads = doc["threads"]
        record_calls = _calls(path, pid, like="cudaEventRecord")
        by_tid: dict[int, list[dict]] = {}
        for c in record_calls:
            by_tid.setdefault(c["tid"], []).append(c)
        starts = {tid: [c["start"] for c in mine] for tid, mine in by_tid.items()}
        starts.update({t: [] for t in threads if t not in starts})
        waits = _calls(path, pid, names={"cudaStreamWaitEvent", "cuStreamWaitEvent"})
        blocking = _calls(path, pid, names=BLOCKING_CALLS)
        streams = _streams_of_calls(path, pid)
        ops = process_ops(path, pid)
        launches = [o["launch"] for o in ops]

        records = {(r["event"], r["nth"]): r for r in runner_rows(doc, "records")}
        calls = {}
        for key, r in records.items():
            before = r["before_ns"] + offset
            mine = by_tid.get(threads[r["thread"]], [])
            calls[key] = _record_call(mine, starts[threads[r["thread"]]], before,
                                      before + r["took_ns"])
        matched = [id(c) for c in calls.values() if c is not None]
        assert len(matched) == len(set(matched)), "two records in one event-record call"
        errors = {int(k) for k in doc.get("elapsed_errors", {})}
        seen = set()
        for i, e in enumerate(runner_rows(doc, "elapsed")):
            pair = (e["start_event"], e["start_nth"], e["end_event"], e["end_nth"])
            if i in errors or pair in seen or pair[:2] not in records \
                    or pair[2:] not in records:
                continue
            seen.add(pair)
            start, end = calls[pair[:2]], calls[pair[2:]]
            if start is None or end is None:
                continue
            tid = start["tid"]
            s0, t0 = start["start"], end["start"]
            inside = ops[bisect.bisect_right(launches, s0):bisect.bisect_left(launches, t0)]
            stream = streams.get(start["correlation"])
            if stream is None:  # no CUDA event trace: the thread's first launch's stream
                first = next((o for o in inside if o["tid"] == tid), None)
                stream = first["stream"] if first else -1
            end_stream = streams.get(end["correlation"], stream)
            own = [o for o in inside if o["stream"] == stream]
            other = []
            for o in inside:
                if o["tid"] != tid or o["stream"] == stream:
                    continue
                joined = o["stream"] == end_stream or any(
                    w["tid"] == tid and o["launch"] < w["start"] < t0
                    and streams.get(w["correlation"], -1) in (stream, end_stream, -1)
                    for w in waits)
                other.append({**o, "joined": joined})
            covered = own + [o for o in other if o["joined"]]
            uncovered = [o for o in other if not o["joined"]]
            earlier = [o for o in ops[:bisect.bisect_right(launches, s0)]
                       if o["stream"] == stream]
            gaps, reach = [], None
            for o in sorted(own, key=lambda o: o["start"]):
                if reach is not None and o["start"] > reach:
                    gaps.append(o["start"] - reach)
                reach = o["end"] if reach is None else max(reach, o["end"])
            out.append({
                "pid": pid, "tid": tid, "start_ns": s0, "end_ns": t0,
                "do_bench": _do_bench_call(doc, i, records[pair[:2]], records[pair[2:]]),
                "start_call_end_ns": start["end"], "value_ns": e["value_ms"] * 1e6,
                "stream": stream, "end_stream": end_stream, "own": own, "other": other,
                "busy_union_ns": union_length([(o["start"], o["end"]) for o in covered]),
                "busy_sum_ns": sum(o["end"] - o["start"] for o in covered),
                "queued_ahead": any(o["end"] >= start["end"] + QUEUED_AHEAD_NS
                                    for o in earlier),
                "uncovered_ns": union_length([(o["start"], o["end"]) for o in uncovered]),
                "uncovered_ops": len(uncovered),
                "blocking": [(c["api"], c["end"] - c["start"]) for c in blocking
                             if c["tid"] == tid and s0 < c["start"] < t0],
                "host_lead_ns": own[0]["launch"] - s0 if own else None,
                "max_gap_ns": max(gaps, default=0),
                "span_ns": (max(o["end"] for o in covered) - min(o["start"] for o in own))
                if own else 0,
            })
    return out


def timer_measurements(path: Path) -> list[dict]:
    """Every measurement a torch.utils.benchmark.Timer kept (the runner's timer_measurement
    scopes whose seconds are among the raw times its timeit/blocked_autorange/
    adaptive_autorange returned): its calls (`number`), the seconds, and the busy time
    (union) of the GPU work its thread launched meanwhile, on any stream."""
    out = []
    for doc in runner_documents(path):
        pid = doc["pid"]
        offset = clock_offset(path, doc)
        ops = process_ops(path, pid)
        scopes = doc["scopes"]
        measurements = [s for s in scopes if s["kind"] == "timer_measurement"]
        for timer in scopes:
            if not timer["kind"].startswith("timer."):
                continue
            kept = list(timer["returned"]["raw_times"])
            for m in measurements:
                if not (timer["before_ns"] <= m["before_ns"] <= timer["after_ns"]
                        and m["thread"] == timer["thread"] and m["returned"] in kept):
                    continue
                kept.remove(m["returned"])
                lo, hi = m["before_ns"] + offset, m["after_ns"] + offset
                tid = doc["threads"][m["thread"]]
                mine = [o for o in ops if o["tid"] == tid and lo < o["launch"] < hi]
                file, line, _ = doc["sites"][timer["site"]]
                out.append({"pid": pid, "tid": tid, "timer": timer, "calls": m["number"],
                            "site": f"{os.path.basename(file)}:{line}",
                            "seconds": m["returned"], "ops": len(mine),
                            "busy_union_ns": union_length([(o["start"], o["end"])
                                                           for o in mine])})
    return out
