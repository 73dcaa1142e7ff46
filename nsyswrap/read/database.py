"""An export opened read-only, its bulk reads started on threads: everything `load` does
before it needs pandas.

`compare` on one report opens it here first (`open_report`) and only then imports pandas
and the analysis (~0.5 s of imports): the SQLite scans run in C on their own threads
meanwhile. Nothing in this module may import pandas (tests/test_cli.py checks it); the
bulk reads travel as Arrow tables through the ADBC SQLite driver's low-level API, whose
DB-API wrapper imports pyarrow.dataset and with it pandas.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import struct
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..common.errors import BadInputError
from ..common.progress import NO_PROGRESS, Progress
from .chunks import cores
from .queries import NVTX_TABLE, READ_TABLES, TEXT_COLUMNS, BulkQueries
from .summaries import SummaryQueries

SQLITE_MAGIC = b"SQLite format 3\x00"

# A report locked by a writer (an export still running, a tool holding a transaction) is
# waited for briefly: sqlite3 waits 5 s by itself, the ADBC reads retry for as long.
LOCKED_RETRIES, LOCKED_WAIT_S = 10, 0.5
# SQLite's POSIX locks on a database file (os_unix.c): PENDING and RESERVED, then the 510
# bytes of the SHARED range. A connection in WAL mode holds a read lock on the SHARED range
# for as long as it is open; a writer in rollback mode a write lock on one of them.
LOCK_START, LOCK_BYTES = 0x40000000, 512
# The header's byte 18 (its write version) is 2 in WAL mode; a -wal file of its 32-byte
# header alone holds no changes.
WAL_MODE, WAL_HEADER_BYTES = 2, 32

# Where a bulk query takes its rowid slice (Database._slices): of the first table after
# FROM (by its alias, when it has one). queries.py writes it into the bulk queries.
ROWS = BulkQueries.ROWS
# Reader threads at most, each with a connection of its own: a 128-core host need not open
# 128 of them.
MAX_READERS = 32
# Rows per slice, at least: a 1 M-row table spreads over 10 cores, a report under 200 k
# rows is one query per table (a slice costs a connection). Measured on 10 M kernels, 2
# cores: two slices on two threads read in 2.96 s what one query reads in 5.81 s.
SLICE_ROWS = 100_000
# Slices per reader thread and read: the slices of one read differ in cost (the runtime
# calls' filter keeps more rows in some than in others), and the loader waits for a read's
# last slice. Two per thread balance the cores: 10 M kernels, 2 cores, load 7.2-7.6 s
# against 9.0-9.2 s with one slice per thread (two, four or eight per thread alike).
SLICES_PER_READER = 2
# Rows per slice, at most: each reader holds its slice's Arrow table and what its reducer
# makes of it until the slice is done, so a big table read in a few slices held several
# 100 MB per reader (the 43 M runtime calls of 10 M kernels in four slices on two cores:
# 5.8 M launches in one). Slices of a million rows bound that: the reads' part of the load
# stays near 0.95 GiB at 10 M kernels, where a few big slices reached 1.4 GiB.
MAX_SLICE_ROWS = 1_000_000
# GPU operations from which a report is streamed (open_report); below, it is loaded whole.
# Any: with one engine for both, streaming a 1 M-kernel report took 1.54-1.59 s and
# 287-294 MiB against 2.17-2.28 s and 310-314 MiB loaded on a 16-core host, 1.41 s and
# 262 MiB against 1.56 s and 285 MiB on 2 cores; the demo report the same either way
# (docs/performance.md, "The analysis engine").
STREAM_MIN_OPERATIONS = 1
# Rows per slice of a streamed read, at most (Database.stream): each of the few slices in
# flight or held is its rows' columns, ~70 B a row once the stream has made them its own
# (operations.py): 128 k rows keep that near 10 MB a slice (10 M kernels, 2 cores: 256 k
# rows held ~20 MB more, in about the same time).
STREAM_SLICE_ROWS = 1 << 17
# Rows per record batch from the ADBC SQLite driver (its default is 1024). Each batch is a
# few small allocations per column, freed only when every column of that batch is: with
# 1024-row batches, 10 M NVTX ranges read as 9766 batches took 583 MiB of RSS for 471 MiB
# of data, and pandas' conversion 0.80 s; with 131072-row batches 481 MiB and 0.21 s. A
# batch is a few MB per reader thread.
BATCH_ROWS = 131_072
# Distinct texts that are not UTF-8 that a report's note counts exactly; past them it says
# "more than" (each one is held as bytes to be counted once: a program that wrote every
# one of ten million range names in Latin-1 would otherwise hold them all a second time).
MAX_COUNTED_TEXTS = 10_000


@dataclass
class OpenReport:
    """A report whose export is open and whose bulk reads are under way (`open_report`);
    `loader.load` turns it into a Report. Close it (or use `with`) when not loading it."""

    source: Path  # what the user named: the .sqlite, or the .nsys-rep it was exported from
    db: Database
    queries: BulkQueries
    notes: list[str] = field(default_factory=list)  # said about the file before loading
    # Opened for the streamed analysis: the operations' and runtime calls' reads are not
    # under way (see open_report).
    stream_operations: bool = False
    # The call summaries' reads, under way on a thread of their own (summaries.py).
    summaries: SummaryQueries | None = None
    # Whether the caller draws every operation (html, trace): every (range, operation)
    # pair is then kept. Not where it asked for a stream, even if the report is read whole.
    pairs_wanted: bool = True

    def read_whole(self) -> None:
        """Start the reads a stream left out (the report loaded whole after all: a report the
        stream gave up on)."""
        self.stream_operations = False
        self.db.prefetch(*self.queries.in_order(), reducers=self.queries.reducers())

    def __enter__(self) -> OpenReport:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.db.close()


def open_report(path: str | os.PathLike, *, cache_dir: str | os.PathLike | None = None,
                nsys: str | None = None, progress: Progress = NO_PROGRESS,
                stream_operations: bool = False) -> OpenReport:
    """Open an nsys report (`.sqlite` export, or `.nsys-rep`, exported on the fly) and start
    its bulk reads. A `.nsys-rep` is exported with `nsys export --type sqlite` into the
    cache folder (`cache_dir`, else $NSYSWRAP_CACHE, else ~/.cache/nsyswrap), never beside
    the original. Raises BadInputError with a one-line message for anything that is not a
    usable report. `stream_operations`: the GPU operations and runtime calls will be read
    as a stream (operations.OperationStream), a few slices at a time, so only the other
    reads start here."""
    asked_to_stream = stream_operations
    source = Path(path)
    if not source.exists():
        raise BadInputError(f"{source}: no such file")
    if source.is_dir():
        raise BadInputError(f"{source} is a folder: give a .sqlite or .nsys-rep report")
    notes: list[str] = []
    sqlite_path = source
    if source.suffix in (".nsys-rep", ".qdrep"):
        from ..common.nsys import export_report  # the export layer; imported only when needed

        with progress.step(f"exporting {source.name} to SQLite (once)"):
            sqlite_path, note = export_report(source, cache_dir=cache_dir, nsys=nsys)
        notes.append(note)
    elif source.suffix == ".qdstrm":
        raise BadInputError(
            f"{source} is a raw capture that was never imported: make a report with "
            f"`nsyswrap import {source}` (or QdstrmImporter -i {source}), then compare that"
        )
    check_sqlite_file(sqlite_path)
    db = Database(sqlite_path, cache_dir=cache_dir, progress=progress)
    notes.extend(db.notes)
    try:
        if not ({"StringIds"} & db.tables
                or {"META_DATA_EXPORT", "EXPORT_META_DATA"} & db.tables):
            raise BadInputError(
                f"{db.path} is SQLite but not an Nsight Systems export "
                "(no StringIds or export metadata table)"
            )
        queries = BulkQueries.of(db)
        # Streaming the operations from the export (not loading them) pays where they
        # outnumber the ranges, not in a range-heavy report (the 10 M-range file: 3x the
        # memory; docs/performance.md, "The analysis engine").
        operations = sum(db.row_estimate(t) for t in queries.operation_tables())
        stream_operations = stream_operations and (
            operations >= STREAM_MIN_OPERATIONS and operations >= db.row_estimate(NVTX_TABLE))
        db.prefetch(*(queries.not_operations() if stream_operations else queries.in_order()),
                    reducers=queries.reducers())
        summaries = SummaryQueries.of(db)
        summaries.prefetch(db)
    except BaseException:
        db.close()
        raise
    return OpenReport(source, db, queries, notes, stream_operations, summaries,
                      pairs_wanted=not asked_to_stream)


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


def _is_locked(e: Exception) -> bool:
    text = str(e).lower()
    return "locked" in text or "busy" in text


def _unreadable(path: Path, e: Exception) -> BadInputError:
    """The one-line error for a report SQLite refuses: locked, or damaged."""
    if _is_locked(e):
        return _locked(path)
    return BadInputError(f"{path} cannot be read as SQLite ({e}): is it damaged?")


class Texts:
    """The report's text as Python and Arrow strings, whatever bytes it holds. nsys stores
    a name as the program passed it (docs/nsys-quirks.md, "Text that is not UTF-8"): a C
    program's nvtxRangePushA("caf\\xe9") in Latin-1, a name cut mid-character, or a BLOB
    where another tool rewrote a text column. Each byte sequence that is not UTF-8 becomes
    U+FFFD, on every path that reads text: sqlite3 (`decode`, its text_factory and what
    Database.rows hands over as bytes) and the ADBC driver's Arrow columns (`column`), and
    the distinct texts so decoded are counted for the report's note. Called from the
    reader threads too."""

    def __init__(self) -> None:
        self._replaced: set[bytes] = set()
        self._more = False  # more than MAX_COUNTED_TEXTS were replaced
        self._lock = threading.Lock()

    def decode(self, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            with self._lock:
                if len(self._replaced) < MAX_COUNTED_TEXTS:
                    self._replaced.add(raw)
                elif raw not in self._replaced:
                    self._more = True
            return raw.decode("utf-8", "replace")

    def column(self, column):
        """A text column of an Arrow table (string, or binary where the driver met a BLOB
        in the first rows) as valid UTF-8 strings. Arrow's own check (C++, without the GIL:
        0.023 s of CPU for the 5 M range names of scripts/bench_compare.py's range report,
        scripts/time_texts.py) finds the record batches that need it; their distinct values
        are decoded here, each once."""
        import pyarrow as pa
        import pyarrow.compute as pc

        as_text = {pa.binary(): pa.string(), pa.large_binary(): pa.large_string()}
        text_type = as_text.get(column.type, column.type)
        chunks, changed = [], column.type != text_type
        for chunk in column.chunks:
            if changed:
                chunk = chunk.view(text_type)  # the same buffers, as text
            try:
                chunk.validate(full=True)  # offsets, and every value's UTF-8
            except pa.ArrowInvalid:
                raw = chunk.view(pa.large_binary() if text_type == pa.large_string()
                                 else pa.binary())
                encoded = pc.dictionary_encode(raw)
                distinct = [None if v is None else self.decode(v)
                            for v in encoded.dictionary.to_pylist()]
                chunk = pa.array(distinct, text_type).take(encoded.indices)
                changed = True
            chunks.append(chunk)
        return pa.chunked_array(chunks, text_type) if changed else column

    def note(self) -> str | None:
        """The report's note on the texts decoded with U+FFFD; None where there were none."""
        with self._lock:
            if not self._replaced:
                return None
            # Its bytes as Python writes them (b'caf\xe9' as caf\xe9): what the program
            # passed, in plain ASCII whatever else the name holds.
            example = repr(min(self._replaced))[2:-1][:60]
            count = f"more than {len(self._replaced)}" if self._more else len(self._replaced)
        return (f"{count} name(s) were not UTF-8 (such as {example}); shown with U+FFFD "
                "(\ufffd) in place of the bytes that were not")


def _connect(uri: str, texts: Texts, **options) -> sqlite3.Connection:
    """A read-only sqlite3 connection whose text values that are not UTF-8 come decoded
    with U+FFFD (Texts) instead of failing the query."""
    con = sqlite3.connect(uri, uri=True, **options)
    con.text_factory = texts.decode
    return con


class _TextColumn(ValueError):
    """A bulk read's number column came as text (Database._numbers)."""


def _uri(path: Path, params: str) -> str:
    return "file:" + urllib.parse.quote(str(path.resolve())) + "?" + params


def _lock_holder(path: Path, writers_only: bool) -> int | None:
    """The pid of another process holding SQLite's locks on `path`: any of them, or with
    `writers_only` a write lock (RESERVED, PENDING or EXCLUSIVE: a transaction writing).
    None when no process does, or where this cannot be asked (not Linux: struct flock's
    layout differs). Asking takes no lock: a file opened read-only is enough."""
    if sys.platform != "linux":
        return None
    import fcntl

    layout = "hhqqi4x"  # struct flock on Linux: type, whence, start, len, pid
    probe = fcntl.F_RDLCK if writers_only else fcntl.F_WRLCK  # what would conflict
    fd = os.open(path, os.O_RDONLY)
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK,
                             struct.pack(layout, probe, os.SEEK_SET, LOCK_START, LOCK_BYTES, 0))
    except OSError:  # a file system without POSIX locks
        return None
    finally:
        os.close(fd)
    kind, _, _, _, pid = struct.unpack(layout, answer)
    return None if kind == fcntl.F_UNLCK else pid


def _plain_tables(con: sqlite3.Connection, path: Path) -> set[str]:
    """The names of the file's tables. Where nsyswrap reads a table (queries.READ_TABLES),
    the file must hold a plain one, as nsys writes it: a view or a virtual table in its
    place runs whatever its definition says on every read (a recursive view never ends),
    and so does a generated column. One line, exit 2, before any read starts. Triggers
    stay: they run on writes, and no connection here writes."""
    read = {t.lower() for t in READ_TABLES}  # SQLite's names ignore case
    tables = set()
    for kind, name, root in con.execute(
            "SELECT type, name, rootpage FROM sqlite_master WHERE type IN ('table', 'view')"):
        plain = kind == "table" and bool(root)  # a virtual table has no b-tree: rootpage 0
        if plain:
            tables.add(name)
        if str(name).lower() not in read:
            continue
        if not plain:
            what = "a view" if kind == "view" else "a virtual table"
            raise BadInputError(f"{path}: {name} is {what}, not a table as nsys writes it "
                                "(reading it would run the SQL it is made of): export the "
                                "report again from its .nsys-rep")
        # table_xinfo's hidden: 2 and 3 for a generated column (virtual, stored).
        generated = [c[1] for c in con.execute(f'PRAGMA table_xinfo("{name}")') if c[6] in (2, 3)]
        if generated:
            raise BadInputError(f"{path}: {name}.{generated[0]} is a generated column, not "
                                "values as nsys writes them (reading it would run the SQL it "
                                "is made of): export the report again from its .nsys-rep")
    return tables


def _locked(path: Path, pid: int | None = None) -> BadInputError:
    which = f"pid {pid}: " if pid else ""
    return BadInputError(f"{path} is locked by another process ({which}an export or a writer "
                         "still running?): wait for it to finish and try again")


class Database:
    """A read-only connection: sqlite3 for small lookups, ADBC for bulk Arrow tables.

    Nothing is created beside the report (docs/nsys-quirks.md, "Reading without writing"):
    a file in rollback mode (nsys's exports) is opened `mode=ro`, which writes nothing
    and honours a writer's locks (waited for, then a one-line error); one in WAL mode
    that no process has open is read `immutable=1` (a plain read-only open would make
    its -wal and -shm files, and fails on a read-only mount), or, where its -wal holds
    changes not yet in the file, from a private copy of both in the cache; one that
    another process has open, through SQLite's WAL protocol, whose files that process
    made already."""

    def __init__(self, path: Path, *, cache_dir: str | os.PathLike | None = None,
                 progress: Progress = NO_PROGRESS):
        self.path = path
        self.notes: list[str] = []  # how the file was read, where that is worth saying
        self._private: Path | None = None  # the private copy's folder, removed on close
        self.uri = self._read_only_uri(cache_dir, progress)
        self.texts = Texts()
        self.con = None
        try:
            self.con = _connect(self.uri, self.texts, timeout=LOCKED_RETRIES * LOCKED_WAIT_S)
            self.tables = _plain_tables(self.con, path)
        except (sqlite3.DatabaseError, BadInputError) as e:
            if self.con is not None:
                self.con.close()
            self._remove_private()
            if isinstance(e, BadInputError):
                raise
            raise _unreadable(path, e) from e
        self._columns: dict[str, set[str]] = {}
        self._not_null: dict[str, set[str]] = {}
        self._pool = None
        self._background = None  # prefetch(..., background=True)
        self._prefetched: dict[str, list] = {}
        self._reducers: dict[str, Callable] = {}

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self.con.close()
        for pool in (self._pool, self._background):
            if pool is not None:
                pool.shutdown(wait=True, cancel_futures=True)
        self._pool = self._background = None
        self._remove_private()

    def _read_only_uri(self, cache_dir: str | os.PathLike | None, progress: Progress) -> str:
        """The URI that reads the report without creating anything beside it (see the
        class docstring)."""
        path = self.path
        with open(path, "rb") as f:
            wal_mode = f.read(19)[18:19] == bytes([WAL_MODE])
        if not wal_mode:
            self._wait_for_writer(progress)
            return _uri(path, "mode=ro")
        if _lock_holder(path, writers_only=False) is not None:
            # Open elsewhere: the WAL protocol reads a consistent state while that process
            # writes, and immutable=1 would not (nor would a copy taken meanwhile).
            return _uri(path, "mode=ro")
        wal = path.with_name(path.name + "-wal")
        if not wal.exists() or wal.stat().st_size <= WAL_HEADER_BYTES:
            return _uri(path, "mode=ro&immutable=1")
        return _uri(self._private_copy(wal, cache_dir, progress), "mode=ro&immutable=1")

    def _wait_for_writer(self, progress: Progress) -> None:
        """Wait while another process writes the file (an export still running), as long as
        sqlite3's busy timeout would, saying so on a terminal; then a one-line error."""
        pid = _lock_holder(self.path, writers_only=True)
        if pid is None:
            return
        deadline = time.monotonic() + LOCKED_RETRIES * LOCKED_WAIT_S
        with progress.step(f"waiting for {self.path.name}: process {pid} is writing it"):
            while pid is not None and time.monotonic() < deadline:
                time.sleep(0.1)
                pid = _lock_holder(self.path, writers_only=True)
        if pid is not None:
            raise _locked(self.path, pid)

    def _private_copy(self, wal: Path, cache_dir: str | os.PathLike | None,
                      progress: Progress) -> Path:
        """A copy of the report and its -wal in a private folder of the cache, its changes
        checkpointed into it (SQLite replays the log's complete transactions only):
        what the report holds, read without writing beside it. Removed on close."""
        from ..common.nsys import cache_folder

        path = self.path
        folder, note = cache_folder(cache_dir, "copies")
        try:
            self._private = Path(tempfile.mkdtemp(prefix=f"{path.stem}-", dir=folder))
        except OSError as e:
            raise BadInputError(f"cannot use the cache folder {folder}: "
                                f"{e.strerror or e} (choose another with --cache-dir or "
                                "$NSYSWRAP_CACHE)") from None
        copy = self._private / "report.sqlite"
        with progress.step(f"copying {path.name} and its write-ahead log"):
            try:
                for _ in range(3):
                    before = [(p.stat().st_size, p.stat().st_mtime_ns) for p in (path, wal)]
                    shutil.copyfile(path, copy)
                    shutil.copyfile(wal, copy.with_name(copy.name + "-wal"))
                    after = [(p.stat().st_size, p.stat().st_mtime_ns) for p in (path, wal)]
                    if before == after and _lock_holder(path, writers_only=False) is None:
                        break
                else:
                    raise _locked(path)
                con = sqlite3.connect(copy)
                try:
                    con.execute("PRAGMA journal_mode=DELETE")  # the log into the copy
                finally:
                    con.close()
            except BaseException:
                self._remove_private()
                raise
        self.notes.append(f"{path} is in WAL mode and its {wal.name} holds changes not yet "
                          "in the file: read from a private copy of both, removed after "
                          "reading" + (f" ({note})" if note else ""))
        return copy

    def _remove_private(self) -> None:
        if self._private is not None:
            shutil.rmtree(self._private, ignore_errors=True)
            self._private = None

    def prefetch(self, *queries: str | None,
                 reducers: Mapping[str, Callable] | None = None,
                 background: bool = False) -> None:
        """Start the big reads at once, each rowid slice on its own connection and thread:
        SQLite's scan and the driver's conversion run in C without the GIL, so the slices
        of all the reads share every core (see _slices). `reducers`: query -> what its
        reader thread makes of each slice's Arrow table (read back with `slices`), so that
        work on a slice's rows runs on every core too, and columns needed only for a few
        rows are not held for all of them. `background`: on one thread of their own, for
        reads wanted only at the end (the call summaries, summaries.py): on the readers'
        pool their slices would queue ahead of the streamed analysis's."""
        from concurrent.futures import ThreadPoolExecutor

        self._reducers.update(reducers or {})
        queries = [q for q in queries if q and q not in self._prefetched]
        if not queries:
            return
        if background:
            if self._background is None:
                self._background = ThreadPoolExecutor(max_workers=1)
            pool = self._background
        else:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=min(cores(), MAX_READERS))
            pool = self._pool
        for q in queries:
            self._prefetched[q] = [pool.submit(self._read, part, self._reducers.get(q))
                                   for part in self._slices(q)]

    def row_estimate(self, table: str) -> int:
        """How many rows `table` has, about: the span of its rowids (from the b-tree's two
        edges, without a scan; exact where no row was ever deleted). 0 for a table the
        export lacks."""
        span = self._rowids(table) if table in self.tables else None
        return 0 if span is None else span[1] - span[0] + 1

    def _rowids(self, table: str) -> tuple[int, int] | None:
        """(the least, the greatest rowid) of `table`; None where it has none (empty, or
        rebuilt WITHOUT ROWID) or cannot be read (damage: the bulk read itself reports it,
        in one line). Apart: SQLite reads min() or max() of the rowid
        off the b-tree's edge, but scans the whole table for the two in one query."""
        try:
            (lo,), = self.con.execute(f"SELECT min(rowid) FROM {table}").fetchall()
            (hi,), = self.con.execute(f"SELECT max(rowid) FROM {table}").fetchall()
        except sqlite3.DatabaseError:
            return None
        return None if lo is None or hi is None else (lo, hi)

    def columns(self, table: str) -> set[str]:
        if table not in self._columns:
            self._columns[table] = {r[1] for r in self.con.execute(f'PRAGMA table_info("{table}")')}
        return self._columns[table]

    def not_null(self, table: str) -> set[str]:
        """The columns of `table` the export declares NOT NULL."""
        if table not in self._not_null:
            self._not_null[table] = {r[1] for r in self.con.execute(
                f'PRAGMA table_info("{table}")') if r[3]}
        return self._not_null[table]

    def rows(self, sql: str, params: Iterable = ()) -> list[tuple]:
        """The query's rows, text as str (a BLOB where the query reads text, too: Texts)."""
        try:
            rows = self.con.execute(sql, tuple(params)).fetchall()
        except sqlite3.DatabaseError as e:
            raise _unreadable(self.path, e) from e
        decode = self.texts.decode
        return [tuple(decode(v) if type(v) is bytes else v for v in row) for row in rows]

    def arrow(self, sql: str):
        """Run a query whose columns are never NULL and return it as one Arrow table, its
        rows in the table's order: its prefetched slices, or read now.

        The ADBC driver infers column types from the first rows, so queries coalesce
        nullable columns: a NULL-only first batch followed by text would fail.
        """
        import pyarrow as pa

        tables = self.slices(sql)
        if len(tables) == 1:
            return tables[0]
        return pa.concat_tables([t for t in tables if t.num_rows] or tables[:1])

    def slices(self, sql: str) -> list:
        """The query's rowid slices in order (see _slices), each as its reducer made it (see
        prefetch), else as an Arrow table: the prefetched ones, or read now."""
        futures = self._prefetched.pop(sql, None)
        if futures is not None:
            return [f.result() for f in futures]
        return [self._read(part, self._reducers.get(sql)) for part in self._slices(sql)]

    def stream(self, sql: str, reduce: Callable | None = None, ahead: int | None = None,
               max_rows: int = STREAM_SLICE_ROWS) -> Iterator:
        """The query's rowid slices in order (see _slices; at most `max_rows` rowids each),
        each as `reduce` makes it of its Arrow table, read on the reader threads at most
        `ahead` slices ahead of the one the caller holds (default: one per reader thread):
        for reads whose slices are used one at a time and dropped (the streamed analysis's
        operations and launches), so that the slices in memory stay a few however big the
        table is."""
        from collections import deque
        from concurrent.futures import ThreadPoolExecutor

        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=min(cores(), MAX_READERS))
        parts = iter(self._slices(sql, max_rows))
        in_flight: deque = deque()
        ahead = max(1, ahead if ahead is not None else min(cores(), MAX_READERS))
        try:
            while True:
                while len(in_flight) < ahead:
                    part = next(parts, None)
                    if part is None:
                        break
                    in_flight.append(self._pool.submit(self._read, part, reduce))
                if not in_flight:
                    return
                yield in_flight.popleft().result()
        finally:
            for future in in_flight:
                future.cancel()

    def _read(self, sql: str, reduce: Callable | None):
        # No reference to the table here while it is reduced: the reducer may free it.
        try:
            return self._numbers(sql) if reduce is None else reduce(self._numbers(sql))
        except (ValueError, TypeError, OSError) as e:
            # Text (or a fraction) where the export has numbers: the driver gives the
            # column as text, or stops at the first such value past its first batch.
            found = self._not_a_number(sql)
            if found is not None:
                raise found from None
            if isinstance(e, _TextColumn):  # text, though not in a column declared INTEGER
                raise BadInputError(f"{self.path}: {e} where numbers belong: the export is "
                                    "damaged or was edited") from None
            if isinstance(e, OSError):
                raise _unreadable(self.path, e) from e
            raise

    def _numbers(self, sql: str):
        """The query's result as an Arrow table (_fetch), refused (_TextColumn) where a
        column that holds numbers came as text."""
        import pyarrow as pa

        table = self._fetch(sql)
        for i, f in enumerate(table.schema):
            if not (pa.types.is_string(f.type) or pa.types.is_binary(f.type)
                    or pa.types.is_large_string(f.type) or pa.types.is_large_binary(f.type)):
                continue
            if f.name not in TEXT_COLUMNS:
                raise _TextColumn(f"the read's column {f.name} came as text")
            column = table.column(i)
            text = self.texts.column(column)
            if text is not column:
                table = table.set_column(i, f.name, text)
            del column, text
        return table

    def _not_a_number(self, sql: str) -> BadInputError | None:
        """The one-line error naming the first value of the query's table that is not a
        whole number in a column declared INTEGER that the query reads; None if there is
        none (then the failure was something else)."""
        table = re.search(r"\bFROM\s+(\w+)", sql).group(1)
        if table not in self.tables:
            return None
        # A connection of its own: this runs on a reader thread.
        con = _connect(self.uri, self.texts)
        try:
            # Integer affinity (a declared type holding INT: a table rebuilt by CREATE
            # TABLE AS declares "INT"), or none.
            declared = [r[1] for r in con.execute(f'PRAGMA table_info("{table}")')
                        if "INT" in str(r[2]).upper() or not r[2]]
            for column in declared:
                if not re.search(rf"\b{re.escape(column)}\b", sql):
                    continue
                row = con.execute(
                    f'SELECT rowid, quote("{column}") FROM {table} '
                    f"WHERE typeof(\"{column}\") NOT IN ('integer', 'null') LIMIT 1"
                ).fetchone()
                if row is not None:
                    return BadInputError(
                        f"{self.path}: {table}.{column} holds {row[1][:40]} (row {row[0]}) "
                        "where a whole number belongs: the export is damaged or was edited")
        except sqlite3.DatabaseError:
            return None
        finally:
            con.close()
        return None

    def _slices(self, sql: str, max_rows: int | None = None) -> list[str]:
        """A bulk query written with ROWS (a scan of one table) as queries over disjoint
        rowid slices, in rowid order: SLICES_PER_READER per core, or more where such slices
        would span more than `max_rows` (default MAX_SLICE_ROWS) rowids, and none under
        SLICE_ROWS."""
        if ROWS not in sql:
            return [sql]
        return [sql.replace(ROWS, c) for c in self.slice_conditions(sql, max_rows)]

    def slice_conditions(self, sql: str, max_rows: int | None = None) -> list[str]:
        """The rowid conditions that _slices puts in place of ROWS in a bulk query, in
        order: a later query of the same slice of its table (a few rows found in one
        slice's reduced result) takes the same condition."""
        table, alias = re.search(r"\bFROM\s+(\w+)(?:\s+AS\s+(\w+))?", sql).groups()
        rowid = f"{alias}.rowid" if alias else "rowid"
        span = self._rowids(table)
        if span is None:
            return ["1"]
        lo, hi = span
        rows = hi - lo + 1
        max_rows = max_rows or MAX_SLICE_ROWS
        parts = max(1, min(max(SLICES_PER_READER * cores(), -(-rows // max_rows)),
                           rows // SLICE_ROWS))
        cuts = [lo - 1 + (hi - lo + 1) * i // parts for i in range(parts + 1)]
        return [f"{rowid} > {a} AND {rowid} <= {b}" for a, b in zip(cuts, cuts[1:], strict=False)]

    def _fetch(self, sql: str, attempt: int = 0):
        """The query's result as an Arrow table, on a connection of its own (each reader
        thread needs one; opening it costs well under a millisecond)."""
        import adbc_driver_manager as adbc
        import adbc_driver_sqlite
        import pyarrow as pa

        handles = []
        try:
            handles.append(adbc_driver_sqlite.connect(self.uri))
            handles.append(adbc.AdbcConnection(handles[-1]))
            handles.append(adbc.AdbcStatement(handles[-1]))
            handles[-1].set_options(**{adbc_driver_sqlite.StatementOptions.BATCH_ROWS.value:
                                       str(BATCH_ROWS)})
            handles[-1].set_sql_query(sql)
            stream, _ = handles[-1].execute_query()
            return pa.RecordBatchReader._import_from_c(stream.address).read_all()
        except adbc.Error as e:
            if _is_locked(e) and attempt < LOCKED_RETRIES:
                time.sleep(LOCKED_WAIT_S)  # sqlite3's own busy timeout does this for it
                return self._fetch(sql, attempt + 1)
            raise _unreadable(self.path, e) from e
        finally:
            for handle in reversed(handles):
                handle.close()
