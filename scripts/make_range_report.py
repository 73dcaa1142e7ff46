"""Make a range-heavy nsys export: NESTING nested NVTX ranges around each of N tiny kernels,
launched alternately from two threads of one process.

    python scripts/make_range_report.py OUT.sqlite --kernels 2000000 [--nesting 5]
        [--names N] [--syncs] [--source S.sqlite]

With the defaults (2 M kernels, five levels) the report holds 10 M NVTX ranges, the shape
that breaks range-to-kernel maps built in memory. With --names N the ranges are named
`request <id>` instead of by level, with N distinct ids, as a server that names each
request's range by its id does: N = the number of ranges gives every range a name of its
own. The ids are handed out in a scrambled order, so that they are no counter
(analysis/families.py) and each name stays a range family of its own. --syncs puts a
cudaDeviceSynchronize in each innermost range after its kernel (a SYNC_IN_RANGE finding
for each family). The schema and the small
tables (strings, enums, metadata, GPU, processes) come from SOURCE, a real export, so the
loader sees a genuine nsys layout; every activity row is made here. Kernel i runs on the GPU
inside its own innermost range's launch window, so each range owns exactly one kernel:
expected results are known without running anything (tests/test_scale.py checks them).
"""

from __future__ import annotations

import argparse
import sqlite3
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
LEVELS = ["iteration", "layer", "block", "module", "op"]  # outermost first
PERIOD_NS = 10_000  # one kernel (and its five ranges) every 10 us
RANGE_INSET_NS = 100  # each level starts 100 ns after and ends 100 ns before its parent
RANGE_LENGTH_NS = 5_000
LAUNCH_AT_NS, LAUNCH_NS = 800, 300  # the cudaLaunchKernel call, inside the innermost range
KERNEL_AT_NS, KERNEL_NS = 2_000, 1_500  # on the GPU, after the launch
SYNC_AT_NS, SYNC_NS = 3_600, 100  # --syncs: a cudaDeviceSynchronize after the kernel
BATCH = 200_000
PUSHPOP = 59
ACTIVITY_TABLES = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME", "NVTX_EVENTS")
SMALL_TABLES = ("StringIds", "PROCESSES", "ThreadNames", "TARGET_INFO_GPU", "ANALYSIS_DETAILS",
                "META_DATA_EXPORT", "EXPORT_META_DATA")


def make(source: Path, out: Path, kernels: int, nesting: int, names: int | None = None,
         syncs: bool = False) -> dict:
    out.unlink(missing_ok=True)
    con = sqlite3.connect(out)
    con.execute("PRAGMA journal_mode = OFF")
    con.execute("PRAGMA synchronous = OFF")
    con.execute("ATTACH DATABASE ? AS src", (f"file:{source}?mode=ro",))
    for name, sql in con.execute("SELECT name, sql FROM src.sqlite_master WHERE type = 'table' "
                                 "AND sql IS NOT NULL").fetchall():
        if name.startswith("sqlite_"):
            continue
        # Only the columns the loader reads are filled: the rest may be NULL here.
        con.execute(sql.replace("NOT NULL", "") if name in ACTIVITY_TABLES else sql)
        if name in SMALL_TABLES or name.startswith("ENUM_"):
            con.execute(f'INSERT INTO main."{name}" SELECT * FROM src."{name}"')
    tid = con.execute("SELECT globalTid FROM src.CUPTI_ACTIVITY_KIND_RUNTIME "
                      "GROUP BY globalTid ORDER BY count(*) DESC LIMIT 1").fetchall()[0][0]
    pid = tid & ~0xFFFFFF
    device = con.execute("SELECT deviceId FROM src.CUPTI_ACTIVITY_KIND_KERNEL "
                         "LIMIT 1").fetchall()[0][0]
    con.commit()
    con.execute("DETACH DATABASE src")
    threads = [tid, tid + 1]  # the source's busiest thread and one more of its process
    launch_id = _string(con, "cudaLaunchKernel_v7000")
    sync_id = _string(con, "cudaDeviceSynchronize_v3020")
    kernel_id = _string(con, "tiny_kernel")
    t0 = 1_000_000_000
    for lo in range(0, kernels, BATCH):
        hi = min(lo + BATCH, kernels)
        nvtx, runtime, kern = [], [], []
        for i in range(lo, hi):
            base = t0 + i * PERIOD_NS
            thread = threads[i % 2]
            for level in range(nesting):
                nvtx.append((base + level * RANGE_INSET_NS,
                             base + RANGE_LENGTH_NS - level * RANGE_INSET_NS, PUSHPOP,
                             _name(i * nesting + level, level, names), thread))
            corr = i + 1
            runtime.append((base + LAUNCH_AT_NS, base + LAUNCH_AT_NS + LAUNCH_NS, thread, corr,
                            launch_id))
            if syncs:
                runtime.append((base + SYNC_AT_NS, base + SYNC_AT_NS + SYNC_NS, thread,
                                kernels + corr, sync_id))
            kern.append((base + KERNEL_AT_NS, base + KERNEL_AT_NS + KERNEL_NS, device,
                         7 + i % 2, pid, corr, kernel_id, kernel_id))
        con.executemany('INSERT INTO NVTX_EVENTS (start, "end", eventType, text, globalTid) '
                        "VALUES (?, ?, ?, ?, ?)", nvtx)
        con.executemany('INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME (start, "end", globalTid, '
                        "correlationId, nameId) VALUES (?, ?, ?, ?, ?)", runtime)
        con.executemany('INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL (start, "end", deviceId, '
                        "streamId, globalPid, correlationId, shortName, demangledName) "
                        "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", kern)
    end = t0 + kernels * PERIOD_NS
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if "ANALYSIS_DETAILS" in tables:
        con.execute("UPDATE ANALYSIS_DETAILS SET startTime = ?, stopTime = ?, duration = ?",
                    (t0 - 1_000_000, end + 1_000_000, end - t0 + 2_000_000))
    con.commit()
    con.close()
    return {"kernels": kernels, "ranges": kernels * nesting}


def _name(number: int, level: int, names: int | None) -> str:
    """The name of range `number`: its level's, or `request <id>` for one of `names` ids
    (a multiplicative scramble of the range's number modulo `names`, a permutation where
    the two are coprime: ids that go down, so no counter family forms)."""
    if names is None:
        return LEVELS[level % len(LEVELS)]
    return f"request {(number * SCRAMBLE) % names if names > 1 else 0}"


# An odd prime larger than any report's range count, coprime to any `names` but its own
# multiples.
SCRAMBLE = 1_000_000_007


def _string(con: sqlite3.Connection, value: str) -> int:
    row = con.execute("SELECT id FROM StringIds WHERE value = ?", (value,)).fetchone()
    if row:
        return row[0]
    new = con.execute("SELECT coalesce(max(id), 0) + 1 FROM StringIds").fetchone()[0]
    con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (new, value))
    return new


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, default=2_000_000)
    p.add_argument("--nesting", type=int, default=len(LEVELS))
    p.add_argument("--names", type=int, default=None,
                   help="name the ranges `request <id>` with this many distinct ids")
    p.add_argument("--syncs", action="store_true",
                   help="a cudaDeviceSynchronize in each innermost range, after its kernel")
    p.add_argument("--source", type=Path,
                   default=HERE.parent / "tests/data/h100_torch_train.sqlite")
    p.add_argument("--force", action="store_true")
    a = p.parse_args()
    if a.out.exists() and not a.force:
        sys.exit(f"{a.out} exists (--force to overwrite)")
    t = time.perf_counter()
    info = make(a.source.resolve(), a.out, a.kernels, a.nesting, a.names, a.syncs)
    print(f"{a.out}: {info['kernels']} kernels, {info['ranges']} NVTX ranges on 2 threads, "
          f"{a.out.stat().st_size / 2**20:.0f} MiB, {time.perf_counter() - t:.1f} s")


if __name__ == "__main__":
    main()
