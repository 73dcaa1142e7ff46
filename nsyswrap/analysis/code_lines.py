"""Where in the program's code: every GPU operation and blocking CUDA call tied to the line of
the program that issued it, and the host's time by line, from the runner's trace of the
program's lines (instrument/line_trace.py, in the runner's document under "lines").

The rule: a thread's trace says, from each entry's time on, which line of the program it
was running (with the lines that called it). A CUDA call is the program's line that its
thread was running when the call started. An operation launched from a thread with no
trace is autograd's backward (its threads are named pt_autograd_N) or another native
thread's. The host time of a line is the time from its entry to the thread's next one; the
GPU idle a line caused is the host time it took while a device had nothing to run before
the operation that ended the idle (launched by the same thread).

`LineTrace` is the decoded trace; `LineTotals` sums the operations by where over the
engine's chunks (engine/analyze.py feeds it, as it feeds the timed windows); `code_lines`
makes the plain result (`CodeLines`) the outputs and the findings read."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..instrument.schema import LINES_SCHEMA
from ..read.cuda_api import PAGEABLE
from ..read.json_input import whole
from ..read.operations import GRAPH, KERNEL, MEMCPY, MEMSET, OpChunk
from .user_events import UserEvents, inflate

# The wheres that are no line of the program (their rows lead the where table).
OUTSIDE, OVERFLOW, AUTOGRAD, NATIVE, AFTER_TRACE = range(5)
SPECIAL_LABELS = ("(outside the program's code)", "(past the trace's limit)",
                  "backward (autograd thread)", "(a thread without Python)",
                  "(after the trace ended)")
FIRST_WHERE = len(SPECIAL_LABELS)
# Entries per thread inflated at most (the runner keeps 8 M): a crafted document cannot
# make the analysis inflate more.
MAX_THREAD_ROWS = 1 << 23
MAX_TABLE_ROWS = 1 << 21  # codes and wheres per process
THREAD_KEY_BITS = (1 << 48) - 1  # pid << 24 | tid, nsys's globalTid without its marker
# (interval, trace segment) pairs host_time holds at a time: each pair takes ~80 bytes of
# temporaries (a million, ~80 MB, were the top of the million-record report's peak).
PAIRS_AT_ONCE = 1 << 18
# Trace entries whose host time code_lines adds up at a time (np.diff of a whole thread's
# trace is 8 bytes an entry, millions of entries).
ENTRIES_AT_ONCE = 1 << 20
# What a blocking CUDA call's name starts with (read/report.api_calls holds them).
LINE_COLUMNS = ["where", "file", "line", "function", "text", "host_ns", "gpu_ns", "kernels",
                "kernel_ns", "backward_kernels", "backward_ns", "copies", "copy_ns",
                "copy_bytes", "pageable_copies", "memsets", "syncs", "sync_ns", "idle_ns"]


@dataclass
class LineTrace:
    """Every process's trace, decoded: the wheres (one table, the special ones first) and
    per thread (pid << 24 | tid) its entries' report times and wheres."""

    wheres: pd.DataFrame  # file, line, function, parent (a where; -1 none), text
    threads: dict[int, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    ends: dict[int, int] = field(default_factory=dict)  # thread -> when its trace stopped
    notes: list[str] = field(default_factory=list)

    def where_of(self, thread: np.ndarray, time: np.ndarray,
                 autograd: set[int] | frozenset = frozenset()) -> np.ndarray:
        """The where of each (thread key, report time): the thread's last entry at or
        before the time; AUTOGRAD or NATIVE for threads without a trace, OUTSIDE before
        the first entry, AFTER_TRACE past its stop."""
        thread = np.asarray(thread, "int64") & THREAD_KEY_BITS
        out = np.full(len(thread), NATIVE, "int64")
        if not len(thread):
            return out
        if autograd:
            out[np.isin(thread, np.fromiter(autograd, "int64"))] = AUTOGRAD
        for key in np.unique(thread):
            entry = self.threads.get(int(key))
            if entry is None:
                continue
            rows = np.flatnonzero(thread == key)
            times, wheres = entry
            at = np.searchsorted(times, time[rows], side="right") - 1
            found = np.where(at >= 0, wheres[np.maximum(at, 0)], OUTSIDE)
            end = self.ends.get(int(key))
            if end is not None:
                found = np.where(time[rows] > end, AFTER_TRACE, found)
            out[rows] = found
        return out

    def host_time(self, thread: int, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Per where, the host time `thread` ran it within the intervals [starts, ends)
        (disjoint or not: each counts)."""
        out = np.zeros(len(self.wheres), "int64")
        entry = self.threads.get(int(thread) & THREAD_KEY_BITS)
        if entry is None or not len(starts):
            return out
        times, wheres = entry
        starts = np.asarray(starts, "int64")
        ends = np.asarray(ends, "int64")
        first = np.maximum(np.searchsorted(times, starts, side="right") - 1, 0)
        last = np.searchsorted(times, ends, side="left") - 1
        counts = np.maximum(last - first + 1, 0)
        # (interval, segment) pairs a batch of intervals at a time: half a million windows
        # over a trace of a few million segments made ~130 MB of pair arrays at once.
        reach = np.cumsum(counts)
        begin = 0
        while begin < len(starts):
            stop = max(int(np.searchsorted(reach, reach[begin] - counts[begin] + PAIRS_AT_ONCE,
                                           side="right")), begin + 1)
            self._add_overlaps(out, times, wheres, first[begin:stop], counts[begin:stop],
                               starts[begin:stop], ends[begin:stop])
            begin = stop
        return out

    @staticmethod
    def _add_overlaps(out: np.ndarray, times: np.ndarray, wheres: np.ndarray,
                      first: np.ndarray, counts: np.ndarray, starts: np.ndarray,
                      ends: np.ndarray) -> None:
        """Adds to `out` (per where) each interval's overlap with the segments from its
        `first`, `counts` of them."""
        if not counts.sum():
            return
        interval = np.repeat(np.arange(len(starts)), counts)
        offsets = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        segment = first[interval] + offsets
        seg_end = np.where(segment + 1 < len(times), times[np.minimum(segment + 1,
                                                                      len(times) - 1)],
                           np.iinfo("int64").max)
        overlap = (np.minimum(seg_end, ends[interval])
                   - np.maximum(times[segment], starts[interval]))
        keep = overlap > 0
        np.add.at(out, wheres[segment[keep]], overlap[keep])


def _column(packed, dtype: str, rows: int, name: str) -> np.ndarray:
    """A packed column of `rows` values of `dtype` (user_events.inflate: bounded as the
    runner's other columns are)."""
    size = rows * np.dtype(dtype).itemsize
    raw = inflate(packed, size, name)
    if len(raw) != size:
        raise ValueError(f"{name} does not hold the rows it says")
    return raw.view(dtype)


def _decode(doc: dict, pid: int, offset: float, first: int
            ) -> tuple[list[tuple], dict, dict]:
    """One process's trace: its wheres (file, line, function, parent, text; numbered from
    `first`), and per thread key its report times and (global) wheres. Raises ValueError
    naming what is not as the runner writes it."""
    if not isinstance(doc, dict) or doc.get("nsyswrap") != LINES_SCHEMA:
        raise ValueError("not a trace of lines")
    rows = _wheres(doc, first)
    threads, ends = _threads(doc, pid, offset, first, len(rows) + 2)
    return rows, threads, ends


def _wheres(doc: dict, first: int) -> list[tuple]:
    """The trace's wheres past its two special ones, as the where table's rows."""
    codes, wheres = doc.get("codes"), doc.get("wheres")
    if not (isinstance(codes, list) and len(codes) <= MAX_TABLE_ROWS and all(
            isinstance(c, list) and len(c) == 3 and isinstance(c[0], str)
            and isinstance(c[1], str) and whole(c[2], 0, 1 << 31) for c in codes)):
        raise ValueError("codes is not a list of [file, function, first line]")
    texts = doc.get("texts")
    texts = texts if isinstance(texts, dict) else {}
    if not (isinstance(wheres, list) and 2 <= len(wheres) <= MAX_TABLE_ROWS):
        raise ValueError("wheres is not a list of [code, line, caller]")
    rows: list[tuple] = []
    for i, w in enumerate(wheres[2:], start=2):
        if not (isinstance(w, list) and len(w) == 3 and whole(w[0], 0, len(codes) - 1)
                and whole(w[1], 0, 1 << 31) and whole(w[2], 0, i - 1)):
            raise ValueError(f"where {i} is not [code, line, an earlier where]")
        file, function, _ = codes[w[0]]
        parent = w[2] - 2 + first if w[2] >= 2 else -1
        text = texts.get(f"{file}:{w[1]}", "")
        rows.append((file, w[1], function, parent, text if isinstance(text, str) else ""))
    return rows


def _threads(doc: dict, pid: int, offset: float, first: int, wheres: int
             ) -> tuple[dict, dict]:
    """Per thread key (pid << 24 | tid): its entries' report times and global wheres; and
    when its trace ended."""
    threads = doc.get("threads")
    if not isinstance(threads, list):
        raise ValueError("threads is not a list")
    out, ends = {}, {}
    ended = doc.get("ended_ns", doc.get("stopped_ns"))
    for t in threads:
        if not (isinstance(t, dict) and whole(t.get("tid"), 0, (1 << 24) - 1)
                and whole(t.get("rows"), 0, MAX_THREAD_ROWS)):
            raise ValueError("a thread is not {tid, rows, clock_deltas, wheres}")
        n = t["rows"]
        clocks = np.cumsum(_column(t.get("clock_deltas"), "<i8", n, "clock_deltas"))
        local = _column(t.get("wheres"), "<u4", n, "wheres").astype("int64")
        if len(local) and local.max() >= wheres:
            raise ValueError("a thread's entries name wheres the trace does not hold")
        glob = np.where(local >= 2, local - 2 + first, np.where(local == 1, OVERFLOW, OUTSIDE))
        times = np.round(clocks + offset).astype("int64")
        if len(times) and (np.diff(times) < 0).any():
            raise ValueError("a thread's entries are not in time order")
        key = pid << 24 | t["tid"]
        out[key] = (times, glob)
        if whole(ended, 0, 1 << 62):
            ends[key] = int(round(ended + offset))
    return out, ends


def line_trace(events: UserEvents, thread_names: dict[int, str] | None = None
               ) -> LineTrace | None:
    """The trace of every process whose runner traced its lines; None where none did."""
    rows: list[tuple] = [(label, 0, label, -1, "") for label in SPECIAL_LABELS]
    trace = LineTrace(wheres=pd.DataFrame())
    found = False
    for runner in events.processes:
        doc = runner.lines
        if doc is None:
            continue
        if runner.offset_ns is None:
            trace.notes.append(f"process {runner.pid}: its trace of lines cannot be placed "
                               "in time (no clock mark)")
            continue
        try:
            mine, threads, ends = _decode(doc, runner.pid, runner.offset_ns, len(rows))
        except ValueError as e:
            trace.notes.append(f"process {runner.pid}: its trace of lines cannot be read "
                               f"({e}); left out")
            continue
        found = True
        rows.extend(mine)
        trace.threads.update(threads)
        trace.ends.update(ends)
        if doc.get("stopped_ns") is not None:
            trace.notes.append(f"process {runner.pid}: the trace of lines filled up and "
                               "stopped; later CUDA calls have no line")
    if not found:
        return None if not trace.notes else _empty(trace)
    trace.wheres = pd.DataFrame(rows, columns=["file", "line", "function", "parent", "text"])
    return trace


def _empty(trace: LineTrace) -> LineTrace:
    trace.wheres = _special_wheres()
    return trace


def lines_missing(events: UserEvents) -> str | None:
    """Why no process's lines were traced, and how to get them; None where one was."""
    if not events.processes:
        return ("no trace of the program's lines: the report was not made by `nsyswrap "
                "run` (its runner traces them, Python 3.12 or newer)")
    if any(runner.lines is not None for runner in events.processes):
        return None
    for runner in events.processes:
        if runner.lines_note:
            return f"no trace of the program's lines: {runner.lines_note}"
    return ("no trace of the program's lines: the run was made by an nsyswrap without it "
            "(run it again with this one, Python 3.12 or newer)")


def autograd_threads(thread_names: dict[int, str]) -> set[int]:
    """The threads autograd runs backward on (PyTorch names them pt_autograd_N)."""
    return {int(k) & THREAD_KEY_BITS for k, name in thread_names.items()
            if str(name).startswith("pt_autograd")}


# emit_nvtx's ranges: "aten::addmm, seq = 4, op_id = 16" (forward, the program's thread) and
# "AddmmBackward0, seq = 4, op_id = 43" (the node autograd runs for it, on its thread).
SEQUENCE = re.compile(r", seq = (\d+)")
BACKWARD_NODE = re.compile(r"^[A-Za-z_][\w.]*Backward\d*, seq = (\d+)")


@dataclass
class BackwardNodes:
    """Per autograd thread, its backward nodes' ranges in start order (start, end) and the
    where of the forward op that made each (by PyTorch's sequence number)."""

    nodes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict)

    def where_of(self, thread: np.ndarray, time: np.ndarray) -> np.ndarray:
        """Each operation's forward where; AUTOGRAD where no node holds its launch."""
        out = np.full(len(thread), AUTOGRAD, "int64")
        for key in np.unique(thread):
            entry = self.nodes.get(int(key))
            if entry is None:
                continue
            starts, ends, wheres = entry
            rows = np.flatnonzero(thread == key)
            at = np.searchsorted(starts, time[rows], side="right") - 1
            inside = (at >= 0) & (time[rows] <= ends[np.maximum(at, 0)])
            out[rows[inside]] = wheres[at[inside]]
        return out


def backward_nodes(ranges: pd.DataFrame, trace: LineTrace | None,
                   autograd: set[int]) -> BackwardNodes:
    """emit_nvtx's backward node ranges on autograd's threads, each tied to the line of the
    forward op of the same process and sequence number (the latest before it)."""
    out = BackwardNodes()
    if trace is None or not autograd or not len(ranges):
        return out
    thread = ranges["thread"].to_numpy("int64") & THREAD_KEY_BITS
    traced = np.fromiter(trace.threads, "int64", len(trace.threads))
    on_autograd = np.isin(thread, np.fromiter(autograd, "int64", len(autograd)))
    rows = np.flatnonzero(on_autograd | np.isin(thread, traced))
    if not len(rows):
        return out
    names = ranges["name"].to_numpy()[rows].astype(str)
    seq = pd.Series(names).str.extract(SEQUENCE, expand=False)
    node = pd.Series(names).str.match(BACKWARD_NODE).to_numpy()
    has = seq.notna().to_numpy()
    frame = pd.DataFrame({"thread": thread[rows], "pid": thread[rows] >> 24,
                          "start": ranges["start_ns"].to_numpy("int64")[rows],
                          "end": ranges["end_ns"].to_numpy("int64")[rows],
                          "seq": pd.to_numeric(seq, errors="coerce").fillna(-1)
                          .to_numpy("int64")})
    forward = frame[has & ~on_autograd[rows] & ~node].sort_values("start", kind="stable")
    backward = frame[has & on_autograd[rows] & node].sort_values("start", kind="stable")
    if not len(forward) or not len(backward):
        return out
    forward = forward.assign(where=trace.where_of(forward["thread"].to_numpy(),
                                                  forward["start"].to_numpy()))
    matched = pd.merge_asof(backward, forward[["start", "pid", "seq", "where"]],
                            on="start", by=["pid", "seq"], direction="backward")
    matched["where"] = matched["where"].fillna(AUTOGRAD).astype("int64")
    for key, mine in matched.groupby("thread", sort=False):
        out.nodes[int(key)] = (mine["start"].to_numpy("int64"), mine["end"].to_numpy("int64"),
                               mine["where"].to_numpy("int64"))
    return out


def ops_wheres(trace: LineTrace, autograd: set[int], backward: BackwardNodes,
               thread: np.ndarray, launch: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each GPU operation's where, by its launching call's thread and start (-1: none, then
    NATIVE); and which were launched by autograd's threads (their where the forward line's
    where `backward` ties them to one)."""
    launched = launch >= 0
    where = np.full(len(launch), NATIVE, "int64")
    rows = np.flatnonzero(launched)
    where[rows] = trace.where_of(thread[rows], launch[rows], autograd)
    on_autograd = where == AUTOGRAD
    if on_autograd.any() and backward.nodes:
        mine = np.flatnonzero(on_autograd)
        where[mine] = backward.where_of(thread[mine].astype("int64") & THREAD_KEY_BITS,
                                        launch[mine])
    return where, on_autograd


class LineTotals:
    """Per where, the GPU work its thread launched from it, summed over the engine's chunks
    (`prepare` on a worker thread, `apply` in order), and the GPU idle it caused. Backward
    work goes to its forward line where emit_nvtx's ranges tie it there (`backward`)."""

    def __init__(self, trace: LineTrace | None, autograd: set[int],
                 backward: BackwardNodes | None = None) -> None:
        self.trace = trace
        self.autograd = autograd
        self.backward = backward or BackwardNodes()
        n = len(trace.wheres) if trace is not None else 0
        self.sums = {c: np.zeros(n, "int64") for c in (
            "kernels", "kernel_ns", "copies", "copy_ns", "copy_bytes", "pageable_copies",
            "memsets", "idle_ns", "backward_kernels", "backward_ns")}
        self.horizon: dict[int, int] = {}  # device -> the latest end of its work so far
        self.kernel_names: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.names: list[str] = []  # each kernel name code's short name (the engine's)

    def prepare(self, chunk: OpChunk) -> dict | None:
        if self.trace is None or not len(chunk):
            return None
        where, backward = ops_wheres(self.trace, self.autograd, self.backward,
                                     chunk["thread"], chunk["launch_start_ns"])
        return {"where": where, "launched": chunk["launch_start_ns"] >= 0,
                "backward": backward}

    def apply(self, prepared: dict | None, chunk: OpChunk) -> None:
        if prepared is None:
            return
        where = prepared["where"]
        n = len(self.trace.wheres)
        duration = chunk["end_ns"] - chunk["start_ns"]
        source = chunk["source"]

        def add(column: str, mask: np.ndarray, weights=None) -> None:
            self.sums[column] += np.bincount(where[mask], weights=None if weights is None
                                             else weights[mask], minlength=n).astype("int64")

        kernel = (source == KERNEL) | (source == GRAPH)
        copy, memset = source == MEMCPY, source == MEMSET
        add("kernels", kernel)
        add("kernel_ns", kernel, duration)
        add("copies", copy)
        add("copy_ns", copy, duration)
        add("copy_bytes", copy, chunk["bytes"])
        add("pageable_copies", copy & _pageable(chunk))
        add("memsets", memset)
        add("backward_kernels", kernel & prepared["backward"])
        add("backward_ns", kernel & prepared["backward"], duration)
        if kernel.any():
            self.kernel_names.append((chunk["name"][kernel].astype("int64"), where[kernel],
                                      duration[kernel]))
        self._idle(chunk, prepared["launched"])

    def _idle(self, chunk: OpChunk, launched: np.ndarray) -> None:
        """The gaps each device had before an operation (its start past every earlier
        operation's end on the device), with the thread that launched that operation."""
        device, start, end = chunk["device_id"], chunk["start_ns"], chunk["end_ns"]
        for d in np.unique(device):
            rows = np.flatnonzero(device == d)
            before = np.maximum.accumulate(np.r_[self.horizon.get(int(d), -1), end[rows]])
            self.horizon[int(d)] = int(before[-1])
            prior = before[:-1]
            gap = (prior >= 0) & (start[rows] > prior) & launched[rows]
            if not gap.any():
                continue
            # Summed as they come: a report of many gaps holds no list of them.
            thread = chunk["thread"][rows[gap]].astype("int64") & THREAD_KEY_BITS
            starts, ends = prior[gap], start[rows[gap]]
            for key in np.unique(thread):
                mine = thread == key
                self.sums["idle_ns"] += self.trace.host_time(int(key), starts[mine], ends[mine])


def _pageable(chunk: OpChunk) -> np.ndarray:
    """Copies from or to pageable host memory (the export's memory kind 0)."""
    return (chunk["src_kind"] == PAGEABLE) | (chunk["dst_kind"] == PAGEABLE)


@dataclass
class CodeLines:
    """What the analysis says of the program's lines: `table` one row per line of the
    program (and per special where: backward on autograd's thread, ...), heaviest first
    (LINE_COLUMNS; `where` the line's heaviest where, for its stack); `trace` for the
    findings' host time; `kernel_lines` GPU time per (kernel name, line)."""

    table: pd.DataFrame
    trace: LineTrace | None
    kernel_lines: pd.DataFrame = field(default_factory=pd.DataFrame)
    autograd: set[int] = field(default_factory=set)
    backward: BackwardNodes = field(default_factory=BackwardNodes)
    notes: list[str] = field(default_factory=list)
    why_empty: str | None = None  # the table is empty: why, and how to fill it

    def stack(self, where: int, depth: int = 8) -> list[tuple[str, int, str]]:
        """The lines that led to `where`, innermost first: (file, line, function)."""
        out = []
        w = self.trace.wheres if self.trace is not None else None
        while w is not None and where >= 0 and len(out) < depth:
            row = w.iloc[where]
            out.append((row["file"], int(row["line"]), row["function"]))
            where = int(row["parent"])
        return out

    def op_places(self, thread: np.ndarray, launch: np.ndarray) -> list[str | None]:
        """Each GPU operation's line as "file:line" (its file's name), the label of a where
        that is no line, None where the report has no trace."""
        if self.trace is None:
            return [None] * len(launch)
        where, _ = ops_wheres(self.trace, self.autograd, self.backward,
                              np.asarray(thread, "int64"), np.asarray(launch, "int64"))
        w = self.trace.wheres
        labels = [f"{str(f).rsplit('/', 1)[-1]}:{n}" if n else str(fn)
                  for f, n, fn in zip(w["file"], w["line"], w["function"], strict=True)]
        return [labels[i] for i in where]

    def by_line(self, sums: dict[str, np.ndarray], order: str) -> pd.DataFrame:
        """Per-where sums (each as long as the trace's wheres) as one row per line, most
        `order` first, with each line's share of it."""
        return _by_line(self.trace.wheres, sums, order)


def _special_wheres() -> pd.DataFrame:
    return pd.DataFrame([(label, 0, label, -1, "") for label in SPECIAL_LABELS],
                        columns=["file", "line", "function", "parent", "text"])


def _by_line(wheres: pd.DataFrame, sums: dict[str, np.ndarray], order: str) -> pd.DataFrame:
    """Per-where sums as one row per line (file, line, function), most `order` first; the
    `where` column is each line's where with the most of `order` (its stack)."""
    frame = wheres[["file", "line", "function", "text"]].copy()
    for name, values in sums.items():
        frame[name] = values
    frame["where"] = np.arange(len(frame))
    used = frame[sum(frame[c] != 0 for c in sums) > 0]
    if not len(used):
        return pd.DataFrame(columns=["where", "file", "line", "function", "text", *sums,
                                     "share"])
    heaviest = used.sort_values(order, ascending=False, kind="stable").drop_duplicates(
        ["file", "line", "function"])[["file", "line", "function", "where", "text"]]
    totals = used.groupby(["file", "line", "function"], sort=False)[list(sums)].sum()
    out = heaviest.merge(totals.reset_index(), on=["file", "line", "function"])
    out = out.sort_values([order, "file", "line"], ascending=[False, True, True],
                          kind="stable").reset_index(drop=True)
    total = out[order].sum()
    out["share"] = out[order] / total if total else 0.0
    return out[["where", "file", "line", "function", "text", *sums, "share"]]


def no_lines() -> CodeLines:
    """The result for an analysis made without the steps (tests, a harness-only view)."""
    return CodeLines(table=pd.DataFrame(columns=LINE_COLUMNS + ["share"]), trace=None,
                     why_empty="no trace of the program's lines")


def code_lines(totals: LineTotals, blocking: pd.DataFrame, kernel_names: list[str],
               why_empty: str | None) -> CodeLines:
    """The plain result: one row per line with its GPU work, host time, syncs and the idle
    it caused; `blocking`: the report's blocking CUDA calls (api_calls' columns);
    `kernel_names`: the chunks' kernel name codes' short names."""
    trace = totals.trace
    if trace is None or len(trace.wheres) <= FIRST_WHERE:
        notes = trace.notes if trace is not None else []
        return CodeLines(table=pd.DataFrame(columns=LINE_COLUMNS), trace=None, notes=notes,
                         why_empty=why_empty or "the trace of lines could not be read")
    n = len(trace.wheres)
    sums = dict(totals.sums)
    host = np.zeros(n, "int64")
    for times, wheres in trace.threads.values():
        # Each entry's where runs until the next entry: integer sums, in any order the same.
        for lo in range(0, len(times) - 1, ENTRIES_AT_ONCE):
            hi = min(lo + ENTRIES_AT_ONCE, len(times) - 1)
            np.add.at(host, wheres[lo:hi], np.diff(times[lo:hi + 1]))
    sums["host_ns"] = host
    where = trace.where_of(blocking["thread"].to_numpy("int64"),
                           blocking["start_ns"].to_numpy("int64"), totals.autograd)
    sums["syncs"] = np.bincount(where, minlength=n).astype("int64")
    sums["sync_ns"] = np.bincount(where, weights=(blocking["end_ns"] - blocking["start_ns"])
                                  .to_numpy("float64"), minlength=n).astype("int64")
    sums["gpu_ns"] = sums["kernel_ns"] + sums["copy_ns"]
    table = _by_line(trace.wheres, sums, "gpu_ns")
    table = table.sort_values(["gpu_ns", "idle_ns", "host_ns"], ascending=False,
                              kind="stable").reset_index(drop=True)
    return CodeLines(table=table[LINE_COLUMNS + ["share"]], trace=trace,
                     kernel_lines=_kernel_lines(totals, kernel_names), notes=trace.notes,
                     autograd=totals.autograd, backward=totals.backward)


def _kernel_lines(totals: LineTotals, names: list[str]) -> pd.DataFrame:
    if not totals.kernel_names:
        return pd.DataFrame(columns=["name", "where", "kernels", "kernel_ns"])
    code = np.concatenate([c for c, _, _ in totals.kernel_names])
    where = np.concatenate([w for _, w, _ in totals.kernel_names])
    duration = np.concatenate([d for _, _, d in totals.kernel_names])
    totals.kernel_names = []
    frame = pd.DataFrame({"code": code, "where": where, "kernel_ns": duration})
    out = frame.groupby(["code", "where"], sort=False).agg(
        kernels=("kernel_ns", "size"), kernel_ns=("kernel_ns", "sum")).reset_index()
    out["name"] = [names[c] if 0 <= c < len(names) else "" for c in out["code"]]
    return out[["name", "where", "kernels", "kernel_ns"]]
