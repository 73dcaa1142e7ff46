"""Make a report with many of the program's own CUDA-event windows from a real one.

    python scripts/grow_user_report.py SOURCE.sqlite OUT.sqlite --windows 500000

SOURCE holds `nsyswrap run`'s records (tests/data/h100_user_seed.sqlite). Its first
measured event window that holds one kernel is the template: the block of the trace from
its start record's call to its kernel's end (the kernel, the recording thread's runtime
calls, their CUDA event rows) is copied after the trace's end, once per new window, each
copy shifted by the block's length and its correlation ids by the report's largest; the
runner's document (a JSON mark, zlib+base64 packed columns) gains the two records and the
elapsed_time() of each copy, on the same host clock shifted by as much (the clock marks
stay as they were, so the offset between the clocks is unchanged). Each window adds two
records, so --windows 500000 gives a report with ~1 M records (the scale of
scripts/workloads/torch_event_million.py, which needs a GPU).
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import sqlite3
import zlib
from pathlib import Path

import numpy as np

from nsyswrap.analysis.user_events import match_records
from nsyswrap.analysis.user_timings import user_windows
from nsyswrap.read.loader import load

KERNELS = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
EVENTS = "CUPTI_ACTIVITY_KIND_CUDA_EVENT"


def template(source: Path) -> dict:
    """The window holding the fewest kernels of its own (at least one): its rows, times."""
    report = load(source)
    windows = user_windows(report)
    rows = windows.rows
    kernels = report.kernels
    best = None
    for i in range(len(rows)):
        r = rows.iloc[i]
        inside = kernels[(kernels["launch_start_ns"] > r["start_time_ns"])
                         & (kernels["launch_start_ns"] < r["end_time_ns"])
                         & (kernels["stream_id"] == r["start_stream_id"])]
        if len(inside) and (best is None or len(inside) < best[0]):
            best = (len(inside), r, int(inside["end_ns"].max()))
    if best is None:
        raise SystemExit(f"{source}: no window with a kernel")
    _, r, kernel_end = best
    return {"pid": int(r["pid"]), "thread": int(r["start_thread"]),
            "begin": int(r["start_time_ns"]),
            "end": max(kernel_end, int(r["end_call_end_ns"])) + 1,
            "start_record": int(r["start_record"]), "end_record": int(r["end_record"]),
            "elapsed_row": int(r["elapsed_row"]),
            # user_windows keeps only the records' contexts: matched again, whole.
            "records": match_records(report).records}


def columns(db: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in db.execute(f"PRAGMA table_info({table})")]


def copy_rows(db: sqlite3.Connection, table: str, where: str, shift: dict[str, str]) -> int:
    """Copy the rows of `table` matching `where` once per row of `copies` (column i), each
    column in `shift` rewritten by its expression; in order of i then start."""
    db.execute(f"CREATE TEMP TABLE block AS SELECT * FROM {table} WHERE {where}")
    cols = columns(db, table)
    select = ", ".join(shift.get(c, f'block."{c}"') for c in cols)
    order = "copies.i" + (", block.start" if "start" in cols else "")
    db.execute(f"INSERT INTO {table} ({', '.join(repr(c) for c in cols)}) "
               f"SELECT {select} FROM copies, block ORDER BY {order}")
    n = db.execute("SELECT count(*) FROM block").fetchone()[0]
    db.execute("DROP TABLE block")
    return n


def packed(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw, 6)).decode("ascii")


def unpacked(text: str, fmt: str, fields) -> np.ndarray:
    raw = zlib.decompress(base64.b64decode(text))
    return np.frombuffer(raw, dtype=np.dtype(
        [(f, "<" + {"q": "i8", "H": "u2", "I": "u4", "d": "f8"}[c])
         for f, c in zip(fields, fmt[1:], strict=True)])).copy()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("source", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--windows", type=int, default=500_000)
    a = p.parse_args()
    t = template(a.source)
    shutil.copyfile(a.source, a.out)
    db = sqlite3.connect(a.out)
    last = max(db.execute(f'SELECT max("end") FROM {table}').fetchone()[0] or 0
               for table in (KERNELS, RUNTIME, "NVTX_EVENTS"))
    step = t["end"] - t["begin"] + 2_000  # each copy after the last, a 2 µs gap
    first = last + 1_000_000 - t["begin"]  # the first copy's shift
    correlation = db.execute(f"SELECT max(correlationId) FROM {RUNTIME}").fetchone()[0] + 1
    db.execute("CREATE TEMP TABLE copies (i INTEGER PRIMARY KEY)")
    db.executemany("INSERT INTO copies VALUES (?)", ((i,) for i in range(a.windows)))
    shift = f"({first} + copies.i * {step})"
    moved = {"start": f"block.start + {shift}", "end": f'block."end" + {shift}',
             "correlationId": f"block.correlationId + (copies.i + 1) * {correlation}"}
    pid_bits = t["thread"] >> 24
    block = f"start >= {t['begin']} AND start < {t['end']}"
    k = copy_rows(db, KERNELS, f"{block} AND globalPid >> 24 = {pid_bits}", moved)
    r = copy_rows(db, RUNTIME, f"{block} AND globalTid = {t['thread']}", moved)
    db.execute(f"CREATE TEMP TABLE calls AS SELECT correlationId FROM {RUNTIME} "
               f"WHERE {block} AND globalTid = {t['thread']}")
    e = copy_rows(db, EVENTS, "correlationId IN (SELECT correlationId FROM calls)",
                  {"correlationId": moved["correlationId"]})
    # The runner's document: two records and an elapsed_time() per copy.
    (rowid, text), = db.execute(
        "SELECT rowid, text FROM NVTX_EVENTS WHERE text LIKE "
        "'{\"nsyswrap\":\"nsyswrap.user-events/%' AND text LIKE ?",
        (f'%"pid":{t["pid"]}%',)).fetchall()
    doc = json.loads(text)
    # The layout the document says (the seed's runner may be an earlier one's).
    records = unpacked(doc["records"], doc["record_format"], doc["record_fields"])
    elapsed = unpacked(doc["elapsed"], doc["elapsed_format"], doc["elapsed_fields"])
    rec = t["records"]
    mine = np.flatnonzero(rec["pid"].to_numpy() == t["pid"])
    place = {int(rec.index[j]): n for n, j in enumerate(mine)}
    pair = records[[place[t["start_record"]], place[t["end_record"]]]]
    shifts = first + np.arange(a.windows, dtype="int64") * step
    new_records = np.concatenate([pair[:1].repeat(a.windows), pair[1:].repeat(a.windows)])
    new_records["before_ns"] += np.tile(shifts, 2)
    next_nth: dict[int, int] = {}  # each event's record() calls are numbered on
    for j in range(2):
        event = int(pair["event"][j])
        base = next_nth.get(event, int(records["nth"][records["event"] == event].max()) + 1)
        new_records["nth"][j * a.windows:(j + 1) * a.windows] = base + np.arange(a.windows)
        next_nth[event] = base + a.windows
    one = elapsed[[t["elapsed_row"]]].repeat(a.windows)
    one["before_ns"] += shifts
    one["after_ns"] += shifts
    one["start_nth"] = new_records["nth"][:a.windows]
    one["end_nth"] = new_records["nth"][a.windows:]
    records = np.concatenate([records, new_records])
    records = records[np.argsort(records["before_ns"], kind="stable")]
    elapsed = np.concatenate([elapsed, one])
    doc["records"], doc["records_rows"] = packed(records.tobytes()), len(records)
    doc["elapsed"], doc["elapsed_rows"] = packed(elapsed.tobytes()), len(elapsed)
    text = json.dumps(doc, separators=(",", ":"))  # as the runner writes it
    db.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", (text, rowid))
    db.commit()
    db.execute("VACUUM")
    db.close()
    print(f"{a.out}: {a.windows:,} windows more ({k} kernel, {r} runtime calls, {e} CUDA "
          f"event rows each); {len(records):,} records, {len(elapsed):,} elapsed_time() "
          f"calls")


if __name__ == "__main__":
    main()
