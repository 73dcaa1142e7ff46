"""The SQL of the bulk reads: which columns of which export tables `load` reads, written for
the tables and columns this export has (docs/nsys-schema.md: they differ between nsys
versions and with what was traced).

Built before pandas is imported (database.open_report starts these reads first), so this
module needs nothing but a connection's table and column lists. Also the reads' results
made numpy columns (on the reader threads: the reducers) or a DataFrame (pandas_frame),
importing what they need when called. Small lookups (metadata, thread names) stay with the
loader; those of launches and kernel names are launches.py's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from . import cuda_api

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

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

# globalTid = marker | pid << 24 | tid; globalPid is the same with tid 0.
TID_BITS = 24
ID_MASK = (1 << TID_BITS) - 1  # a pid or tid within a global id
LOW32 = 0xFFFFFFFF


# Every table of an export that nsyswrap reads, here or in any other module: the file must
# hold each as a plain table, not a view or a virtual table in its place (database.
# Database refuses those; tests/test_not_tables.py checks the package reads no other one).
READ_TABLES = frozenset({
    KERNEL_TABLE, RUNTIME_TABLE, MEMCPY_TABLE, MEMSET_TABLE, GRAPH_TABLE, NVTX_TABLE,
    "CUPTI_ACTIVITY_KIND_CUDA_EVENT", "CUPTI_ACTIVITY_KIND_SYNCHRONIZATION", "OSRT_API",
    "StringIds", "ENUM_NSYS_EVENT_TYPE", "ThreadNames", "PROCESSES", "ANALYSIS_DETAILS",
    "GPU_METRICS", "TARGET_INFO_GPU_METRICS", "TARGET_INFO_GPU",
    "TARGET_INFO_SESSION_START_TIME", "TARGET_INFO_SYSTEM_ENV", "META_DATA_CAPTURE",
    "META_DATA_EXPORT", "EXPORT_META_DATA",
})

# The bulk reads' only text columns: a text value in any other is not a number.
TEXT_COLUMNS = frozenset({"name", "text"})


class Schema(Protocol):
    """What the queries need of a connection (database.Database)."""

    tables: set[str]

    def columns(self, table: str) -> set[str]: ...

    def not_null(self, table: str) -> set[str]: ...

    def rows(self, sql: str, params: Iterable = ()) -> list[tuple]: ...


@dataclass
class RuntimeQuery:
    """The runtime-table queries of the launches and the blocking calls, and what their
    name ids mean."""

    calls_sql: str | None  # every call that may launch GPU work or block the host
    blocking: dict[int, str]  # name id -> blocking API


@dataclass
class MissingTimes:
    """How many rows of a table a bulk read leaves out for a NULL start or end (`sql`, one
    row `n`), and what those rows are ("kernel")."""

    what: str
    table: str
    sql: str

    def note(self, n: int) -> str:
        return (f"{n} {self.what}(s) without a start or end time (NULL in {self.table}); "
                "left out")


@dataclass
class BulkQueries:
    """Every bulk read of one export (None where its table is absent)."""

    # Where a bulk query takes its rowid slice (database.Database._slices).
    ROWS = "{rows}"

    event_types: dict[str, int]  # NVTX event type ids
    kernels: str | None
    transfers: dict[str, str]  # op ("memcpy", "memset", "graph") -> its table's query
    runtime: RuntimeQuery
    nvtx_domains: str | None
    nvtx_ranges: str | None
    unterminated: str | None  # how many ranges never ended
    nvtx_marks: str | None
    # Where a table's times may be NULL (not nsys's own exports): rows left out, counted.
    missing: list[MissingTimes]

    @classmethod
    def of(cls, db: Schema) -> BulkQueries:
        types = nvtx_event_types(db)
        return cls(types, kernels_sql(db), transfers_sql(db), runtime_sql(db),
                   nvtx_domains_sql(db, types), nvtx_ranges_sql(db, types),
                   unterminated_sql(db, types), nvtx_marks_sql(db, types),
                   missing_times(db, types))

    def reducers(self) -> dict[str, Callable]:
        """Query -> what a reader thread makes of each of its slices (database.prefetch)."""
        out: dict[str, Callable] = {}
        if self.kernels is not None:
            out[self.kernels] = numpy_columns
        if self.runtime.calls_sql is not None:
            out[self.runtime.calls_sql] = functools.partial(
                RuntimeSlice.of, blocking_ids=tuple(sorted(self.runtime.blocking)))
        if self.nvtx_ranges is not None:
            out[self.nvtx_ranges] = functools.partial(
                RangeSlice.of, pushpop=self.event_types["NvtxPushPopRange"])
        return out

    def in_order(self) -> list[str | None]:
        """The queries in the order the loader uses them. The NVTX table's small reads
        (domains, unended ranges, marks) are full scans too. Kernels before the runtime
        calls: the other way round (the launches merged while the kernels are read) raises
        the 10 M-kernel peak on 16 cores by 300 MB, for at most a second of load on 2
        (docs/performance.md, "Reads")."""
        return [self.kernels, *self.transfers.values(), self.runtime.calls_sql,
                *self.not_operations()]

    def operation_tables(self) -> list[str]:
        """The tables of the GPU operations this export has."""
        out = [KERNEL_TABLE] if self.kernels is not None else []
        return out + [{"memcpy": MEMCPY_TABLE, "memset": MEMSET_TABLE, "graph": GRAPH_TABLE}[op]
                      for op in self.transfers]

    def not_operations(self) -> list[str | None]:
        """in_order's reads but the GPU operations' and the runtime calls' (which the
        streamed analysis reads a few slices at a time)."""
        return [self.nvtx_domains, self.nvtx_ranges, self.unterminated, self.nvtx_marks,
                *(m.sql for m in self.missing)]


def times_present(db: Schema, table: str, columns: tuple[str, ...] = ("start", "end"),
                  alias: str = "") -> str:
    """The SQL condition that keeps the rows of `table` whose `columns` (its times) are
    not NULL: "1" where the export declares them NOT NULL (nsys's own exports, which then
    cost nothing to read or count); a NULL time would read as the least int64, a kernel
    at -9.2e18 ns."""
    prefix = f"{alias}." if alias else ""
    tests = [f'{prefix}"{c}" IS NOT NULL' for c in columns if c not in db.not_null(table)]
    return " AND ".join(tests) or "1"


def missing_times(db: Schema, types: dict[str, int]) -> list[MissingTimes]:
    """The counts of the rows the bulk reads leave out for a NULL time (times_present),
    for the tables where the export allows one."""
    out = []
    for what, table in (("kernel", KERNEL_TABLE), ("memcpy", MEMCPY_TABLE),
                        ("memset", MEMSET_TABLE), ("CUDA graph launch", GRAPH_TABLE),
                        ("CUDA runtime call", RUNTIME_TABLE)):
        if table in db.tables and (kept := times_present(db, table)) != "1":
            out.append(MissingTimes(what, table,
                                    f"SELECT count(*) AS n FROM {table} WHERE NOT ({kept})"))
    if NVTX_TABLE in db.tables and "start" not in db.not_null(NVTX_TABLE):
        # A NULL end is a range that never ended: counted apart (unterminated_sql).
        ranges = f"{types['NvtxPushPopRange']}, {types['NvtxStartEndRange']}"
        out.append(MissingTimes("NVTX range", NVTX_TABLE, f"""SELECT count(*) AS n
            FROM {NVTX_TABLE} WHERE eventType IN ({ranges}) AND start IS NULL
              AND "end" IS NOT NULL"""))
        out.append(MissingTimes("NVTX mark", NVTX_TABLE, f"""SELECT count(*) AS n
            FROM {NVTX_TABLE} WHERE eventType = {types["NvtxMark"]} AND start IS NULL"""))
    return out


def nvtx_event_types(db: Schema) -> dict[str, int]:
    types = dict(NVTX_EVENT_TYPES)
    if "ENUM_NSYS_EVENT_TYPE" in db.tables:
        placeholders = ",".join("?" * len(types))
        for name, id_ in db.rows(
            f"SELECT name, id FROM ENUM_NSYS_EVENT_TYPE WHERE name IN ({placeholders})", types
        ):
            types[name] = int(id_)
    return types


def kernels_sql(db: Schema) -> str | None:
    """Five columns, not eight: the ADBC driver spends ~100 ns on every value it converts,
    several times SQLite's own cost per row, so ids that fit together travel packed (each
    in 32 bits, as CUDA and StringIds number them) and are unpacked in numpy."""
    if KERNEL_TABLE not in db.tables:
        return None
    cols = db.columns(KERNEL_TABLE)
    short = "k.shortName" if "shortName" in cols else "k.demangledName"
    full = "k.demangledName" if "demangledName" in cols else short
    return f"""SELECT k.start AS start_ns, k."end" AS end_ns,
                      (k.deviceId << 32) | (k.streamId & {LOW32}) AS device_stream,
                      {launch_key_sql("k.globalPid", "k.correlationId")} AS launch_key,
                      ((coalesce({short}, -1) & {LOW32}) << 32)
                        | (coalesce({full}, {short}, -1) & {LOW32}) AS name_ids
               FROM {KERNEL_TABLE} AS k
               WHERE {times_present(db, KERNEL_TABLE, alias="k")} AND {BulkQueries.ROWS}"""


def launch_key_sql(global_id: str, correlation_id: str) -> str:
    """The key that joins GPU work to the runtime call that launched it: the process
    (global id >> 24) and the correlation id, unique per process (CUPTI counts per process)
    and 32 bits wide. Computed by SQLite: one definition for every table that carries it."""
    return f"((({global_id}) >> {TID_BITS}) << 32) | ({correlation_id})"


def transfers_sql(db: Schema) -> dict[str, str]:
    """op ("memcpy", "memset", "graph") -> the query of its table, for those present."""
    out = {}
    common = f"""start AS start_ns, "end" AS end_ns, deviceId AS device_id,
                 streamId AS stream_id,
                 {launch_key_sql("globalPid", "correlationId")} AS launch_key"""

    def rows(table: str) -> str:
        return f"{times_present(db, table)} AND {BulkQueries.ROWS}"

    if MEMCPY_TABLE in db.tables:
        cols = db.columns(MEMCPY_TABLE)
        src = "coalesce(srcKind, 7)" if "srcKind" in cols else "7"
        dst = "coalesce(dstKind, 7)" if "dstKind" in cols else "7"
        out["memcpy"] = f"""SELECT {common}, coalesce(bytes, 0) AS bytes,
                                   coalesce(copyKind, 0) AS copy_kind_id, {src} AS src_id,
                                   {dst} AS dst_id
                            FROM {MEMCPY_TABLE} WHERE {rows(MEMCPY_TABLE)}"""
    if MEMSET_TABLE in db.tables:
        out["memset"] = f"""SELECT {common}, coalesce(bytes, 0) AS bytes
                            FROM {MEMSET_TABLE} WHERE {rows(MEMSET_TABLE)}"""
    if GRAPH_TABLE in db.tables:
        # Graphs traced as a whole (--cuda-graph-trace=graph, the default): one row per launch.
        out["graph"] = f"""SELECT {common}, 0 AS bytes FROM {GRAPH_TABLE}
                           WHERE {rows(GRAPH_TABLE)}"""
    return out


def runtime_sql(db: Schema) -> RuntimeQuery:
    if RUNTIME_TABLE not in db.tables:
        return RuntimeQuery(None, {})
    names = dict(db.rows("SELECT id, value FROM StringIds WHERE value LIKE 'cu%'"))
    launch_ids = {i for i, v in names.items() if cuda_api.LAUNCH_API.match(v)}
    blocking = {i: cuda_api.base_name(v) for i, v in names.items()
                if cuda_api.base_name(v) in cuda_api.BLOCKING_APIS}
    # One scan of the runtime table for the launches and the blocking calls (the loader
    # splits them by name_id): a long capture holds several runtime calls per kernel, and
    # SQLite's cost is the scan (~100 ns a row to reach nameId), not the columns it hands
    # over. A second scan for the blocking calls alone cost 2.9-4 s of CPU at 43 M runtime
    # rows; `end` and `nameId` for every launch, ~0.7 s (scripts/time_reads.py).
    return RuntimeQuery(
        f"""SELECT {launch_key_sql("globalTid", "correlationId")} AS launch_key,
                   start AS start_ns, globalTid AS thread, "end" AS end_ns, nameId AS name_id
            FROM {RUNTIME_TABLE}
            WHERE nameId IN ({sql_list(launch_ids | set(blocking))})
              AND {times_present(db, RUNTIME_TABLE)} AND {BulkQueries.ROWS}""",
        blocking)


def numpy_columns(table) -> dict[str, np.ndarray]:
    """One rowid slice of a read (the kernels', kernels_sql; the streamed analysis's
    copies, memsets and graphs too) as int64 numpy columns, on its reader thread (the
    driver's small record batches joined there, not on the loader's thread), still packed:
    unpacked they would be held three columns wider while the other reads finish."""
    names = table.column_names
    box = [table]
    del table  # the box holds the only reference: see boxed_numpy_columns
    return boxed_numpy_columns(box, names)


def pandas_frame(table) -> pd.DataFrame:
    """An Arrow table as a DataFrame. The Arrow buffers are handed over column by column,
    each freed as it is converted: the peak stays near one copy of the result instead of
    two. Text columns are copied out of the driver's record batches first: pandas keeps
    Arrow text as it is (zero-copy), and a batch imported from the ADBC driver is freed only
    when all of its columns are, so one text column kept every column of the read alive (10 M
    NVTX ranges: a 509 MiB frame held 1035 MiB; 510 MiB with the text copied). A text column
    of one batch (database.BATCH_ROWS rows at most) is already compact and stays as it is."""
    import pyarrow as pa

    for i, field in enumerate(table.schema):
        column = table.column(i)
        if column.num_chunks > 1 and (pa.types.is_string(field.type)
                                      or pa.types.is_large_string(field.type)):
            # As large_string (64-bit offsets, which pandas' text columns use): one chunk
            # of more than 2 GiB of text would overflow 32-bit offsets.
            text = column.cast(pa.large_string()).combine_chunks()
            table = table.set_column(i, pa.field(field.name, text.type), text)
            del text
        del column
    return table.to_pandas(self_destruct=True, split_blocks=True)


@dataclass
class RuntimeSlice:
    """One rowid slice of the runtime calls' read (RuntimeQuery.calls_sql), split on its
    reader thread: the launches sorted by launch key (stable: rowid order among equal keys),
    and the few blocking calls as read. Sorted slice by slice on every core, the loader
    only merges the sorted runs; `end` and `nameId`, read for the blocking calls, are not
    held for the millions of launches (90 MB each at 10 M): a launch keeps its duration,
    in 32 bits where the slice's fit (the trace draws each launch's own cost)."""

    # launch_key (sorted), start_ns, duration_ns, thread_code, threads
    launches: dict[str, np.ndarray]
    blocking: Any  # pyarrow.Table: the calls_sql columns of the blocking calls
    # (first start, last start, whether the starts ascend) in rowid order; None when empty
    span: tuple[int, int, bool] | None = None

    @classmethod
    def of(cls, table, blocking_ids: tuple[int, ...]) -> RuntimeSlice:
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        blocking = table.filter(pc.is_in(table["name_id"], pa.array(blocking_ids, pa.int64())))
        names = ["launch_key", "start_ns", "thread", "end_ns"]
        box = [table.select(names)]
        del table  # the name id goes; the box holds the rest: see boxed_numpy_columns
        launches = boxed_numpy_columns(box, names)
        start = launches["start_ns"]
        duration = launches.pop("end_ns") - start
        fits = not len(duration) or (duration.min() >= -2**31 and duration.max() < 2**31)
        launches["duration_ns"] = duration.astype("int32") if fits else duration
        del duration
        # The calls are exported in start order (docs/nsys-quirks.md): the streamed
        # analysis keeps a window of slices by their first and last start.
        span = (int(start[0]), int(start[-1]), bool(np.all(start[1:] >= start[:-1]))) if len(
            start) else None
        del start
        order = np.argsort(launches["launch_key"], kind="stable")
        for name, values in launches.items():  # each replaced by its sorted copy in turn
            launches[name] = values[order]
            del values
        # The launching threads as codes into the slice's few distinct thread ids (a byte
        # a launch, not eight: the slices' threads were 80 MB at 10 M launches on the
        # load's peak, where the loader merges the slices).
        launches["thread_code"], launches["threads"] = coded(launches.pop("thread"))
        return cls(launches, blocking, span)


def coded(values):
    """(codes, sorted distinct values) of integers that take a few values, the codes in the
    narrowest integer type (chunks.small_code_type)."""
    import numpy as np

    from .chunks import small_code_type

    distinct, codes = np.unique(values, return_inverse=True)
    return codes.astype(small_code_type(len(distinct))), distinct


@dataclass
class RangeSlice:
    """One rowid slice of the NVTX range read (nvtx_ranges_sql), made compact on its reader
    thread: numbers as numpy columns, the push/pop-or-start/end type as one byte, and the
    names dictionary-encoded (a code per range and the slice's distinct names), so that
    the loader never holds ten million names as text beside their Arrow and pandas copies
    (at 10 M ranges those copies would set the load's peak)."""

    columns: dict[str, np.ndarray]  # start_ns, end_ns, thread, domain_id (int64); startend
    name_codes: np.ndarray  # int32: each range's name, a row of `names`
    names: Any  # pyarrow.StringArray: the slice's distinct names

    @classmethod
    def of(cls, table, pushpop: int) -> RangeSlice:
        import numpy as np
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(table["name"].combine_chunks())
        box = [table.drop_columns(["name"])]
        del table  # the box holds the only reference: see boxed_numpy_columns
        columns = boxed_numpy_columns(box, ["start_ns", "end_ns", "thread", "domain_id",
                                            "event_type"])
        columns["startend"] = (columns.pop("event_type") != pushpop).astype("int8")
        return cls(columns, np.asarray(encoded.indices.to_numpy(), dtype="int32"),
                   encoded.dictionary)


def boxed_numpy_columns(box: list, names: list[str]) -> dict[str, np.ndarray]:
    """Columns of an Arrow table as int64 numpy arrays, each column's Arrow buffers freed
    as it is converted: on a many-core host every reader thread's slice converts at once,
    and two copies of each would be held. The table comes in a one-element list that
    holds the only reference to it (an argument would keep it alive in the caller's
    frame)."""
    import numpy as np

    table = box.pop()
    out = {}
    for name in names:
        column = table[name]
        if column.null_count:
            # NULL ids (a table another tool rebuilt; times are never NULL here, see
            # times_present) as -1, "unknown", as elsewhere: no NaN cast to int64.
            import pyarrow.compute as pc

            column = pc.fill_null(column, -1)
        out[name] = np.asarray(column.to_numpy(), dtype="int64")
        del column
        table = table.drop_columns([name])
    return out


def sql_list(ids: Iterable[int]) -> str:
    """Integer ids as the inside of an SQL IN (...), NULL (matching nothing) for none."""
    return ",".join(map(str, sorted(ids))) or "NULL"


def nvtx_text_sql(db: Schema) -> tuple[str, str]:
    """SQL for an NVTX event's text: `text` (ASCII) or `textId` -> StringIds (registered)."""
    if "textId" in db.columns(NVTX_TABLE):
        return "coalesce(e.text, s.value, '')", "LEFT JOIN StringIds AS s ON s.id = e.textId"
    return "coalesce(e.text, '')", ""


def nvtx_domains_sql(db: Schema, types: dict[str, int]) -> str | None:
    if NVTX_TABLE not in db.tables:
        return None
    text, join = nvtx_text_sql(db)
    return f"""SELECT e.globalTid AS thread, e.domainId AS domain_id, {text} AS name
               FROM {NVTX_TABLE} AS e {join}
               WHERE e.eventType = {types["NvtxDomainCreate"]} AND e.domainId IS NOT NULL
                 AND e.globalTid IS NOT NULL"""  # whose process is unknown names no range


def unterminated_sql(db: Schema, types: dict[str, int]) -> str | None:
    """How many ranges never ended (the program exited inside them)."""
    if NVTX_TABLE not in db.tables:
        return None
    return f"""SELECT count(*) AS n FROM {NVTX_TABLE}
               WHERE eventType IN ({types["NvtxPushPopRange"]}, {types["NvtxStartEndRange"]})
                 AND "end" IS NULL"""


def nvtx_ranges_sql(db: Schema, types: dict[str, int]) -> str | None:
    if NVTX_TABLE not in db.tables:
        return None
    text, join = nvtx_text_sql(db)
    return f"""SELECT e.start AS start_ns, e."end" AS end_ns, e.globalTid AS thread,
                      coalesce(e.domainId, 0) AS domain_id, {text} AS name,
                      e.eventType AS event_type
               FROM {NVTX_TABLE} AS e {join}
               WHERE e.eventType IN ({types["NvtxPushPopRange"]}, {types["NvtxStartEndRange"]})
                 AND e."end" IS NOT NULL AND {times_present(db, NVTX_TABLE, ("start",), "e")}
                 AND {BulkQueries.ROWS}"""


def nvtx_marks_sql(db: Schema, types: dict[str, int]) -> str | None:
    if NVTX_TABLE not in db.tables:
        return None
    text, join = nvtx_text_sql(db)
    return f"""SELECT e.start AS time_ns, e.globalTid AS thread,
                      coalesce(e.domainId, 0) AS domain_id, {text} AS text
               FROM {NVTX_TABLE} AS e {join}
               WHERE e.eventType = {types["NvtxMark"]}
                 AND {times_present(db, NVTX_TABLE, ("start",), "e")} ORDER BY e.start"""
