"""The program's own CUDA-event records, as `nsyswrap run`'s runner wrote them into the report
(nsyswrap/instrument/event_hooks.py), tied to the runtime calls they made.

The runner reads the host clock just before and after each `record()`; the report holds the
`cudaEventRecord` call itself. The clock marks the runner writes (each one's time in the
report lies between the readings taken just before and after it) give the offset between
the two clocks; with it each record's bracket holds exactly one event-record call of its
thread, which gives the record its time in the report, its correlation id and, where the
export has CUDA event trace, its stream. Events torch records itself (the caching allocator,
NCCL's work events) are calls with no record of the runner's around them, so they never
shift the matching.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..instrument.schema import (
    CLOCK_SCHEMA,
    USER_CONTEXT_DEPTH,
    USER_ELAPSED_FIELDS,
    USER_ELAPSED_FIELDS_1,
    USER_ELAPSED_FORMAT,
    USER_ELAPSED_FORMAT_1,
    USER_EVENTS_MARK_PREFIX,
    USER_EVENTS_PART_SCHEMA,
    USER_EVENTS_PART_SCHEMA_1,
    USER_EVENTS_SCHEMA,
    USER_EVENTS_SCHEMA_1,
    USER_MAX_CONTEXTS,
    USER_MAX_ELAPSED,
    USER_MAX_RECORDS,
    USER_MAX_SITES,
    USER_MAX_THREADS,
    USER_RECORD_FIELDS,
    USER_RECORD_FIELDS_1,
    USER_RECORD_FORMAT,
    USER_RECORD_FORMAT_1,
)
from ..read.json_input import MarkParts, all_of, finite, is_text, parse, real, whole
from ..read.report import Report, empty, thread_ids

# How far outside its bracket (ns) a record's call may lie: the clock offset's own
# uncertainty (a mark's bracket is ~0.5-2 µs wide; their intersection narrower).
MATCH_TOLERANCE_NS = 2_000
# Calls of the thread looked at per record, from the first inside its widened bracket.
CANDIDATES = 4


@dataclass
class RunnerRecords:
    """One process's records, decoded: frames of the runner's columns (see _user_events)."""

    pid: int
    records: pd.DataFrame  # before_ns, took_ns, thread, event, nth, site, context (int64,
    #                        -1: a document of the earlier runner), stream; emptied once
    #                        matched (UserEvents.records holds them then)
    elapsed: pd.DataFrame  # before_ns, after_ns, thread, start_event, start_nth, end_event,
    #                        end_nth, site, value_ms, error
    sites: list[tuple[str, int, str]]  # site code -> (file, line, function)
    threads: list[int]  # thread code -> OS thread id
    scopes: list[dict]
    clock_marks: list[tuple[int, int, str]]
    floor_ms: list[float]
    notes: list[str]
    hook_cost_ns: float | None
    record_count: int = 0  # the records the document holds
    dropped_records: int = 0
    dropped_elapsed: int = 0
    # context code -> the program's frames that led to the records, innermost first, each
    # (file, line, function, ((argument, text), ...)) (_user_events.Recorder.context_code)
    contexts: list[tuple] = field(default_factory=list)
    hook_cost_worst_ns: float | None = None  # a record that takes its context
    own_records: int = 0  # nsyswrap's own (the harness's): counted by the runner, not kept
    own_elapsed: int = 0
    offset_ns: float | None = None  # report time = host clock + offset (clock_offset)
    offset_spread_ns: float | None = None  # how far the clock marks disagree
    # The trace of the program's lines as the document holds it (code_lines.py decodes it);
    # None: not traced (Python before 3.12, `nsyswrap run --no-lines`, an earlier runner).
    lines: dict | None = None
    lines_note: str | None = None  # why not: the runner's words


@dataclass
class UserEvents:
    """Every process's records, matched to the report's event calls (match_records)."""

    processes: list[RunnerRecords] = field(default_factory=list)
    # One row per record: pid, thread (report key), tid, event, nth, site, context (-1:
    # unknown), stream_handle,
    # call (row of report.event_calls, -1 unmatched), time_ns (the call's start),
    # call_end_ns, stream_id (the trace's; -1 unknown)
    records: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes)


# The runner's documents the analysis reads: this runner's and the earlier one's.
_DOCUMENT_SCHEMAS = (USER_EVENTS_SCHEMA, USER_EVENTS_SCHEMA_1)


def _runner_marks(marks: pd.DataFrame) -> np.ndarray:
    """Which of `marks` are the runner's documents (or their parts)."""
    return marks["text"].astype(str).str.startswith(USER_EVENTS_MARK_PREFIX).to_numpy(bool)


def without_runner_documents(marks: pd.DataFrame) -> pd.DataFrame:
    """`marks` without the runner's documents (those runner_documents reads)."""
    if not len(marks):
        return marks
    mine = _runner_marks(marks)
    return marks[~mine].reset_index(drop=True) if mine.any() else marks


def runner_documents(marks: pd.DataFrame, notes: list[str]) -> list[dict]:
    """The runner's JSON documents in the report's marks, parts joined; what cannot be read
    is said in `notes` and left out."""
    if not len(marks):
        return []
    docs, parts = [], MarkParts()
    for text in marks["text"][_runner_marks(marks)].astype(str):
        try:
            doc = parse(text)
        except ValueError:
            notes.append("a mark of nsyswrap's runner is not JSON (cut short?); left out")
            continue
        kind = doc.get("nsyswrap") if isinstance(doc, dict) else None
        if kind in _DOCUMENT_SCHEMAS:
            docs.append(doc)
        elif kind in (USER_EVENTS_PART_SCHEMA, USER_EVENTS_PART_SCHEMA_1) and not parts.add(doc):
            notes.append("a part of the runner's records lacks its key, part number, part "
                         "count or text; left out")
    for joined in parts.joined():
        if not joined.complete:
            notes.append(f"the runner's records {joined.key} are incomplete ({joined.found} of "
                         f"{joined.count} parts: the capture ended while they were written); "
                         "left out")
        elif not (isinstance(joined.doc, dict) and joined.doc.get("nsyswrap") in
                  _DOCUMENT_SCHEMAS):
            notes.append(f"the runner's records {joined.key} cannot be read (their parts do not "
                         "join into one of its documents); left out")
        else:
            docs.append(joined.doc)
    return docs


# What the runner writes, as the analysis takes it: a host clock reading (perf_counter_ns,
# ns since boot: far below this bound, which keeps the matching's sums within int64), and
# process and thread ids (pid_t).
CLOCK_MAX = 1 << 62
ID_MAX = (1 << 31) - 1


def _check(ok: bool, problem: str) -> None:
    if not ok:
        raise ValueError(problem)


def _is_clock(value) -> bool:
    return whole(value, 0, CLOCK_MAX)


def _optional(doc: dict, name: str, default):
    """A field the runner always writes but a document of an earlier one may lack."""
    value = doc.get(name)
    return default if value is None else value


# Compressed bytes inflated a step: deflate's greatest ratio (1032:1) makes at most ~4 MB
# of each, so no step goes far past the bound.
INFLATE_STEP = 4 << 10


def inflate(packed, most: int, name: str) -> np.ndarray:
    """A packed column (zlib, then base64) as bytes, no more than `most` of them: a crafted
    column of a few MB inflates to GBs, which a whole zlib.decompress would allocate before
    any check. Inflated a step at a time into one buffer (np.empty: the pages of the bound
    not filled are never touched)."""
    _check(is_text(packed), f"{name} is not text")
    try:
        compressed = memoryview(base64.b64decode(packed, validate=True))
    except ValueError:  # binascii.Error is one; so is text that is not ASCII
        raise ValueError(f"{name} is not base64") from None
    inflater = zlib.decompressobj()
    out = np.empty(most, dtype=np.uint8)
    filled = 0
    for at in range(0, len(compressed), INFLATE_STEP):
        try:
            step = inflater.decompress(compressed[at:at + INFLATE_STEP])
        except zlib.error as e:
            raise ValueError(f"{name} is not zlib data ({e})") from None
        _check(filled + len(step) <= most,
               f"{name} inflates past {most} bytes, more than the document says it holds")
        out[filled:filled + len(step)] = np.frombuffer(step, dtype=np.uint8)
        filled += len(step)
        if inflater.eof:
            break
    _check(inflater.eof, f"{name} is cut short")
    return out[:filled]


def _unpack(doc: dict, name: str, fmt: str, fields: tuple[str, ...],
            most_rows: int) -> pd.DataFrame:
    """A packed column as a frame: inflated no further than the rows the document says it
    holds (`<name>_rows`; a document of an earlier runner says none: the most it keeps)."""
    size = struct.calcsize(fmt)
    rows = doc.get(f"{name}_rows")
    _check(rows is None or whole(rows, 0, most_rows),
           f"{name}_rows is not a count of rows up to {most_rows}")
    raw = inflate(doc.get(name), (most_rows if rows is None else rows) * size, name)
    _check(len(raw) % size == 0 and (rows is None or len(raw) == rows * size),
           f"{name} is {len(raw)} bytes, not "
           f"{'rows' if rows is None else rows} of {size} bytes")
    table = raw.view(np.dtype(
        [(f, "<" + _NUMPY_CODES[code]) for f, code in zip(fields, fmt[1:], strict=True)]))
    # Each column copied out whole, in the machine's byte order; the bytes then go.
    return pd.DataFrame({f: table[f].astype(table.dtype[f].newbyteorder("="), copy=True)
                         for f in fields}, copy=False)


# struct codes of the runner's formats, as numpy types.
_NUMPY_CODES = {"q": "i8", "Q": "u8", "I": "u4", "i": "i4", "H": "u2", "h": "i2", "d": "f8"}


def _check_rows(records: pd.DataFrame, elapsed: pd.DataFrame, threads: int,
                sites: int, contexts: int) -> None:
    """The packed rows' codes point into the document's lists, their clock readings are
    readings, and each (event, record) is recorded once, as the runner writes them."""
    for name, frame in (("records", records), ("elapsed", elapsed)):
        _check(bool((frame["thread"].to_numpy() < threads).all()),
               f"{name} name a thread past the document's {threads}")
        _check(bool((frame["site"].to_numpy() < sites).all()),
               f"{name} name a call site past the document's {sites}")
    _check(bool((records["context"].to_numpy() < contexts).all()),
           f"records name a context past the document's {contexts}")
    before = records["before_ns"].to_numpy()
    took = records["took_ns"].to_numpy()
    _check(bool(((before >= 0) & (before <= CLOCK_MAX) & (took >= 0)
                 & (took <= CLOCK_MAX - before)).all()),
           "records hold times that are not clock readings")
    before, after = elapsed["before_ns"].to_numpy(), elapsed["after_ns"].to_numpy()
    _check(bool(((before >= 0) & (before <= after) & (after <= CLOCK_MAX)).all()),
           "elapsed holds times that are not clock readings in order")
    keys = ((records["event"].to_numpy().astype("uint64") << np.uint64(32))
            | records["nth"].to_numpy().astype("uint64"))
    keys.sort()  # a sort, not np.unique: numpy's hashed unique is ~50x slower at 1 M rows
    _check(bool((keys[1:] != keys[:-1]).all()), "records repeat an event's record")


def _is_plain(value) -> bool:
    """What the runner writes of a Python value (_user_events._plain): a number, a list of
    numbers, or text (its repr)."""
    return real(value) or all_of(value, real) or is_text(value)


_SCOPE_COUNTS = ("first_record", "end_record", "first_elapsed", "end_elapsed", "number")


def _scope_problem(scope, threads: int, sites: int, contexts: int) -> str | None:
    """What makes a scope (a do_bench or Timer call, a pause) unusable, None when nothing
    does: the fields the analysis reads, each of the type and range the runner writes."""
    if not isinstance(scope, dict):
        return "it is not an object"
    if not is_text(scope.get("kind")):
        return "its kind is not text"
    before, after = scope.get("before_ns"), scope.get("after_ns")
    if not (_is_clock(before) and _is_clock(after) and before <= after):
        return "before_ns and after_ns are not clock readings in order"
    if not whole(scope.get("thread"), 0, threads - 1):
        return "its thread is not one of the document's"
    if not whole(scope.get("site", -1), -1, sites - 1):
        return "its site is not one of the document's"
    if not whole(scope.get("context", -1), -1, contexts - 1):
        return "its context is not one of the document's"
    for name in _SCOPE_COUNTS:
        if name in scope and not whole(scope[name], 0):
            return f"{name} is not a count"
    if not is_text(scope.get("label", "")):
        return "its label is not text"
    options = scope.get("options", {})
    if not (isinstance(options, dict) and all(_is_plain(v) for v in options.values())):
        return "options must map names to numbers or text"
    returned = scope.get("returned")
    if isinstance(returned, dict):  # a Timer's Measurement
        if not (_is_plain(returned.get("raw_times", []))
                and whole(returned.get("number_per_run", 0), 0)
                and all(_is_plain(returned.get(k, 0.0)) for k in ("median", "mean"))):
            return "what it returned is not a measurement"
    elif returned is not None and not _is_plain(returned):
        return "what it returned is not a number, numbers or text"
    return None


def _is_site(value) -> bool:
    return (isinstance(value, list) and len(value) == 3 and is_text(value[0])
            and whole(value[1], 0) and is_text(value[2]))


def _is_argument(value) -> bool:
    return isinstance(value, list) and len(value) == 2 and is_text(value[0]) \
        and is_text(value[1])


def _is_frame(value) -> bool:
    """[file, line, function, [[argument, text], ...]]: a frame of a context."""
    return (isinstance(value, list) and len(value) == 4 and is_text(value[0])
            and whole(value[1], 0) and is_text(value[2]) and all_of(value[3], _is_argument))


def _is_context(value) -> bool:
    return (isinstance(value, list) and len(value) <= USER_CONTEXT_DEPTH
            and all_of(value, _is_frame))


def _is_clock_mark(value) -> bool:
    return (isinstance(value, list) and len(value) == 3 and _is_clock(value[0])
            and _is_clock(value[1]) and value[0] <= value[1] and is_text(value[2]))


def decode(doc: dict) -> RunnerRecords:
    """One runner document as frames, each field the analysis reads checked to be what the
    runner writes (its type and range, the packed columns' layout and size, the codes in
    them). Raises ValueError saying what is not."""
    _check(isinstance(doc, dict), "it is not a JSON object")
    pid = doc.get("pid")
    _check(whole(pid, 0, ID_MAX), "its pid is not a process id")
    earlier = doc.get("nsyswrap") == USER_EVENTS_SCHEMA_1
    record_format, record_fields, elapsed_format, elapsed_fields = (
        (USER_RECORD_FORMAT_1, USER_RECORD_FIELDS_1, USER_ELAPSED_FORMAT_1,
         USER_ELAPSED_FIELDS_1) if earlier else
        (USER_RECORD_FORMAT, USER_RECORD_FIELDS, USER_ELAPSED_FORMAT, USER_ELAPSED_FIELDS))
    _check(doc.get("record_format") == record_format
           and doc.get("record_fields") == list(record_fields)
           and doc.get("elapsed_format") == elapsed_format
           and doc.get("elapsed_fields") == list(elapsed_fields),
           "its packed columns are not laid out as the runner's (record_format, "
           "record_fields, elapsed_format, elapsed_fields)")
    threads, sites = doc.get("threads"), doc.get("sites")
    _check(all_of(threads, lambda t: whole(t, 0, ID_MAX)) and len(threads) <= USER_MAX_THREADS + 1,
           "threads is not a list of thread ids")
    _check(all_of(sites, _is_site) and len(sites) <= USER_MAX_SITES + 1,
           "sites is not a list of [file, line, function]")
    contexts = [] if earlier else doc.get("contexts")
    _check(all_of(contexts, _is_context) and len(contexts) <= USER_MAX_CONTEXTS + 1,
           "contexts is not a list of contexts (lists of [file, line, function, "
           "[[argument, text], ...]])")
    records = _unpack(doc, "records", record_format, record_fields, USER_MAX_RECORDS)
    if earlier:
        records.insert(records.columns.get_loc("site") + 1, "context", np.int64(-1))
    records["context"] = records["context"].astype("int64")
    elapsed = _unpack(doc, "elapsed", elapsed_format, elapsed_fields, USER_MAX_ELAPSED)
    _check_rows(records, elapsed, len(threads), len(sites), len(contexts))
    errors = _optional(doc, "elapsed_errors", {})
    _check(isinstance(errors, dict) and all(
        k.isascii() and k.isdigit() and len(k) < 19 and is_text(v) for k, v in errors.items()),
        "elapsed_errors does not map row numbers to text")
    # What each elapsed_time() raised ("" for none: nearly all), as a categorical: a text
    # per row was 0.1 s and 4 MB at half a million.
    texts, codes = {"": 0}, np.zeros(len(elapsed), "int32")
    for k, v in errors.items():
        if (row := int(k)) < len(elapsed):
            codes[row] = texts.setdefault(v, len(texts))
    elapsed["error"] = pd.Categorical.from_codes(codes, list(texts))
    scopes = _optional(doc, "scopes", [])
    _check(isinstance(scopes, list), "scopes is not a list")
    for i, scope in enumerate(scopes):
        problem = _scope_problem(scope, len(threads), len(sites), len(contexts))
        _check(problem is None, f"scope {i}: {problem}")
    clock_marks = _optional(doc, "clock_marks", [])
    _check(all_of(clock_marks, _is_clock_mark),
           "clock_marks is not a list of [before_ns, after_ns, key]")
    floor_ms = _optional(doc, "floor_ms", [])
    _check(all_of(floor_ms, finite), "floor_ms is not a list of times")
    notes = _optional(doc, "notes", [])
    _check(all_of(notes, is_text), "notes is not a list of text")
    costs = {name: doc.get(name) for name in ("hook_cost_ns", "hook_cost_worst_ns")}
    for name, cost in costs.items():
        _check(cost is None or finite(cost, 0), f"{name} is not a time")
    counts = {name: _optional(doc, name, 0) for name in ("dropped_records", "dropped_elapsed",
                                                         "own_records", "own_elapsed")}
    for name, count in counts.items():
        _check(whole(count, 0), f"{name} is not a count")
    return RunnerRecords(
        pid=pid, records=records, record_count=len(records), elapsed=elapsed,
        sites=[tuple(s) for s in sites],
        threads=list(threads), scopes=scopes,
        clock_marks=[(b, a, k) for b, a, k in clock_marks],
        floor_ms=[float(x) for x in floor_ms], notes=list(notes),
        hook_cost_ns=_time_or_none(costs["hook_cost_ns"]),
        hook_cost_worst_ns=_time_or_none(costs["hook_cost_worst_ns"]),
        contexts=[tuple((file, line, function, tuple((name, text) for name, text in arguments))
                        for file, line, function, arguments in context)
                  for context in contexts],
        **_lines_fields(doc), **counts)


def _lines_fields(doc: dict) -> dict:
    """The trace of lines as the document holds it (code_lines.py checks it), and why there
    is none: each only where it has the runner's type."""
    lines, note = doc.get("lines"), doc.get("lines_note")
    return {"lines": lines if isinstance(lines, dict) else None,
            "lines_note": note if is_text(note) else None}


def _time_or_none(value) -> float | None:
    return None if value is None else float(value)


def clock_offset(runner: RunnerRecords, marks: pd.DataFrame) -> tuple[float, float] | None:
    """(offset, spread): report time = host clock + offset, from the clock marks. Each mark
    bounds the offset from both sides (its time lies between the readings around it); the
    offset is the middle of the bounds every mark allows, and `spread` how wide that is.
    Where the bounds do not meet (the clocks drifted apart, or a mark was delayed), the
    median of the marks' own middles, and the spread is how far they disagree."""
    mine = marks[(marks["pid"] == runner.pid)
                 & marks["text"].astype(str).str.startswith('{"nsyswrap":"' + CLOCK_SCHEMA)]
    times = {}
    for time_ns, text in zip(mine["time_ns"], mine["text"], strict=True):
        try:
            doc = parse(text)
        except ValueError:
            continue
        key = doc.get("key") if isinstance(doc, dict) else None
        if is_text(key):
            times[key] = int(time_ns)
    lows, highs = [], []
    for before, after, key in runner.clock_marks:
        if key in times:
            lows.append(times[key] - after)
            highs.append(times[key] - before)
    if not lows:
        return None
    low, high = max(lows), min(highs)
    if low <= high:
        return (low + high) / 2, float(high - low)
    middles = (np.asarray(lows, "float64") + np.asarray(highs, "float64")) / 2
    return float(np.median(middles)), float(middles.max() - middles.min())


def match_records(report: Report) -> UserEvents:
    """The runner's records of every process, each tied to its event-record call."""
    notes: list[str] = []
    out = UserEvents(notes=notes)
    docs = runner_documents(report.marks, notes)
    if not docs:
        return out
    calls = report.event_calls
    frames, pids = [], set()
    for doc in docs:
        try:
            runner = decode(doc)
        except ValueError as e:  # decode checks every field: anything else is a bug here
            notes.append(f"the runner's records of a process cannot be read ({e}); left out")
            continue
        if runner.pid in pids:  # the runner writes one document per process, at its exit
            notes.append(f"process {runner.pid}: a second document of the runner's records "
                         "(a process writes one); left out")
            continue
        pids.add(runner.pid)
        notes.extend(runner.notes)
        for count, what in ((runner.dropped_records, "record()"),
                            (runner.dropped_elapsed, "elapsed_time()")):
            if count:
                notes.append(f"process {runner.pid}: {count} {what} calls past the runner's "
                             "limit were counted, not kept")
        offset = clock_offset(runner, report.marks)
        if offset is None:
            notes.append(f"process {runner.pid}: none of the runner's clock marks is in the "
                         "report (captured only in part?): its records cannot be placed "
                         "in time")
            out.processes.append(runner)
            continue
        runner.offset_ns, runner.offset_spread_ns = offset
        out.processes.append(runner)
        frames.append(_matched(runner, calls))
        # 44 bytes a record, held till the end otherwise (a slice would keep them).
        runner.records = runner.records.iloc[:0].copy()
    out.records = (pd.concat(frames, ignore_index=True) if frames else _matched_empty())
    unmatched = int((out.records["call"] < 0).sum()) if len(out.records) else 0
    if unmatched:
        notes.append(f"{unmatched} of {len(out.records)} record() calls have no "
                     "cudaEventRecord call in the report (outside the capture range, or not "
                     "traced): their intervals are listed, not reconciled")
    return out


_MATCHED_COLUMNS = ["pid", "thread", "tid", "event", "nth", "site", "context", "stream_handle",
                    "call", "time_ns", "call_end_ns", "stream_id"]


def _matched_empty() -> pd.DataFrame:
    return empty(_MATCHED_COLUMNS)


def _bracketed(starts: np.ndarray, ends: np.ndarray, low: np.ndarray, high: np.ndarray,
               exact_low: np.ndarray, exact_high: np.ndarray) -> np.ndarray:
    """Per record, the call (a position in `starts`, the calls in start order; -1: none)
    starting inside its bracket widened by the clock's uncertainty ([low, high]) and ending
    inside it; of those, the one lying furthest inside the bracket itself ([exact_low,
    exact_high]): torch's own records sit between the program's, just outside their
    brackets. A bracket with one call starting in it (most) can take only that one; the
    others choose among their first CANDIDATES."""
    first = np.searchsorted(starts, low, side="left")
    inside = np.searchsorted(starts, high, side="right") - first
    best = np.where((inside == 1) & (ends[np.minimum(first, len(ends) - 1)] <= high),
                    first, -1)
    several = np.flatnonzero(inside > 1)
    if len(several):
        best[several] = _closest(starts, ends, first[several], high[several],
                                 exact_low[several], exact_high[several])
    return best


def _closest(starts: np.ndarray, ends: np.ndarray, first: np.ndarray, high: np.ndarray,
             exact_low: np.ndarray, exact_high: np.ndarray) -> np.ndarray:
    """Of the CANDIDATES calls from `first` on (in start order) that start and end by `high`,
    the one lying least outside [exact_low, exact_high] (the first of equals); -1: none."""
    best = np.full(len(first), -1, "int64")
    best_out = np.full(len(first), np.inf)
    for k in range(CANDIDATES):
        at = first + k
        valid = at < len(starts)
        at = np.minimum(at, len(starts) - 1)
        ok = valid & (starts[at] <= high) & (ends[at] <= high)
        outside = (np.maximum(exact_low - starts[at], 0)
                   + np.maximum(ends[at] - exact_high, 0)).astype("float64")
        better = ok & (outside < best_out)
        best[better] = at[better]
        best_out[better] = outside[better]
    return best


def _matched(runner: RunnerRecords, calls: pd.DataFrame) -> pd.DataFrame:
    """The runner's records with the event-record call each brackets (-1: none)."""
    r = runner.records
    n = len(r)
    tids = np.asarray(runner.threads, dtype="int64")
    tid = tids[r["thread"].to_numpy()] if len(tids) else np.zeros(n, "int64")
    low = r["before_ns"].to_numpy("int64") + runner.offset_ns - MATCH_TOLERANCE_NS
    high = (r["before_ns"].to_numpy("int64") + r["took_ns"].to_numpy("int64")
            + runner.offset_ns + MATCH_TOLERANCE_NS)
    call = np.full(n, -1, dtype="int64")
    mine = calls[(calls["pid"] == runner.pid) & (calls["api"] == "record")]
    _, call_tids = thread_ids(mine["thread"].to_numpy())
    exact_low = low + MATCH_TOLERANCE_NS
    exact_high = high - MATCH_TOLERANCE_NS
    for t in np.unique(tid):
        rows = np.flatnonzero(tid == t)
        these = mine[call_tids == t]
        starts = these["start_ns"].to_numpy("int64")
        ends = these["end_ns"].to_numpy("int64")
        if not len(starts):
            continue
        best = _bracketed(starts, ends, low[rows], high[rows], exact_low[rows],
                          exact_high[rows])
        got = best >= 0
        call[rows[got]] = these.index.to_numpy()[best[got]]
    found = call >= 0
    safe = np.where(found, call, 0)
    def take(column, fill):
        if not len(calls):
            return np.full(n, fill, "int64")
        return np.where(found, calls[column].to_numpy("int64")[safe], fill)

    pid = np.full(n, runner.pid, "int64")
    thread = take("thread", -1)
    return pd.DataFrame({
        # event, nth and site as the runner packed them (32 bits or fewer): 12 MB a million
        # records less, held till the end; their readers widen them where they compute.
        "pid": pid, "thread": thread, "tid": tid, "event": r["event"].to_numpy(),
        "nth": r["nth"].to_numpy(), "site": r["site"].to_numpy(),
        "context": r["context"].to_numpy("int64"),
        "stream_handle": r["stream"].to_numpy("int64"), "call": call,
        "time_ns": take("start_ns", -1), "call_end_ns": take("end_ns", -1),
        "stream_id": take("stream_id", -1)}, copy=False)
