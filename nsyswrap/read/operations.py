"""An export's GPU operations as a stream: chunks in GPU start order, each operation joined
to the runtime call that launched it, with only a few reader slices in memory at a time.

`loader.load` holds every kernel, copy and launch at once (10 M kernels: ~550 MB of
kernels and ~190 MB of launches while they are joined). The analysis engine
(analysis/engine/) needs each operation once, in GPU start order, with its launch's
start and thread: this module reads the kernel, memcpy, memset and graph tables slice by
slice (database.Database.stream), merges them by start, and joins each chunk to a window
of the runtime calls read so far.

It relies on what nsys's exporter does and checks it as it reads (docs/nsys-quirks.md,
"Export order"): every activity table, and the runtime calls, come in start order. Where a
check fails, or a launch is not where the window says it must be, it raises
StreamFallback, and the caller loads the report whole (loader.load), whose operations
the engine reads in start order however they were exported: the results are the same
either way, only the memory differs.

Each chunk's operations are ordered as the loader numbers them (its `gpu_ops` rows) among
equal starts: kernels first, in export order, then copies, memsets and graphs, so that
anything that breaks ties by row does the same from either source.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .database import Database
from .launches import (
    device_ids,
    full_name_ids,
    launch_pids,
    launch_rows,
    short_name_ids,
    sorted_launches,
    stream_ids,
    string_labels,
    strings_of,
)
from .queries import RUNTIME_TABLE, BulkQueries, RuntimeSlice, numpy_columns
from .report import BROKEN_TIMES, broken_times

# Where each operation comes from, as its `kind` (gpu_ops.OP_KINDS' order) and the order of
# ties among equal starts (the loader stacks kernels before the transfers, and the
# transfers' tables in this order before its stable sort by start).
KERNEL, MEMCPY, MEMSET, GRAPH = 0, 1, 2, 3
SOURCE_KINDS = {"memcpy": MEMCPY, "memset": MEMSET, "graph": GRAPH}

# Operations per chunk, about: a chunk's attribution holds some ten arrays of its pairs
# (about two per operation), and a few chunks are in flight at once (read, prepared,
# applied), which makes the chunks in flight much of the stream's peak: 10 M kernels,
# 2 cores, 64 k held ~45 MB less than 128 k in about the same time (docs/performance.md,
# "The analysis engine").
CHUNK_OPERATIONS = 1 << 16

# The latest an operation may start after the call that launched it, in the stream's
# bookkeeping: launches are kept this long behind the operations read (to join them), and
# a range is complete once the operations read start this long after its end. Measured
# lags are 4 us to 44 ms (the fixtures: the deepest launch queues of a DDP job); an
# operation that starts later than this raises StreamFallback, so a longer queue costs
# memory (the report loaded whole), never a wrong number.
LAUNCH_LAG_NS = 10_000_000_000

# Queries of the runtime table by correlation id (a scan of the whole table each) for
# launches the window does not hold, before the stream gives up (StreamFallback): the
# loader's whole join makes one.
MAX_LAUNCH_LOOKUPS = 2

# Slices read ahead of the one in use, per table (the runtime calls: twice as many): the
# reader threads must never wait for the analysis to take a slice, or a core idles. With
# 128 k-row slices and 64 k-operation chunks two are enough: four (and eight) held ~25 MB
# more and were no quicker (10 M kernels, 2 cores; docs/performance.md).
READ_AHEAD = 2

# The last moment: no operation starts there, so every row before it is final.
END_OF_TIME = 2**63 - 1

class StreamFallback(Exception):
    """The report cannot be streamed as it is (its tables out of start order, operations
    that started long after their launch...): analyse it whole. The message says why."""


@dataclass
class OpChunk:
    """Operations with starts in [its first, the next chunk's first), in GPU start order,
    ties as the loader numbers them (see the module docstring). Columns (numpy):
    start_ns, end_ns; source (KERNEL, MEMCPY, MEMSET, GRAPH: also the operation's kind)
    and index (its place among its source's operations, broken timestamps left out);
    launch_start_ns and thread (-1 where its launching call is not in the report);
    device_id, stream_id, pid; name (kernels: their (short, demangled) name pair's code,
    FirstSeenCodes) and full_name (the demangled name's), -1 for the others; bytes;
    copy_kind, src_kind, dst_kind (CUPTI's enum values for memcpys, -1 for the others)."""

    columns: dict[str, np.ndarray]
    # Every later chunk's operations start at or after this (END_OF_TIME after the last).
    until_ns: int = END_OF_TIME
    # Each operation's row of a loaded report's gpu_ops (engine/sources.LoadedOperations);
    # None in a stream, which keeps no such rows.
    rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.columns["start_ns"])

    def __getitem__(self, column: str) -> np.ndarray:
        return self.columns[column]


class FirstSeenCodes:
    """Integer ids numbered in order of first appearance, growing as batches arrive (kernel
    name ids slice by slice; the streams of the engine's pairs)."""

    def __init__(self) -> None:
        self.ids = pd.Index(np.zeros(0, "int64"))

    def __call__(self, ids: np.ndarray) -> np.ndarray:
        codes = self.ids.get_indexer(ids)
        new = codes < 0
        if new.any():
            self.ids = self.ids.append(pd.Index(pd.unique(ids[new])))
            codes[new] = self.ids.get_indexer(ids[new])
        return codes.astype(np.int32)


@dataclass
class _Source:
    """One table's operations in start order, a reader slice at a time: the rows read and
    not yet handed out."""

    code: int
    blocks: Iterator[dict[str, np.ndarray]]
    names: FirstSeenCodes | None = None  # kernels only: (short, demangled) name pairs
    full_names: FirstSeenCodes | None = None  # and demangled names
    buffer: dict[str, np.ndarray] | None = None
    done: bool = False
    read: int = 0  # operations kept so far (their index)
    reversed: int = 0  # left out for ending before they start
    last_start: int = -(2**63)
    pids: set[int] = field(default_factory=set)

    def rows(self) -> int:
        return 0 if self.buffer is None else len(self.buffer["start_ns"])

    def fill(self) -> None:
        """Read the next slice onto the buffer (or mark the source done)."""
        block = next(self.blocks, None)
        if block is None:
            self.done = True
            return
        block = self._normalized(block)
        if self.buffer is None or self.rows() == 0:
            self.buffer = block
        else:
            self.buffer = {c: np.concatenate([self.buffer[c], block[c]]) for c in block}

    def _normalized(self, block: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        start, end = block.pop("start_ns"), block.pop("end_ns")
        if len(start):
            if start[0] < self.last_start or not np.all(start[1:] >= start[:-1]):
                raise StreamFallback("GPU operations not exported in start order")
            self.last_start = int(start[-1])
        keep = ~broken_times(start, end)  # left out, as the loader does (_drop_reversed)
        kept = int(keep.sum())
        self.reversed += len(start) - kept
        every = kept == len(start)

        def col(values: np.ndarray) -> np.ndarray:
            return values if every else values[keep]

        out = {"start_ns": col(start), "end_ns": col(end)}
        launch_key = col(block.pop("launch_key"))
        out["launch_key"] = launch_key
        pid = launch_pids(launch_key)
        self.pids.update(pd.unique(pid).tolist())
        out["pid"] = pid
        if self.code == KERNEL:
            device_stream = col(block.pop("device_stream"))
            out["device_id"] = device_ids(device_stream)
            out["stream_id"] = stream_ids(device_stream)
            ids = col(block.pop("name_ids"))
            # The (short, demangled) name pair's code, and the demangled name's (the kernel
            # table's key), resolved to text at the end (kernel_names).
            out["name"] = self.names(ids)
            out["full_name"] = self.full_names(full_name_ids(ids))
            out["bytes"] = np.zeros(kept, "int64")
            for c in ("copy_kind", "src_kind", "dst_kind"):
                out[c] = np.full(kept, -1, np.int8)
        else:
            out["device_id"] = col(block.pop("device_id"))
            out["stream_id"] = col(block.pop("stream_id"))
            out["name"] = np.full(kept, -1, np.int32)
            out["full_name"] = out["name"]
            out["bytes"] = col(block.pop("bytes"))
            for c, raw in (("copy_kind", "copy_kind_id"), ("src_kind", "src_id"),
                           ("dst_kind", "dst_id")):
                values = block.pop(raw, None)
                out[c] = (np.full(kept, -1, np.int8) if values is None
                          else col(values).astype(np.int8))
        out["source"] = np.full(kept, self.code, np.int8)
        out["index"] = np.arange(self.read, self.read + kept, dtype="int64")
        self.read += kept
        return out

    def peek(self, before: int, limit: int) -> tuple[dict[str, np.ndarray] | None, int | None]:
        """(views of the first buffered rows that start before `before`, at most `limit` of
        them; the start of the first such row left out by the limit, else None)."""
        if self.rows() == 0:
            return None, None
        k = int(np.searchsorted(self.buffer["start_ns"], before, side="left"))
        beyond = int(self.buffer["start_ns"][limit]) if k > limit else None
        k = min(k, limit)
        return ({c: v[:k] for c, v in self.buffer.items()} if k else None), beyond

    def drop(self, before: int) -> None:
        """Drop the buffered rows that start before `before` (handed out)."""
        if self.rows():
            k = int(np.searchsorted(self.buffer["start_ns"], before, side="left"))
            self.buffer = {c: v[k:] for c, v in self.buffer.items()}


def _kept_compressed(table):
    """A slice's blocking calls (a pyarrow table of integer columns) as its columns
    compressed (compressed.py): held until the stream ends, ~30 MB of Arrow
    buffers at 10 M kernels. A table with nulls or other types stays as it is."""
    import pyarrow as pa

    from .compressed import compressed

    if any(c.null_count or not pa.types.is_integer(c.type) for c in table.columns):
        return table
    return {name: compressed(table.column(name).to_numpy()) for name in table.column_names}


def _table_of(kept):
    """The pyarrow table _kept_compressed kept."""
    import pyarrow as pa

    from .compressed import decompressed

    if not isinstance(kept, dict):
        return kept
    return pa.table({name: decompressed(c) for name, c in kept.items()})


@dataclass
class _LaunchWindow:
    """The runtime calls read so far that operations still to come may have been launched
    by: a few reader slices (queries.RuntimeSlice: each one's launches sorted by launch
    key), in start order, and the blocking calls of every slice read."""

    slices: Iterator[RuntimeSlice] | None
    window: deque = field(default_factory=deque)
    blocking: list = field(default_factory=list)  # pyarrow tables
    done: bool = False
    last_start: int | None = None  # of every call read so far (they ascend)

    def read_until(self, time_ns: int) -> None:
        """Read slices until one holds a call that started after `time_ns` (or none are
        left): every launch of an operation that started by then is read."""
        while not self.done and (self.last_start is None or self.last_start <= time_ns):
            self._next()

    def drain(self) -> None:
        while not self.done:
            self._next()
        self.window.clear()

    def _next(self) -> None:
        part = next(self.slices, None) if self.slices is not None else None
        if part is None:
            self.done = True
            return
        self.blocking.append(_kept_compressed(part.blocking))
        part.blocking = None
        if part.span is None:
            return
        first, last, ascending = part.span
        if not ascending or (self.last_start is not None and first < self.last_start):
            raise StreamFallback("runtime calls not exported in start order")
        self.last_start = last
        launches = part.launches
        launches["threads"] = launches["threads"][launches.pop("thread_code")]  # the ids
        launches["thread"] = launches.pop("threads")
        launches["last_start"] = last
        self.window.append(launches)

    def forget_before(self, time_ns: int) -> None:
        """Drop the slices whose calls all started before `time_ns`."""
        while self.window and self.window[0]["last_start"] < time_ns:
            self.window.popleft()

    def lookup(self, key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(launch start, thread) for each key, -1 where the window has none; the first
        call in export order where several share a key (as the loader's stable sort)."""
        start = np.full(len(key), -1, "int64")
        thread = np.full(len(key), -1, "int64")
        todo = np.arange(len(key))
        for launches in self.window:
            if len(todo) == 0:
                break
            keys = launches["launch_key"]
            if len(keys) == 0:
                continue
            probe = key[todo]
            i = np.minimum(np.searchsorted(keys, probe), len(keys) - 1)
            found = keys[i] == probe
            start[todo[found]] = launches["start_ns"][i[found]]
            thread[todo[found]] = launches["thread"][i[found]]
            todo = todo[~found]
        return start, thread


class OperationStream:
    """The report's GPU operations as OpChunks (iterate once), read from `db` with the
    queries open_report wrote (opened with stream_operations=True). Once iterated:
    `operations` and the notes of left-out rows (`notes`), `last_call_ns`, `pids`, the
    blocking calls (`take_blocking_tables`) and the kernels' names (`kernel_names`)."""

    def __init__(self, db: Database, queries: BulkQueries,
                 chunk_operations: int = CHUNK_OPERATIONS, lag_ns: int = LAUNCH_LAG_NS,
                 ahead: int = READ_AHEAD) -> None:
        self.db, self.queries = db, queries
        self.chunk_operations = max(1, chunk_operations)
        self.lag_ns = lag_ns
        self.names, self.full_names = FirstSeenCodes(), FirstSeenCodes()
        self.sources: list[_Source] = []
        if queries.kernels is not None:
            self.sources.append(_Source(KERNEL, db.stream(queries.kernels, numpy_columns,
                                                          ahead), self.names, self.full_names))
        for op, sql in queries.transfers.items():
            self.sources.append(_Source(SOURCE_KINDS[op], db.stream(sql, numpy_columns, 1)))
        reducers = queries.reducers()
        calls = queries.runtime.calls_sql
        # The runtime calls twice as far ahead: several per operation are scanned, and
        # what a reader keeps of a slice (its launches) is a few MB.
        self.launches = _LaunchWindow(db.stream(calls, reducers[calls], 2 * ahead)
                                      if calls is not None else None)
        self.lookups = 0
        self.operations = 0

    def __iter__(self) -> Iterator[OpChunk]:
        target = self.chunk_operations
        while True:
            for s in self.sources:
                while not s.done and s.rows() == 0:
                    s.fill()
            if all(s.rows() == 0 for s in self.sources):
                break
            waiting = [s for s in self.sources if not s.done]
            # Every row still to be read starts at or after its source's last buffered
            # start: the rows before the least of those are final in start order.
            cut = min((int(s.buffer["start_ns"][-1]) for s in waiting), default=END_OF_TIME)
            ready = sum(int(np.searchsorted(s.buffer["start_ns"], cut)) for s in self.sources
                        if s.rows())
            if waiting and ready < target:
                # A fuller chunk, or a cut that moves: more of the source that holds it back.
                min(waiting, key=lambda s: int(s.buffer["start_ns"][-1])).fill()
                continue
            yield self._merged(cut, target)
        # The last slices read stay referenced by the buffers' empty views (~40 MB at
        # 10 M kernels, under the analysis's end).
        for s in self.sources:
            s.buffer = None
        self.launches.drain()

    def _merged(self, cut: int, target: int) -> OpChunk:
        """The next chunk: the buffered rows that start before `cut`, about `target` of them
        (more where one start holds more), cut between two distinct starts."""
        limit = target
        while True:
            peeks = [s.peek(cut, limit) for s in self.sources]
            parts = [p for p, _ in peeks if p is not None]
            # Sources in their order (kernels, copies, memsets, graphs), each in start and
            # index order: a stable sort by start gives the loader's order among ties.
            columns = {c: np.concatenate([p[c] for p in parts]) if len(parts) > 1
                       else parts[0][c] for c in parts[0]}
            order = np.argsort(columns["start_ns"], kind="stable")
            start = columns["start_ns"][order]
            edge = cut
            if len(order) > target:
                edge = int(start[target])
            # Rows a source's limit left out start no earlier than its first one left out.
            edge = min([edge] + [b for _, b in peeks if b is not None])
            end = int(np.searchsorted(start, edge, side="left"))
            if end > 0:
                break
            limit *= 2  # every row at hand shares one start: take more
        for s in self.sources:
            s.drop(edge)
        chunk = self._joined({c: v[order[:end]] for c, v in columns.items()})
        chunk.until_ns = edge
        return chunk

    def _joined(self, columns: dict[str, np.ndarray]) -> OpChunk:
        """The chunk with each operation's launch (start, thread; -1 where the report has
        none), from the window of runtime calls or, for the few it lacks, the runtime
        table itself."""
        start = columns["start_ns"]
        key = columns.pop("launch_key")
        window = self.launches
        window.read_until(int(start[-1]))
        window.forget_before(int(start[0]) - self.lag_ns)
        launch, thread = window.lookup(key)
        missing = launch < 0
        if missing.any() and RUNTIME_TABLE in self.db.tables:
            self.lookups += 1
            if self.lookups > MAX_LAUNCH_LOOKUPS:
                raise StreamFallback("launching calls missing from the stream's window")
            found = self._looked_up(key[missing])
            at = np.flatnonzero(missing)
            launch[at], thread[at] = found
        known = launch >= 0
        if known.any() and int((start[known] - launch[known]).max()) > self.lag_ns:
            raise StreamFallback("an operation started long after its launch")
        columns["launch_start_ns"] = launch
        columns["thread"] = thread
        self.operations += len(start)
        return OpChunk(columns)

    def _looked_up(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(start, thread) of the calls with these launch keys, looked up in the runtime
        table by correlation id (launches.launch_rows, as the loader does for calls its name
        filter left out), -1 where none: the first in export order where several share a
        key."""
        start, thread, _ = sorted_launches(launch_rows(self.db, keys)).lookup(keys)
        return start, thread

    def close(self) -> None:
        """Stop the reads under way (a stream given up on)."""
        for s in self.sources:
            s.blocks.close()
        if self.launches.slices is not None:
            self.launches.slices.close()

    # What the stream found, once iterated.

    @property
    def reversed(self) -> tuple[int, int]:
        """Kernels, and other operations, left out for ending before they start."""
        kernels = sum(s.reversed for s in self.sources if s.code == KERNEL)
        return kernels, sum(s.reversed for s in self.sources if s.code != KERNEL)

    @property
    def notes(self) -> list[str]:
        """The loader's notes for the left-out operations (loader._drop_reversed)."""
        kernels, transfers = self.reversed
        return [f"{n} {what}(s) {BROKEN_TIMES}; left out"
                for n, what in ((kernels, "kernel"), (transfers, "copy or memset")) if n]

    @property
    def kernels(self) -> int:
        return sum(s.read for s in self.sources if s.code == KERNEL)

    @property
    def pids(self) -> set[int]:
        return set().union(*(s.pids for s in self.sources))

    @property
    def last_call_ns(self) -> int | None:
        return self.launches.last_start

    def take_blocking_tables(self) -> list:
        """The blocking calls' tables (pyarrow), handed over once: the stream lets go of
        them (~30 MB at 10 M kernels, held past the analysis otherwise)."""
        kept, self.launches.blocking = self.launches.blocking, []
        return [_table_of(k) for k in kept]

    def kernel_names(self) -> tuple[list[str], list[str]]:
        """(the demangled name of each `full_name` code, the short name of each `name` code)
        of OpChunk's kernels, as the loader names them (loader._kernels)."""
        short_ids = short_name_ids(self.names.ids.to_numpy(dtype="int64"))
        full_ids = self.full_names.ids.to_numpy(dtype="int64")
        strings = strings_of(self.db, np.concatenate([short_ids, full_ids]))
        return string_labels(full_ids, strings), string_labels(short_ids, strings)
