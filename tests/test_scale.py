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
