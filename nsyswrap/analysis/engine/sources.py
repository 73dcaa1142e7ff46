"""Where the engine's chunks of GPU operations come from (analyze.measure): the
export read as a stream (ExportOperations, over operations.OperationStream), or a report
loaded whole (LoadedOperations). Both give the same OpChunks: operations in GPU start
order, ties as the loader numbers them (kernels first, in their order, then the
transfers in theirs), so the engine's numbers do not depend on where they came from.

A loaded report holds every launch, so its source knows the longest launch lag and closes
each range as early as the stream would: no fallback is possible. It also keeps what the
formats that draw every operation need (the operations, as `gpu_ops`, and, when asked,
every (range, operation) pair), which the stream does not.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

import numpy as np
import pandas as pd

from ...read.chunks import ascending, compact_ids
from ...read.cuda_api import COPY_KINDS, MEMORY_KINDS
from ...read.loader import WithoutOperations, blocking_calls
from ...read.operations import (
    CHUNK_OPERATIONS,
    END_OF_TIME,
    OpChunk,
    OperationStream,
    StreamFallback,
)
from ...read.report import Report, empty
from ..gpu_ops import GPU_OPS_KERNEL_INPUT, gpu_ops, text_categorical
from ..range_search import no_pairs


class OperationSource(Protocol):
    """What the engine reads of a source, besides its chunks (iterated once)."""

    # No operation starts later than this after its launch: a range that ended this long
    # before the chunks reached is complete.
    lag_ns: int
    # Whether every (range, operation) pair is kept (take_pairs, kept).
    keeps_pairs: bool

    def __iter__(self) -> Iterator[OpChunk]: ...

    @property
    def kernels(self) -> int:
        """How many kernels the chunks held (once iterated)."""

    @property
    def operations(self) -> int:
        """How many GPU operations the chunks held (once iterated)."""

    def kernel_names(self) -> tuple[list[str], list[str]]:
        """(demangled name of each `full_name` code, short name of each `name` code)."""

    def complete(self, report: Report) -> None:
        """Once iterated: what the report still lacks (its blocking calls, its notes)."""

    def take_pairs(self, chunk: OpChunk, pairs: pd.DataFrame) -> None:
        """A chunk's (range, operation) pairs, as the attribution made them (events: the
        chunk's rows), in chunk order: kept where the source keeps them."""

    def kept(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """(the GPU operations, the pairs with events as their rows): each an empty frame
        where the source keeps none."""


class ExportOperations:
    """The export's GPU operations as the stream reads them: only the chunks in flight are
    held, nothing is kept for drawing. The stream raises StreamFallback where the report
    breaks what it assumes (operations.py)."""

    keeps_pairs = False

    def __init__(self, stream: OperationStream, rest: WithoutOperations) -> None:
        self.stream, self.rest = stream, rest
        self._names: tuple[list[str], list[str]] | None = None  # kernel_names, once read
        # The stream checks every operation's lag against its own bound.
        self.lag_ns = stream.lag_ns

    def __iter__(self) -> Iterator[OpChunk]:
        return iter(self.stream)

    @property
    def kernels(self) -> int:
        return self.stream.kernels

    @property
    def operations(self) -> int:
        return self.stream.operations

    def kernel_names(self) -> tuple[list[str], list[str]]:
        if self._names is None:
            full, short = self.stream.kernel_names()
            if len(set(full)) < len(full):
                # Two string ids with one text: their kernels' order among each other is
                # lost.
                raise StreamFallback("kernel names repeat in the string table")
            self._names = full, short
        return self._names

    def complete(self, report: Report) -> None:
        s = self.stream
        report.api_calls = blocking_calls(s.take_blocking_tables(), s.queries.runtime)
        # Read before the report's notes are made: they count the names that were not
        # UTF-8 (loader.WithoutOperations.complete), and these are the stream's last.
        self.kernel_names()
        self.rest.complete(report, s.notes, s.last_call_ns, s.operations, s.pids)

    def take_pairs(self, chunk: OpChunk, pairs: pd.DataFrame) -> None:
        pass

    def kept(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        gpu_ops = empty(("start_ns", "end_ns", "thread", "launch_start_ns", "device_id",
                         "stream_id", "bytes", "kind", "name", "copy_kind", "src_kind",
                         "dst_kind"))
        return gpu_ops, no_pairs("other_thread", "innermost")


class LoadedOperations:
    """A loaded report's GPU operations (analysis/gpu_ops.py: kernels, then transfers) as the
    engine's chunks, CHUNK_OPERATIONS at a time, each cut between two distinct starts.
    `keep_pairs`: keep every (range, operation) pair for the formats that draw them.
    `consume`: the report's kernel and transfer columns are dropped once copied."""

    def __init__(self, report: Report, *, keep_pairs: bool = True, consume: bool = False,
                 chunk_operations: int = CHUNK_OPERATIONS) -> None:
        kernels = report.kernels
        self.kernels = len(kernels)
        full = text_categorical(kernels["name"])
        self.full_names = [str(n) for n in full.categories]
        full_codes = full.codes.astype(np.int32)
        del full
        if consume:
            report.kernels = kernels[GPU_OPS_KERNEL_INPUT]
        del kernels
        self.ops = gpu_ops(report, consume)
        if consume:
            report.kernels = report.kernels.iloc[:0].copy()  # a slice would keep the buffers
            report.transfers = report.transfers.iloc[:0].copy()
        ops = self.ops
        self.operations = len(ops)
        self.enums = {c: _enum_ids(ops[c], kinds) for c, kinds in (
            ("copy_kind", COPY_KINDS), ("src_kind", MEMORY_KINDS), ("dst_kind", MEMORY_KINDS))}
        self.short_names = [str(n) for n in ops["name"].cat.categories]
        start = ops["start_ns"].to_numpy()
        # In start order, ties by row: the stream's order (kernels, then transfers).
        self.order = None if ascending(start) else compact_ids(np.argsort(start, kind="stable"))
        # The frame's columns as the chunks take them, gathered once.
        thread = ops["thread"].array
        self.arrays = {
            "start_ns": start, "end_ns": ops["end_ns"].to_numpy(),
            # OP_KINDS' order is the stream's (KERNEL, MEMCPY, ...).
            "source": ops["kind"].cat.codes.to_numpy().astype(np.int8),
            "launch_start_ns": ops["launch_start_ns"].to_numpy(),
            "thread_code": thread.codes, "device_id": ops["device_id"].to_numpy(),
            "stream_id": ops["stream_id"].to_numpy(), "bytes": ops["bytes"].to_numpy(),
            "name": ops["name"].cat.codes.to_numpy(),
        }
        self.threads = np.asarray(thread.categories, dtype="int64")
        self.full_codes = full_codes
        launch = self.arrays["launch_start_ns"]
        known = launch >= 0
        # The longest lag in the report: ranges close as soon as no later operation can be
        # theirs, and none can arrive for a closed one.
        self.lag_ns = max(int((start[known] - launch[known]).max()), 0) if known.any() else 0
        del known
        self.chunk_operations = max(1, chunk_operations)
        self.keeps_pairs = keep_pairs
        self.pair_parts: list[dict[str, np.ndarray]] = []

    def __iter__(self) -> Iterator[OpChunk]:
        n, order = self.operations, self.order
        start = self.arrays["start_ns"]
        in_order = start if order is None else start[order]
        lo = 0
        while lo < n:
            hi = min(lo + self.chunk_operations, n)
            if hi < n:
                # Cut before the first operation of hi's start, or after its last where
                # every operation from lo on shares it.
                cut = int(np.searchsorted(in_order, in_order[hi], side="left"))
                hi = cut if cut > lo else int(np.searchsorted(in_order, in_order[hi],
                                                              side="right"))
            rows = np.arange(lo, hi) if order is None else order[lo:hi]
            chunk = OpChunk(self._columns(slice(lo, hi) if order is None else rows, rows),
                            int(in_order[hi]) if hi < n else END_OF_TIME)
            chunk.rows = rows
            yield chunk
            lo = hi

    def _columns(self, at: slice | np.ndarray, rows: np.ndarray) -> dict[str, np.ndarray]:
        """OpChunk's columns (operations.OpChunk) of the gpu_ops rows `rows` (`at`:
        the same rows, as a slice where they are consecutive)."""
        a, k = self.arrays, self.kernels
        kernel = rows < k
        name = np.full(len(rows), -1, np.int32)
        name[kernel] = a["name"][at][kernel]
        full_name = np.full(len(rows), -1, np.int32)
        full_name[kernel] = self.full_codes[rows[kernel]]
        columns = {c: a[c][at] for c in ("start_ns", "end_ns", "source", "launch_start_ns",
                                         "device_id", "stream_id", "bytes")}
        columns.update({c: values[at] for c, values in self.enums.items()})
        # Each one's place among its own: the kernels, and the transfers.
        columns["index"] = np.where(kernel, rows, rows - k)
        columns["thread"] = self.threads[a["thread_code"][at]]
        columns["name"], columns["full_name"] = name, full_name
        return columns

    def kernel_names(self) -> tuple[list[str], list[str]]:
        return self.full_names, self.short_names

    def launches(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every operation's launching thread, launch time (-1 unknown) and stream."""
        a = self.arrays
        return (self.threads[a["thread_code"]], a["launch_start_ns"],
                a["stream_id"].astype("int64"))

    def complete(self, report: Report) -> None:
        pass

    def take_pairs(self, chunk: OpChunk, pairs: pd.DataFrame) -> None:
        if self.keeps_pairs and pairs is not None and len(pairs):
            columns = {c: pairs[c].to_numpy() for c in pairs.columns}
            columns["event"] = chunk.rows[columns["event"]]
            self.pair_parts.append(columns)

    def kept(self) -> tuple[pd.DataFrame, pd.DataFrame]:
        """gpu_ops, and the pairs sorted by event as the attribution sorts them (each
        chunk's are, and an operation's pairs are all in its chunk): a stable sort by
        event of the chunks' pairs in turn."""
        parts, self.pair_parts = self.pair_parts, []
        if not self.keeps_pairs or not parts:
            return self.ops, no_pairs("other_thread", "innermost")
        columns = {}
        for c in list(parts[0]):
            columns[c] = np.concatenate([p.pop(c) for p in parts])
        order = np.argsort(columns["event"], kind="stable")
        pairs = pd.DataFrame({c: columns.pop(c)[order] for c in list(columns)}, copy=False)
        return self.ops, pairs


def _enum_ids(texts: pd.Series, names: dict[int, str]) -> np.ndarray:
    """CUPTI enum values of text as loader.kind_names wrote them ("" for none: -1;
    "unknown" for values past the enum: a value past it), per row."""
    cat = text_categorical(texts)
    ids = {v: k for k, v in names.items()}
    past = max(names) + 1
    table = np.array([-1 if t == "" else ids.get(t, past) for t in cat.categories] + [-1],
                     dtype=np.int8)
    return table[cat.codes]
