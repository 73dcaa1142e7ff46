"""A grown report (scripts/make_big_report.py) gives the source's numbers, scaled: the fast
paths for big files must agree with the small-file results."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import GPU_MIX, sql

import nsyswrap

GROW = Path(__file__).parents[1] / "scripts" / "make_big_report.py"
COPIES = 12


@pytest.fixture(scope="module")
def grown(tmp_path_factory):
    n = sql(GPU_MIX, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    out = tmp_path_factory.mktemp("grown") / "grown.sqlite"
    subprocess.run([sys.executable, str(GROW), str(GPU_MIX), str(out), "--kernels",
                    str(n * COPIES)], check=True, capture_output=True)
    return out


def test_grown_file_holds_the_copies(grown):
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        assert sql(grown, f"SELECT count(*) FROM {table}")[0][0] == COPIES * sql(
            GPU_MIX, f"SELECT count(*) FROM {table}")[0][0]


def test_kernel_totals_scale(grown):
    small = nsyswrap.compare(GPU_MIX).analysis.kernels.set_index("name")
    big = nsyswrap.compare(grown).analysis.kernels.set_index("name")
    assert (big["count"] == COPIES * small["count"]).all()
    assert (big["total_ns"] == COPIES * small["total_ns"]).all()
    assert (big["median_ns"] == small["median_ns"]).all()
    assert (big["min_ns"] == small["min_ns"]).all() and (big["max_ns"] == small["max_ns"]).all()


def test_range_results_scale(grown):
    small = nsyswrap.compare(GPU_MIX)
    big = nsyswrap.compare(grown)
    s = small.analysis.ranges.set_index(["domain", "name"])
    b = big.analysis.ranges.set_index(["domain", "name"]).loc[s.index]
    assert (b["count"] == COPIES * s["count"]).all()
    for col in ("gpu_busy_total_ns", "gpu_ops", "kernels", "syncs", "copies", "copy_bytes"):
        assert (b[col] == COPIES * s[col]).all(), col
    for col in ("cpu_median_ns", "gpu_busy_median_ns", "gpu_span_median_ns",
                "launch_latency_median_ns"):
        pd.testing.assert_series_equal(b[col], s[col], check_names=False)  # NaN == NaN
    # The same pathologies, found in every copy.
    assert {(f.code, f.range) for f in big.findings} >= {
        (f.code, f.range) for f in small.findings if f.code != "COLD_START"}


TRAIN = Path(__file__).parent / "data" / "h100_torch_train.sqlite"


def test_step_marks_read_as_harness_runs(tmp_path):
    """--step-marks: every train_step of every copy is a harness run of one iteration (its
    mark, its two event records), and the tables stay in start order."""
    out = tmp_path / "marks.sqlite"
    n = sql(TRAIN, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    subprocess.run([sys.executable, str(GROW), str(TRAIN), str(out), "--kernels", str(3 * n),
                    "--step-marks"], check=True, capture_output=True)
    steps = sql(TRAIN, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON "
                       "s.id = e.textId WHERE s.value = 'train_step'")[0][0]
    events = sql(TRAIN, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT")[0][0]
    assert sql(out, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_CUDA_EVENT")[0][0] == 3 * (
        events + 2 * steps)
    for table in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        assert sql(out, f"SELECT count(*) FROM {table} a JOIN {table} b "
                        "ON b.rowid = a.rowid + 1 WHERE b.start < a.start")[0][0] == 0
    a = nsyswrap.compare(out).analysis
    assert len(a.benchmarks) == 3 * steps and set(a.benchmarks["benchmark"]) == {"train_step"}
    assert (a.benchmarks["iterations"] == 1).all()
    assert a.benchmarks["busy_median_ns"].notna().all()
    assert "train_step" not in set(a.ranges.loc[~a.ranges["harness"], "name"])


RANGES = Path(__file__).parents[1] / "scripts" / "make_range_report.py"
LEVELS = ["iteration", "layer", "block", "module", "op"]


@pytest.fixture(scope="module")
def range_heavy(tmp_path_factory):
    out = tmp_path_factory.mktemp("ranges") / "ranges.sqlite"
    subprocess.run([sys.executable, str(RANGES), str(out), "--kernels", "3000"], check=True,
                   capture_output=True)
    return out


@pytest.mark.parametrize("rule", ["process", "thread"])
def test_range_heavy_report_gives_known_results(range_heavy, rule):
    """Five nested ranges around each tiny kernel, on two threads: every range owns exactly
    its own kernel (1.5 us on the GPU, launched 1.2 us before it starts)."""
    c = nsyswrap.compare(range_heavy, attribution=rule)
    r = c.analysis.ranges.set_index("name")
    assert sorted(r.index) == sorted(LEVELS)
    for level, name in enumerate(LEVELS):
        row = r.loc[name]
        assert row["count"] == 3000 and row["kernels"] == 3000 and row["gpu_ops"] == 3000
        assert row["gpu_busy_total_ns"] == 3000 * 1500
        assert row["cpu_median_ns"] == 5000 - 200 * level
        assert row["launch_latency_median_ns"] == 1200
    assert c.analysis.attribution.other_threads.empty  # each thread's ranges own its work
    assert int(c.analysis.kernels["count"].sum()) == 3000


def test_a_report_compare_loaded_matches_one_passed_in(range_heavy):
    """compare() empties the per-operation frames of a report it loaded itself once they
    are attributed; a Report passed in is left whole and gives the same numbers."""
    report = nsyswrap.load(range_heavy)
    mine = nsyswrap.compare(report)
    assert len(report.kernels) == 3000
    pd.testing.assert_frame_equal(mine.analysis.instances.frame(),
                                  nsyswrap.compare(range_heavy).analysis.instances.frame())
