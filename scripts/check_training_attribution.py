"""How close nsyswrap's per-range GPU busy time is to a direct SQL computation on a training
loop's report (the issue's acceptance check on the GPU host):

    nsyswrap run -o OUT scripts/workloads/torch_train.py
    python scripts/check_training_attribution.py OUT/torch_train.sqlite

For each range of the training loop it prints the median GPU busy time per instance from
nsyswrap (default rule, --attribution process) and from plain SQL plus a loop: the union of
the GPU operations launched inside the range by its own thread, or by another thread of its
process that had no user NVTX range open at the launch. Exit 1 if any differs by more than
5%.
"""

from __future__ import annotations

import bisect
import sqlite3
import statistics
import sys

RANGES = ("train_step", "forward", "backward", "optimizer")


def _union(intervals):
    total, end = 0, None
    for s, e in sorted(intervals):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def sql_busy(path: str) -> dict[str, list[int]]:
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    ops = con.execute(
        "SELECT o.start, o.end, r.globalTid, r.start FROM (SELECT start, end, correlationId, "
        "globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL UNION ALL SELECT start, end, correlationId, "
        "globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY UNION ALL SELECT start, end, correlationId, "
        "globalPid FROM CUPTI_ACTIVITY_KIND_MEMSET) o JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON "
        "r.correlationId = o.correlationId AND (r.globalTid >> 24) = (o.globalPid >> 24)"
    ).fetchall()
    # User ranges: push/pop and start/end ranges outside libraries' domains (NCCL here).
    nccl = {d for (d,) in con.execute(
        "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = 'NCCL'")}
    ranges = con.execute(
        "SELECT e.start, e.end, e.globalTid, coalesce(e.text, s.value), e.domainId "
        "FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
        "WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL").fetchall()
    user = [r for r in ranges if r[4] not in nccl]
    open_on: dict[int, list[tuple[int, int]]] = {}
    for start, end, tid, _name, _dom in user:
        open_on.setdefault(tid, []).append((start, end))

    def in_own_range(tid, t):
        return any(s <= t <= e for s, e in open_on.get(tid, ()))

    ops.sort(key=lambda o: o[3])
    launches = [o[3] for o in ops]
    out: dict[str, list[int]] = {}
    for start, end, tid, name, _dom in user:
        if name not in RANGES:
            continue
        lo, hi = bisect.bisect_left(launches, start), bisect.bisect_right(launches, end)
        mine = [(o[0], o[1]) for o in ops[lo:hi]
                if o[2] == tid or (o[2] >> 24 == tid >> 24 and not in_own_range(o[2], o[3]))]
        out.setdefault(name, []).append(_union(mine))
    return out


def main(path: str) -> int:
    import nsyswrap

    inst = nsyswrap.compare(path).analysis.instances
    expected = sql_busy(path)
    worst = 0.0
    print(f"{'range':<12} {'n':>3} {'nsyswrap median':>16} {'SQL median':>12} {'diff':>7}")
    for name in RANGES:
        got = inst[inst["name"] == name]["gpu_busy_ns"]
        want = statistics.median(expected.get(name, [0]))
        diff = abs(got.median() - want) / want if want else float(got.median() != 0)
        worst = max(worst, diff)
        print(f"{name:<12} {len(got):>3} {got.median() / 1e3:>13.1f} µs {want / 1e3:>9.1f} µs "
              f"{diff:>6.1%}")
    print(f"largest difference: {worst:.2%} (limit 5%)")
    return 0 if worst <= 0.05 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
