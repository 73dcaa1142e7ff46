"""Read an Nsight Systems SQLite export into a `Report`. The only module that speaks SQL.

Exports differ between nsys versions (see docs/nsys-schema.md): tables exist only for what
was traced, NVTX text sits in `text` or in `textId` -> StringIds, the metadata table was
renamed, kernel names are ids into StringIds. Every column beyond the core ones is optional.

The file is opened read-only (SQLite URI `mode=ro`): nothing is ever written next to it.
Bulk rows travel as Arrow columns through the ADBC SQLite driver; small lookups use sqlite3.
"""

from __future__ import annotations

import os
import re
import sqlite3
import time
import urllib.parse
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from . import cuda_api
from ._memory import release_freed_memory
from .chunks import cores
from .errors import BadInputError
from .progress import NO_PROGRESS, Progress
from .report import (
    API_COLUMNS,
    KERNEL_COLUMNS,
    MARK_COLUMNS,
    METRIC_COLUMNS,
    RANGE_COLUMNS,
    TRANSFER_COLUMNS,
    GpuInfo,
    Report,
    ReportInfo,
    empty,
)

SQLITE_MAGIC = b"SQLite format 3\x00"

KERNEL_TABLE = "CUPTI_ACTIVITY_KIND_KERNEL"
RUNTIME_TABLE = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY_TABLE = "CUPTI_ACTIVITY_KIND_MEMCPY"
MEMSET_TABLE = "CUPTI_ACTIVITY_KIND_MEMSET"
GRAPH_TABLE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
NVTX_TABLE = "NVTX_EVENTS"

# ENUM_NSYS_EVENT_TYPE ids; the same in 2022.4 and 2025.3, read from the enum table when present.
NVTX_EVENT_TYPES = {
    "NvtxMark": 34,
    "NvtxPushPopRange": 59,
    "NvtxStartEndRange": 60,
    "NvtxDomainCreate": 75,
}
# CUPTI enums (stable across CUPTI versions): ENUM_CUDA_MEMCPY_OPER, ENUM_CUDA_MEM_KIND.
COPY_KINDS = {
    0: "unknown", 1: "HtoD", 2: "DtoH", 3: "HtoA", 4: "AtoH", 5: "AtoA", 6: "AtoD", 7: "DtoA",
    8: "DtoD", 9: "HtoH", 10: "PtoP", 11: "UVM HtoD", 12: "UVM DtoH", 13: "UVM DtoD",
}
MEMORY_KINDS = {
    0: "pageable", 1: "pinned", 2: "device", 3: "array", 4: "managed", 5: "device static",
    6: "managed static", 7: "unknown",
}
# globalTid = marker | pid << 24 | tid; globalPid is the same with tid 0.
_TID_BITS = 24
_ID_MASK = (1 << _TID_BITS) - 1


def load(path: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None,
         nsys: str | None = None, progress: Progress = NO_PROGRESS) -> Report:
    """Load an nsys report (`.sqlite` export, or `.nsys-rep`, exported on the fly).

    A `.nsys-rep` is exported with `nsys export --type sqlite` into the cache folder
    (`cache_dir`, else $NSYSWRAP_CACHE, else ~/.cache/nsyswrap), never beside the original.
    Raises BadInputError with a one-line message for anything that is not a usable report.
    """
    source = Path(path)
    if not source.exists():
        raise BadInputError(f"{source}: no such file")
    if source.is_dir():
        raise BadInputError(f"{source} is a folder: give a .sqlite or .nsys-rep report")
    notes: list[str] = []
    sqlite_path = source
    if source.suffix in (".nsys-rep", ".qdrep"):
        from .nsys import export_report  # the export layer; imported only when needed

        with progress.step(f"exporting {source.name} to SQLite (once)"):
            sqlite_path, note = export_report(source, cache_dir=cache_dir, nsys=nsys)
        notes.append(note)
    elif source.suffix == ".qdstrm":
        raise BadInputError(
            f"{source} is a raw capture that was never imported: make a report with "
            f"`nsyswrap import {source}` (or QdstrmImporter -i {source}), then compare that"
        )
    check_sqlite_file(sqlite_path)
    with _Database(sqlite_path) as db, progress.step(f"loading {sqlite_path.name}"):
        report = _read_report(db, source, notes)
    release_freed_memory(len(report.kernels) + len(report.transfers) + len(report.ranges))
    return report


def check_sqlite_file(path: Path) -> None:
    """Refuse files that are not SQLite, or are shorter than their header says (truncated)."""
    size = path.stat().st_size
    if size == 0:
        raise BadInputError(f"{path} is empty: not an Nsight Systems export")
    with open(path, "rb") as f:
        head = f.read(100)
    if len(head) < 100 or not head.startswith(SQLITE_MAGIC):
        raise BadInputError(
            f"{path} is not a SQLite file: give an export made with "
            "`nsys export --type sqlite` (or the .nsys-rep itself)"
        )
    page_size = int.from_bytes(head[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    page_count = int.from_bytes(head[28:32], "big")
    # The in-header page count is valid when the change counter matches "version-valid-for".
    if page_count and head[24:28] == head[92:96] and size < page_size * page_count:
        raise BadInputError(
            f"{path} is truncated ({size} of {page_size * page_count} bytes): "
            "copy it again or re-export it from the .nsys-rep"
        )


# A report locked by a writer (an export still running, a tool holding a transaction) is
# waited for briefly: sqlite3 waits 5 s by itself, the ADBC reads retry for as long.
LOCKED_RETRIES, LOCKED_WAIT_S = 10, 0.5


def _is_locked(e: Exception) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _unreadable(path: Path, e: Exception) -> BadInputError:
    """The one-line error for a report SQLite refuses: locked, or damaged."""
    if _is_locked(e):
        return BadInputError(f"{path} is locked by another process (an export or a writer "
                             "still running?): wait for it to finish and try again")
    return BadInputError(f"{path} cannot be read as SQLite ({e}): is it damaged?")


class _Database:
    """A read-only connection: sqlite3 for small lookups, ADBC for bulk frames."""

    def __init__(self, path: Path):
        self.path = path
        self.uri = "file:" + urllib.parse.quote(str(path.resolve())) + "?mode=ro"
        try:
            self.con = sqlite3.connect(self.uri, uri=True, timeout=LOCKED_RETRIES * LOCKED_WAIT_S)
            self.tables = {
                name
                for (name,) in self.con.execute(
                    "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')"
                )
            }
        except sqlite3.DatabaseError as e:
            raise _unreadable(path, e) from e
        self._bulk = None
        self._columns: dict[str, set[str]] = {}
        self._pool = None
        self._prefetched: dict[str, object] = {}

    def __enter__(self) -> _Database:
        return self

    def __exit__(self, *exc) -> None:
        self.con.close()
        if self._bulk is not None:
            self._bulk.close()
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def prefetch(self, *queries: str | None) -> None:
        """Start the big reads at once, each rowid slice on its own connection and thread:
        SQLite's scan and the driver's conversion run in C without the GIL, so the slices
        of all the reads share every core (see _slices)."""
        from concurrent.futures import ThreadPoolExecutor

        queries = [q for q in queries if q and q not in self._prefetched]
        if not queries:
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(cores(), MAX_READERS))
        for q in queries:
            self._prefetched[q] = [self._pool.submit(self._fetch, part, None)
                                   for part in self._slices(q)]

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')}
        return self._columns[table]

    def rows(self, sql: str, params: Iterable = ()) -> list[tuple]:
        try:
            return self.con.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as e:
            raise _unreadable(self.path, e) from e

    def frame(self, sql: str) -> pd.DataFrame:
        """Run a query whose columns are never NULL and return it as a DataFrame, its rows
        in the table's order.

        The ADBC driver infers column types from the first rows, so queries coalesce
        nullable columns: a NULL-only first batch followed by text would fail.
        """
        import pyarrow as pa

        futures = self._prefetched.pop(sql, None)
        if futures is not None:
            tables = [f.result() for f in futures]
        else:
            tables = [self._fetch(part, self) for part in self._slices(sql)]
        table = tables[0] if len(tables) == 1 else pa.concat_tables(
            [t for t in tables if t.num_rows] or tables[:1])
        del tables
        # Hand the Arrow buffers over column by column, freeing each as it is converted:
        # the peak stays near one copy of the result instead of two.
        return table.to_pandas(self_destruct=True, split_blocks=True)

    def _slices(self, sql: str) -> list[str]:
        """A bulk query written with ROWS (a scan of one table) as queries over disjoint
        rowid slices, in rowid order: one per SLICE_ROWS rows, at most one per core."""
        if ROWS not in sql:
            return [sql]
        table, alias = re.search(r"\bFROM\s+(\w+)(?:\s+AS\s+(\w+))?", sql).groups()
        rowid = f"{alias}.rowid" if alias else "rowid"
        try:
            # Apart: SQLite reads min() or max() of the rowid off the b-tree's edge, but
            # scans the whole table for the two in one query.
            (lo,), = self.con.execute(f"SELECT min(rowid) FROM {table}").fetchall()
            (hi,), = self.con.execute(f"SELECT max(rowid) FROM {table}").fetchall()
        except sqlite3.DatabaseError:  # damage: the read itself reports it, in one line
            lo = hi = None
        if lo is None or hi is None:  # empty, or a view (whose rowid SQLite reads as NULL)
            return [sql.replace(ROWS, "1")]
        parts = max(1, min(cores(), (hi - lo + 1) // SLICE_ROWS))
        cuts = [lo - 1 + (hi - lo + 1) * i // parts for i in range(parts + 1)]
        return [sql.replace(ROWS, f"{rowid} > {a} AND {rowid} <= {b}")
                for a, b in zip(cuts, cuts[1:], strict=False)]

    def _fetch(self, sql: str, owner: _Database | None, attempt: int = 0):
        """The query's result as an Arrow table."""
        import adbc_driver_sqlite.dbapi as adbc

        con = None
        try:
            if owner is not None:  # the caller's thread: reuse one connection
                if owner._bulk is None:
                    owner._bulk = adbc.connect(self.uri)
                con = owner._bulk
            else:  # a prefetch thread: a connection of its own
                con = adbc.connect(self.uri)
            cur = con.cursor()
            try:
                cur.execute(sql)
                return cur.fetch_arrow_table()
            finally:
                cur.close()
        except adbc.Error as e:
            if _is_locked(e) and attempt < LOCKED_RETRIES:
                time.sleep(LOCKED_WAIT_S)  # sqlite3's own busy timeout does this for it
                return self._fetch(sql, owner, attempt + 1)
            raise _unreadable(self.path, e) from e
        finally:
            if owner is None and con is not None:
                con.close()


# Where a bulk query takes its rowid slice (_Database._slices): of the first table after
# FROM (by its alias, when it has one).
ROWS = "{rows}"
# Reader threads at most, each with a connection of its own: a 128-core host need not open
# 128 of them.
MAX_READERS = 32
# Rows per slice, at least: a 1 M-row table spreads over 10 cores, a report under 200 k
# rows is one query per table (a slice costs a connection). Measured on 10 M kernels, 2
# cores: two slices on two threads read in 2.96 s what one query reads in 5.81 s.
SLICE_ROWS = 100_000


def _read_report(db: _Database, source: Path, notes: list[str]) -> Report:
    if not ({"StringIds"} & db.tables or {"META_DATA_EXPORT", "EXPORT_META_DATA"} & db.tables):
        raise BadInputError(
            f"{db.path} is SQLite but not an Nsight Systems export "
            "(no StringIds or export metadata table)"
        )
    event_types = _nvtx_event_types(db)
    runtime = _runtime_sql(db)
    # In the order they are used; the blocking calls' scan (a few rows) last. The NVTX
    # table's small reads (domains, unended ranges, marks) are full scans too.
    db.prefetch(_kernels_sql(db), *_transfers_sql(db).values(), runtime.launches_sql,
                _nvtx_domains_sql(db, event_types), _nvtx_ranges_sql(db, event_types),
                _unterminated_sql(db, event_types), _nvtx_marks_sql(db, event_types),
                runtime.blocking_sql)
    kernels = _kernels(db)
    transfers = _transfers(db)
    launches = _launch_calls(db, runtime)
    kernels, transfers = _attach_launches(db, launches, kernels, transfers)
    kernels, transfers = kernels[KERNEL_COLUMNS], transfers[TRANSFER_COLUMNS]
    domains = _nvtx_domains(db, event_types)
    ranges, unterminated = _nvtx_ranges(db, event_types, domains)
    if unterminated:
        notes.append(f"{unterminated} NVTX range(s) never ended (program exited inside them); "
                     "left out")
    kernels = _drop_reversed(kernels, "kernel", notes)
    transfers = _drop_reversed(transfers, "copy or memset", notes)
    ranges = _drop_reversed(ranges, "NVTX range", notes)
    marks = _nvtx_marks(db, event_types, domains)
    api_calls = _blocking_calls(db, runtime)
    gpu_metrics = _gpu_clock_metrics(db)

    info = _report_info(db, source)
    info.notes.extend(notes)
    info.has_cuda = KERNEL_TABLE in db.tables or RUNTIME_TABLE in db.tables
    info.has_nvtx = NVTX_TABLE in db.tables
    info.has_osrt = "OSRT_API" in db.tables
    info.has_gpu_metrics = not gpu_metrics.empty
    if not info.has_cuda:
        info.notes.append("no CUDA trace in this report (profile with -t cuda): "
                          "GPU columns are empty")
    if not info.has_nvtx:
        info.notes.append("no NVTX events in this report (profile with -t nvtx and annotate "
                          "code with nsyswrap.annotate): no per-range analysis")
    _check_gpu_trace(info, launches, kernels, transfers, ranges)
    active_pids = set(np.unique(np.concatenate([
        kernels["pid"].to_numpy(dtype="int64"), transfers["pid"].to_numpy(dtype="int64"),
        ranges["pid"].to_numpy(dtype="int64")])).tolist())
    info.processes = {pid: name for pid, name in _process_names(db).items() if pid in active_pids}
    info.threads = _thread_names(db)
    return Report(info, kernels, transfers, api_calls, ranges, marks, gpu_metrics)


def _drop_reversed(frame: pd.DataFrame, what: str, notes: list[str]) -> pd.DataFrame:
    """Leave out records that end before they start (a broken timestamp: seen in reports
    merged or edited by other tools, and possible from a clock that stepped) and say so;
    they would count as negative time."""
    reversed_ = frame["end_ns"].to_numpy() < frame["start_ns"].to_numpy()
    n = int(reversed_.sum())
    if not n:
        return frame
    notes.append(f"{n} {what}(s) end before they start (broken timestamps); left out")
    return frame[~reversed_].reset_index(drop=True)


def _check_gpu_trace(info: ReportInfo, launches: _Launches, kernels: pd.DataFrame,
                     transfers: pd.DataFrame, ranges: pd.DataFrame) -> None:
    """Say loudly when CUDA was traced and NVTX ranges are there but no GPU activity is: a
    process that dies by a signal never writes the CUDA activity it buffered (kernels, and
    the runtime calls too), while its NVTX ranges all reach the report (docs/nsys-quirks.md,
    "Signals"). GPU times are then unknown, not 0."""
    if len(launches.start_ns):
        info.last_cuda_call_ns = int(launches.start_ns.max())
    if not info.has_cuda or ranges.empty or len(kernels) or len(transfers):
        return
    info.gpu_trace_lost = True
    info.alert(
        f"no GPU activity in this report although CUDA was traced and there are {len(ranges)} "
        "NVTX ranges: if the program launched GPU work, its GPU trace was lost (a program "
        "ended by a signal never writes the CUDA activity it buffered); GPU times are "
        "unknown, not 0. Profile again and let the program exit normally (nsyswrap run "
        "makes Ctrl-C and SIGTERM end a Python program that way)")


def _nvtx_event_types(db: _Database) -> dict[str, int]:
    types = dict(NVTX_EVENT_TYPES)
    if "ENUM_NSYS_EVENT_TYPE" in db.tables:
        placeholders = ",".join("?" * len(types))
        for name, id_ in db.rows(
            f"SELECT name, id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({placeholders})", types
        ):
            types[name] = int(id_)
    return types


def _pid(global_id: pd.Series) -> np.ndarray:
    return (global_id.to_numpy(dtype="int64") >> _TID_BITS) & _ID_MASK


def _process_key(global_id: pd.Series) -> np.ndarray:
    """Unique per process across the report (the pid alone could repeat across hosts)."""
    return global_id.to_numpy(dtype="int64") >> _TID_BITS


def _kernels_sql(db: _Database) -> str | None:
    """Five columns, not eight: the ADBC driver spends ~100 ns on every value it converts,
    several times SQLite's own cost per row, so ids that fit together travel packed (each
    in 32 bits, as CUDA and StringIds number them) and are unpacked in numpy."""
    if KERNEL_TABLE not in db.tables:
        return None
    cols = db.columns(KERNEL_TABLE)
    short = "k.shortName" if "shortName" in cols else "k.demangledName"
    full = "k.demangledName" if "demangledName" in cols else short
    return f"""SELECT k.start AS start_ns, k."end" AS end_ns,
                      (k.deviceId << 32) | (k.streamId & {_LOW32}) AS device_stream,
                      {_launch_key_sql("k.globalPid", "k.correlationId")} AS launch_key,
                      ((coalesce({short}, -1) & {_LOW32}) << 32)
                        | (coalesce({full}, {short}, -1) & {_LOW32}) AS name_ids
               FROM {KERNEL_TABLE} AS k WHERE {ROWS}"""


_LOW32 = 0xFFFFFFFF


def _launch_key_sql(global_id: str, correlation_id: str) -> str:
    """The key that joins GPU work to the runtime call that launched it: the process
    (global id >> 24) and the correlation id, unique per process (CUPTI counts per process)
    and 32 bits wide. Computed by SQLite: one definition for every table that carries it."""
    return f"((({global_id}) >> {_TID_BITS}) << 32) | ({correlation_id})"


def _with_launch_ids(df: pd.DataFrame) -> None:
    """pid and correlation_id, unpacked from the launch_key column."""
    key = df["launch_key"].to_numpy(dtype="int64")
    df["pid"] = (key >> 32) & _ID_MASK
    df["correlation_id"] = key & _LOW32


def _kernels(db: _Database) -> pd.DataFrame:
    sql = _kernels_sql(db)
    if sql is None:
        return empty(KERNEL_COLUMNS + ["launch_key"])
    df = db.frame(sql)  # export order; nothing downstream needs kernels sorted
    device_stream = df.pop("device_stream").to_numpy(dtype="int64")
    df["device_id"] = device_stream >> 32
    df["stream_id"] = device_stream & _LOW32
    _with_launch_ids(df)
    # Distinct (short, full) name pairs are a few hundred among millions of kernels.
    codes, pairs = pd.factorize(df.pop("name_ids"), sort=False)
    pairs = np.asarray(pairs, dtype="int64")
    short_ids, full_ids = pairs >> 32, pairs & _LOW32
    full_ids[full_ids == _LOW32] = -1
    strings = _strings(db, np.concatenate([short_ids, full_ids]))
    df["short_name"] = _as_category(short_ids, strings, codes)
    df["name"] = _as_category(full_ids, strings, codes)
    return df


def _strings(db: _Database, ids: Iterable[int]) -> dict[int, str]:
    """StringIds values for the given ids (only those: the table can be large)."""
    ids = sorted({int(i) for i in ids if i >= 0})
    out: dict[int, str] = {}
    for i in range(0, len(ids), 900):  # SQLite's default limit on bound parameters is 999
        chunk = ids[i : i + 900]
        out.update(db.rows(
            f"SELECT id, value FROM StringIds WHERE id IN ({','.join('?' * len(chunk))})", chunk
        ))
    return out


def _as_category(ids: np.ndarray, strings: dict[int, str],
                 codes: np.ndarray | None = None) -> pd.Categorical:
    """Map string ids to a categorical: a million kernels share a few hundred names.
    With `codes`, the rows hold ids[codes] (ids already factorized)."""
    if codes is None:
        codes, ids = pd.factorize(ids, sort=False)
    labels = [strings.get(int(u), f"<unknown string {u}>") for u in ids]
    # Two ids can carry the same text; categories must be unique.
    labels_unique, inverse = np.unique(np.array(labels, dtype=object), return_inverse=True)
    return pd.Categorical.from_codes(inverse[codes], categories=list(labels_unique))


def _transfers_sql(db: _Database) -> dict[str, str]:
    """op ("memcpy", "memset", "graph") -> the query of its table, for those present."""
    out = {}
    common = f"""start AS start_ns, "end" AS end_ns, deviceId AS device_id,
                 streamId AS stream_id,
                 {_launch_key_sql("globalPid", "correlationId")} AS launch_key"""
    if MEMCPY_TABLE in db.tables:
        cols = db.columns(MEMCPY_TABLE)
        src = "coalesce(srcKind, 7)" if "srcKind" in cols else "7"
        dst = "coalesce(dstKind, 7)" if "dstKind" in cols else "7"
        out["memcpy"] = f"""SELECT {common}, coalesce(bytes, 0) AS bytes,
                                   coalesce(copyKind, 0) AS copy_kind_id, {src} AS src_id,
                                   {dst} AS dst_id
                            FROM {MEMCPY_TABLE} WHERE {ROWS}"""
    if MEMSET_TABLE in db.tables:
        out["memset"] = f"""SELECT {common}, coalesce(bytes, 0) AS bytes
                            FROM {MEMSET_TABLE} WHERE {ROWS}"""
    if GRAPH_TABLE in db.tables:
        # Graphs traced as a whole (--cuda-graph-trace=graph, the default): one row per launch.
        out["graph"] = f"""SELECT {common}, 0 AS bytes FROM {GRAPH_TABLE} WHERE {ROWS}"""
    return out


def _transfers(db: _Database) -> pd.DataFrame:
    parts = []
    for op, sql in _transfers_sql(db).items():
        df = db.frame(sql)
        df["op"] = op
        if op == "memcpy":
            df["copy_kind"] = df.pop("copy_kind_id").map(COPY_KINDS).fillna("unknown")
            df["src_kind"] = df.pop("src_id").map(MEMORY_KINDS).fillna("unknown")
            df["dst_kind"] = df.pop("dst_id").map(MEMORY_KINDS).fillna("unknown")
        parts.append(df)
    if not parts:
        return empty(TRANSFER_COLUMNS + ["launch_key"])
    df = pd.concat(parts, ignore_index=True)
    for col in ("copy_kind", "src_kind", "dst_kind"):
        df[col] = df[col].fillna("") if col in df else ""
    df = df.sort_values("start_ns", kind="stable", ignore_index=True)
    _with_launch_ids(df)
    return df


@dataclass
class _Launches:
    """Runtime calls that launched GPU work, sorted by (process, correlation id) key."""

    key: np.ndarray
    start_ns: np.ndarray
    thread: np.ndarray

    def frame(self) -> pd.DataFrame:
        """The calls as rows again (launch_key, start_ns, thread), to extend them."""
        return pd.DataFrame({"launch_key": self.key, "start_ns": self.start_ns,
                             "thread": self.thread})

    def lookup(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(launch start, thread) for each key, -1 where no call matches."""
        if len(self.key) == 0:
            return np.full(len(key), -1, "int64"), np.full(len(key), -1, "int64")
        # Searching sorted keys walks the table in order (nearly sorted already: stable sort
        # is quick); random probes into 10 M keys miss the cache at every step.
        order = np.argsort(key, kind="stable")
        i = np.empty(len(key), dtype="int64")
        i[order] = np.searchsorted(self.key, key[order])
        i = np.minimum(i, len(self.key) - 1)
        hit = self.key[i] == key
        return np.where(hit, self.start_ns[i], -1), np.where(hit, self.thread[i], -1)


@dataclass
class _RuntimeQuery:
    """The runtime-table queries of _launch_calls and _blocking_calls, and what their name
    ids mean."""

    launches_sql: str | None  # every call that may launch GPU work (blocking ones too)
    blocking_sql: str | None  # the calls that block the host, with their end and name
    blocking: dict[int, str]  # name id -> blocking API


def _runtime_sql(db: _Database) -> _RuntimeQuery:
    if RUNTIME_TABLE not in db.tables:
        return _RuntimeQuery(None, None, {})
    names = dict(db.rows("SELECT id, value FROM StringIds WHERE value LIKE 'cu%'"))
    launch_ids = {i for i, v in names.items() if cuda_api.LAUNCH_API.match(v)}
    blocking = {i: cuda_api.base_name(v) for i, v in names.items()
                if cuda_api.base_name(v) in cuda_api.BLOCKING_APIS}
    # Two reads, not one of five columns: the launches (one per kernel) need only three,
    # packed as the kernels' are; the few blocking calls need their end and name as well.
    return _RuntimeQuery(
        f"""SELECT {_launch_key_sql("globalTid", "correlationId")} AS launch_key,
                   start AS start_ns, globalTid AS thread
            FROM {RUNTIME_TABLE}
            WHERE nameId IN ({_sql_list(launch_ids | set(blocking))}) AND {ROWS}""",
        f"""SELECT correlationId AS correlation_id, start AS start_ns, "end" AS end_ns,
                   globalTid AS thread, nameId AS name_id
            FROM {RUNTIME_TABLE} WHERE nameId IN ({_sql_list(blocking)}) AND {ROWS}""",
        blocking)


def _sql_list(ids: Iterable[int]) -> str:
    """Integer ids as the inside of an SQL IN (...), NULL (matching nothing) for none."""
    return ",".join(map(str, sorted(ids))) or "NULL"


def _launch_calls(db: _Database, query: _RuntimeQuery) -> _Launches:
    """The runtime calls that may have launched GPU work, joined to it by _attach_launches.
    Only calls that can launch GPU work or block are read (a filter on their name ids, in
    SQLite): a long capture holds several runtime calls per kernel."""
    if query.launches_sql is None:
        return _Launches(*(np.array([], dtype="int64") for _ in range(3)))
    return _sorted_launches(db.frame(query.launches_sql))


def _blocking_calls(db: _Database, query: _RuntimeQuery) -> pd.DataFrame:
    """The runtime calls that block the host, in time order (API_COLUMNS)."""
    if query.blocking_sql is None:
        return empty(API_COLUMNS)
    calls = db.frame(query.blocking_sql).sort_values("start_ns", kind="stable",
                                                      ignore_index=True)
    calls["pid"] = _pid(calls["thread"])
    calls["api"] = calls.pop("name_id").map(query.blocking)
    return calls[API_COLUMNS]


def _sorted_launches(df: pd.DataFrame) -> _Launches:
    key = df["launch_key"].to_numpy(dtype="int64")
    order = np.argsort(key, kind="stable")
    return _Launches(key[order], df["start_ns"].to_numpy(dtype="int64")[order],
                     df["thread"].to_numpy(dtype="int64")[order])


def _attach_launches(db: _Database, launches: _Launches,
                     *ops: pd.DataFrame) -> list[pd.DataFrame]:
    """Each operation with the start and thread of the runtime call that launched it (-1
    when the report has none). Operations whose call the name filter of _launch_calls left
    out are looked up again by correlation id, so no name list can drop work."""
    keys = [op["launch_key"].to_numpy(dtype="int64") for op in ops]
    found = [launches.lookup(k) for k in keys]
    missing = np.unique(np.concatenate([k[f[0] < 0] for k, f in zip(keys, found, strict=True)]
                                       or [np.array([], "int64")]))
    if len(missing) and RUNTIME_TABLE in db.tables:
        ids = sorted({int(k & _LOW32) for k in missing})
        extra = [db.frame(f"""SELECT {_launch_key_sql("globalTid", "correlationId")}
                                       AS launch_key, start AS start_ns, globalTid AS thread
                              FROM {RUNTIME_TABLE}
                              WHERE correlationId IN ({_sql_list(ids[i:i + 5000])})""")
                 for i in range(0, len(ids), 5000)]
        launches = _sorted_launches(pd.concat([launches.frame(), *extra], ignore_index=True))
        found = [launches.lookup(k) for k in keys]
    return [op.drop(columns=["launch_start_ns", "thread"], errors="ignore").assign(
                launch_start_ns=start, thread=thread)
            for op, (start, thread) in zip(ops, found, strict=True)]


def _nvtx_text_sql(db: _Database) -> tuple[str, str]:
    """SQL for an NVTX event's text: `text` (ASCII) or `textId` -> StringIds (registered)."""
    if "textId" in db.columns(NVTX_TABLE):
        return "coalesce(e.text, s.value, '')", "LEFT JOIN StringIds AS s ON s.id = e.textId"
    return "coalesce(e.text, '')", ""


def _nvtx_domains(db: _Database, types: dict[str, int]) -> dict[tuple[int, int], str]:
    """(process_key, domainId) -> domain name. Domain ids are per process; 0 is the default."""
    if NVTX_TABLE not in db.tables:
        return {}
    df = db.frame(_nvtx_domains_sql(db, types))
    return {(int(tid) >> _TID_BITS, int(dom)): str(name)
            for tid, dom, name in zip(df["thread"], df["domain_id"], df["name"], strict=True)}


def _nvtx_domains_sql(db: _Database, types: dict[str, int]) -> str | None:
    if NVTX_TABLE not in db.tables:
        return None
    text, join = _nvtx_text_sql(db)
    return f"""SELECT e.globalTid AS thread, e.domainId AS domain_id, {text} AS name
               FROM {NVTX_TABLE} AS e {join}
               WHERE e.eventType = {types["NvtxDomainCreate"]} AND e.domainId IS NOT NULL"""


def _unterminated_sql(db: _Database, types: dict[str, int]) -> str | None:
    """How many ranges never ended (the program exited inside them)."""
    if NVTX_TABLE not in db.tables:
        return None
    return f"""SELECT count(*) AS n FROM {NVTX_TABLE}
               WHERE eventType IN ({types["NvtxPushPopRange"]}, {types["NvtxStartEndRange"]})
                 AND "end" IS NULL"""


def _domain_names(df: pd.DataFrame, domains: dict[tuple[int, int], str]) -> pd.Series:
    """Each row's domain name, from (process, domain id); "" for the default domain."""
    key = (_process_key(df["thread"]) << 32) | df.pop("domain_id").to_numpy(dtype="int64")
    known = pd.Index([(p << 32) | d for p, d in domains], dtype="int64")
    return _texts(known.get_indexer(key) + 1, ["", *domains.values()], df.index)


def _texts(codes: np.ndarray, values: list[str], index: pd.Index) -> pd.Series:
    """values[code] per row, as the text column `.astype(str)` would give, built in Arrow:
    a Python string per row cost 2.7 s at 10 M ranges, the Arrow take 0.15 s."""
    import pyarrow as pa

    text = pa.DictionaryArray.from_arrays(pa.array(codes, pa.int32()),
                                          pa.array(values, pa.large_string()))
    return text.cast(pa.large_string()).to_pandas().set_axis(index)


def _nvtx_ranges_sql(db: _Database, types: dict[str, int]) -> str | None:
    if NVTX_TABLE not in db.tables:
        return None
    text, join = _nvtx_text_sql(db)
    return f"""SELECT e.start AS start_ns, e."end" AS end_ns, e.globalTid AS thread,
                      coalesce(e.domainId, 0) AS domain_id, {text} AS name,
                      e.eventType AS event_type
               FROM {NVTX_TABLE} AS e {join}
               WHERE e.eventType IN ({types["NvtxPushPopRange"]}, {types["NvtxStartEndRange"]})
                 AND e."end" IS NOT NULL AND {ROWS}"""


def _nvtx_ranges(db: _Database, types: dict[str, int],
                 domains: dict[tuple[int, int], str]) -> tuple[pd.DataFrame, int]:
    if NVTX_TABLE not in db.tables:
        return empty(RANGE_COLUMNS), 0
    pushpop = types["NvtxPushPopRange"]
    df = db.frame(_nvtx_ranges_sql(db, types)).sort_values("start_ns", kind="stable",
                                                           ignore_index=True)
    unterminated = int(db.frame(_unterminated_sql(db, types))["n"].iloc[0])
    df["range_id"] = np.arange(len(df), dtype="int64")
    df["pid"] = _pid(df["thread"])
    df["tid"] = df["thread"].to_numpy(dtype="int64") & _ID_MASK
    df["domain"] = _domain_names(df, domains)
    df["style"] = _texts((df.pop("event_type") != pushpop).to_numpy(),
                         ["pushpop", "startend"], df.index)
    df["name"] = df["name"].astype(str)
    return df[RANGE_COLUMNS], int(unterminated)


def _nvtx_marks_sql(db: _Database, types: dict[str, int]) -> str | None:
    if NVTX_TABLE not in db.tables:
        return None
    text, join = _nvtx_text_sql(db)
    return f"""SELECT e.start AS time_ns, e.globalTid AS thread,
                      coalesce(e.domainId, 0) AS domain_id, {text} AS text
               FROM {NVTX_TABLE} AS e {join}
               WHERE e.eventType = {types["NvtxMark"]} ORDER BY e.start"""


def _nvtx_marks(db: _Database, types: dict[str, int],
                domains: dict[tuple[int, int], str]) -> pd.DataFrame:
    if NVTX_TABLE not in db.tables:
        return empty(MARK_COLUMNS)
    df = db.frame(_nvtx_marks_sql(db, types))
    df["pid"] = _pid(df["thread"])
    df["domain"] = _domain_names(df, domains)
    df["text"] = df["text"].astype(str)
    return df[MARK_COLUMNS]


def _gpu_clock_metrics(db: _Database) -> pd.DataFrame:
    """Clock samples from --gpu-metrics-devices (GPC/SYS clock), in MHz."""
    if "GPU_METRICS" not in db.tables or "TARGET_INFO_GPU_METRICS" not in db.tables:
        return empty(METRIC_COLUMNS)
    metric_ids = dict(db.rows(
        "SELECT DISTINCT metricId, metricName FROM TARGET_INFO_GPU_METRICS "
        "WHERE metricName LIKE '%Clock Frequency%'"
    ))
    if not metric_ids:
        return empty(METRIC_COLUMNS)
    df = db.frame(
        f"""SELECT timestamp AS time_ns, typeId AS type_id, metricId AS metric_id,
                   value FROM GPU_METRICS
            WHERE metricId IN ({','.join(str(int(i)) for i in metric_ids)})
            ORDER BY timestamp"""
    )
    # typeId names the sampled GPU; number them in order, as nsys lists GPUs.
    df["device_id"] = pd.factorize(df.pop("type_id"), sort=True)[0].astype("int64")
    df["metric"] = df.pop("metric_id").map(metric_ids).str.replace(" Frequency [MHz]", "")
    # nsys 2025.3 stores clock values in Hz although the metric name says MHz.
    value = df["value"].astype("float64")
    df["value"] = np.where(value > 1e5, value / 1e6, value)
    return df[METRIC_COLUMNS]


def _meta(db: _Database) -> dict[str, str]:
    for table in ("META_DATA_EXPORT", "EXPORT_META_DATA"):  # 2025.x, 2022.x
        if table in db.tables:
            return {str(k): str(v) for k, v in db.rows(f"SELECT name, value FROM {table}")}
    return {}


def _report_info(db: _Database, source: Path) -> ReportInfo:
    meta = _meta(db)
    start = end = None
    if "ANALYSIS_DETAILS" in db.tables and {"startTime", "stopTime"} <= db.columns(
        "ANALYSIS_DETAILS"
    ):
        row = db.rows("SELECT min(startTime), max(stopTime) FROM ANALYSIS_DETAILS")
        if row and row[0][0] is not None:
            start, end = int(row[0][0]), int(row[0][1])
    return ReportInfo(
        path=db.path,
        source=source,
        nsys_version=meta.get("EXPORT_PRODUCT_VERSION"),
        schema_version=meta.get("EXPORT_SCHEMA_VERSION"),
        start_ns=start,
        end_ns=end,
        gpus=_gpus(db),
        session_start_utc_ns=_session_start(db),
        driver_version=_driver_version(db),
        rank_env=_rank_env(db),
        command=_command(db),
    )


# Variables that number a process among its peers, as launchers set them: torchrun
# (RANK, LOCAL_RANK), Slurm, Open MPI, MPICH/PMI.
RANK_VARIABLES = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "SLURM_PROCID", "SLURM_LOCALID",
                  "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK")


def _session_start(db: _Database) -> int | None:
    if "TARGET_INFO_SESSION_START_TIME" not in db.tables or "utcEpochNs" not in db.columns(
            "TARGET_INFO_SESSION_START_TIME"):
        return None
    row = db.rows("SELECT min(utcEpochNs) FROM TARGET_INFO_SESSION_START_TIME")
    return int(row[0][0]) if row and row[0][0] is not None else None


def _system_env(db: _Database) -> dict[str, str]:
    """TARGET_INFO_SYSTEM_ENV as name -> value (driver, the nsys CLI's environment, ...)."""
    if "TARGET_INFO_SYSTEM_ENV" not in db.tables or not {"name", "value"} <= db.columns(
            "TARGET_INFO_SYSTEM_ENV"):
        return {}
    return {str(k): str(v) for k, v in db.rows("SELECT name, value FROM TARGET_INFO_SYSTEM_ENV")
            if k is not None and v is not None}


def _driver_version(db: _Database) -> str | None:
    value = _system_env(db).get("NvDriverVersion")
    return value if value not in (None, "", "0") else None  # 2022.4 CPU exports write "0"


def _rank_env(db: _Database) -> dict[str, str]:
    """The rank variables of the profiled program: from the environment nsys launched it
    with (META_DATA_CAPTURE, 2023+), else from the nsys CLI's own environment (the
    DeviceEnvironment entry: under torchrun, nsys runs inside each rank's environment).
    Empty where nsys ran around the launcher (all ranks in one report)."""
    found: dict[str, str] = {}
    if "META_DATA_CAPTURE" in db.tables:
        for (value,) in db.rows("SELECT value FROM META_DATA_CAPTURE "
                                "WHERE name LIKE '%ENVIRONMENT_VARIABLE'"):
            key, sep, val = str(value).partition("=")
            if sep and key in RANK_VARIABLES and key not in found:
                found[key] = val.strip('"')
    if not found:
        for item in _system_env(db).get("DeviceEnvironment", "").split(";"):
            key, sep, val = item.partition("=")
            if sep and key in RANK_VARIABLES:
                found.setdefault(key, val)
    return found


def _command(db: _Database) -> list[str] | None:
    """The profiled command line, where nsys kept it (META_DATA_CAPTURE, 2023 and later)."""
    if "META_DATA_CAPTURE" not in db.tables:
        return None
    args: dict[int, str] = {}
    command = None
    for name, value in db.rows("SELECT name, value FROM META_DATA_CAPTURE "
                               "WHERE name LIKE 'PROCESS_0:%'"):
        key = str(name).split(":", 1)[1]
        if key == "COMMAND":
            command = str(value)
        elif key.startswith("ARGUMENT_") and key[9:].isdigit():
            args[int(key[9:])] = str(value)
    return [command, *(args[i] for i in sorted(args))] if command else None


def _gpus(db: _Database) -> list[GpuInfo]:
    if "TARGET_INFO_GPU" not in db.tables:
        return []
    cols = db.columns("TARGET_INFO_GPU")
    want = ["id", "name", "smCount", "l2CacheSize", "computeMajor", "computeMinor", "clockRate"]
    select = ", ".join(c if c in cols else "NULL" for c in want)
    gpus = []
    for id_, name, sms, l2, major, minor, clock in db.rows(
        f"SELECT DISTINCT {select} FROM TARGET_INFO_GPU ORDER BY 1"
    ):
        gpus.append(GpuInfo(
            device_id=int(id_) if id_ is not None else len(gpus),
            name=str(name),
            sm_count=int(sms) if sms is not None else None,
            l2_bytes=int(l2) if l2 is not None else None,
            compute_capability=f"{major}.{minor}" if major is not None else None,
            max_clock_mhz=float(clock) / 1e6 if clock else None,  # clockRate is in Hz
        ))
    return gpus


def _thread_names(db: _Database) -> dict[int, str]:
    """globalTid -> the thread's name (what `pthread_setname_np` or the OS called it)."""
    if "ThreadNames" not in db.tables or "globalTid" not in db.columns("ThreadNames"):
        return {}
    return {int(tid): str(name) for tid, name in db.rows(
        "SELECT t.globalTid, s.value FROM ThreadNames AS t JOIN StringIds AS s "
        "ON s.id = t.nameId WHERE t.globalTid IS NOT NULL")}


def _process_names(db: _Database) -> dict[int, str]:
    if "PROCESSES" not in db.tables:
        return {}
    return {int(pid): str(name) for pid, name in db.rows("SELECT pid, name FROM PROCESSES")}
