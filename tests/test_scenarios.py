"""The committed H100 scenario report (examples/reports/scenarios-h100.sqlite, made by
`nsyswrap run examples/scenarios.py`): every planted pathology is flagged with its code and
the controls with nothing. The numbers behind the flags are checked against SQL."""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest
import reference
from conftest import finding, sql

import nsyswrap
from nsyswrap.common.units import fmt_ns

ROOT = Path(__file__).parents[1]
REPORT = ROOT / "examples" / "reports" / "scenarios-h100.sqlite"


def _planted() -> dict[str, str | None]:
    spec = importlib.util.spec_from_file_location("scenarios", ROOT / "examples" / "scenarios.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # defines PLANTED; torch is imported only inside main()
    return module.PLANTED


PLANTED = _planted()


@pytest.fixture(scope="module")
def result():
    return nsyswrap.compare(REPORT)


def _codes(result, name):
    return {f.code for f in result.findings if f"nsyswrap:{name}" in f.ranges}


def test_every_benchmark_is_in_the_report(result):
    assert sorted(result.benchmarks["benchmark"]) == sorted(PLANTED)


@pytest.mark.parametrize("name", [n for n, code in PLANTED.items() if code])
def test_planted_scenario_is_flagged(result, name):
    assert PLANTED[name] in _codes(result, name)


@pytest.mark.parametrize("name", [n for n, code in PLANTED.items() if not code])
def test_control_is_clean(result, name):
    assert _codes(result, name) == set()
    row = result.benchmarks.set_index("benchmark").loc[name]
    assert row["verdict"].startswith("agree")


def test_no_findings_outside_the_benchmarks(result):
    assert all(label.startswith("nsyswrap:") for f in result.findings for label in f.ranges)
    assert all(f.ranges for f in result.findings)


def _marks():
    rows = sql(REPORT, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
                       "ON s.id = e.textId WHERE e.eventType = 34")
    docs = [json.loads(t) for (t,) in rows if t.startswith("{")]
    return {d["name"]: d for d in docs if d.get("nsyswrap") == "nsyswrap.benchmark/1"}


def test_event_and_kernel_medians_match_sql(result):
    marks = _marks()
    projection = reference.projection(REPORT)
    bench = result.benchmarks.set_index("benchmark")
    for name, mark in marks.items():
        calls = mark["calls_per_iteration"]
        assert bench.loc[name, "event_median_ns"] == pytest.approx(
            statistics.median(mark["event_ns"]) / calls)
        # The timed iterations: the last N ranges of that name before the mark.
        mine = [p for p in projection if p["domain"] == "nsyswrap" and p["name"] == name]
        timed = mine[-len(mark["event_ns"]):]
        assert bench.loc[name, "busy_median_ns"] == pytest.approx(
            statistics.median(p["busy"] for p in timed) / calls)


def test_uncovered_stream_events_read_less_than_the_gpu_worked(result):
    row = result.benchmarks.set_index("benchmark").loc["uncovered_stream"]
    assert row["event_median_ns"] < row["busy_median_ns"]


def test_cache_effect_reports_both_numbers(result):
    _, evidence = finding(result.findings, "CACHE_EFFECT", "nsyswrap:cache_effect")
    assert evidence["busy_flushed_ns"] > evidence["busy_hot_ns"]


def test_same_finding_in_several_benchmarks_is_one(result):
    """CACHE_EFFECT holds for cache_effect and softmax_interleave: one finding names both."""
    cache = [f for f in result.findings if f.code == "CACHE_EFFECT"]
    assert len(cache) == 1
    assert sorted(cache[0].ranges) == ["nsyswrap:cache_effect", "nsyswrap:softmax_interleave"]
    assert set(cache[0].evidence["by_range"]) == set(cache[0].ranges)
    assert cache[0].range is None


def _floor_windows(mark):
    """Event - kernel time of the harness's floor windows, from SQL: the last N ranges named
    like the mark's floor_range, each paired with the kernels launched inside it."""
    projection = [p for p in reference.projection(REPORT, "thread")
                  if p["domain"] == "nsyswrap" and p["name"] == mark["floor_range"]]
    timed = projection[-len(mark["floor_event_ns"]):]
    return [e - p["busy"] for e, p in zip(mark["floor_event_ns"], timed, strict=True)]


def test_event_floor_is_measured_in_the_run(result):
    """Every benchmark's floor (events around one tiny kernel, minus that kernel) matches
    SQL, and sits where the accuracy table puts the events' own cost on an H100."""
    bench = result.benchmarks.set_index("benchmark")
    for name, mark in _marks().items():
        floor = statistics.median(_floor_windows(mark)) / mark["calls_per_iteration"]
        assert bench.loc[name, "floor_ns"] == pytest.approx(floor)
        if mark["calls_per_iteration"] == 1:
            assert 1_000 < floor < 5_000


def test_a_short_kernel_with_only_the_events_cost_is_no_launch_overhead(result):
    """softmax on 16 MiB: a 13-16 µs kernel whose events add only their own floor (the
    issue's false LAUNCH_OVERHEAD). The overhead beyond the floor is well under a µs."""
    assert "LAUNCH_OVERHEAD" not in _codes(result, "softmax_interleave")
    row = result.benchmarks.set_index("benchmark").loc["softmax_interleave"]
    assert row["overhead_median_ns"] > 2_000  # what was flagged before the floor
    assert abs(row["overhead_median_ns"] - row["floor_ns"]) < 1_000


def test_host_bound_numbers_match_sql(result):
    """host_pause: host time per iteration is the NVTX range's length (no syncs inside),
    from SQL; the GPU time the kernels launched inside it."""
    _, evidence = finding(result.findings, "HOST_BOUND", "nsyswrap:host_pause")
    mark = _marks()["host_pause"]
    mine = [p for p in reference.projection(REPORT, "thread")
            if p["domain"] == "nsyswrap" and p["name"] == "host_pause"][-len(mark["event_ns"]):]
    assert evidence["host_median_ns"] == pytest.approx(
        statistics.median(p["end"] - p["start"] for p in mine))
    assert evidence["gpu_busy_median_ns"] == pytest.approx(
        statistics.median(p["busy"] for p in mine))
    assert evidence["host_median_ns"] > 800_000 > 5 * evidence["gpu_busy_median_ns"]
    assert evidence["backpressure"] is True


def test_demo_default_is_this_report():
    from nsyswrap.cli import demo_report

    assert demo_report().read_bytes() == REPORT.read_bytes()  # the same report, installed


def test_verdict_says_when_the_events_own_cost_is_all_the_difference(result):
    """softmax_interleave: events +18% above a 14.6 us kernel, all of it the events' floor
    (measured in the same run): 'agree', saying so and naming the floor. The controls, whose
    excess is small against their kernels, stay a plain 'agree'."""
    b = result.benchmarks.set_index("benchmark")
    row = b.loc["softmax_interleave"]
    excess = row["event_median_ns"] - row["busy_median_ns"]
    assert excess > 0.10 * row["busy_median_ns"]
    assert excess <= 1.25 * row["floor_ns"] + 100
    assert row["verdict"].startswith("agree once the events' own cost is taken off")
    assert fmt_ns(row["floor_ns"]) in row["verdict"]
    for control in ("control_linear", "control_linear_hot"):
        assert b.loc[control, "verdict"] == "agree"
    # A cause found keeps its own verdict: launch overhead beyond the floor.
    assert b.loc["launch_overhead_tiny", "verdict"].startswith("events inflated")
