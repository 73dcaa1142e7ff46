"""The call summaries `nsys stats` users expect, read from the export: CUDA API calls per
name and the slowest of them (cuda_api_sum), GPU copies by kind and memsets
(cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum in one table), OS runtime calls per name
(osrt_sum).

A long capture holds tens of millions of runtime calls (10 M kernels: 43 M), so no row
reaches pandas. SQLite's GROUP BY sorts every row it groups (~250 ns a row on the 2-core
machine); a scan that hands each row over as one integer, (group << bits) | value, costs
~90 ns, and the reader thread that read a slice turns its million integers into value
counts (one vectorized sort, ~5 ms): each distinct (group, value) once, with how often it
occurs. The counts of all slices give each group's count, total, least, greatest, median
and standard deviation exactly. A row that does not pack (a negative or huge value, a group
id past its bits, a NULL) comes as -1 - rowid and is read again by its rowid.

The reads run on a thread of their own (database.Database.prefetch(background=True))
while the report loads and the analysis runs; the loader collects them at the end
(loader.WithoutOperations.complete). Built before pandas is imported, like queries.py.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from .queries import (
    MEMCPY_TABLE,
    MEMSET_TABLE,
    RUNTIME_TABLE,
    TID_BITS,
    BulkQueries,
    Schema,
    boxed_numpy_columns,
    sql_list,
    times_present,
)

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

    from .report import CallSummaries


class Database(Protocol):
    """What the summaries need of a connection (database.Database, which imports this
    module: a Protocol keeps the two from importing each other)."""

    tables: set[str]

    def columns(self, table: str) -> set[str]: ...

    def rows(self, sql: str, params=()) -> list[tuple]: ...

    def prefetch(self, *sql: str, **options) -> None: ...

    def slices(self, sql: str) -> list: ...

    def slice_conditions(self, sql: str) -> list[str]: ...


OSRT_TABLE = "OSRT_API"
# ENUM_NSYS_EVENT_CLASS: an OS runtime call. The table's other rows (31, 32) mark where
# tracing started and finished; nsys's osrt_sum keeps only these.
OSRT_CALL_CLASS = 27
SLOWEST_CALLS = 5
# Rowids per query when rows that did not pack are read again (SQLite binds at most 999
# parameters; these are written into the SQL, a few kB per query).
ROWID_BATCH = 5000
DURATION = '"end" - start'


@dataclass(frozen=True)
class Packed:
    """One summarised table read as packed integers: per value column, each row's group
    (an API's name id, a copy's kind) and value (its duration, its bytes) as
    (group << value_bits) | value; -1 - rowid in every column for a row where any of them
    does not pack (so that a row is read again whole, or not at all)."""

    table: str
    group: str  # SQL of the group id
    values: tuple[tuple[str, str], ...]  # (column, SQL of the value); the first: duration
    where: str  # SQL condition on the rows summarised
    group_max: int  # the greatest group id that packs
    slowest: bool = False  # also find the rows of the greatest durations

    @property
    def value_bits(self) -> int:
        return 63 - max(1, self.group_max.bit_length())

    @property
    def sql(self) -> str:
        most = (1 << self.value_bits) - 1
        packs = " AND ".join([f"({v}) BETWEEN 0 AND {most}" for _, v in self.values]
                             + [f"({self.group}) BETWEEN 0 AND {self.group_max}"])
        columns = ", ".join(
            f"CASE WHEN {packs} THEN (({self.group}) << {self.value_bits}) | ({v}) "
            f"ELSE -1 - rowid END AS {name}" for name, v in self.values)
        return f"SELECT {columns} FROM {self.table} WHERE {self.where} AND {BulkQueries.ROWS}"

    def reducer(self) -> Callable:
        return functools.partial(ValueCounts.of, value_bits=self.value_bits,
                                 top=SLOWEST_CALLS if self.slowest else 0)


@dataclass
class SummaryQueries:
    """The summaries' reads of one export (None where its table is absent)."""

    api: Packed | None
    memcpy: Packed | None
    memset: Packed | None
    osrt: Packed | None

    @classmethod
    def of(cls, db: Schema) -> SummaryQueries:
        string_max = 0
        if "StringIds" in db.tables:
            string_max = int(db.rows("SELECT max(id) FROM StringIds")[0][0] or 0)
        duration = (("duration", DURATION),)
        size = ("bytes", "coalesce(bytes, 0)")
        api = memcpy = memset = osrt = None
        if RUNTIME_TABLE in db.tables:
            api = Packed(RUNTIME_TABLE, "nameId", duration,
                         times_present(db, RUNTIME_TABLE), string_max, slowest=True)
        if MEMCPY_TABLE in db.tables:
            kind = "coalesce(copyKind, 0)" if "copyKind" in db.columns(MEMCPY_TABLE) else "0"
            memcpy = Packed(MEMCPY_TABLE, kind, (*duration, size),
                            times_present(db, MEMCPY_TABLE), COPY_KIND_MAX)
        if MEMSET_TABLE in db.tables:
            memset = Packed(MEMSET_TABLE, "0", (*duration, size),
                            times_present(db, MEMSET_TABLE), 0)
        if OSRT_TABLE in db.tables:
            where = times_present(db, OSRT_TABLE)
            if "eventClass" in db.columns(OSRT_TABLE):
                where += f" AND eventClass = {OSRT_CALL_CLASS}"
            osrt = Packed(OSRT_TABLE, "nameId", duration, where, string_max)
        return cls(api, memcpy, memset, osrt)

    def reads(self) -> list[Packed]:
        return [p for p in (self.api, self.memcpy, self.memset, self.osrt) if p is not None]

    def prefetch(self, db: Database) -> None:
        """Start the reads on a thread of their own: they are wanted only at the end."""
        db.prefetch(*(p.sql for p in self.reads()),
                    reducers={p.sql: p.reducer() for p in self.reads()}, background=True)


# copyKind values that pack (CUPTI's enum has 14); any other is read again by its rowid.
COPY_KIND_MAX = 255


@dataclass
class ValueCounts:
    """One rowid slice of a Packed read, reduced on its reader thread: per value column
    its distinct packed keys (sorted) and how often each occurs; the rowids of the rows
    that did not pack; and the slice's `top` greatest durations (the slowest calls are
    looked for again in the slices that hold them: Database.slice_conditions)."""

    keys: dict[str, np.ndarray]
    counts: dict[str, np.ndarray]
    odd_rowids: np.ndarray
    top: np.ndarray

    @classmethod
    def of(cls, table, value_bits: int, top: int) -> ValueCounts:
        import numpy as np

        names = table.column_names
        box = [table]
        del table  # the box holds the only reference: see queries.boxed_numpy_columns
        columns = boxed_numpy_columns(box, names)
        keys, counts = {}, {}
        odd = np.zeros(0, "int64")
        greatest = np.zeros(0, "int64")
        for i, name in enumerate(names):
            packed = columns.pop(name)
            if len(packed) and packed.min() < 0:  # -1 - rowid in every column
                if i == 0:
                    odd = -1 - packed[packed < 0]
                packed = packed[packed >= 0]
            if not packed.flags.writeable:  # the driver's own buffer (one record batch)
                packed = packed.copy()
            packed.sort()  # in place: no second copy of the slice's column
            keys[name], counts[name] = _runs(packed)
            del packed
            if i == 0 and top:
                greatest = _greatest(keys[name] & ((1 << value_bits) - 1), counts[name], top)
        return cls(keys, counts, odd, greatest)


def _greatest(values: np.ndarray, counts: np.ndarray, top: int) -> np.ndarray:
    """The `top` greatest of values occurring `counts` times each, greatest first."""
    import numpy as np

    order = np.argsort(values, kind="stable")[::-1]
    enough = int(np.searchsorted(np.cumsum(counts[order]), top)) + 1
    return np.repeat(values[order[:enough]], counts[order[:enough]])[:top]


def _runs(sorted_keys: np.ndarray, counts: np.ndarray | None = None
          ) -> tuple[np.ndarray, np.ndarray]:
    """Each distinct key of sorted keys once, with how often it occurs (the sum of its
    `counts`, where the keys come with counts)."""
    import numpy as np

    if not len(sorted_keys):
        return sorted_keys, np.zeros(0, "int64")
    first = np.flatnonzero(np.concatenate([[True], sorted_keys[1:] != sorted_keys[:-1]]))
    if counts is None:
        return sorted_keys[first], np.diff(np.append(first, len(sorted_keys)))
    return sorted_keys[first], np.add.reduceat(counts, first)


@dataclass
class _Read:
    """A Packed read's slices merged: per value column, (group ids, values, counts), the
    rows that did not pack included (a NULL group as -1); the reduced slices; and those
    rows as read again (rowid -> (group, values...))."""

    columns: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    slices: list[ValueCounts]
    odd: dict[int, tuple]

    def __len__(self) -> int:
        return int(next(iter(self.columns.values()))[2].sum())


def collect(db: Database, queries: SummaryQueries, threads: dict[int, str],
            notes: list[str]) -> CallSummaries:
    """The summaries from the reads SummaryQueries.prefetch started (read now where it did
    not), with the rows left out said in `notes`. `threads`: thread key -> name."""
    from .report import CallSummaries

    queries.prefetch(db)  # reads not started yet (none where open_report started them)
    out = CallSummaries()
    if queries.api is not None and len(read := _read(db, queries.api, notes, "CUDA API call")):
        name = _names(db, read, api=True)
        out.cuda_api = _call_table(read.columns["duration"], name)
        out.slowest_api_calls = _slowest(db, queries.api, read, name, threads)
    if queries.osrt is not None and len(read := _read(db, queries.osrt, notes,
                                                      "OS runtime call")):
        out.os_runtime = _call_table(read.columns["duration"], _names(db, read, api=False))
    parts = []
    for packed, label in ((queries.memcpy, _copy_label), (queries.memset, _memset_label)):
        if packed is not None and len(read := _read(db, packed, notes, "GPU copy or memset")):
            parts.append((read, label))
    if parts:
        out.memory_ops = _memory_table(parts)
    return out


def _read(db: Database, packed: Packed, notes: list[str], what: str) -> _Read:
    """`packed`'s slices (prefetched, else read now) merged, the rows that did not pack
    read again by rowid; rows whose duration is negative (broken timestamps) left out and
    said in `notes`."""
    import numpy as np

    slices = db.slices(packed.sql)
    none = np.zeros(0, "int64")
    odd = _rows_by_rowid(db, packed, np.concatenate([s.odd_rowids for s in slices] or [none]))
    broken = [r for r, row in odd.items() if row[1] is None or row[1] < 0]
    # SQLite computes an end - start past int64 (a start near the least int64) as a REAL,
    # which no int64 holds.
    endless = [r for r, row in odd.items() if row[1] is not None and row[1] >= 0
               and not isinstance(row[1], int)]
    for rowid in broken + endless:
        del odd[rowid]
    if broken:
        notes.append(f"{len(broken)} {what}(s) end before they start (broken timestamps); "
                     "left out of the summary")
    if endless:
        notes.append(f"{len(endless)} {what}(s) last longer than 64 bits of ns hold (broken "
                     "timestamps); left out of the summary")
    mask = (1 << packed.value_bits) - 1
    columns = {}
    for i, (name, _) in enumerate(packed.values):
        keys = np.concatenate([s.keys[name] for s in slices] or [none])
        counts = np.concatenate([s.counts[name] for s in slices] or [none])
        order = np.argsort(keys, kind="stable")
        keys, counts = _runs(keys[order], counts[order])
        extra = list(odd.values())
        groups = np.concatenate([keys >> packed.value_bits, np.array(
            [-1 if row[0] is None else row[0] for row in extra], "int64")])
        values = np.concatenate([keys & mask, np.array(
            [0 if row[1 + i] is None else row[1 + i] for row in extra], "int64")])
        columns[name] = (groups, values, np.concatenate([counts, np.ones(len(extra), "int64")]))
    return _Read(columns, slices, odd)


def _rows_by_rowid(db: Database, packed: Packed, rowids: np.ndarray) -> dict[int, tuple]:
    """rowid -> (group, values...) of the rows that did not pack, read by rowid."""
    out: dict[int, tuple] = {}
    values = ", ".join(v for _, v in packed.values)
    ids = sorted(set(rowids.tolist()))
    for i in range(0, len(ids), ROWID_BATCH):
        for rowid, *row in db.rows(
                f"SELECT rowid, {packed.group}, {values} FROM {packed.table} "
                f"WHERE rowid IN ({sql_list(ids[i:i + ROWID_BATCH])})"):
            out[int(rowid)] = tuple(row)
    return out


def _names(db: Database, read: _Read, api: bool) -> Callable[[int], str]:
    """The name of each group id (a StringIds id): CUDA API names without their version
    suffix (cuda_api.base_name), so that versions of one call add up."""
    import numpy as np

    from .cuda_api import base_name

    ids = np.unique(np.concatenate([g for g, _, _ in read.columns.values()])).tolist()
    known = [i for i in ids if i >= 0]
    strings: dict[int, str] = {}
    for i in range(0, len(known), 900):  # SQLite's default limit of bound parameters: 999
        part = known[i:i + 900]
        strings.update(db.rows(f"SELECT id, value FROM StringIds WHERE id IN "
                               f"({','.join('?' * len(part))})", part))

    def name(group: int) -> str:
        if group < 0:
            return "<no name>"
        text = strings.get(group)
        if text is None:
            return f"<unknown string {group}>"
        return base_name(str(text)) if api else str(text)

    return name


def _copy_label(kind: int) -> str:
    from .cuda_api import COPY_KINDS

    return f"memcpy {COPY_KINDS.get(kind, 'unknown')}"


def _memset_label(_: int) -> str:
    return "memset"


def _statistics(groups: np.ndarray, values: np.ndarray, counts: np.ndarray,
                label: Callable[[int], str]) -> pd.DataFrame:
    """Per label of the group ids (several ids may share one): count, total, mean, median
    (pandas' rule: the mean of the two middle values of an even count), least, greatest and
    sample standard deviation (0 for one value) of the values, each occurring `counts`
    times; indexed by label, heaviest first (then by label)."""
    import numpy as np
    import pandas as pd

    ids, inverse = np.unique(groups, return_inverse=True)
    labels = [label(int(i)) for i in ids]
    codes, names = pd.factorize(pd.Index(labels, dtype="object"), sort=True)
    code = codes[inverse]
    order = np.lexsort((values, code))
    code, values, counts = code[order], values[order], counts[order]
    first = np.flatnonzero(np.concatenate([[True], code[1:] != code[:-1]]))
    last = np.append(first[1:], len(code)) - 1
    n = np.add.reduceat(counts, first)
    total = np.add.reduceat(values * counts, first)
    mean = total / n
    cumulative = np.cumsum(counts)
    before = cumulative[first] - counts[first]

    def nth(rank: np.ndarray) -> np.ndarray:  # the rank-th smallest value of each group
        return values[np.searchsorted(cumulative, before + rank, side="right")]

    median = (nth((n - 1) // 2) + nth(n // 2)) / 2
    deviation = values - np.repeat(mean, np.diff(np.append(first, len(code))))
    squares = np.add.reduceat(counts * deviation * deviation, first)
    std = np.sqrt(np.divide(squares, n - 1, out=np.zeros(len(n)), where=n > 1))
    out = pd.DataFrame({"count": n, "total": total, "mean": mean, "median": median,
                        "min": values[first], "max": values[last], "std": std},
                       index=pd.Index(np.asarray(names[code[first]], dtype=object),
                                      name="name"))
    return out


def _by_total(frame: pd.DataFrame) -> pd.DataFrame:
    """Heaviest first, then by name: nsys stats' order, ties settled."""
    frame = frame.reset_index()
    return frame.sort_values(["total_ns", frame.columns[0]], ascending=[False, True],
                             ignore_index=True)


def _call_table(column: tuple[np.ndarray, np.ndarray, np.ndarray],
                label: Callable[[int], str]) -> pd.DataFrame:
    """CALL_SUMMARY_COLUMNS from a read's durations."""
    from .report import CALL_SUMMARY_COLUMNS

    stats = _statistics(*column, label)
    stats.columns = ["calls", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns",
                     "std_ns"]
    stats["share"] = stats["total_ns"] / stats["total_ns"].sum()
    return _by_total(stats)[CALL_SUMMARY_COLUMNS]


def _memory_table(parts: list[tuple[_Read, Callable[[int], str]]]) -> pd.DataFrame:
    """MEMORY_OP_COLUMNS from the copies' and the memsets' reads."""
    import pandas as pd

    from .report import MEMORY_OP_COLUMNS

    frames = []
    for read, label in parts:
        time = _statistics(*read.columns["duration"], label)
        size = _statistics(*read.columns["bytes"], label)
        time.columns = ["count", "total_ns", "mean_ns", "median_ns", "min_ns", "max_ns",
                        "std_ns"]
        size.columns = ["count_bytes", "total_bytes", "mean_bytes", "median_bytes",
                        "min_bytes", "max_bytes", "std_bytes"]
        frames.append(time.join(size.drop(columns="count_bytes")))
    out = pd.concat(frames)
    out.index.name = "operation"
    out["share"] = out["total_ns"] / out["total_ns"].sum()
    # Bytes per second of copying: over the copies' own time, as nsys's throughput.
    out["throughput_bytes_per_s"] = out["total_bytes"] / out["total_ns"].where(
        out["total_ns"] > 0) * 1e9
    return _by_total(out)[MEMORY_OP_COLUMNS]


def _slowest(db: Database, packed: Packed, read: _Read, name: Callable[[int], str],
             threads: dict[int, str]) -> pd.DataFrame:
    """The SLOWEST_CALLS calls of greatest duration (SLOWEST_CALL_COLUMNS), slowest first,
    ties in export order. From the value counts: T, the SLOWEST_CALLS-th greatest duration,
    and how many are greater (fewer than SLOWEST_CALLS). Those are read again from the
    slices whose greatest durations exceed T; the rest, durations of T, from the first
    slices that hold T (a slice's `top` does, where it holds T at all), in rowid order:
    a replicated report holds T in thousands of slices, and each slice read again is a
    scan of up to a million rows."""
    import numpy as np
    import pandas as pd

    from .queries import ID_MASK
    from .report import SLOWEST_CALL_COLUMNS

    _, values, counts = read.columns["duration"]
    order = np.argsort(values)[::-1]
    reached = np.searchsorted(np.cumsum(counts[order]), SLOWEST_CALLS)
    threshold = int(values[order][min(reached, len(order) - 1)])
    ties = SLOWEST_CALLS - int(counts[values > threshold].sum())
    select = (f'SELECT rowid, start, "end", globalTid, {packed.group} FROM {packed.table} '
              f"WHERE {{}} AND {packed.where} AND {DURATION} {{}} {threshold} "
              f"ORDER BY {DURATION} DESC, rowid LIMIT {SLOWEST_CALLS}")
    found: dict[int, tuple] = {}
    tied: dict[int, tuple] = {}
    odd = f"rowid IN ({sql_list(read.odd)})"
    for where in [odd] if read.odd else []:
        found.update((r[0], r[1:]) for r in db.rows(select.format(where, ">")))
        tied.update((r[0], r[1:]) for r in db.rows(select.format(where, "=")))
    conditions = db.slice_conditions(packed.sql)
    for condition, part in zip(conditions, read.slices, strict=True):
        if len(part.top) and int(part.top.max()) > threshold:
            found.update((r[0], r[1:]) for r in db.rows(select.format(condition, ">")))
    from_slices = 0
    for condition, part in zip(conditions, read.slices, strict=True):
        if from_slices >= ties:
            break
        if threshold in part.top:
            rows = db.rows(select.format(condition, "="))
            tied.update((r[0], r[1:]) for r in rows)
            from_slices += len(rows)
    found.update(sorted(tied.items())[:ties])
    rows = [row for _, row in sorted(found.items(), key=lambda r: (r[1][0] - r[1][1], r[0]))][
        :SLOWEST_CALLS]
    out = pd.DataFrame({
        "name": [name(-1 if r[3] is None else int(r[3])) for r in rows],
        "start_ns": [int(r[0]) for r in rows],
        "end_ns": [int(r[1]) for r in rows],
        "duration_ns": [int(r[1] - r[0]) for r in rows],
        "pid": [-1 if r[2] is None else (int(r[2]) >> TID_BITS) & ID_MASK for r in rows],
        "tid": [-1 if r[2] is None else int(r[2]) & ID_MASK for r in rows],
        "thread_name": [threads.get(int(r[2]), "") if r[2] is not None else ""
                        for r in rows],
    })
    for c in ("start_ns", "end_ns", "duration_ns", "pid", "tid"):
        out[c] = out[c].astype("int64")
    return out[SLOWEST_CALL_COLUMNS]
