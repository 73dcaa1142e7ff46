"""Independent reference computations for the tests: plain SQL plus simple Python loops,
written without nsyswrap's code, to check its vectorised results."""

from __future__ import annotations

import bisect
import statistics
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
