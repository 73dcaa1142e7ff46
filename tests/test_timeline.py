"""The HTML report's timeline windows against SQL on the demo report (one thread, so both
attribution rules agree): each window draws the range's own GPU operations where nsys
recorded them, a flow from each launch to its operation, and the CUDA-event window on the
stream the events timed."""

from __future__ import annotations

import pytest
from conftest import DEMO, sql

from nsyswrap.compare import compare
from nsyswrap.render.timeline import (
    KIND_EVENTS,
    KIND_GAP,
    KIND_LAUNCH,
    KIND_NVTX,
    KIND_OTHER,
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
