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
from conftest import sql

import nsyswrap

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
    return {f.code for f in result.findings if f.range == f"nsyswrap:{name}"}


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
    assert all((f.range or "").startswith("nsyswrap:") for f in result.findings)


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
    f = next(f for f in result.findings if f.code == "CACHE_EFFECT")
    assert f.evidence["busy_flushed_ns"] > f.evidence["busy_hot_ns"]


def test_demo_default_is_this_report():
    from nsyswrap.cli import demo_report

    assert demo_report().read_bytes() == REPORT.read_bytes()  # the same report, installed
