"""Kernel totals equal direct SQL and NVIDIA's own cuda_gpu_kern_sum."""

from __future__ import annotations

import csv

import pytest
import reference
from conftest import DATA, GPU_GRAPH_NODES, GPU_MIX, analysed


def kernel_table(path):
    """The analysis's kernel table (the engine's, a demangled name at a time)."""
    return analysed(path).kernels.set_index("name")


@pytest.mark.parametrize("path", [GPU_MIX, GPU_GRAPH_NODES], ids=lambda p: p.name)
def test_kernel_summary_matches_sql(path):
    got = kernel_table(path)
    expected = reference.kernel_totals(path)
    assert set(got.index) == set(expected)
    for name, e in expected.items():
        row = got.loc[name]
        assert (row["count"], row["total_ns"], row["min_ns"], row["max_ns"]) == (
            e["count"], e["total"], e["min"], e["max"])
        assert row["median_ns"] == pytest.approx(e["median"])
    assert got["share"].sum() == pytest.approx(1.0)


@pytest.mark.parametrize("path", [GPU_MIX, GPU_GRAPH_NODES], ids=lambda p: p.name)
def test_kernel_summary_matches_nsys_stats(path):
    """The same numbers as `nsys stats -r cuda_gpu_kern_sum` printed on the GPU host."""
    stats = DATA / (path.stem + ".nsys_stats_cuda_gpu_kern_sum.csv")
    got = kernel_table(path)
    with open(stats, newline="") as f:
        for row in csv.DictReader(f):
            mine = got.loc[row["Name"]]
            assert mine["count"] == int(row["Instances"])
            assert mine["total_ns"] == int(row["Total Time (ns)"])
            assert mine["median_ns"] == pytest.approx(float(row["Med (ns)"]))
            assert 100 * mine["share"] == pytest.approx(float(row["Time (%)"]), abs=0.051)


@pytest.mark.parametrize("path", [GPU_MIX, GPU_GRAPH_NODES, DATA / "h100_torch_train.sqlite"],
                         ids=lambda p: p.name)
def test_kernel_medians_and_counts_are_sqls_exactly(path):
    """Each name's median is middle_of its durations: SQL's median exactly, not within a
    rounding; and the same from the export streamed in small chunks."""
    import pandas as pd
    from test_streamed import SMALL_CHUNK, streamed

    got = kernel_table(path)
    expected = reference.kernel_totals(path)
    for name, e in expected.items():
        assert got.loc[name, "median_ns"] == e["median"]
        assert got.loc[name, "count"] == e["count"]
    pd.testing.assert_frame_equal(streamed(path, chunk=SMALL_CHUNK).kernels.set_index("name"),
                                  got)
