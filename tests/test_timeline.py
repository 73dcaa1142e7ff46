"""The HTML report's timeline windows against SQL: on the demo report (one thread, so both
attribution rules agree) each window draws the range's own GPU operations where nsys
recorded them, a flow from each launch to its operation, and the CUDA-event window on the
stream the events timed; on the seed article's timings (`nsyswrap run`'s records) each timed
interval's window is placed by the program's record calls and the work on their stream."""

from __future__ import annotations

import pandas as pd
import pytest
from conftest import DEMO, USER_SEED, sql

from nsyswrap.comparison.single import compare
from nsyswrap.render.timeline import (
    KIND_EVENTS,
    KIND_GAP,
    KIND_LAUNCH,
    KIND_NVTX,
    KIND_OTHER,
    KIND_RECORD,
    KIND_SYNC,
    WindowBuilder,
)

# GPU operations launched from the range's thread while it was open.
OWN_OPS = """
SELECT g.start, g."end", g.streamId FROM CUPTI_ACTIVITY_KIND_RUNTIME r
JOIN (SELECT correlationId, start, "end", streamId FROM CUPTI_ACTIVITY_KIND_KERNEL
      UNION ALL SELECT correlationId, start, "end", streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY
      UNION ALL SELECT correlationId, start, "end", streamId FROM CUPTI_ACTIVITY_KIND_MEMSET) g
  ON g.correlationId = r.correlationId
WHERE (r.globalTid >> 24) & 16777215 = ? AND r.globalTid & 16777215 = ?
  AND r.start >= ? AND r.start <= ?
"""
NOT_OPS = {KIND_NVTX, KIND_EVENTS, KIND_LAUNCH, KIND_SYNC, KIND_OTHER, KIND_GAP}


@pytest.fixture(scope="module")
def demo():
    return compare(DEMO)


def _first_iterations(c):
    its = c.analysis.iterations.sort_values("start_ns")
    return its.groupby("benchmark", sort=False).head(1)


def _us(ns: int, origin: int) -> float:
    return round((ns - origin) / 1e3, 4)


def test_each_window_draws_its_ranges_gpu_work(demo):
    builder = WindowBuilder(demo)
    inst = demo.analysis.instances.frame()
    for it in _first_iterations(demo).itertuples():
        r = inst.loc[it.range_id]
        win = builder.build(r, "x", it.benchmark, it.event_ns)
        ops = sql(DEMO, OWN_OPS, (int(r.pid), int(r.tid), int(r.start_ns), int(r.end_ns)))
        assert ops, it.benchmark
        origin = int(r.start_ns)
        drawn = sorted((m["start_us"], m["end_us"]) for m in win.marks
                       if m["kind"] not in NOT_OPS)
        assert drawn == sorted((_us(s, origin), _us(e, origin)) for s, e, _ in ops)
        assert len(win.flows) == len(ops)  # one arrow from each launch
        assert all(f["row2"] is not None for f in win.flows)
        selected = [m for m in win.marks if m.get("selected")]
        assert [(m["start_us"], m["kind"]) for m in selected] == [(0.0, KIND_NVTX)]
        rows = {m["row"] for m in win.marks}
        assert rows == set(range(len(win.rows)))  # no empty rows


def test_event_window_sits_on_the_timed_stream(demo):
    builder = WindowBuilder(demo)
    inst = demo.analysis.instances.frame()
    several_streams = []
    for it in _first_iterations(demo).itertuples():
        r = inst.loc[it.range_id]
        win = builder.build(r, "x", it.benchmark, it.event_ns)
        (events,) = [m for m in win.marks if m["kind"] == KIND_EVENTS]
        assert events["end_us"] - events["start_us"] == pytest.approx(it.event_ns / 1e3,
                                                                       abs=2e-4)
        ops = sql(DEMO, OWN_OPS, (int(r.pid), int(r.tid), int(r.start_ns), int(r.end_ns)))
        spans = {}
        for s, e, stream in ops:
            lo, hi = spans.get(stream, (s, e))
            spans[stream] = (min(lo, s), max(hi, e))
        fits = {k: v for k, v in spans.items() if v[1] - v[0] <= it.event_ns}
        if len(spans) > 1 and len(fits) == 1:  # uncovered_stream: the events timed one
            ((lo, hi),) = fits.values()
            assert events["end_us"] == _us(max(hi, int(r.end_ns)), int(r.start_ns))
            several_streams.append(it.benchmark)
    assert several_streams == ["uncovered_stream"]


# -- the program's own timed intervals (nsyswrap run's records) ------------------------------

RECORD_CALL = """
SELECT r."end", r.globalTid, e.streamId FROM CUPTI_ACTIVITY_KIND_RUNTIME r
JOIN StringIds s ON s.id = r.nameId
JOIN CUPTI_ACTIVITY_KIND_CUDA_EVENT e ON e.correlationId = r.correlationId
WHERE s.value LIKE 'cudaEventRecord%' AND r.start = ?
"""
# GPU operations on a stream with the start of the call that launched them, from a process.
STREAM_OPS = """
SELECT r.start, g.start, g."end" FROM CUPTI_ACTIVITY_KIND_RUNTIME r
JOIN (SELECT correlationId, start, "end", streamId FROM CUPTI_ACTIVITY_KIND_KERNEL
      UNION ALL SELECT correlationId, start, "end", streamId FROM CUPTI_ACTIVITY_KIND_MEMCPY
      ) g ON g.correlationId = r.correlationId
WHERE (r.globalTid >> 24) & 16777215 = ? AND g.streamId = ?
"""


@pytest.fixture(scope="module")
def seed():
    return compare(USER_SEED)


def test_interval_window_is_placed_by_the_record_calls_and_the_stream(seed):
    """Each interval's window against SQL: its record() marks sit on the report's
    cudaEventRecord calls; the operations drawn as its own are those launched onto the
    recorded stream between the two calls; the events' window runs from the later of the
    start call's end and the end of the work it waited for, to the later of the end call's
    end and the last operation; the GPU idle before and after is shaded."""
    builder = WindowBuilder(seed)
    intervals = seed.analysis.user_timings.intervals
    assert len(intervals) == 90
    waited = 0
    for iv in intervals.itertuples(index=False):
        win = builder.build_interval(pd.Series(iv._asdict()), "x", iv.label)
        origin = win.origin_ns
        records = sorted(m["start_us"] for m in win.marks if m["kind"] == KIND_RECORD)
        t0, t1 = (round(origin + us * 1e3) for us in records)
        ((start_end, thread, stream),) = sql(USER_SEED, RECORD_CALL, (t0,))
        ((end_end, end_thread, end_stream),) = sql(USER_SEED, RECORD_CALL, (t1,))
        assert (end_thread, end_stream) == (thread, stream)
        ops = sql(USER_SEED, STREAM_OPS, ((thread >> 24) & 0xFFFFFF, stream))
        own = sorted((s, e) for launch, s, e in ops if t0 < launch < t1)
        assert own, iv.label
        drawn = sorted((m["start_us"], m["end_us"]) for m in win.marks
                       if m["kind"] not in NOT_OPS | {KIND_RECORD})
        assert drawn == [(_us(s, origin), _us(e, origin)) for s, e in own]
        assert len(win.flows) == len(own)
        before = [e for launch, _, e in ops if launch < t0]
        prior_end = max(before) if before else 0
        waited += prior_end > start_end
        start, end = max(start_end, prior_end), max(end_end, max(e for _, e in own))
        (events,) = [m for m in win.marks if m["kind"] == KIND_EVENTS]
        assert (events["start_us"], events["end_us"]) == (_us(start, origin), _us(end, origin))
        bands = sorted((b["start_us"], b["end_us"]) for b in win.bands)
        expected = []
        if own[0][0] > start:
            expected.append((_us(start, origin), _us(own[0][0], origin)))
        if end > max(e for _, e in own):
            expected.append((_us(max(e for _, e in own), origin), _us(end, origin)))
        assert bands == sorted(expected)
        assert {m["row"] for m in win.marks} == set(range(len(win.rows)))
    assert 0 < waited < len(intervals)  # back-pressured windows and others
