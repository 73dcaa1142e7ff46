"""What reading an export costs through the ADBC SQLite driver, query by query.

    python scripts/time_reads.py REPORT.sqlite [--slices 1 2 4]

Times `fetch_arrow_table()` of: the kernel table's eight plain columns against the five
packed ones the loader reads; the runtime table's launching and blocking calls as one
five-column read against the loader's two reads (three packed columns, then the blocking
calls alone); SQLite's own decoding of the eight kernel columns (`total()` of each, no
conversion); and the packed kernel read in N rowid slices on N threads. The SQL is the
loader's own where it can be (`queries.kernels_sql`, `queries.runtime_sql`). One query at
a time, so compare the lines of one run.
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import adbc_driver_sqlite.dbapi as adbc

from nsyswrap.read import database, queries

K = queries.KERNEL_TABLE


def fetch(uri: str, sql: str) -> int:
    con = adbc.connect(uri)
    try:
        cur = con.cursor()
        cur.execute(sql)
        rows = cur.fetch_arrow_table().num_rows
        cur.close()
        return rows
    finally:
        con.close()


def timed(label: str, f) -> None:
    t = time.perf_counter()
    rows = f()
    print(f"{time.perf_counter() - t:7.2f} s  {rows:>11,} rows  {label}", flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path)
    p.add_argument("--slices", type=int, nargs="*", default=[1, 2])
    a = p.parse_args()
    db = database.Database(a.report)
    uri = db.uri
    kernels = queries.kernels_sql(db)
    runtime = queries.runtime_sql(db)
    plain = (f'SELECT start, "end", deviceId, streamId, globalPid, correlationId, shortName, '
             f"demangledName FROM {K}")
    timed("kernels, 8 plain columns", lambda: fetch(uri, plain))
    timed("kernels, 5 packed columns (the loader's)",
          lambda: fetch(uri, kernels.replace(queries.BulkQueries.ROWS, "1")))
    total = ", ".join(f"total({c})" for c in ("start", '"end"', "deviceId", "streamId",
                                                "globalPid", "correlationId", "shortName",
                                                "demangledName"))
    timed("kernels, SQLite's decoding alone (total() of the 8)",
          lambda: len(sqlite3.connect(uri, uri=True).execute(
              f"SELECT {total} FROM {K}").fetchall()))
    ids = runtime.calls_sql.split("nameId IN (")[1].split(")")[0]
    timed("runtime calls, 5 plain columns (one read)", lambda: fetch(
        uri, f'SELECT correlationId, start, "end", globalTid, nameId FROM '
             f"{queries.RUNTIME_TABLE} WHERE nameId IN ({ids})"))
    launches = runtime.calls_sql.replace(', "end" AS end_ns, nameId AS name_id', "")
    timed("launches alone, 3 packed columns",
          lambda: fetch(uri, launches.replace(queries.BulkQueries.ROWS, "1")))
    timed("launches and blocking calls, 5 columns (the loader's)",
          lambda: fetch(uri, runtime.calls_sql.replace(queries.BulkQueries.ROWS, "1")))
    blocking = ",".join(map(str, sorted(runtime.blocking))) or "NULL"
    timed("blocking calls alone (a second scan of the table)", lambda: fetch(
        uri, f'SELECT correlationId, start, "end", globalTid, nameId FROM '
             f"{queries.RUNTIME_TABLE} WHERE nameId IN ({blocking})"))
    for n in a.slices:
        (lo,), = db.con.execute(f"SELECT min(rowid) FROM {K}").fetchall()
        (hi,), = db.con.execute(f"SELECT max(rowid) FROM {K}").fetchall()
        cuts = [lo - 1 + (hi - lo + 1) * i // n for i in range(n + 1)]
        parts = [kernels.replace(queries.BulkQueries.ROWS, f"k.rowid > {x} AND k.rowid <= {y}")
                 for x, y in zip(cuts, cuts[1:], strict=False)]

        def read(parts=parts, n=n) -> int:
            with ThreadPoolExecutor(n) as pool:
                return sum(pool.map(lambda q: fetch(uri, q), parts))
        timed(f"kernels, packed, {n} rowid slice(s) on {n} thread(s)", read)


if __name__ == "__main__":
    main()
