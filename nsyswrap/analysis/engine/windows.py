"""The program's timed windows (analysis/user_timings.py: a CUDA-event window or a Timer
measurement) measured by the engine as it goes through the chunks, beside the NVTX ranges
(totals.RangeTotals), with the same primitives: the range search (range_search.RangeSearch),
keyed here by stream as well as by thread, and the union sweep carried on across chunks
(union.union_sorted's `prior`). Busy time and gaps mean what they mean for a range.

The windows' own rules, for the pairs found (launches strictly inside the window):
- by stream: an event window's own operations are those launched onto its start
  record's (process, stream), by any thread;
- by thread: the recording thread's launches on other streams are joined where the stream
  was made to wait for them (a wait after the launch, before the end record: `wait_ns`) or
  ran on the end record's stream, else uncovered; a Timer measurement's own operations are
  all its thread's launches, on any stream;
- the prior operation of an event window: the last one launched onto its stream at or
  before the start record (its end is what the start event waited for). On one stream
  operations start in launch order, so each window's is known once an operation launched
  after its start record arrives on that stream.

Each window keeps a few running numbers (a window's memory: ~150 bytes), and the names of
its first own operations (the `work` label) while it has at most WORK_NAMES of them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...read.cuda_api import PAGEABLE
from ...read.operations import KERNEL, MEMCPY, OpChunk
from ..gpu_ops import OP_KINDS
from ..lanes import assign_lanes
from ..range_search import RangeSearch
from ..union import union_sorted

# The trace's thread key less its marker bits: pid << 24 | tid (report.thread_ids).
THREAD_BITS = (1 << 48) - 1
# CUPTI's copy kinds a window counts as host copies (HtoD, DtoH).
WINDOW_COPY_KINDS = (1, 2)
# A window's work is named by its operations while it has at most this many.
WORK_NAMES = 16


def stream_key(pid: np.ndarray, stream: np.ndarray) -> np.ndarray:
    """A (process, stream) as one integer."""
    return (np.asarray(pid, "int64") << 32) | (np.asarray(stream, "int64") & 0xFFFFFFFF)


def _search(keys: np.ndarray, start: np.ndarray, end: np.ndarray, use: np.ndarray
            ) -> RangeSearch | None:
    """A range search over the windows at `use` (range_id: the window's row), keyed by
    `keys`, finding launches strictly inside (start, end)."""
    rows = np.flatnonzero(use & (end - start >= 2))
    if not len(rows):
        return None
    ranges = pd.DataFrame({"range_id": rows, "thread": keys[rows], "start_ns": start[rows] + 1,
                           "end_ns": end[rows] - 1})
    ranges = ranges.sort_values("start_ns", kind="stable")
    ranges["lane"] = assign_lanes(ranges)
    return RangeSearch(ranges)


def _pairs(search: RangeSearch | None, keys: np.ndarray, times: np.ndarray,
           rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(window, chunk row) of each launch inside a window of the search."""
    found = None if search is None else search.pairs(
        pd.DataFrame({"thread": keys, "time_ns": times}, index=pd.Index(rows), copy=False))
    if found is None:
        return np.zeros(0, "int64"), np.zeros(0, "int64")
    return found["range_id"].astype("int64"), found["event"].astype("int64")


def pairs_in_windows(keys: np.ndarray, start: np.ndarray, end: np.ndarray,
                     event_keys: np.ndarray, event_times: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray]:
    """(window, event) of each event whose time lies strictly inside a window of its key
    (windows: `keys`, `start`, `end`; -1 keys take none): the windows' other searches
    (the waits that join streams, the recording thread's blocking calls, the copies before
    a window)."""
    keys, start, end = (np.asarray(a, "int64") for a in (keys, start, end))
    event_keys, event_times = np.asarray(event_keys, "int64"), np.asarray(event_times, "int64")
    # Only the windows with an event of their key strictly inside are searched: these
    # searches' events are few beside a million windows, and the search costs per window.
    times = np.sort(event_times)
    use = ((keys >= 0) & sorted_isin(keys, np.sort(event_keys))
           & (np.searchsorted(times, start, "right") < np.searchsorted(times, end, "left")))
    return _pairs(_search(keys, start, end, use), event_keys, event_times,
                  np.arange(len(event_keys)))


def sorted_isin(values: np.ndarray, sorted_set: np.ndarray) -> np.ndarray:
    """np.isin against a sorted array, by binary search: np.isin's own sort (or hash) of
    a million values took ~0.5 s."""
    if not len(sorted_set):
        return np.zeros(len(values), bool)
    at = np.minimum(np.searchsorted(sorted_set, values), len(sorted_set) - 1)
    return sorted_set[at] == values


def text_column(codes: np.ndarray, texts: list[str]) -> pd.Categorical:
    """texts[codes] as a categorical: the windows' text columns repeat a few texts over a
    million rows (`texts` may repeat one). Its categories are the texts used, sorted: the
    same column whatever order the texts came in (streamed or loaded)."""
    text_codes, uniques = pd.factorize(np.asarray(texts, dtype=object))
    column = pd.Categorical.from_codes(text_codes[np.asarray(codes, "int64")] if len(texts)
                                       else np.zeros(0, "int64"), categories=uniques)
    column = column.remove_unused_categories()
    return column.reorder_categories(sorted(column.categories))


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: each 64-bit value to a well-spread one."""
    z = np.asarray(x).astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


class WindowTotals:
    """Running numbers of the program's timed windows over the engine's chunks.

    windows (one row each): start_ns, end_ns (the window: launches strictly between),
    by_stream (an event window: own operations by its stream; else a Timer measurement:
    by its thread), stream_key (stream_key(); -1 unknown), end_stream (the end record's
    stream id, -1), thread (the recording thread's key, -1), wait_ns (the last wait that
    joins other streams' work; -1 none)."""

    def __init__(self, windows: pd.DataFrame, grids: pd.DataFrame | None = None) -> None:
        """`grids`: the kernels' launch grids (Report.kernel_grids; None: not read)."""
        n = self.n = len(windows)
        self.grids = grids
        self.start = windows["start_ns"].to_numpy("int64")
        self.end = windows["end_ns"].to_numpy("int64")
        self.by_stream = windows["by_stream"].to_numpy(bool)
        self.key = windows["stream_key"].to_numpy("int64")
        self.end_stream = windows["end_stream"].to_numpy("int64")
        self.thread = windows["thread"].to_numpy("int64") & THREAD_BITS
        self.wait = windows["wait_ns"].to_numpy("int64")
        known = self.key >= 0
        self.stream_search = _search(self.key, self.start, self.end, self.by_stream & known)
        self.thread_search = _search(self.thread, self.start, self.end,
                                     windows["thread"].to_numpy("int64") >= 0)
        z = {"int": lambda: np.zeros(n, "int64"), "nan": lambda: np.full(n, np.nan)}
        self.count = {c: z["int"]() for c in ("own", "kernels", "copies", "copy_ns",
                                              "copy_bytes", "pageable", "gaps", "max_gap",
                                              "joined", "uncovered")}
        # Union horizons (the latest end so far; NaN: nothing yet) and busy time per class:
        # own operations, the work the window covers (own and joined), uncovered work.
        self.first_start, self.first_launch = z["nan"](), z["nan"]()
        self.last = {c: z["nan"]() for c in ("own", "work", "uncovered")}
        self.busy = {c: np.zeros(n) for c in ("work", "uncovered")}
        self.signature = np.zeros(n, np.uint64)
        self.main_ns = np.full(n, -1, "int64")
        self.main_name = np.full(n, -1, "int64")
        self.main_grid = np.zeros(n, "int64")
        self.shapes = pd.Index(np.zeros(0, np.uint64))  # each distinct work shape, numbered
        self.names: list[tuple[np.ndarray, ...]] = []  # (window, launch, name) of first ops
        self.timer_streams: list[np.ndarray] = []  # (window << 32 | stream) of Timer work
        # The prior operation: each (process, stream)'s windows in start-record order, how
        # far they are answered, and the last launched operation seen (launch, end).
        self.prior_end = np.zeros(n, "int64")
        rows = np.flatnonzero(self.by_stream & known)
        rows = rows[np.lexsort((self.start[rows], self.key[rows]))]
        keys, first = np.unique(self.key[rows], return_index=True)
        self.prior_keys = keys
        self.prior_rows = np.split(rows, first[1:]) if len(rows) else []
        self.prior_done = np.zeros(len(keys), "int64")
        self.prior_last: dict[int, tuple[int, int]] = {}

    # `prepare` (any thread, any order) then `apply` (in chunk order), as RangeTotals.

    def prepare(self, chunk: OpChunk) -> dict | None:
        """The chunk's (window, operation) pairs by class, each sorted by (window, start)."""
        if not self.n:
            return None
        launch = chunk["launch_start_ns"]
        rows = np.flatnonzero(launch >= 0)
        if not len(rows):
            return {"launched": rows}
        thread = chunk["thread"][rows].astype("int64")
        times = launch[rows]
        stream = chunk["stream_id"][rows].astype("int64")
        keys = stream_key((thread >> 24) & 0xFFFFFF, stream)
        own_w, own_e = _pairs(self.stream_search, keys, times, rows)
        by_w, by_e = _pairs(self.thread_search, thread & THREAD_BITS, times, rows)
        op_key = np.full(len(chunk), -1, "int64")
        op_key[rows] = keys
        event_window = self.by_stream[by_w]
        # An event window's recording thread on its own stream: already its own.
        other = ~event_window | (op_key[by_e] != self.key[by_w])
        by_w, by_e, event_window = by_w[other], by_e[other], event_window[other]
        joined = event_window & ((launch[by_e] < self.wait[by_w])
                                 | (chunk["stream_id"][by_e] == self.end_stream[by_w]))
        timer = ~event_window
        start = chunk["start_ns"]
        out = {"launched": rows, "op_key": op_key}
        out["own"] = _by_window(np.r_[own_w, by_w[timer]], np.r_[own_e, by_e[timer]], start)
        out["joined"] = _by_window(by_w[joined], by_e[joined], start)
        uncovered = event_window & ~joined
        out["uncovered"] = _by_window(by_w[uncovered], by_e[uncovered], start)
        out["work"] = _by_window(np.r_[out["own"][0], out["joined"][0]],
                                 np.r_[out["own"][1], out["joined"][1]], start)
        return out

    def apply(self, prepared: dict | None, chunk: OpChunk) -> None:
        if prepared is None:
            return
        self._prior(chunk, prepared)
        if "own" not in prepared:
            return
        start, end = chunk["start_ns"], chunk["end_ns"]
        launch = chunk["launch_start_ns"]
        is_kernel = chunk["source"] == KERNEL
        copy = (chunk["source"] == MEMCPY) & np.isin(chunk["copy_kind"], WINDOW_COPY_KINDS)
        c = self.count
        w, e = prepared["own"]
        if len(w):
            heads, groups = _heads(w)
            seen = ~np.isnan(self.last["own"][groups])
            u = union_sorted(w, start[e], end[e], prior=(
                seen, np.nan_to_num(self.last["own"][groups]).astype("int64")))
            self.first_start[groups] = np.where(seen, self.first_start[groups],
                                                u["first_start_ns"])
            self.last["own"][groups] = u["last_end_ns"]
            c["gaps"][groups] += u["gaps"]
            c["max_gap"][groups] = np.maximum(c["max_gap"][groups], u["max_gap_ns"])
            c["own"][groups] += u["count"]
            duration = end[e] - start[e]
            host = copy[e]
            pageable = host & ((chunk["src_kind"][e] == PAGEABLE)
                               | (chunk["dst_kind"][e] == PAGEABLE))
            for name, values in (("kernels", is_kernel[e]), ("copies", host),
                                 ("copy_ns", np.where(host, duration, 0)),
                                 ("copy_bytes", np.where(host, chunk["bytes"][e], 0)),
                                 ("pageable", pageable)):
                c[name][groups] += np.add.reduceat(values.astype("int64"), heads)
            self.first_launch[groups] = np.fmin(self.first_launch[groups],
                                                np.minimum.reduceat(launch[e], heads))
            self._names(w, e, chunk, groups, heads, u["count"])
            timer = ~self.by_stream[w]
            if timer.any():
                self.timer_streams.append(pd.unique(
                    (w[timer] << 32) | (chunk["stream_id"][e[timer]].astype("int64")
                                        & 0xFFFFFFFF)))
        for cls in ("joined", "uncovered"):
            w, e = prepared[cls]
            if len(w):
                heads, groups = _heads(w)
                c[cls][groups] += np.diff(np.r_[heads, len(w)])
        for cls in ("work", "uncovered"):
            w, e = prepared[cls]
            if not len(w):
                continue
            heads, groups = _heads(w)
            seen = ~np.isnan(self.last[cls][groups])
            u = union_sorted(w, start[e], end[e], prior=(
                seen, np.nan_to_num(self.last[cls][groups]).astype("int64")))
            self.busy[cls][groups] += u["busy_ns"]
            self.last[cls][groups] = u["last_end_ns"]
        w, e = prepared["work"]
        if len(w):
            self._work(w, e, chunk, is_kernel)

    def _prior(self, chunk: OpChunk, prepared: dict) -> None:
        """Answer the prior operation of the windows whose start record the chunk's
        launches on their stream have passed (see the module docstring)."""
        rows = prepared["launched"]
        if not len(self.prior_keys) or not len(rows):
            return
        key = prepared["op_key"][rows]
        at = np.searchsorted(self.prior_keys, key)
        at = np.minimum(at, len(self.prior_keys) - 1)
        mine = self.prior_keys[at] == key
        rows, at = rows[mine], at[mine]
        launch, end = chunk["launch_start_ns"], chunk["end_ns"]
        order = np.lexsort((launch[rows], at))
        rows, at = rows[order], at[order]
        bounds = np.flatnonzero(np.r_[True, at[1:] != at[:-1], True])
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            k = int(at[lo])
            windows = self.prior_rows[k][self.prior_done[k]:]
            times = launch[rows[lo:hi]]
            t0 = self.start[windows]
            # Answered: windows whose start record comes before this chunk's last launch
            # on the stream (a later launch exists: nothing launched earlier can follow).
            answer = int(np.searchsorted(t0, times[-1], side="left"))
            if answer:
                before = np.searchsorted(times, t0[:answer], side="right") - 1
                was = self.prior_last.get(k)
                ends = end[rows[lo:hi]][np.maximum(before, 0)]
                self.prior_end[windows[:answer]] = np.where(
                    before >= 0, ends, 0 if was is None else was[1])
                self.prior_done[k] += answer
            self.prior_last[k] = (int(times[-1]), int(end[rows[hi - 1]]))

    def _names(self, w: np.ndarray, e: np.ndarray, chunk: OpChunk, groups: np.ndarray,
               heads: np.ndarray, counts: np.ndarray) -> None:
        """Keep (window, launch, name) of own operations while a window has at most
        WORK_NAMES + 1 of them (more: the label says how many)."""
        before = self.count["own"][groups] - counts  # own operations before this chunk
        place = np.arange(len(w)) - np.repeat(heads, counts) + np.repeat(before, counts)
        keep = place <= WORK_NAMES
        if keep.any():
            e = e[keep]
            name = np.where(chunk["source"][e] == KERNEL, chunk["name"][e],
                            -1 - chunk["source"][e].astype("int64"))
            self.names.append((w[keep], chunk["launch_start_ns"][e], name))

    def _work(self, w: np.ndarray, e: np.ndarray, chunk: OpChunk, is_kernel: np.ndarray
              ) -> None:
        """The work signature (each distinct shape of operation numbered in order of first
        appearance, its number mixed, summed mod 2**64) and the longest kernel."""
        source = chunk["source"][e].astype("int64")
        kernel = is_kernel[e]
        grid = _grid(self.grids, chunk, e)
        detail = np.where(kernel, grid, chunk["bytes"][e].astype("int64"))
        name = np.where(kernel, chunk["name"][e].astype("int64"), -1)
        # A kernel is told by its demangled name (its code stands for one text in either
        # source; two kernels may share a short name).
        full = np.where(kernel, chunk["full_name"][e].astype("int64"), -1)
        raw = _mix(_mix(_mix(source) ^ full.astype(np.uint64)) ^ detail.astype(np.uint64))
        codes = self.shapes.get_indexer(raw)
        new = codes < 0
        if new.any():
            # Numbered in the operations' (start) order, not the pairs': the same numbers
            # whatever the chunks.
            by_start = np.argsort(e[new], kind="stable")
            self.shapes = self.shapes.append(pd.Index(pd.unique(raw[new][by_start])))
            codes = self.shapes.get_indexer(raw)
        hashed = _mix(codes.astype(np.uint64) + np.uint64(1))
        heads, groups = _heads(w)
        with np.errstate(over="ignore"):
            self.signature[groups] += np.add.reduceat(hashed, heads)
        duration = np.where(kernel, chunk["end_ns"][e] - chunk["start_ns"][e], -1)
        # The longest kernel of each window (the first of equals).
        order = np.lexsort((-duration, w))
        first = order[np.r_[0, np.flatnonzero(w[order][1:] != w[order][:-1]) + 1]]
        ww, longest = w[first], duration[first]
        better = longest > self.main_ns[ww]
        ww, first = ww[better], first[better]
        self.main_ns[ww] = duration[first]
        self.main_name[ww] = name[first]
        self.main_grid[ww] = grid[first]

    def numbers(self, kernel_names: list[str]) -> pd.DataFrame:
        """After the last chunk: every window's numbers, one column each, the
        kernels named by their short names (`kernel_names`, by the chunks' name codes)."""
        for k, rows in enumerate(self.prior_rows):  # windows after the stream's last launch
            last = self.prior_last.get(k)
            if last is not None:
                self.prior_end[rows[self.prior_done[k]:]] = last[1]
        c = self.count
        streams = np.zeros(self.n, "int64")
        if self.timer_streams:
            pairs = pd.unique(np.concatenate(self.timer_streams))
            streams += np.bincount(pairs >> 32, minlength=self.n)
        event = self.by_stream
        streams = np.where(event, 1 + (c["joined"] > 0) + (c["uncovered"] > 0), streams)
        main = np.where(self.main_name >= 0, self.main_name, len(kernel_names))
        return pd.DataFrame({
            "own_ops": c["own"], "kernels": c["kernels"], "copies": c["copies"],
            "copy_ns": c["copy_ns"].astype("float64"), "copy_bytes": c["copy_bytes"],
            "pageable_copies": c["pageable"], "first_start_ns": self.first_start,
            "own_last_end_ns": self.last["own"], "first_launch_ns": self.first_launch,
            "gaps": c["gaps"], "max_gap_ns": c["max_gap"].astype("float64"),
            "gpu_busy_ns": self.busy["work"], "last_end_ns": self.last["work"],
            "joined_ops": c["joined"], "uncovered_ops": c["uncovered"],
            "uncovered_busy_ns": self.busy["uncovered"], "prior_end_ns": self.prior_end,
            "streams": streams, "work_ops": c["own"] + c["joined"],
            "work_signature": self.signature.view(np.int64),
            "main_kernel": text_column(main, [*kernel_names, ""]),
            "main_grid": _grid_texts(self.main_grid),
            "work": self._work_labels(kernel_names),
        }, copy=False)

    def _work_labels(self, kernel_names: list[str]) -> pd.Categorical:
        """Each window's own operations named in launch order ('a | b'), or counted where
        more than WORK_NAMES; each distinct sequence of names written once."""
        own = self.count["own"]
        code = np.zeros(self.n, "int64")  # 0: "", then the counts', then the sequences'
        many = own > WORK_NAMES
        counts, code[many] = np.unique(own[many], return_inverse=True)
        code[many] += 1
        texts = ["", *(f"{k} operations" for k in counts.tolist())]
        if not self.names:
            return text_column(code, texts)
        w, launch, name = (np.concatenate(p) for p in zip(*self.names, strict=True))
        self.names = []
        keep = ~many[w]
        w, launch, name = w[keep], launch[keep], name[keep]
        if not len(w):
            return text_column(code, texts)
        order = np.lexsort((launch, w))
        w, name = w[order], name[order]
        names = np.array([*kernel_names, *reversed(OP_KINDS[1:])], dtype=object)
        # Kernels by their code; the others (-1 - kind) from the end of `names`.
        name = np.where(name >= 0, name, len(names) + name + 1)
        # One row per window of its names' codes (len(names): none), its sequences numbered.
        heads = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
        place = np.arange(len(w)) - np.repeat(heads, np.diff(np.r_[heads, len(w)]))
        table = np.full((len(heads), int(place.max()) + 1), len(names), "int64")
        table[np.repeat(np.arange(len(heads)), np.diff(np.r_[heads, len(w)])), place] = name
        sequences, which = _distinct_rows(table)
        code[w[heads]] = len(texts) + which.reshape(-1)
        texts += [" | ".join(names[s[s < len(names)]]) for s in sequences]
        return text_column(code, texts)


def _distinct_rows(table: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """np.unique(table, axis=0, return_inverse=True) of a 2-D table of small non-negative
    ints, by hashing a column at a time (pd.factorize) and sorting only the distinct rows:
    np.unique sorts every row as bytes (0.5 s for half a million windows)."""
    code = np.zeros(len(table), "int64")
    width = int(table.max()) + 1 if table.size else 1
    for column in table.T:  # codes < rows, so code * width + value fits int64
        code = pd.factorize(code * width + column)[0].astype("int64")
    # A row of each code (equal rows share a code: any one of them will do).
    some = np.zeros(int(code.max()) + 1 if len(code) else 0, "int64")
    some[code] = np.arange(len(code))
    distinct = table[some]
    order = np.lexsort(distinct.T[::-1])  # rows in lexicographic order, as np.unique's
    rank = np.empty(len(order), "int64")
    rank[order] = np.arange(len(order))
    return distinct[order], rank[code]

def _by_window(w: np.ndarray, e: np.ndarray, start: np.ndarray
               ) -> tuple[np.ndarray, np.ndarray]:
    """Pairs sorted by (window, operation start), ties by operation."""
    order = np.lexsort((e, start[e], w))
    return w[order], e[order]


def _heads(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    heads = np.flatnonzero(np.r_[True, w[1:] != w[:-1]])
    return heads, w[heads]


def _grid(grids: pd.DataFrame | None, chunk: OpChunk, e: np.ndarray) -> np.ndarray:
    """The launch grid of operations `e` of the chunk, packed (Report.kernel_grids), found by
    the kernel's start and stream; 0 where unknown (not a kernel, or no grids read)."""
    if grids is None or not len(grids) or not len(e):
        return np.zeros(len(e), "int64")
    starts = grids["start_ns"].to_numpy("int64")
    start = chunk["start_ns"][e].astype("int64")
    at = np.minimum(np.searchsorted(starts, start), len(starts) - 1)
    # Kernels that start at the same nanosecond (rare) are told apart by their stream.
    same = (starts[at] == start) & (grids["stream_id"].to_numpy("int64")[at]
                                    == chunk["stream_id"][e].astype("int64"))
    return np.where(same, grids["grid"].to_numpy("int64")[at], 0)


def _grid_texts(packed: np.ndarray) -> pd.Categorical:
    """Packed grids as '128×1×1' ('' for none), each distinct one written once."""
    values, codes = np.unique(packed, return_inverse=True)
    mask = (1 << 21) - 1
    return text_column(codes.reshape(-1), [f"{v >> 42}×{(v >> 21) & mask}×{v & mask}"
                                           if v else "" for v in values.tolist()])
