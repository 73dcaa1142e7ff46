"""The runner's records of a program's own CUDA-event timing
(nsyswrap/instrument/event_hooks.py) and
their matching to the report's event-record calls (analysis/user_events.py), on the CPU.

The records come from the runner's real hooks, driven on a stand-in Event class; the
report's side is built the way nsys writes it: each record's cudaEventRecord call inside
the record() call, torch's own records (the caching allocator's, NCCL's) on the same thread
between the program's, and another thread's at the same times."""

from __future__ import annotations

import base64
import functools
import importlib.util
import json
import struct
import sys
import threading
import time
import types
import zlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import needs_nsys

from nsyswrap.analysis.user_events import clock_offset, decode, match_records, runner_documents
from nsyswrap.instrument.schema import CLOCK_SCHEMA, USER_EVENTS_PART_SCHEMA, USER_EVENTS_SCHEMA
from nsyswrap.read.report import EVENT_CALL_COLUMNS, MARK_COLUMNS, Report, ReportInfo, empty

RUNNER = Path(__file__).parents[1] / "nsyswrap" / "instrument" / "event_hooks.py"
PID, TID, OTHER_TID = 4242, 4243, 4300
# The report's clock = the host's + this (nsys counts from its session's start).
OFFSET_NS = -123_456_789_000


def _runner():
    """A fresh copy of the runner module, as runner.py loads it (by path)."""
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
        # torch's own records from C++: between the program's, outside their brackets (the
        # runner's clock reads around each record(): between the base calls was not enough,
        # as a thread paused between the first read and the call leaves that gap inside the
        # next bracket, where the runner rightly may take torch's record).
        brackets = [(before, before + took) for before, took, *_ in
                    struct.iter_unpack(doc["record_format"],
                                       zlib.decompress(base64.b64decode(doc["records"])))]
        assert len(brackets) == len(calls)
        for (_b0, a0), (b1, _a1) in zip(brackets, brackets[1:], strict=False):
            mid = (a0 + b1) // 2
            if a0 < mid < b1:
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
    from nsyswrap.instrument.schema import USER_EVENTS_ENV

    return USER_EVENTS_ENV


def test_the_schema_names_match_the_runners_copy():
    module = _runner()
    assert module.USER_EVENTS_SCHEMA == USER_EVENTS_SCHEMA
    assert module.USER_EVENTS_PART_SCHEMA == USER_EVENTS_PART_SCHEMA
    assert module.CLOCK_SCHEMA == CLOCK_SCHEMA
    assert module.ENABLE_ENV == schema_env()
    from nsyswrap.instrument import schema as names

    assert module.LINES_ENV == names.LINES_ENV
    lines = module._sibling("line_trace")
    assert (lines.LINES_SCHEMA, lines.SOURCE_ENV) == (names.LINES_SCHEMA, names.SOURCE_ENV)
    from nsyswrap.instrument import schema

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
                           "--trace", "nvtx", "--format", "json", str(script)],
                          capture_output=True, text=True, env=env, timeout=300)
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
                           "--trace", "nvtx", "--no-user-events", "--format", "json",
                           str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert json.loads(proc.stdout)["user_timings"]["records"] == 0


# -- the identity of a timing: each record's context -----------------------------------------

def _line(marker: str) -> int:
    """The line of this file that ends with `# line: <marker>`."""
    lines = Path(__file__).read_text().splitlines()
    found = [i + 1 for i, text in enumerate(lines) if text.endswith(f"# line: {marker}")]
    assert len(found) == 1, marker
    return found[0]


def _contexts_by_record(runner):
    """The decoded document, and each kept record's context (as decoded), in order."""
    r = decode(runner.RECORDER.document())
    # This file's frames only: what runs the tests (pytest-xdist's exec'd "<string>"
    # frames, say) is outside.
    return r, [tuple(f for f in r.contexts[c] if f[0] == __file__)
               for c in r.records["context"]]


def test_a_timing_helper_called_for_many_workloads_gives_each_its_context(runner):
    Event, _ = _hooked_event_class(runner)
    start, end = Event(), Event()

    def timed(name, fn):  # line: timed-def
        start.record(_Stream(1))
        fn()
        end.record(_Stream(1))
        return start.elapsed_time(end)

    def warm():
        pass

    workloads = [list, dict, set, functools.partial(max, 1, 2), warm, str.upper.__get__("x")]
    for i, fn in enumerate(workloads):
        timed(f"workload {i}", fn)  # line: timed-call
    r, contexts = _contexts_by_record(runner)
    me = "test_a_timing_helper_called_for_many_workloads_gives_each_its_context"
    # Qualified names past 60 characters keep their end.
    shown = ["list", "dict", "set", "partial(max)", "…" + f"{me}.<locals>.warm"[-59:],
             "str.upper"]
    expected = [((__file__, _line("timed-def"), f"{me}.<locals>.timed",
                  (("name", repr(f"workload {i}")), ("fn", text))),
                 (__file__, _line("timed-call"), me, (("runner", runner.__name__),)))
                for i, text in enumerate(shown)]
    # Start and end record of one call share its context; each call has its own.
    assert contexts == [c for c in expected for _ in range(2)]
    assert len(r.contexts) == 6


def test_one_function_called_per_variant_gives_each_variant_its_context(runner):
    Event, _ = _hooked_event_class(runner)
    start, end = Event(), Event()

    def measure(variant, size=4096, shape=(64, 128)):  # line: measure-def
        start.record(_Stream(1))
        end.record(_Stream(1))

    for variant in ("fp16", "bf16", "fp32"):
        measure(variant)  # line: measure-call
    start.elapsed_time(end)
    _, contexts = _contexts_by_record(runner)
    me = "test_one_function_called_per_variant_gives_each_variant_its_context"
    assert [c[0][3] for c in contexts[::2]] == [
        (("variant", repr(v)), ("size", "4096"), ("shape", "(64, 128)"))
        for v in ("fp16", "bf16", "fp32")]
    assert {c[0][:3] for c in contexts} == {(__file__, _line("measure-def"),
                                             f"{me}.<locals>.measure")}
    assert {c[1][:3] for c in contexts} == {(__file__, _line("measure-call"), me)}


def test_a_loop_recording_in_one_call_takes_one_snapshot(runner):
    Event, _ = _hooked_event_class(runner)
    pairs = [(Event(), Event()) for _ in range(50)]

    def loop():
        for start, end in pairs:
            start.record(_Stream(1))
            end.record(_Stream(1))

    for call in range(2):
        loop()
        assert runner.RECORDER.snapshots == call + 1
        # The frame is held only until the next elapsed_time().
        assert any(state[0] is not None for state in runner.RECORDER.thread_states.values())
        pairs[0][0].elapsed_time(pairs[0][1])
        assert all(state[0] is None for state in runner.RECORDER.thread_states.values())
    # The second call was a new invocation: a new snapshot, the same context.
    r, _ = _contexts_by_record(runner)
    assert len(r.records) == 200 and set(r.records["context"]) == {0}


def test_a_start_and_a_stop_helper_each_have_their_context(runner):
    Event, _ = _hooked_event_class(runner)
    start_event, end_event = Event(), Event()

    def start():  # line: start-def
        start_event.record(_Stream(1))

    def stop():  # line: stop-def
        end_event.record(_Stream(1))

    for _ in range(3):
        start()  # line: start-call
        stop()  # line: stop-call
    _, contexts = _contexts_by_record(runner)
    me = "test_a_start_and_a_stop_helper_each_have_their_context"
    mine = (("runner", runner.__name__),)
    starts = ((__file__, _line("start-def"), f"{me}.<locals>.start", ()),
              (__file__, _line("start-call"), me, mine))
    stops = ((__file__, _line("stop-def"), f"{me}.<locals>.stop", ()),
             (__file__, _line("stop-call"), me, mine))
    assert contexts == [starts, stops] * 3


def test_a_method_is_named_with_its_class_and_self_by_its_type(runner):
    Event, _ = _hooked_event_class(runner)

    class Bench:
        def __init__(self):
            self.start, self.end = Event(), Event()

        def run(self, dtype):  # line: method-def
            self.start.record(_Stream(1))
            self.end.record(_Stream(1))

    Bench().run("fp16")  # line: method-call
    _, contexts = _contexts_by_record(runner)
    me = "test_a_method_is_named_with_its_class_and_self_by_its_type"
    assert contexts[0][0] == (__file__, _line("method-def"), f"{me}.<locals>.Bench.run",
                              (("self", "<Bench>"), ("dtype", "'fp16'")))


def test_arguments_named_like_secrets_are_never_written(runner):
    Event, _ = _hooked_event_class(runner)
    event = Event()

    def call_api(size, api_key, password, auth, my_Token, cookie_jar, credentials, secret,
                 *args, **kwargs):
        event.record(_Stream(1))

    call_api(8, "k-hunter2", "hunter2", "hunter2", "hunter2", "hunter2", "hunter2",
             "hunter2", "more", client_secret="hunter2")
    r, contexts = _contexts_by_record(runner)
    assert contexts[0][0][3] == (
        ("size", "8"), ("api_key", "…"), ("password", "…"), ("auth", "…"), ("my_Token", "…"),
        ("cookie_jar", "…"), ("credentials", "…"), ("secret", "…"), ("args", "<tuple>"),
        ("kwargs", "<dict>"))
    assert "hunter2" not in json.dumps(runner.RECORDER.document())


class _Tensor:  # what torch.Tensor is to the runner: a class of that name in module torch
    pass


_Tensor.__name__, _Tensor.__module__ = "Tensor", "torch"
_Parameter = type("Parameter", (_Tensor,), {"__module__": "torch.nn.parameter"})
_Module = type("Module", (), {"__module__": "torch.nn.modules.module"})
_Linear = type("Linear", (_Module,), {"__module__": "torch.nn.modules.linear"})
_Size = type("Size", (tuple,), {"__module__": "torch"})


class _Exploding:
    def __repr__(self):
        raise AssertionError("the runner called __repr__")

    __str__ = __repr__


def test_values_are_shown_by_type_never_by_their_own_repr(runner):
    Event, _ = _hooked_event_class(runner)
    event = Event()

    def step(x, weight, layer, shape, thing, label, long_label, flag, ratio, nothing, module,
             big):
        event.record(_Stream(1))

    step(_Tensor(), _Parameter(), _Linear(), _Size((4096, 4096)), _Exploding(), "matmul",
         "x" * 50, True, 0.5, None, json, 10 ** 100)
    _, contexts = _contexts_by_record(runner)
    assert dict(contexts[0][0][3]) == {
        "x": "Tensor", "weight": "Tensor", "layer": "Linear", "shape": "(4096, 4096)",
        "thing": "<_Exploding>", "label": "'matmul'", "long_label": "str[50]",
        "flag": "True", "ratio": "0.5", "nothing": "None", "module": "json", "big": "<int>"}


def _as_version_1(doc: dict) -> dict:
    """A document as the earlier runner wrote it (16-bit codes, no contexts), made with
    struct from this runner's."""
    def repacked(name, old_format, new_format, keep):
        raw = zlib.decompress(base64.b64decode(doc[name]))
        rows = b"".join(struct.pack(old_format, *keep(row))
                        for row in struct.iter_unpack(new_format, raw))
        return base64.b64encode(zlib.compress(rows)).decode("ascii")

    old = dict(doc, nsyswrap="nsyswrap.user-events/1", record_format="<qqHIIHq",
               record_fields=["before_ns", "took_ns", "thread", "event", "nth", "site",
                              "stream"], elapsed_format="<qqHIIIIHd")
    old["records"] = repacked("records", "<qqHIIHq", doc["record_format"],
                              lambda row: row[:6] + row[7:])
    old["elapsed"] = repacked("elapsed", "<qqHIIIIHd", doc["elapsed_format"], lambda row: row)
    for name in ("contexts", "hook_cost_worst_ns", "own_records", "own_elapsed"):
        del old[name]
    for scope in old["scopes"]:
        scope.pop("context", None)
    return old


def test_a_document_of_the_earlier_runner_is_still_read(runner):
    Event, _ = _hooked_event_class(runner)
    pairs = _record_program(runner, Event, n_pairs=3)
    doc = runner.RECORDER.document()
    old = _as_version_1(doc)
    r, earlier = decode(doc), decode(old)
    assert earlier.contexts == [] and earlier.records["context"].tolist() == [-1] * 6
    assert earlier.records["context"].dtype == "int64"
    columns = [c for c in r.records.columns if c != "context"]
    pd.testing.assert_frame_equal(earlier.records[columns], r.records[columns],
                                  check_dtype=False)
    assert len(r.contexts) == 1 and (r.records["context"] == 0).all()
    text = json.dumps(old, separators=(",", ":"))
    assert len(runner_documents(pd.DataFrame({"text": [text]}), [])) == 1
    assert len(pairs) == 3


def test_records_and_measurements_of_nsyswraps_own_code_are_counted_not_kept(runner):
    Event, _ = _hooked_event_class(runner)
    own = {}
    source = ("def benchmark(start, end, stream):\n"
              "    start.record(stream)\n"
              "    end.record(stream)\n"
              "    return start.elapsed_time(end)\n")
    exec(compile(source, str(RUNNER.parent / "harness.py"), "exec"), own)
    for _ in range(2):
        own["benchmark"](Event(), Event(), _Stream(1))
    _record_program(runner, Event, n_pairs=3)
    doc = runner.RECORDER.document()
    assert (doc["own_records"], doc["own_elapsed"]) == (4, 2)
    r = decode(doc)
    assert (r.own_records, r.own_elapsed) == (4, 2)
    assert len(r.records) == 6 and len(r.elapsed) == 3
    assert all(file == __file__ for file, _, _ in r.sites)
    assert all(c[0][0] == __file__ for c in r.contexts)


def test_each_threads_records_carry_that_threads_id(runner, monkeypatch):
    """Records made on two threads (the main one before and after a worker's) are each
    packed with the OS thread id of the thread that made them, in the order made; the
    hot path keeps a thread's state where that thread alone reads it."""
    ids: dict[int, int] = {}  # an id of each thread (the fixture's is one for all)

    def native_id():
        return ids.setdefault(threading.get_ident(), 100 + len(ids))

    monkeypatch.setattr(runner.threading, "get_native_id", native_id)
    Event, _ = _hooked_event_class(runner)
    stream, made = _Stream(1), []

    def record(n):
        event = Event()
        for _ in range(n):
            event.record(stream)
            made.append(native_id())

    record(2)
    worker = threading.Thread(target=record, args=(3,))
    worker.start()
    worker.join()
    record(1)
    r = decode(runner.RECORDER.document())
    assert [r.threads[t] for t in r.records["thread"]] == made
    assert len(set(made)) == 2


def test_past_the_limits_sites_and_contexts_share_an_overflow_entry(runner, monkeypatch):
    """Generated code: 70 000 functions each recording once (more contexts than the
    runner names, and than 16 bits hold); nothing raises in elapsed_time() or at exit, and
    the document reads. Each function is one code object of its own, named and placed
    apart (a site and a context each), made from one compiled function (compiling 70 000
    took 2.5 s); they run on a thread of their own, whose stack the context walks in a few
    frames (under pytest's, each walk went through dozens of library frames)."""
    monkeypatch.setattr(runner, "MAX_SITES", 50_000)
    Event, _ = _hooked_event_class(runner)
    count = 70_000
    template = {}
    exec(compile("def f(event, stream):\n    event.record(stream)\n", "<generated>", "exec"),
         template)
    code = template["f"].__code__
    functions = [types.FunctionType(code.replace(co_name=f"f{i}", co_qualname=f"f{i}",
                                                 co_firstlineno=2 * i + 1), template)
                 for i in range(count)]
    assert len({id(f.__code__) for f in functions}) == count
    event, stream = Event(), _Stream(1)

    def record_all():
        for f in functions:
            f(event, stream)

    worker = threading.Thread(target=record_all)
    worker.start()
    worker.join()
    event.elapsed_time(event)
    marks = []
    monkeypatch.setattr(runner, "_mark_function", lambda: marks.append)
    runner.flush(measure_floor=False)
    docs = runner_documents(pd.DataFrame({"text": marks}), [])
    r = decode(docs[0])
    assert len(r.records) == count and len(r.elapsed) == 1
    assert len(r.contexts) == runner.MAX_CONTEXTS + 1
    assert r.contexts[-1] == (("?", 0, "?", ()),)
    assert (r.records["context"] == runner.MAX_CONTEXTS).sum() == count - runner.MAX_CONTEXTS
    assert len(r.sites) == 50_001 and r.sites[-1] == ("?", 0, "?")
    assert (r.records["site"] == 50_000).sum() == count - 50_000
    assert sum("more than" in n for n in r.notes) == 2


def test_a_record_made_inside_a_library_gets_its_callers_context(runner):
    """As triton.testing.do_bench records inside itself: the context starts at the
    program's frame that called it, at the line of the call; the do_bench call's scope has
    the same context."""
    Event, _ = _hooked_event_class(runner)
    library = types.ModuleType("triton.testing")
    source = ("def do_bench(fn, start, end, stream):\n"
              "    for _ in range(3):\n"
              "        start.record(stream)\n"
              "        fn()\n"
              "        end.record(stream)\n"
              "    return start.elapsed_time(end)\n")
    path = str(Path("/opt/lib/python3/site-packages/triton/testing.py"))
    exec(compile(source, path, "exec"), library.__dict__)
    runner._patch_do_bench(library)

    def bench_all(size):
        library.do_bench(list, Event(), Event(), _Stream(1))  # line: library-call

    bench_all(64)  # line: bench-call
    r, contexts = _contexts_by_record(runner)
    me = "test_a_record_made_inside_a_library_gets_its_callers_context"
    expected = ((__file__, _line("library-call"), f"{me}.<locals>.bench_all",
                 (("size", "64"),)),
                (__file__, _line("bench-call"), me, (("runner", runner.__name__),)))
    assert contexts == [expected] * 6
    (scope,) = [s for s in r.scopes if s["kind"] == "do_bench"]
    assert tuple(f for f in r.contexts[scope["context"]] if f[0] == __file__) == expected
    assert {r.sites[s][0] for s in r.records["site"]} == {path}
