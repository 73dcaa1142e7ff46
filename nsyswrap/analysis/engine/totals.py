"""Every per-range number of the instance columns (columns.py), added up a chunk of
operations at a time.

Chunks come in GPU start order (sources.py), so each range's union sweep
goes on from the horizon its earlier intervals reached (union.union_sorted's `prior`),
its first operation is the first one seen, and counts, sums, least and greatest values add
up. What does not add up (each range's median launch latency, its distinct streams) is
kept per range until the range can receive no more operations: every operation starts
within the source's lag of its launch (the stream checks LAUNCH_LAG_NS; a loaded report
knows its longest), so a range that ended that long before the chunks reached is
complete. Device busy time is answered as the stream passes
each window's edges (union.DeviceBusy).

The numbers are kept only for the ranges open now (Slots: one slot per range from the
moment the stream passes its start until it closes), GPU numbers as float64 from the start
(the instance columns' type: integers below 2**53 add exactly), starting from each
column's value for a range without work (columns.py). Closed ranges' instance columns are
packed a batch at a time (instance_table.pack) and put together, a column at a time, at
the end (`instance_columns`): at 10 M kernels every range's running numbers as float64 would be
~180 MB of the stream's peak (docs/performance.md, "The analysis engine").
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd

from ...common.memory import trim_heap
from ...read.chunks import compact_ids, ids_are_rows
from ...read.compressed import CompressedSequence, compressed, decompressed
from ...read.cuda_api import COPY_KINDS, PAGEABLE
from ...read.operations import END_OF_TIME, KERNEL, MEMCPY, FirstSeenCodes, OpChunk, StreamFallback
from ..attribution import HOST_COPY_KINDS, Attributor, innermost_of
from ..columns import COLUMNS, RELATIVE_TO
from ..grouped import grouped_median, rows_of_runs
from ..instance_table import pack, unpack
from ..summary import work_per_thread
from ..union import DeviceBusy, merge_intervals, union_sorted
from .open_values import OpenValues, PooledCounts
from .slots import Slots

# CUPTI's memcpy kinds that copy between host and device.
HOST_COPY_IDS = np.array(sorted(k for k, v in COPY_KINDS.items() if v in HOST_COPY_KINDS))

# Ranges that have closed, packed together (each column's packing has a fixed cost; a batch
# of 16 k ranges packs to ~1 MB).
CLOSE_BATCH = 1 << 14

# slot_of: a range the stream has not reached yet, and one whose numbers are packed.
UNOPENED, CLOSED = -1, -2

# Each running number per open range: its dtype and its value before any work (NaN: not
# seen yet). The GPU numbers are float64 as the instance columns are.
ACCUMULATORS = {
    "row": ("int64", -1),  # the range in the slot (-1: a free slot)
    "gpu_ops": ("float64", 0.0), "busy": ("float64", 0.0), "gaps": ("float64", 0.0),
    "max_gap": ("float64", 0.0), "first_start": ("float64", np.nan),
    "last_end": ("float64", np.nan), "kernels": ("float64", 0.0),
    "first_launch": ("float64", np.nan), "first_device": ("int64", -1),
    "latency": ("float64", np.nan), "streams": ("float64", 0.0),
    # Device busy before the first start and the last end of the range's GPU work.
    "busy_at_first": ("float64", np.nan), "busy_at_last": ("float64", np.nan),
    # Host copies inside each range (nested included).
    "copies": ("int64", 0), "copy_bytes": ("int64", 0), "copy_ns": ("int64", 0),
    "pageable_copies": ("int64", 0),
}
# The process rule's: the range's own thread's work alone.
OWN_ACCUMULATORS = {"own_busy": ("float64", 0.0), "own_last_end": ("float64", np.nan)}
# Busy time of each device in the range's CPU window (key: ("cpu_busy", device)).
CPU_BUSY = ("float64", 0.0)

# The instance columns the closed ranges' batches hold, and their types (columns.py).
CLOSED_COLUMNS = {c.name: c.dtype for c in COLUMNS if c.made_from in ("gpu", "copies")}
COPY_COLUMNS = [c.name for c in COLUMNS if c.made_from == "copies"]


class RangeTotals:
    """The per-range accumulators of one report's analysis (the engine's)."""

    def __init__(self, ranges: pd.DataFrame, attributor: Attributor, group_of_row: np.ndarray,
                 lag_ns: int) -> None:
        n = self.n = len(ranges)
        self.attributor, self.lag_ns = attributor, lag_ns
        ids = ranges["range_id"].to_numpy(dtype="int64")
        # Each range id's row; None where the ids are the rows (the loader's numbering).
        self.row_of_id = None
        if not ids_are_rows(ids):
            self.row_of_id = np.full(int(ids.max()) + 1 if n else 0, -1, dtype=np.int64)
            self.row_of_id[ids] = np.arange(n)
        self.range_start = ranges["start_ns"].to_numpy(dtype="int64")
        self.range_end = ranges["end_ns"].to_numpy(dtype="int64")
        self.group_of_row = group_of_row
        # The running numbers of the open ranges, by slot (slot_of: each row's slot, or
        # UNOPENED, CLOSED).
        self.slot_of = np.full(n, UNOPENED, dtype=np.int32 if n < 2**31 else np.int64)
        self.slots = Slots(ACCUMULATORS | (OWN_ACCUMULATORS if attributor.rule == "process"
                                            else {}))
        self.has_own = attributor.rule == "process"
        self.other_thread_pairs = False
        # Device busy: before the first start and the last end of each range's GPU work,
        # and in its CPU window on each device (the range's device is its first
        # operation's, which may come after the window has passed).
        self.device = DeviceBusy()
        # The CPU windows' starts in time order (rows, and their moments; the ranges' own
        # column where they come in start order), made once: a chunk opens the ranges its
        # starts reach, and answers their device busy time there. Their ends are found
        # among the open ranges (the slots' rows), as are the ranges that close: no
        # range-sized order of the ends is kept (13 MB at 1.2 M ranges).
        start = self.range_start
        order = None if np.all(start[1:] >= start[:-1]) else compact_ids(
            np.argsort(start, kind="stable"))
        self.starts = (order, start if order is None else start[order])
        self.opened = 0  # how far the starts are taken
        self.pending_last = np.zeros(0, dtype=np.int64)  # rows whose last end waits
        # The closed ranges: (rows, their instance columns packed), a batch at a time, each
        # packed by `packer` (a future until instance_columns).
        self.closed: list[tuple[np.ndarray, Future | dict]] = []
        self.packer = ThreadPoolExecutor(max_workers=1)
        self.open_latency = OpenValues()
        self.open_streams = OpenValues()
        self.pooled = PooledCounts()
        self.stream_codes = FirstSeenCodes()  # (device, stream) pairs, numbered
        # Per launching thread: operations, kernels, kernel time, devices (work_per_thread's
        # columns, added up); and the operations that went to other threads' ranges (count,
        # first operation's place).
        self.threads: dict[int, list] = {}
        self.taken: dict[int, list[int]] = {}
        # The kernel summary's input (by demangled name code: durations, first name pair)
        # and the host copies, as chunks.
        self.kernel_durations: dict[int, CompressedSequence] = {}
        self.kernel_first_pair: dict[int, int] = {}
        self.copy_parts: list[dict[str, np.ndarray]] = []
        self.transfers_seen = 0
        self.lower = -END_OF_TIME
        self.untrimmed = 0  # operations applied since the heap was last trimmed

    def rows_of(self, ids: np.ndarray) -> np.ndarray:
        """The rows of range ids."""
        return ids.astype(np.int64, copy=False) if self.row_of_id is None else self.row_of_id[ids]

    # One chunk: `prepare` (on any thread, in any order: it reads no state that chunks
    # change) then `apply` (in chunk order).

    def prepare(self, chunk: OpChunk) -> dict:
        """What a chunk adds, as far as it does not depend on earlier chunks: its
        attribution, its pairs in range order and their per-range numbers as if each range
        began here, its merged intervals per device, per-thread counts, kernel durations
        per name, host copies. `apply` adds it to the totals."""
        start, end = chunk["start_ns"], chunk["end_ns"]
        launch, thread = chunk["launch_start_ns"], chunk["thread"]
        is_kernel = chunk["source"] == KERNEL
        out: dict = {"chunk": chunk}
        # The launching threads numbered once (a few ids, by hashing: sorted numbers, so
        # that they order as the ids do), for every per-thread count below.
        codes, threads = pd.factorize(thread)
        by_id = np.argsort(threads)
        threads = threads[by_id]
        codes = np.argsort(by_id)[codes]
        out["threads"] = work_per_thread(codes, pd.Index(threads, dtype="int64"), is_kernel,
                                         start, end, chunk["device_id"])
        out["kernels"] = self._kernel_inputs(chunk, is_kernel)
        # Each transfer's place among the chunk's transfers (apply adds those before).
        is_transfer = ~is_kernel
        out["transfer_rank"] = np.where(is_transfer, np.cumsum(is_transfer) - 1, -1)
        out["transfers"] = int(is_transfer.sum())
        known = np.flatnonzero(launch >= 0)
        pairs = taken = None
        if len(known) and self.n:
            launches = pd.DataFrame(
                {"thread": pd.Categorical.from_codes(codes[known], categories=pd.Index(threads)),
                 "time_ns": launch[known]}, index=pd.Index(known), copy=False)
            pairs, taken = self.attributor.op_pairs(launches)
        if taken is not None:
            taken = np.flatnonzero(taken)
            out["taken"] = (taken, codes[taken], threads)
        out["devices"] = {}  # each device's merged intervals
        for d in pd.unique(chunk["device_id"]).tolist():
            mine = chunk["device_id"] == d
            out["devices"][d] = merge_intervals(start[mine], end[mine])
        if pairs is not None and len(pairs):
            out["pairs"] = self._prepared_pairs(chunk, pairs, is_kernel)
        out["copies"] = self._prepared_copies(chunk, pairs)
        out["attributed"] = pairs  # for a source that keeps them (engine/sources.py)
        return out

    def _prepared_pairs(self, chunk: OpChunk, pairs: pd.DataFrame,
                        is_kernel: np.ndarray) -> dict:
        """A chunk's (range, operation) pairs in range order, and their numbers per range
        as if each range's work began in this chunk (apply carries on the ranges seen
        before)."""
        start, end = chunk["start_ns"], chunk["end_ns"]
        event = pairs["event"].to_numpy()
        row = self.rows_of(pairs["range_id"].to_numpy())
        other = pairs["other_thread"].to_numpy()
        # By (range, start), ties in pair order (by operation): lexsort's, as _RangeOrder.
        order = np.lexsort((start[event], row))
        row, event, other = row[order], event[order], other[order]
        del order
        heads = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        out = {"row": row, "event": event, "heads": heads, "rows": row[heads],
               "other_any": bool(other.any()),
               "union": union_sorted(row, start[event], end[event]),
               "first_device": chunk["device_id"][event[heads]]}
        if self.has_own:
            own = ~other
            out["own"] = own
            g = row[own]
            own_heads = np.flatnonzero(np.r_[True, g[1:] != g[:-1]]) if len(g) else g
            out["own_heads"], out["own_rows"] = own_heads, g[own_heads]
            out["own_union"] = union_sorted(g, start[event[own]], end[event[own]])
        kernel = is_kernel[event]
        launch = chunk["launch_start_ns"]
        out["kernels"] = np.add.reduceat(kernel.astype("int64"), heads)
        out["first_launch"] = np.minimum.reduceat(launch[event], heads)
        # Launch latencies of the kernels, and the distinct (range, stream) pairs.
        k_rows, k_events = row[kernel], event[kernel]
        out["latency"] = (self.range_end[k_rows], k_rows, start[k_events] - launch[k_events])
        stream_key = (chunk["device_id"][event].astype("int64") << 32) | chunk["stream_id"][event]
        local, keys = pd.factorize(stream_key)  # a few streams: numbered here, hashing
        distinct = pd.unique((row.astype("int64") << 32) | local)
        out["streams"] = (distinct >> 32, np.asarray(keys)[distinct & 0xFFFFFFFF])
        return out

    def _prepared_copies(self, chunk: OpChunk, pairs: pd.DataFrame | None) -> dict | None:
        """The chunk's host copies: each one's innermost range, and every (range, copy)."""
        copy = np.flatnonzero((chunk["source"] == MEMCPY)
                              & np.isin(chunk["copy_kind"], HOST_COPY_IDS))
        if len(copy) == 0:
            return None
        part = {c: chunk[c][copy] for c in ("start_ns", "end_ns", "thread", "launch_start_ns",
                                             "device_id", "stream_id", "bytes", "copy_kind",
                                             "src_kind", "dst_kind")}
        part["at"] = copy
        part["range_id"] = (innermost_of(pairs, copy) if pairs is not None
                            else np.full(len(copy), -1, dtype="int64"))
        out = {"part": part, "pairs": None}
        if pairs is not None and len(pairs):
            is_copy = np.zeros(len(chunk), dtype=bool)
            is_copy[copy] = True
            event = pairs["event"].to_numpy()
            mine = is_copy[event]
            event = event[mine]
            out["pairs"] = (
                self.rows_of(pairs["range_id"].to_numpy()[mine]), chunk["bytes"][event],
                chunk["end_ns"][event] - chunk["start_ns"][event],
                (chunk["src_kind"][event] == PAGEABLE) | (chunk["dst_kind"][event] == PAGEABLE))
        return out

    def apply(self, prepared: dict) -> None:
        """Add a prepared chunk to the totals (chunks in order)."""
        chunk = prepared["chunk"]
        starting = self._open_until(chunk.until_ns)
        transfer_rank = np.where(prepared["transfer_rank"] >= 0,
                                 prepared["transfer_rank"] + self.transfers_seen, -1)
        self.transfers_seen += prepared["transfers"]
        for t, work in zip(prepared["threads"].index.tolist(),
                           prepared["threads"].itertuples(index=False), strict=True):
            entry = self.threads.setdefault(t, [0, 0, 0, set()])
            entry[0] += work.gpu_ops
            entry[1] += work.kernels
            entry[2] += work.kernel_ns
            entry[3] |= work.devices
        for code, first_pair, durations in prepared["kernels"]:
            if code not in self.kernel_durations:
                self.kernel_durations[code] = CompressedSequence()
                self.kernel_first_pair[code] = first_pair
            self.kernel_durations[code].add(durations)
        if "taken" in prepared:
            self._other_threads(chunk, transfer_rank, *prepared["taken"])
        self.device.chunk_merged(prepared["devices"])
        if "pairs" in prepared:
            self._pairs(chunk, prepared["pairs"])
        copies = prepared["copies"]
        if copies is not None:
            part = copies.pop("part")
            part["rank"] = transfer_rank[part.pop("at")]
            # Kept compressed (~75 bytes a copy as they are: 19 MB at 10 M kernels).
            self.copy_parts.append({c: compressed(v) for c, v in part.items()})
            if copies["pairs"] is not None:
                row, nbytes, ns, pageable = copies["pairs"]
                at = self._slots(row)
                a = self.slots.arrays
                np.add.at(a["copies"], at, 1)
                np.add.at(a["copy_bytes"], at, nbytes)
                np.add.at(a["copy_ns"], at, ns)
                np.add.at(a["pageable_copies"], at, pageable)
        self._answer_device_busy(chunk.until_ns, starting)
        self._close(chunk.until_ns - self.lag_ns if chunk.until_ns < END_OF_TIME
                    else END_OF_TIME)

    def _pairs(self, chunk: OpChunk, p: dict) -> None:
        """Add a chunk's prepared pairs: the union sweep carried on from each range's
        horizon where the range was seen before, and the per-range numbers."""
        start, end = chunk["start_ns"], chunk["end_ns"]
        row, event, heads, rows = p["row"], p["event"], p["heads"], p["rows"]
        at = self._slots(rows)
        a = self.slots.arrays
        first, last = a["first_start"], a["last_end"]
        self.other_thread_pairs |= p["other_any"]
        seen = ~np.isnan(first[at])
        u = _carried_on(p["union"], row, start[event], end[event], heads, seen, last[at])
        a["gpu_ops"][at] += u["count"]
        a["busy"][at] += u["busy_ns"]
        a["gaps"][at] += u["gaps"]
        a["max_gap"][at] = np.fmax(a["max_gap"][at], u["max_gap_ns"])
        last[at] = u["last_end_ns"]
        new = ~seen
        fresh = at[new]
        first[fresh] = u["first_start_ns"][new]
        a["first_device"][fresh] = p["first_device"][new]
        a["busy_at_first"][fresh] = self._busy_before(a["first_device"][fresh],
                                                      u["first_start_ns"][new])
        # The device's busy time before each range's last end, now where the chunk's starts
        # reach it; else once they do (pending_last). A later chunk that moves the end asks
        # again, so the last answer is the last end's.
        moments = last[at].astype("int64")
        now = moments < chunk.until_ns
        a["busy_at_last"][at[now]] = self._busy_before(a["first_device"][at[now]],
                                                       moments[now])
        if not now.all():
            self.pending_last = pd.unique(np.concatenate([self.pending_last, rows[~now]]))
        if self.has_own and len(p["own_rows"]):
            own = p["own"]
            own_at = self.slot_of[p["own_rows"]]  # a subset of `rows`: open
            reached = a["own_last_end"][own_at]
            v = _carried_on(p["own_union"], row[own], start[event[own]], end[event[own]],
                            p["own_heads"], ~np.isnan(reached), reached)
            a["own_busy"][own_at] += v["busy_ns"]
            a["own_last_end"][own_at] = v["last_end_ns"]
        a["kernels"][at] += p["kernels"]
        a["first_launch"][at] = np.fmin(a["first_launch"][at], p["first_launch"])
        # Launch latencies of the kernels and the streams, kept until each range closes.
        self.open_latency.add(*p["latency"])
        d_rows, keys = p["streams"]
        self.open_streams.add(self.range_end[d_rows], d_rows, self.stream_codes(keys))

    def _open_until(self, until: int) -> tuple[np.ndarray, np.ndarray]:
        """A slot for each range that starts before `until` (and has none yet). Returns
        the slots and starts of the ranges starting since the last call, in start order:
        the CPU windows' edges that _answer_device_busy answers for the same bound."""
        order, moments = self.starts
        k = int(np.searchsorted(moments, until, side="left"))
        rows = order[self.opened:k] if order is not None else np.arange(self.opened, k)
        starts = moments[self.opened:k]
        self.opened = max(self.opened, k)
        return self._slots(rows), starts

    def _open_ends(self) -> tuple[np.ndarray, np.ndarray]:
        """The slots in use, and the ends of their ranges."""
        rows = self.slots.arrays["row"]
        at = np.flatnonzero(rows >= 0)
        return at, self.range_end[rows[at]]

    def _slots(self, rows: np.ndarray) -> np.ndarray:
        """The slots of `rows` (distinct), taken for those that have none yet. A range
        that has closed cannot take work: the stream's order would be broken."""
        at = self.slot_of[rows]
        if len(at) and int(at.min()) < 0:
            if (at == CLOSED).any():
                raise StreamFallback("operations arrived for a range already closed")
            new = rows[at == UNOPENED]
            taken = self.slots.take(len(new))
            self.slot_of[new] = taken
            self.slots.arrays["row"][taken] = new
            at = self.slot_of[rows]
        return at.astype(np.int64, copy=False)

    def _busy_before(self, devices: np.ndarray, moments: np.ndarray) -> np.ndarray:
        """B(t) on each moment's device (moments within the current chunk's bounds)."""
        out = np.zeros(len(moments))
        for d in np.unique(devices).tolist():
            at = devices == d
            out[at] = self.device.busy_before(d, moments[at])
        return out

    def _answer_device_busy(self, until: int, starting: tuple[np.ndarray, np.ndarray]
                            ) -> None:
        """The moments in [the previous chunk's bound, this one's) on every device: the
        ranges' CPU windows' edges (`starting`: _open_until's for this bound, and the ends
        of open ranges), and the last ends of their GPU work."""
        lo, hi = self.lower, until
        self.lower = until
        devices = self.device.devices
        for d in devices:
            if ("cpu_busy", d) not in self.slots.arrays:
                self.slots.add(("cpu_busy", d), *CPU_BUSY)
        a = self.slots.arrays
        at, starts = starting
        if len(at):
            for d in devices:
                a[("cpu_busy", d)][at] -= self.device.busy_before(d, starts)
        # The ends in [lo, hi): of open ranges (each opened once the stream passed its
        # start, closed only after its end was answered).
        at, ends = self._open_ends()
        now = (ends >= lo) & (ends < hi)
        if now.any():
            at, ends = at[now], ends[now]
            for d in devices:
                a[("cpu_busy", d)][at] += self.device.busy_before(d, ends)
        pending = self.pending_last
        if len(pending):
            at = self.slot_of[pending]
            moments = a["last_end"][at].astype("int64")
            now = moments < hi
            at = at[now]
            a["busy_at_last"][at] = self._busy_before(a["first_device"][at], moments[now])
            self.pending_last = pending[~now]

    def _close(self, before: int) -> None:
        """Ranges that ended before `before` receive nothing more: their median latency
        and distinct streams, and their kernels' latencies pooled per group; their numbers
        packed once a batch of them is ready."""
        a = self.slots.arrays
        rows, latency = self.open_latency.close(before)
        if len(rows):
            at = self.slot_of[rows]
            if _each_once(at, self.slots.capacity):  # one kernel each: its own latency
                a["latency"][at] = latency
            else:
                medians = grouped_median(rows, latency)
                a["latency"][self.slot_of[medians.index.to_numpy()]] = medians.to_numpy()
            self.pooled.add(self.group_of_row[rows], latency)
        rows, codes = self.open_streams.close(before)
        if len(rows):
            at = self.slot_of[rows]
            if _each_once(at, self.slots.capacity):  # one stream each
                a["streams"][at] = 1
            else:
                # Distinct (range, stream) by hashing, then how many per range: no sort
                # of every closed range's entries.
                distinct = pd.unique((rows.astype("int64") << 32) | codes) >> 32
                numbers, present = pd.factorize(distinct)
                a["streams"][self.slot_of[present]] = np.bincount(numbers,
                                                                  minlength=len(present))
        at, ends = self._open_ends()
        done = ends < before
        if int(done.sum()) < (1 if before == END_OF_TIME else CLOSE_BATCH):
            return
        rows = a["row"][at[done]]
        if len(self.pending_last):  # their last end's device busy time is still to come
            rows = rows[~np.isin(rows, self.pending_last)]
        if len(rows):
            self._pack_closed(rows)

    def _pack_closed(self, rows: np.ndarray) -> None:
        """The closed ranges' instance columns (as columns.py says for a range whose GPU
        work is known; engine._instances adds the rest), packed, and their slots given
        back."""
        at = self._slots(rows)
        a = self.slots.arrays
        first, last, busy = a["first_start"][at], a["last_end"][at], a["busy"][at]
        span = last - first
        span[np.isnan(first)] = 0
        busy_cpu = np.full(len(at), np.nan)
        device = a["first_device"][at]
        for key, values in a.items():
            if isinstance(key, tuple):
                mine = device == key[1]
                busy_cpu[mine] = values[at[mine]]
        columns = {
            "gpu_first_start_ns": first, "gpu_last_end_ns": last,
            "gpu_ops": a["gpu_ops"][at], "kernels": a["kernels"][at], "gpu_busy_ns": busy,
            "gaps": a["gaps"][at], "max_gap_ns": a["max_gap"][at],
            "launch_latency_ns": a["latency"][at], "first_launch_ns": a["first_launch"][at],
            "streams": a["streams"][at], "gpu_span_ns": span, "gpu_idle_ns": span - busy,
            "gpu_device_busy_ns": a["busy_at_last"][at] - a["busy_at_first"][at],
            "gpu_device_busy_cpu_ns": busy_cpu,
        }
        if self.has_own:
            columns["gpu_busy_other_threads_ns"] = busy - a["own_busy"][at]
        for c in COPY_COLUMNS:
            columns[c] = a[c][at]
        # Packed on a thread of its own (numpy and zlib, mostly without the GIL): the
        # chunks are applied on this one, which a range-heavy report keeps busiest.
        self.closed.append((compact_ids(rows),
                            self.packer.submit(_packed, columns, self.range_start[rows])))
        self.slots.give_back(at)
        self.slot_of[rows] = CLOSED

    def release_stream_state(self) -> None:
        """Once finished (and the pooled medians taken): drop what only the stream needed
        (the range search, the slots, the starts, the open values); what stays is the
        closed ranges' batches and the kernels', copies' and threads' totals."""
        self.attributor = self.slot_of = None
        self.slots = Slots({})
        self.starts = None
        self.pending_last = np.zeros(0, dtype=np.int64)
        self.open_latency = self.open_streams = self.pooled = None
        self.device = DeviceBusy()

    def instance_columns(self):
        """(column, its values by row of the ranges) for each of CLOSED_COLUMNS that the
        batches hold, gpu_first_start_ns first, once every range is closed (finish): each
        put together from the batches, whose parts are let go as it is."""
        n = self.n
        # The other threads' busy time only where their work went to other threads' ranges
        # (else _instances makes it from the busy time: 0 where known).
        names = [c for c in CLOSED_COLUMNS if c != "gpu_busy_other_threads_ns"
                 or (self.has_own and self.other_thread_pairs)]
        # gpu_first_start_ns first: where it is NaN, the range saw no GPU work.
        names.sort(key=lambda c: c != "gpu_first_start_ns")
        self.closed = [(rows, packed.result()) for rows, packed in self.closed]
        self.packer.shutdown()
        for c in names:
            values = np.empty(n, dtype=CLOSED_COLUMNS[c])
            for rows, packed in self.closed:
                stored = packed.pop(c)
                base = self.range_start[rows] if getattr(stored, "base", None) else None
                codes = getattr(stored, "codes", None)
                if codes is not None:
                    stored = dataclasses.replace(stored, codes=decompressed(codes))
                values[rows] = unpack(stored, len(rows), base=base)
            # The batches' codes of this column, freed, are small blocks among the heap's
            # that the next columns do not fit in: given back (~90 MB at 10 M kernels).
            trim_heap(n)
            yield c, values
        self.closed = []

    def _other_threads(self, chunk: OpChunk, transfer_rank: np.ndarray, taken: np.ndarray,
                       inverse: np.ndarray, threads: np.ndarray) -> None:
        """Per launching thread, the operations that went to other threads' ranges (`taken`,
        their threads `inverse`: places in `threads`): how many, and the first one's place
        in the loader's operation order (kernels, by index, then transfers), which breaks
        ties as value_counts does."""
        place = np.where(chunk["source"][taken] == KERNEL, chunk["index"][taken],
                         2**62 + transfer_rank[taken])
        counts = np.bincount(inverse, minlength=len(threads))
        first = np.full(len(threads), 2**63 - 1, dtype=np.int64)
        np.minimum.at(first, inverse, place)
        for t, n, f in zip(threads.tolist(), counts.tolist(), first.tolist(), strict=True):
            if n == 0:
                continue
            was = self.taken.get(t)
            self.taken[t] = [n, f] if was is None else [was[0] + n, min(was[1], f)]

    @staticmethod
    def _kernel_inputs(chunk: OpChunk, is_kernel: np.ndarray) -> list[tuple]:
        """The kernel table's input: each demangled name's durations in export order (as
        uint32 where they fit), with the name pair of its first kernel (whose short name
        the table shows): (code, first pair, durations) per name in the chunk."""
        if not is_kernel.any():
            return []
        duration = chunk["end_ns"][is_kernel] - chunk["start_ns"][is_kernel]
        if int(duration.max()) < 2**32:
            duration = duration.astype(np.uint32)
        full, pair = chunk["full_name"][is_kernel], chunk["name"][is_kernel]
        order = np.argsort(full, kind="stable")
        names, first = np.unique(full[order], return_index=True)
        bounds = np.r_[first, len(order)]
        return [(code, int(pair[order[bounds[i]]]), duration[order[bounds[i]:bounds[i + 1]]])
                for i, code in enumerate(names.tolist())]

    def finish(self) -> None:
        """After the last chunk: every moment answered, every range closed."""
        self._answer_device_busy(END_OF_TIME, self._open_until(END_OF_TIME))
        self._close(END_OF_TIME)


def _each_once(slots: np.ndarray, capacity: int) -> bool:
    """Whether no slot occurs twice (a range-heavy report's ranges hold a kernel each):
    counted over the slots, not sorted."""
    return len(slots) <= capacity and int(np.bincount(slots, minlength=capacity).max()) <= 1


def _packed(columns: dict[str, np.ndarray], base: np.ndarray) -> dict:
    """A batch of closed ranges' columns packed (instance_table.pack; moments relative to
    each range's start `base`), their codes kept compressed until the columns are put
    together (instance_columns)."""
    packed = {}
    for c, v in columns.items():
        stored = pack(v, base if c in RELATIVE_TO else None, "start_ns")
        codes = getattr(stored, "codes", None)
        if codes is not None:
            stored = dataclasses.replace(stored, codes=compressed(codes))
        packed[c] = stored
    return packed


def _carried_on(union: dict[str, np.ndarray], g: np.ndarray, start: np.ndarray,
                end: np.ndarray, heads: np.ndarray, seen: np.ndarray,
                reached: np.ndarray) -> dict[str, np.ndarray]:
    """A chunk's union numbers per range (union_sorted's, as if each range began here),
    with the ranges `seen` before taken again from the horizon their earlier work
    `reached` (union.union_sorted's `prior`): only those ranges' pairs are swept
    again (a few that span chunks)."""
    if not seen.any():
        return union
    at = np.flatnonzero(seen)
    counts = np.diff(np.r_[heads, len(g)])[at]
    rows = rows_of_runs(heads[at], counts)
    again = union_sorted(g[rows], start[rows], end[rows],
                          prior=(np.ones(len(at), bool), reached[at].astype("int64")))
    out = {c: v.copy() for c, v in union.items()}
    for c in ("busy_ns", "gaps", "max_gap_ns", "last_end_ns", "count"):
        out[c][at] = again[c]
    return out
