"""Grow a real nsys export to N kernels by replicating its activity along the time axis.

    python scripts/make_big_report.py SOURCE.sqlite OUT.sqlite --kernels 1000000

Copy k of every activity row (kernels, runtime API calls, memcpy, memset, syncs, graphs,
NVTX ranges and marks) is shifted by k x (the source's span + 1 ms); correlation ids by
k x (the source's largest + 1), so kernels still join their launching calls, CUDA event
records (CUPTI_ACTIVITY_KIND_CUDA_EVENT, no times) theirs, and every NVTX range still
holds its own copy's work. Copies are appended one after another, so tables in
start order stay so. Domains, strings, threads and devices are shared.
Tables the analyses do not read (OSRT, callchains) are left as they are. The source is read
only; OUT is a new file (refuses to overwrite unless --force).

    python scripts/make_big_report.py SOURCE.sqlite OUT.sqlite --kernels N --step-marks \
        [HARNESS.sqlite] [--step-range train_step]

--step-marks first gives every `--step-range` NVTX range of the source (each copy's, then)
what a step timed by the harness (`nsyswrap.benchmark(step, iters=1, warmup=0,
flush_l2="none", backpressure=False)`) leaves in a real report: a cudaEventRecord call on
the step's thread just after the range starts and one just before it ends (fresh
correlation ids, each with its CUPTI_ACTIVITY_KIND_CUDA_EVENT row on the stream of the
step's first kernel), and after the range the harness's mark, in the `nsyswrap` domain of
the step's process, as a registered string (textId), as the harness writes it
(harness.mark_payloads): one iteration, whose event time is the step's GPU span (its own
kernels, copies and memsets) plus the events' own ~2.4 µs, its host time the span between
the two record calls. The shapes come from HARNESS.sqlite (default
tests/data/h200_user_harness.sqlite, a report of `nsyswrap run` with the harness): its
first harness document's config (the device's name and L2 size taken from SOURCE), the
record calls' API name and their median distance from the iteration ranges' edges and
length. No floor windows are added, so the documents name none (floor_range null). Each
copy's documents differ (event and host times + k mod 64 ns), as a real run's would: no two
marks share a string.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import shutil
import sqlite3
import statistics
import sys
import time
from pathlib import Path

import pandas as pd

from nsyswrap.analysis.reconcile import benchmark_runs
from nsyswrap.instrument.harness import BenchmarkConfig, BenchmarkResult, mark_payloads
from nsyswrap.instrument.schema import HARNESS_DOMAIN
from nsyswrap.read import cuda_api
from nsyswrap.read.loader import EVENT_RECORD_APIS

HARNESS_REPORT = Path(__file__).resolve().parent.parent / "tests/data/h200_user_harness.sqlite"

# (table, columns holding session time, columns holding correlation ids)
GROWN = [
    ("CUPTI_ACTIVITY_KIND_KERNEL", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_RUNTIME", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_MEMCPY", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_MEMSET", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_GRAPH_TRACE", ("start", "end"), ("correlationId",)),
    ("CUPTI_ACTIVITY_KIND_CUDA_EVENT", (), ("correlationId",)),
]
NVTX_KINDS = (34, 59, 60)  # marks and ranges; domain create/destroy stay single
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
CUDA_EVENT = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"
GPU_WORK = ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
# What a pair of CUDA events reads beyond the work between them on an H100
# (docs/performance.md, "The harness's accuracy").
EVENT_COST_NS = 2400
# The harness marks after the loop's synchronize: this long after the range, at most half
# way to the next step.
MARK_AFTER_NS = 1000


def grow(source: Path, out: Path, kernels: int, step_marks: Path | None = None,
         step_range: str = "train_step") -> dict:
    shutil.copyfile(source, out)
    con = sqlite3.connect(out)
    steps = add_step_marks(con, step_marks, step_range) if step_marks is not None else None
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    have = [(t, tc, cc) for t, tc, cc in GROWN if t in tables]
    timed = [t for t, tc, _ in have if tc]
    n_kernels = con.execute("SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
    copies = math.ceil(kernels / n_kernels)
    lo = min(con.execute(f"SELECT min(start) FROM {t}").fetchone()[0] or 0 for t in timed)
    hi = max(con.execute(f'SELECT max("end") FROM {t}').fetchone()[0] or 0 for t in timed)
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
        # Copy k's marks name the strings of its own documents (add_step_marks numbered
        # them copy by copy from steps["first_text_id"]).
        text_id = (None if steps is None else
                   f'CASE WHEN t.textId >= {steps["first_text_id"]} THEN t.textId + c.k * '
                   f'{steps["marks"]} ELSE t.textId END')
        _grow_table(con, "NVTX_EVENTS", ("start", "end"), (), period, max_corr,
                    f"WHERE t.eventType IN {NVTX_KINDS}", {"textId": text_id})
        if steps is not None:
            con.executemany("INSERT INTO StringIds (id, value) VALUES (?, ?)",
                            steps["texts"](copies))
    if "ANALYSIS_DETAILS" in tables:
        con.execute("UPDATE ANALYSIS_DETAILS SET stopTime = stopTime + ?, duration = "
                    "duration + ?", ((copies - 1) * period, (copies - 1) * period))
    con.commit()
    con.execute("VACUUM")
    con.close()
    return {"copies": copies, "kernels": copies * n_kernels, "period_ns": period,
            "step_marks": 0 if steps is None else copies * steps["marks"]}


def _grow_table(con, table, time_cols, corr_cols, period, max_corr, where,
                override=None) -> None:
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    override = {c: e for c, e in (override or {}).items() if e is not None}
    exprs = []
    for c in cols:
        if c in override:
            exprs.append(override[c])
        elif c in time_cols:
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


def harness_shapes(path: Path) -> dict:
    """What a harness-timed iteration looks like in `path` (a report of `nsyswrap run` with
    the harness): the first harness document, the record calls' API name, and their median
    offset from the iteration range's edges and duration."""
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT e.start, e.globalTid, d.text, coalesce(e.text, s.value) FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId JOIN NVTX_EVENTS d ON d.eventType = 75 "
        "AND d.domainId = e.domainId AND (d.globalTid >> 24) = (e.globalTid >> 24) "
        "WHERE e.eventType = 34 ORDER BY e.start").fetchall()
    marks = pd.DataFrame(rows, columns=["time_ns", "thread", "domain", "text"])
    marks["pid"] = [(t >> 24) & 0xFFFFFF for t in marks["thread"]]
    runs = benchmark_runs(marks)
    if not runs:
        sys.exit(f"{path}: no harness marks ({HARNESS_DOMAIN} domain, nsyswrap.benchmark/1)")
    names = {i: v for i, v in con.execute(
        "SELECT id, value FROM StringIds WHERE value LIKE 'cu%Event%'")
        if cuda_api.base_name(v) in EVENT_RECORD_APIS}
    ids = ",".join(map(str, names))
    first, last, api = [], [], None
    for run in runs:
        thread = int(marks.loc[marks["time_ns"] == run["time_ns"], "thread"].iloc[0])
        ranges = con.execute(
            "SELECT e.start, e.end FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId "
            "WHERE e.eventType IN (59, 60) AND coalesce(e.text, s.value) = ? "
            "AND e.globalTid = ? AND e.start < ? AND e.end IS NOT NULL "
            "ORDER BY e.start DESC LIMIT ?",
            (run["range"], thread, run["time_ns"], len(run["event_ns"]))).fetchall()
        for start, end in ranges:
            calls = con.execute(
                f'SELECT start, "end", nameId FROM {RUNTIME} WHERE globalTid = ? AND '
                f'nameId IN ({ids}) AND start >= ? AND "end" <= ? ORDER BY start',
                (thread, start, end)).fetchall()
            if len(calls) >= 2:
                first.append((calls[0][0] - start, calls[0][1] - calls[0][0]))
                last.append((end - calls[-1][1], calls[-1][1] - calls[-1][0]))
                api = api or names[calls[0][2]]
    con.close()
    if not first:
        sys.exit(f"{path}: no cudaEventRecord calls inside the harness's iteration ranges")
    med = lambda xs: int(statistics.median(xs))  # noqa: E731
    return {"run": runs[0], "api": api,
            "start_offset": med([o for o, _ in first]), "start_ns": med([d for _, d in first]),
            "end_offset": med([o for o, _ in last]), "end_ns": med([d for _, d in last])}


def add_step_marks(con, harness: Path, step_range: str) -> dict:
    """Give each `step_range` range of the (not yet grown) report the harness's records
    and mark (module docstring). Returns what grow() needs to number copy k's marks:
    {"first_text_id", "marks" (per copy), "texts" (copies -> (id, document) rows)}."""
    shape = harness_shapes(harness)
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    if CUDA_EVENT not in tables:
        src = sqlite3.connect(f"file:{harness}?mode=ro", uri=True)
        con.execute(src.execute("SELECT sql FROM sqlite_master WHERE name = ?",
                                (CUDA_EVENT,)).fetchone()[0])
        src.close()
    steps = con.execute(
        "SELECT e.start, e.end, e.globalTid, e.domainId FROM NVTX_EVENTS e "
        "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType IN (59, 60) "
        "AND coalesce(e.text, s.value) = ? AND e.end IS NOT NULL ORDER BY e.start",
        (step_range,)).fetchall()
    if not steps:
        sys.exit(f"no {step_range!r} NVTX range in the source (--step-range)")
    api_id = _string_id(con, shape["api"])
    gpu = con.execute("SELECT name, l2CacheSize FROM TARGET_INFO_GPU LIMIT 1").fetchone() \
        if "TARGET_INFO_GPU" in tables else None
    fields = {f.name for f in dataclasses.fields(BenchmarkConfig)}
    config = {k: v for k, v in shape["run"]["config"].items() if k in fields}
    corr = max(con.execute(f"SELECT max(correlationId) FROM {t}").fetchone()[0] or 0
               for t, _, cc in GROWN if t in tables and cc) + 1
    event_id = (con.execute(f"SELECT max(eventId) FROM {CUDA_EVENT}").fetchone()[0] or 0) + 1
    sync_id = (con.execute(f"SELECT max(eventSyncId) FROM {CUDA_EVENT}").fetchone()[0] or 0) + 1
    first_text_id = con.execute("SELECT max(id) FROM StringIds").fetchone()[0] + 1
    work = " UNION ALL ".join(
        f'SELECT start, "end", correlationId, globalPid, deviceId, streamId, '
        f'{"contextId" if "contextId" in _columns(con, t) else "NULL"} FROM {t}'
        for t in GPU_WORK if t in tables)
    calls, events, marks, docs = [], [], [], []
    for j, (start, end, thread, domain_id) in enumerate(steps):
        pid = (thread >> 24) & 0xFFFFFF
        process = thread - (thread & 0xFFFFFF)
        domain = _domain(con, thread, domain_id)
        mine = con.execute(
            f'SELECT r.start, r."end" FROM {RUNTIME} r WHERE r.globalTid = ? AND r.start >= ? '
            f'AND r."end" <= ? ORDER BY r.start', (thread, start, end)).fetchall()
        room_start = (mine[0][0] if mine else end) - start
        room_end = end - (mine[-1][1] if mine else start)
        # The record calls where the harness makes them, moved in to the range's edge
        # where the step's own first (last) call comes sooner.
        a = start + max(min(shape["start_offset"], room_start - shape["start_ns"] - 1), 0)
        b = end - max(min(shape["end_offset"], room_end - shape["end_ns"] - 1), 0)
        # The step's own GPU work: what its launch calls (on its thread, inside it) started.
        ops = con.execute(
            f'SELECT g.start, g."end", g.deviceId, g.streamId, g.contextId '
            f"FROM ({work}) g JOIN {RUNTIME} r ON r.correlationId = g.correlationId "
            f"AND (r.globalTid >> 24) = (g.globalPid >> 24) "
            f"WHERE r.globalTid = ? AND r.start >= ? AND r.start <= ? ORDER BY g.start",
            (thread, start, end)).fetchall()
        span = max(o[1] for o in ops) - ops[0][0] if ops else 0
        # The events go to the stream the step's work goes to (its first operation's).
        device, stream, context = ops[0][2:] if ops else (0, 7, 1)
        for t0, t1 in ((a, a + shape["start_ns"]), (b - shape["end_ns"], b)):
            calls.append({"start": t0, "end": t1, "eventClass": 0, "globalTid": thread,
                          "correlationId": corr, "nameId": api_id, "returnValue": 0})
            events.append({"deviceId": device, "contextId": 1 if context is None else context,
                           "greenContextId": 0, "streamId": stream, "correlationId": corr,
                           "globalPid": process, "eventId": event_id,
                           "eventSyncId": sync_id})
            corr, event_id, sync_id = corr + 1, event_id + 1, sync_id + 1
        following = [s for s, _, t, _ in steps if t == thread and s > end]
        at = end + min(MARK_AFTER_NS, (min(following) - end) // 2 if following else
                       MARK_AFTER_NS)
        marks.append({"start": at, "eventType": 34, "globalTid": thread,
                      "textId": first_text_id + j, "domainId": _domain_id(con, thread)})
        docs.append({"config": {**config, "name": step_range, "iters": 1, "warmup": 0,
                                "warmup_iters": 0, "flush_l2": "none", "flush_bytes": 0,
                                "backpressure": False, "sleep_ns": 0.0,
                                "sleep_cycles_per_ns": 0.0, "enqueue_ns": None,
                                "cuda_graph": 0, "calls": 1, "sync_each": True,
                                "clock_source": None, "max_clock_mhz": None,
                                "range_domain": domain,
                                **({"device": gpu[0], "l2_bytes": gpu[1]} if gpu else {})},
                     "pid": pid, "event": span + EVENT_COST_NS,
                     "host": b - a})
    _insert_in_start_order(con, RUNTIME, calls)
    _insert(con, CUDA_EVENT, events)
    _insert_in_start_order(con, "NVTX_EVENTS", marks)

    def texts(copies: int):
        for k in range(copies):
            for j, d in enumerate(docs):
                result = BenchmarkResult(step_range, [float(d["event"] + k % 64)], ["hot"],
                                         BenchmarkConfig(**d["config"]), [None],
                                         host_ns=[float(d["host"] + k % 64)])
                payloads = mark_payloads(result, pid=d["pid"])
                if len(payloads) != 1:
                    sys.exit("a step's document is longer than one mark: not supported")
                yield first_text_id + k * len(docs) + j, payloads[0]

    return {"first_text_id": first_text_id, "marks": len(docs), "texts": texts}


def _columns(con, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]


def _string_id(con, value: str) -> int:
    row = con.execute("SELECT id FROM StringIds WHERE value = ?", (value,)).fetchone()
    if row:
        return row[0]
    new = con.execute("SELECT max(id) FROM StringIds").fetchone()[0] + 1
    con.execute("INSERT INTO StringIds (id, value) VALUES (?, ?)", (new, value))
    return new


def _domain(con, thread: int, domain_id) -> str | None:
    """The name of a range's domain (None: the default domain)."""
    if not domain_id:
        return None
    row = con.execute("SELECT text FROM NVTX_EVENTS WHERE eventType = 75 AND domainId = ? "
                      "AND (globalTid >> 24) = ?", (domain_id, thread >> 24)).fetchone()
    return row[0] if row else None


def _domain_id(con, thread: int) -> int:
    """The harness's domain in the thread's process, created (before the process's first
    event) where the process has none."""
    row = con.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = ? "
                      "AND (globalTid >> 24) = ?", (HARNESS_DOMAIN, thread >> 24)).fetchone()
    if row:
        return row[0]
    new, first = con.execute(
        "SELECT coalesce(max(domainId), 0) + 1, min(start) FROM NVTX_EVENTS "
        "WHERE (globalTid >> 24) = ?", (thread >> 24,)).fetchone()
    _insert_in_start_order(con, "NVTX_EVENTS", [{
        "start": first, "eventType": 75, "text": HARNESS_DOMAIN, "globalTid": thread,
        "domainId": new}])
    return new


def _insert(con, table: str, rows: list[dict], into: str | None = None) -> None:
    """Add `rows` (column -> value; the table's other columns NULL) to `table`, or to
    `into` shaped like it."""
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    names = ", ".join(f'"{c}"' for c in cols)
    con.executemany(f"INSERT INTO {into or table} ({names}) VALUES "
                    f"({', '.join('?' * len(cols))})", [[r.get(c) for c in cols] for r in rows])


def _insert_in_start_order(con, table: str, rows: list[dict]) -> None:
    """Add `rows` (_insert) so that the table stays in start order by rowid, as nsys
    exports it: each new row after the rows that start no later."""
    if not rows:
        return
    cols = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')]
    names = ", ".join(f'"{c}"' for c in cols)
    con.execute(f'CREATE TEMP TABLE added AS SELECT * FROM "{table}" WHERE 0')
    _insert(con, table, rows, into="temp.added")
    con.execute(f'CREATE TEMP TABLE merged AS SELECT {names} FROM ('
                f'SELECT 0 AS added, rowid AS r, * FROM "{table}" UNION ALL '
                f'SELECT 1, rowid, * FROM temp.added) ORDER BY start, added, r')
    con.execute(f'DELETE FROM "{table}"')
    con.execute(f'INSERT INTO "{table}" ({names}) SELECT {names} FROM temp.merged '
                f'ORDER BY rowid')
    con.execute("DROP TABLE temp.added")
    con.execute("DROP TABLE temp.merged")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--kernels", type=int, required=True, help="at least this many kernels")
    p.add_argument("--step-marks", type=Path, nargs="?", const=HARNESS_REPORT, default=None,
                   metavar="HARNESS.sqlite",
                   help="the harness's records and mark in every --step-range range "
                   f"(shapes from HARNESS.sqlite, default {HARNESS_REPORT.name})")
    p.add_argument("--step-range", default="train_step", help="the step's NVTX range")
    p.add_argument("--force", action="store_true")
    a = p.parse_args()
    if a.out.exists() and not a.force:
        sys.exit(f"{a.out} exists (--force to overwrite)")
    t0 = time.perf_counter()
    info = grow(a.source, a.out, a.kernels, a.step_marks, a.step_range)
    marks = f", {info['step_marks']} harness marks" if a.step_marks is not None else ""
    print(f"{a.out}: {info['kernels']} kernels ({info['copies']} copies of {a.source.name})"
          f"{marks}, {a.out.stat().st_size / 2**20:.0f} MiB, {time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
