"""What reading a report's text as UTF-8 costs (database.Texts), on the two paths it takes.

    python scripts/time_texts.py REPORT.sqlite [--repeat 5]

- Arrow: the NVTX ranges' read (the loader's own SQL, queries.nvtx_ranges_sql) once, then
  `Texts.column` on its name column: Arrow's UTF-8 check of every name, which is what the
  read of a report whose names are all UTF-8 pays.
- sqlite3: every StringIds value read with sqlite3's own decoding, then with `Texts.decode`
  as the text factory (the sqlite3 reads of a report read far fewer: kernel and API names
  by id, thread and process names).
Prints the best of REPEAT thread-CPU times of each (the machine's other load moves wall
times more than CPU times).
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from pathlib import Path

from nsyswrap.read import database, queries


def best_cpu_s(f, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.thread_time()
        f()
        times.append(time.thread_time() - t)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("report", type=Path)
    p.add_argument("--repeat", type=int, default=5)
    a = p.parse_args()
    db = database.Database(a.report)
    try:
        bulk = queries.BulkQueries.of(db)
        if bulk.nvtx_ranges:
            sql = bulk.nvtx_ranges.replace(queries.BulkQueries.ROWS, "1")
            start = time.perf_counter()
            names = db._fetch(sql)["name"]
            read_s = time.perf_counter() - start
            check_s = best_cpu_s(lambda: db.texts.column(names), a.repeat)
            print(f"Arrow: {len(names):,} range names ({names.nbytes / 2**20:.0f} MiB) read "
                  f"in {read_s:.2f} s wall; checked in {check_s:.3f} s CPU")
        con = sqlite3.connect(db.uri, uri=True)
        count = con.execute("SELECT count(*) FROM StringIds").fetchone()[0]
        plain_s = best_cpu_s(lambda: con.execute("SELECT value FROM StringIds").fetchall(),
                             a.repeat)
        con.text_factory = db.texts.decode
        decoded_s = best_cpu_s(lambda: con.execute("SELECT value FROM StringIds").fetchall(),
                               a.repeat)
        con.close()
        print(f"sqlite3: {count:,} StringIds values in {plain_s * 1e3:.1f} ms CPU as str, "
              f"{decoded_s * 1e3:.1f} ms with Texts.decode")
    finally:
        db.close()


if __name__ == "__main__":
    main()
