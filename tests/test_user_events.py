"""The runner's records of a program's own CUDA-event timing (nsyswrap/_user_events.py) and
their matching to the report's event-record calls (analysis/user_events.py), on the CPU.

The records come from the runner's real hooks, driven on a stand-in Event class; the
report's side is built the way nsys writes it: each record's cudaEventRecord call inside
the record() call, torch's own records (the caching allocator's, NCCL's) on the same thread
between the program's, and another thread's at the same times."""

from __future__ import annotations

import importlib.util
import json
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_nsys

from nsyswrap.analysis.user_events import clock_offset, decode, match_records, runner_documents
from nsyswrap.report import EVENT_CALL_COLUMNS, MARK_COLUMNS, Report, ReportInfo, empty
from nsyswrap.schema import CLOCK_SCHEMA, USER_EVENTS_PART_SCHEMA, USER_EVENTS_SCHEMA

RUNNER = Path(__file__).parents[1] / "nsyswrap" / "_user_events.py"
PID, TID, OTHER_TID = 4242, 4243, 4300
# The report's clock = the host's + this (nsys counts from its session's start).
OFFSET_NS = -123_456_789_000


def _runner():
    """A fresh copy of the runner module, as _target.py loads it (by path)."""
    spec = importlib.util.spec_from_file_location(f"_runner_{time.time_ns()}", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.RECORDER = module.Recorder()
    return module


class _Stream:
    def __init__(self, handle):
        self.cuda_stream = handle


def _hooked_event_class(runner):
    """An Event class like torch.cuda.Event over a base whose record() and elapsed_time()
    stand for the C++ ones, patched by the runner's real hook."""
    calls = []  # (start, end) of each "cudaEventRecord" the base made, on the host clock

    class Base:
        def record(self, stream):
            start = time.perf_counter_ns()
            self.at = start
            calls.append((start, time.perf_counter_ns()))

        def elapsed_time(self, end_event):
            return (end_event.at - self.at) / 1e6

    class Event(Base):
        def record(self, stream=None):
            super().record(stream)

        def elapsed_time(self, end_event):
            return super().elapsed_time(end_event)

    module = type("streams", (), {"Event": Event})
    runner._patch_event(module)
    return Event, calls


def _report(marks: list[tuple[int, str]], calls: pd.DataFrame) -> Report:
    m = pd.DataFrame({"time_ns": [t for t, _ in marks], "pid": PID, "thread": 0,
                      "domain": "", "text": [text for _, text in marks]})
    m = m.astype({"time_ns": "int64", "pid": "int32"})[MARK_COLUMNS]
    info = ReportInfo(path=Path("x"), source=Path("x"), nsys_version=None,
                      schema_version=None, start_ns=None, end_ns=None)
    none = empty(["start_ns"])  # what the matching does not read
    return Report(info, none, none, none, none, m, none, calls, None)


def _thread_key(tid: int) -> int:
    return (1 << 56) | (PID << 24) | tid


def _record_program(runner, Event, n_pairs=20):
    """A timing loop through the hooks; returns the events."""
    stream = _Stream(77)
    pairs = [(Event(), Event()) for _ in range(n_pairs)]
    for start, end in pairs:
        start.record(stream)
        sum(range(200))
        end.record(stream)
    for start, end in pairs:
        start.elapsed_time(end)
    return pairs


def _nsys_side(runner, calls, internal_between=True):
    """The report's marks and event calls for what the runner recorded: each record's call
    where the base made it (host clock + OFFSET_NS); torch's own records between them on
    the same thread, and another thread's calls at the very same times."""
    marks = []

    def mark(text):
        marks.append((time.perf_counter_ns() + OFFSET_NS, text))

    runner.RECORDER.clock_burst(mark)
    doc = runner.RECORDER.document()
    doc["pid"] = PID  # the report's process
    marks.append((time.perf_counter_ns() + OFFSET_NS, json.dumps(doc, separators=(",", ":"))))
    rows = []
    for start, end in calls:
        rows.append((start + OFFSET_NS, end + OFFSET_NS, TID, "mine"))
        rows.append((start + OFFSET_NS, end + OFFSET_NS + 10, OTHER_TID, "other thread"))
    if internal_between:
        # torch's own records from C++: between the program's, outside their brackets.
        for (_s0, e0), (s1, _e1) in zip(calls, calls[1:], strict=False):
            mid = (e0 + s1) // 2
            if e0 < mid < s1:
                rows.append((mid + OFFSET_NS, mid + OFFSET_NS + 1, TID, "torch"))
    rows.sort()
    frame = pd.DataFrame({
        "start_ns": [r[0] for r in rows], "end_ns": [r[1] for r in rows], "pid": PID,
        "thread": [_thread_key(r[2]) for r in rows],
        "correlation_id": np.arange(len(rows)), "stream_id": 7, "api": "record"})
    whose = [r[3] for r in rows]
    return marks, frame[EVENT_CALL_COLUMNS], whose


@pytest.fixture
def runner(monkeypatch):
    module = _runner()
    # The thread the records were made on is the program's TID in the report.
    monkeypatch.setattr(module.threading, "get_native_id", lambda: TID)
    return module


def test_each_record_is_matched_to_its_own_call_whatever_else_is_recorded(runner):
    Event, calls = _hooked_event_class(runner)
    _record_program(runner, Event)
    marks, event_calls, whose = _nsys_side(runner, calls)
    assert whose.count("torch") > 10  # the test really interleaves torch's own records
    events = match_records(_report(marks, event_calls))
    rec = events.records
    assert len(rec) == 40 and (rec["call"] >= 0).all()
    # Each record got the call its own record() made: the program's, on its thread, in
    # the order made, never torch's nor the other thread's.
    assert [whose[c] for c in rec["call"]] == ["mine"] * 40
    mine = [i for i, w in enumerate(whose) if w == "mine"]
    assert rec["call"].tolist() == mine
    assert (rec["tid"] == TID).all()
    assert rec["stream_id"].tolist() == [7] * 40
    # The offset the clock marks give is the one nsys's clock had.
    p = events.processes[0]
    assert abs(p.offset_ns - OFFSET_NS) <= p.offset_spread_ns / 2 + 1


def test_records_keep_their_call_sites_events_and_order(runner):
    Event, calls = _hooked_event_class(runner)
    pairs = _record_program(runner, Event, n_pairs=3)
    measured = [(e.at - s.at) / 1e6 for s, e in pairs]
    start, _ = pairs[0]
    start.record(_Stream(77))  # a second record of the same event
    doc = runner.RECORDER.document()
    r = decode(doc)
    assert len(r.records) == 7 and len(r.elapsed) == 3
    assert r.records["nth"].tolist() == [1, 1, 1, 1, 1, 1, 2]
    assert r.records["event"].tolist()[:6] == [1, 2, 3, 4, 5, 6]
    assert r.records["stream"].tolist() == [77] * 7
    sites = {r.sites[s][1] for s in r.records["site"][:6]}
    assert len(sites) == 2  # start.record() and end.record() are two lines of this file
    assert all(f == __file__ for f, _, _ in r.sites)
    assert (r.elapsed["start_nth"] == 1).all() and (r.elapsed["end_nth"] == 1).all()
    assert np.allclose(r.elapsed["value_ms"], measured)


def test_elapsed_time_that_raises_is_kept_with_its_reason(runner):
    class Base:
        def record(self, stream):
            pass

        def elapsed_time(self, end_event):
            raise ValueError("Both events must be created with argument 'enable_timing=True'.")

    class Event(Base):
        pass

    runner._patch_event(type("streams", (), {"Event": Event}))
    a, b = Event(), Event()
    a.record(_Stream(1))
    b.record(_Stream(1))
    with pytest.raises(ValueError):
        a.elapsed_time(b)
    r = decode(runner.RECORDER.document())
    assert np.isnan(r.elapsed["value_ms"][0])
    assert r.elapsed["error"][0].startswith("ValueError: Both events")


def test_parts_are_joined_and_incomplete_ones_said(runner):
    Event, calls = _hooked_event_class(runner)
    _record_program(runner, Event, n_pairs=2)
    text = json.dumps(runner.RECORDER.document(), separators=(",", ":"))
    chunks = [text[i:i + 100] for i in range(0, len(text), 100)]
    parts = [json.dumps({"nsyswrap": USER_EVENTS_PART_SCHEMA, "key": "k", "part": i,
                         "parts": len(chunks), "text": c}, separators=(",", ":"))
             for i, c in enumerate(chunks)]
    marks = pd.DataFrame({"text": parts})
    notes: list[str] = []
    assert len(runner_documents(marks, notes)) == 1 and not notes
    assert runner_documents(marks.iloc[:-1], notes) == []
    assert "incomplete" in notes[0]


def test_no_clock_mark_in_the_report_leaves_records_unplaced(runner):
    Event, calls = _hooked_event_class(runner)
    _record_program(runner, Event, n_pairs=2)
    marks, event_calls, _ = _nsys_side(runner, calls)
    without_clock = [(t, text) for t, text in marks if CLOCK_SCHEMA not in text]
    events = match_records(_report(without_clock, event_calls))
    assert any("clock marks" in n for n in events.notes)
    assert events.records.empty


def test_clock_offset_from_marks_that_disagree_is_their_median():
    from nsyswrap.analysis.user_events import RunnerRecords

    r = RunnerRecords(pid=1, records=pd.DataFrame(), elapsed=pd.DataFrame(), sites=[],
                      threads=[], scopes=[], clock_marks=[(0, 10, "a"), (100, 110, "b")],
                      floor_ms=[], notes=[], hook_cost_ns=None)
    text = '{"nsyswrap":"' + CLOCK_SCHEMA + '","key":"%s"}'
    marks = pd.DataFrame({"time_ns": [1005, 1150], "pid": 1,
                          "text": [text % "a", text % "b"]})
    offset, spread = clock_offset(r, marks)
    # a allows [995, 1005], b [1040, 1050]: they do not meet; the middles are 1000, 1045.
    assert offset == pytest.approx(1022.5) and spread == pytest.approx(45)


def schema_env() -> str:
    from nsyswrap.schema import USER_EVENTS_ENV

    return USER_EVENTS_ENV


def test_the_schema_names_match_the_runners_copy():
    module = _runner()
    assert module.USER_EVENTS_SCHEMA == USER_EVENTS_SCHEMA
    assert module.USER_EVENTS_PART_SCHEMA == USER_EVENTS_PART_SCHEMA
    assert module.CLOCK_SCHEMA == CLOCK_SCHEMA
    assert module.ENABLE_ENV == schema_env()
    from nsyswrap import schema

    assert module.FLOOR_RANGE == schema.USER_FLOOR_RANGE
    assert module.TIMER_RANGE_PREFIX == schema.TIMER_RANGE_PREFIX
    assert module.DO_BENCH_RANGE_PREFIX == schema.DO_BENCH_RANGE_PREFIX
    assert (module.RECORD_FORMAT, module.RECORD_FIELDS) == (schema.USER_RECORD_FORMAT,
                                                            schema.USER_RECORD_FIELDS)
    assert (module.ELAPSED_FORMAT, module.ELAPSED_FIELDS) == (schema.USER_ELAPSED_FORMAT,
                                                              schema.USER_ELAPSED_FIELDS)
    assert (module.MAX_RECORDS, module.MAX_ELAPSED) == (schema.USER_MAX_RECORDS,
                                                        schema.USER_MAX_ELAPSED)


def test_the_runner_imports_no_torch_and_nothing_of_nsyswrap():
    import subprocess

    code = (f"import importlib.util, sys; s = importlib.util.spec_from_file_location('r', "
            f"{str(RUNNER)!r}); m = importlib.util.module_from_spec(s); "
            "s.loader.exec_module(m); m.install(); "
            "print(sorted(k for k in sys.modules if k.split('.')[0] in "
            "('torch', 'nsyswrap', 'pandas', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


PROGRAM = """
import threading
import torch

def time_it(n):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(n):
        start.record()
        sum(range(10_000))
        end.record()
        start.elapsed_time(end)

time_it(3)
worker = threading.Thread(target=time_it, args=(2,))
worker.start()
worker.join()
lonely = torch.cuda.Event()
lonely.record()
"""


@needs_nsys
def test_nsyswrap_run_records_an_unmodified_programs_timings_into_the_report(tmp_path):
    """End to end under Debian's nsys 2022.4 on the CPU: the runner's records reach the
    report through NVTX (a stand-in torch whose NVTX is the nvtx package); with no CUDA
    there is no cudaEventRecord call to tie them to, which the analysis says."""
    import os
    import subprocess

    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    root = Path(__file__).parents[1]
    env = dict(os.environ, PYTHONPATH=f"{root / 'tests' / 'fake_torch'}{os.pathsep}{root}")
    out = tmp_path / "run"
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", str(out),
                           "--format", "json", str(script)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    u = json.loads(proc.stdout)["user_timings"]
    assert u["records"] == 11 and u["measured"] == 5
    assert u["groups"] == []
    unreconciled = {row["label"].rsplit(":", 1)[1]: row for row in u["unreconciled"]}
    assert sum(row["count"] for row in u["unreconciled"]) == 5
    assert all("capture range" in row["reason"] for row in unreconciled.values())
    assert [row["records"] for row in u["unmeasured"]] == [1]
    assert u["hook_cost_ns"] > 0
    # --no-user-events: nothing recorded.
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", str(tmp_path / "off"),
                           "--no-user-events", "--format", "json", str(script)],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["user_timings"]["records"] == 0
