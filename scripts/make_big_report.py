"""Grow a real nsys export to N kernels by replicating its activity along the time axis.

    python scripts/make_big_report.py SOURCE.sqlite OUT.sqlite --kernels 1000000

Copy k of every activity row (kernels, runtime API calls, memcpy, memset, syncs, graphs,
NVTX ranges and marks) is shifted by k x (the source's span + 1 ms); correlation ids by
k x (the source's largest + 1), so kernels still join their launching calls and every NVTX
range still holds its own copy's work. Copies are appended one after another, so tables in
start order stay so. Domains, strings, threads and devices are shared.
Tables the analyses do not read (OSRT, callchains) are left as they are. The source is read
only; OUT is a new file (refuses to overwrite unless --force).
"""

from __future__ import annotations

import argparse
import math
import shutil
import sqlite3
import sys
import time
from pathlib import Path

# (table, columns holding session time, columns holding correlation ids)
GROWN = [
    ("CUPTI_ACTIVITY_KIND_KERNEL", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_MEMSET", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", ("start", "end"), ("correlationId",)),
]
NVTX_KINDS = (34, 59, 60)  # marks and ranges; domain create/destroy stay single


def grow(source: Path, out: Path, kernels: int) -> dict:
    shutil.copyfile(source, out)
    con = sqlite3.connect(out)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    have = [(t, tc, cc) for t, tc, cc in GROWN if t in tables]
    n_kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = math.ceil(kernels / n_kernels)
    lo = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 0 for t, _, _ in have)
    hi = max(con.execute(f'SELECT max("end") FROM {t}').fetchone()[0] or 0 for t, _, _ in have)
    if "NVTX_EVENTS" in tables:
        nlo, nhi = con.execute(
            f'SELECT min(start), max(coalesce("end", start)) FROM NVTX_EVENTS '
            f"WHERE eventType IN {NVTX_KINDS}").fetchone()
        lo, hi = min(lo, nlo or lo), max(hi, nhi or hi)
    period = hi - lo + 1_000_000
    max_corr = max(con.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0
                   for t, _, _ in have) + 1
    con.execute("CREATE TEMP TABLE copies (k INTEGER PRIMARY KEY)")
    con.executemany("INSERT INTO copies VALUES (?)", [(k,) for k in range(1, copies)])
    for table, time_cols, corr_cols in have:
        _grow_table(con, table, time_cols, corr_cols, period, max_corr, "")
    if "NVTX_EVENTS" in tables:
        _grow_table(con, "NVTX_EVENTS", ("start", "end"), (), period, max_corr,
                    f"WHERE t.eventType IN {NVTX_KINDS}")
    if "ANALYSIS_DETAILS" in tables:
        con.execute("UPDATE ANALYSIS_DETAILS SET stopTime = stopTime + ?, duration = "
                    "duration + ?", ((copies - 1) * period, (copies - 1) * period))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return {"copies": copies, "kernels": copies * n_kernels, "period_ns": period}


def _grow_table(con, table, time_cols, corr_cols, period, max_corr, where) -> None:
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    exprs = []
    for c in cols:
        if c in time_cols:
            exprs.append(f't."{c}" + c.k * {period}')
        elif c in corr_cols:
            exprs.append(f't."{c}" + c.k * {max_corr}')
        else:
            exprs.append(f't."{c}"')
    names = ", ".join(f'"{c}"' for c in cols)
    # Copy after copy, each in the source's row order (CROSS JOIN keeps SQLite's loops in
    # this order): the rows stay in start order, as nsys exports them (docs/nsys-quirks.md,
    # "Export order"), and as the streamed analysis reads them.
    con.execute(f'INSERT INTO "{table}" ({names}) SELECT {", ".join(exprs)} '
                f'FROM copies AS c CROSS JOIN (SELECT * FROM "{table}") AS t {where} '
                f'ORDER BY c.k, t.rowid')


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, required=True, help="at least this many kernels")
    p.add_argument("--force", action="store_true")
    a = p.parse_args()
    if a.out.exists() and not a.force:
        sys.exit(f"{a.out} exists (--force to overwrite)")
    t0 = time.perf_counter()
    info = grow(a.source, a.out, a.kernels)
    print(f"{a.out}: {info['kernels']} kernels ({info['copies']} copies of {a.source.name}), "
          f"{a.out.stat().st_size / 2**20:.0f} MiB, {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
