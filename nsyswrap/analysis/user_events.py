"""The program's own CUDA-event records, as `nsyswrap run`'s runner wrote them into the report
(nsyswrap/_user_events.py), tied to the runtime calls they made.

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
import binascii
import json
import struct
import zlib
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..report import Report, thread_ids
from ..schema import CLOCK_SCHEMA, USER_EVENTS_PART_SCHEMA, USER_EVENTS_SCHEMA

# How far outside its bracket (ns) a record's call may lie: the clock offset's own
# uncertainty (a mark's bracket is ~0.5-2 µs wide; their intersection narrower).
MATCH_TOLERANCE_NS = 2_000
# Calls of the thread looked at per record, from the first inside its widened bracket.
CANDIDATES = 4


@dataclass
class RunnerRecords:
    """One process's records, decoded: frames of the runner's columns (see _user_events)."""

    pid: int
    records: pd.DataFrame  # before_ns, took_ns, thread, event, nth, site, stream
    elapsed: pd.DataFrame  # before_ns, after_ns, thread, start_event, start_nth, end_event,
    #                        end_nth, site, value_ms, error
    sites: list[tuple[str, int, str]]  # site code -> (file, line, function)
    threads: list[int]  # thread code -> OS thread id
    scopes: list[dict]
    clock_marks: list[tuple[int, int, str]]
    floor_ms: list[float]
    notes: list[str]
    hook_cost_ns: float | None
    dropped_records: int = 0
    offset_ns: float | None = None  # report time = host clock + offset (clock_offset)
    offset_spread_ns: float | None = None  # how far the clock marks disagree


@dataclass
class UserEvents:
    """Every process's records, matched to the report's event calls (match_records)."""

    processes: list[RunnerRecords] = field(default_factory=list)
    # One row per record: pid, thread (report key), tid, event, nth, site, stream_handle,
    # call (row of report.event_calls, -1 unmatched), time_ns (the call's start),
    # call_end_ns, stream_id (the trace's; -1 unknown), correlation_id
    records: pd.DataFrame = field(default_factory=pd.DataFrame)
    notes: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.processes)


def runner_documents(marks: pd.DataFrame, notes: list[str]) -> list[dict]:
    """The runner's JSON documents in the report's marks, parts joined; what cannot be read
    is said in `notes` and left out."""
    if not len(marks):
        return []
    texts = marks["text"].astype(str)
    mine = texts.str.startswith('{"nsyswrap":"' + USER_EVENTS_SCHEMA)
    docs, parts = [], {}
    for text in texts[mine]:
        try:
            doc = json.loads(text)
        except ValueError:
            notes.append("a mark of nsyswrap's runner is not JSON (cut short?); left out")
            continue
        if doc.get("nsyswrap") == USER_EVENTS_SCHEMA:
            docs.append(doc)
        elif doc.get("nsyswrap") == USER_EVENTS_PART_SCHEMA:
            parts.setdefault(str(doc.get("key")), {})[doc.get("part")] = doc
    for key, pieces in parts.items():
        first = pieces.get(0) or next(iter(pieces.values()))
        if len(pieces) != first.get("parts"):
            notes.append(f"the runner's records {key} are incomplete ({len(pieces)} of "
                         f"{first.get('parts')} parts: the capture ended while they were "
                         "written); left out")
            continue
        try:
            docs.append(json.loads("".join(pieces[i]["text"] for i in sorted(pieces))))
        except (ValueError, KeyError, TypeError):
            notes.append(f"the runner's records {key} cannot be read; left out")
    return docs


def _unpack(doc: dict, data: str, fmt: str, fields: list[str]) -> pd.DataFrame:
    raw = zlib.decompress(base64.b64decode(doc[data]))
    layout = struct.Struct(fmt)
    if len(raw) % layout.size:
        raise ValueError(f"{data} is {len(raw)} bytes, not rows of {layout.size}")
    dtype = np.dtype([(name, _NUMPY_CODES[code]) for name, code in
                      zip(fields, fmt.lstrip("<"), strict=True)])
    return pd.DataFrame(np.frombuffer(raw, dtype=dtype.newbyteorder("<")).copy())


# struct codes of the runner's formats, as numpy types.
_NUMPY_CODES = {"q": "i8", "Q": "u8", "I": "u4", "i": "i4", "H": "u2", "h": "i2", "d": "f8"}


def decode(doc: dict) -> RunnerRecords:
    """One runner document as frames. Raises ValueError (KeyError, ...) when malformed."""
    records = _unpack(doc, "records", doc["record_format"], doc["record_fields"])
    elapsed = _unpack(doc, "elapsed", doc["elapsed_format"], doc["elapsed_fields"])
    errors = {int(k): str(v) for k, v in (doc.get("elapsed_errors") or {}).items()}
    elapsed["error"] = [errors.get(i, "") for i in range(len(elapsed))]
    sites = [(str(f), int(line), str(fn)) for f, line, fn in doc["sites"]]
    return RunnerRecords(
        pid=int(doc["pid"]), records=records, elapsed=elapsed, sites=sites,
        threads=[int(t) for t in doc["threads"]], scopes=list(doc.get("scopes") or []),
        clock_marks=[(int(b), int(a), str(k)) for b, a, k in doc.get("clock_marks") or []],
        floor_ms=[float(x) for x in doc.get("floor_ms") or []],
        notes=[str(n) for n in doc.get("notes") or []],
        hook_cost_ns=doc.get("hook_cost_ns"),
        dropped_records=int(doc.get("dropped_records") or 0))


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
            times[json.loads(text)["key"]] = int(time_ns)
        except (ValueError, KeyError, TypeError):
            continue
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
    frames = []
    for doc in docs:
        try:
            runner = decode(doc)
        except (ValueError, KeyError, TypeError, binascii.Error, zlib.error, struct.error) as e:
            notes.append(f"the runner's records of a process cannot be read ({e}); left out")
            continue
        notes.extend(runner.notes)
        if runner.dropped_records:
            notes.append(f"process {runner.pid}: {runner.dropped_records} record() calls past "
                         "the runner's limit were counted, not kept")
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
    out.records = (pd.concat(frames, ignore_index=True) if frames else _matched_empty())
    unmatched = int((out.records["call"] < 0).sum()) if len(out.records) else 0
    if unmatched:
        notes.append(f"{unmatched} of {len(out.records)} record() calls have no "
                     "cudaEventRecord call in the report (outside the capture range, or not "
                     "traced): their intervals are listed, not reconciled")
    return out


_MATCHED_COLUMNS = ["pid", "thread", "tid", "event", "nth", "site", "stream_handle", "call",
                    "time_ns", "call_end_ns", "stream_id", "correlation_id"]


def _matched_empty() -> pd.DataFrame:
    return pd.DataFrame({c: pd.Series(dtype="int64") for c in _MATCHED_COLUMNS})


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
        # The calls starting inside the bracket (widened by the clock's uncertainty) and
        # ending inside it; of those, the one lying furthest inside the bracket itself
        # (torch's own records sit between the program's, just outside their brackets).
        first = np.searchsorted(starts, low[rows], side="left")
        best = np.full(len(rows), -1, "int64")
        best_out = np.full(len(rows), np.inf)
        for k in range(CANDIDATES):
            at = first + k
            valid = at < len(starts)
            at = np.minimum(at, len(starts) - 1)
            ok = valid & (starts[at] <= high[rows]) & (ends[at] <= high[rows])
            outside = (np.maximum(exact_low[rows] - starts[at], 0)
                       + np.maximum(ends[at] - exact_high[rows], 0)).astype("float64")
            better = ok & (outside < best_out)
            best[better] = at[better]
            best_out[better] = outside[better]
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
        "pid": pid, "thread": thread, "tid": tid, "event": r["event"].to_numpy("int64"),
        "nth": r["nth"].to_numpy("int64"), "site": r["site"].to_numpy("int64"),
        "stream_handle": r["stream"].to_numpy("int64"), "call": call,
        "time_ns": take("start_ns", -1), "call_end_ns": take("end_ns", -1),
        "stream_id": take("stream_id", -1), "correlation_id": take("correlation_id", -1)})
