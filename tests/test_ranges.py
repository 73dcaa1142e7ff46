"""Per-range GPU projection against an independent computation and nsys's nvtx_gpu_proj_sum."""

from __future__ import annotations

import csv
import statistics

import pandas as pd
import pytest
import reference
from conftest import (
    ALL_REPORTS,
    DATA,
    GPU_GRAPH_NODES,
    GPU_MIX,
    GPU_NO_CUDA,
    analysed,
    threads_that_matter,
)

import nsyswrap
from nsyswrap.analysis import analyze

# Each fixture under the process rule; under nsys's thread rule, those where it can give
# another answer: more than one thread launched work or opened ranges (SQL).
RULES = [(p, "process") for p in ALL_REPORTS] + [
    (p, "thread") for p in ALL_REPORTS if len(threads_that_matter(p)) > 1]


@pytest.mark.parametrize(("path", "rule"), RULES, ids=lambda v: getattr(v, "name", v))
def test_each_instance_matches_reference(path, rule):
    a = analysed(path, rule)
    expected = reference.projection(path, rule)
    inst = a.instances.frame().sort_values("start_ns", kind="stable")
    assert len(inst) == len(expected)
    has_cuda = a.info.has_gpu_activity  # CUDA traced and its GPU records kept
    for got, exp in zip(inst.to_dict("records"), expected, strict=True):
        assert (got["start_ns"], got["end_ns"], got["name"], got["domain"]) == (
            exp["start"], exp["end"], exp["name"], exp["domain"])
        if not has_cuda:
            assert got["gpu_busy_ns"] != got["gpu_busy_ns"]  # NaN: unknown, not zero
            continue
        assert got["gpu_ops"] == exp["ops"], got["name"]
        assert got["kernels"] == exp["kernels"], got["name"]
        assert got["gpu_busy_ns"] == exp["busy"], got["name"]
        assert got["gpu_span_ns"] == exp["span"], got["name"]
        assert got["gpu_busy_other_threads_ns"] == exp["other_busy"], got["name"]


@pytest.mark.parametrize(("path", "same_op_count"), [(GPU_MIX, True), (GPU_GRAPH_NODES, False),
                                                    (DATA / "h100_torch_train.sqlite", True)],
                         ids=["mix", "graph_nodes", "train"])
def test_summary_matches_nsys_projection(path, same_op_count):
    """nsys's 'Proj' time is the span; its op counts equal ours, except that nsys counts a
    cudaGraphLaunch as one op where we count each kernel node it ran (docs/analyses.md)."""
    ranges = analyze(nsyswrap.load(path), attribution="thread").ranges
    stats = DATA / (path.stem + ".nsys_stats_nvtx_gpu_proj_sum.csv")
    with open(stats, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows
    for row in rows:
        domain, _, name = row["Range"].partition(":")
        mine = ranges[(ranges["domain"] == domain) & (ranges["name"] == name)].iloc[0]
        assert mine["count"] == int(row["Range Instances"])
        if same_op_count:
            assert mine["gpu_ops"] == int(row["Total GPU Ops"])
        assert mine["gpu_span_median_ns"] == pytest.approx(float(row["Proj Med (ns)"]))
        assert mine["cpu_total_ns"] == int(row["Total Range Time (ns)"])


def test_overlapping_streams_count_once():
    inst = analysed(GPU_MIX).instances.frame()
    two = inst[inst["name"] == "two_streams"].iloc[0]
    ops = [o for o in reference.projection(GPU_MIX) if o["name"] == "two_streams"][0]
    assert two["gpu_busy_ns"] == ops["busy"]
    # the kernels of the two streams really overlapped: the plain sum is larger than the union
    kernels = [o for o in reference.gpu_ops(GPU_MIX)
               if o["launch"] >= two["start_ns"] and o["launch"] <= two["end_ns"]]
    assert sum(o["end"] - o["start"] for o in kernels) > two["gpu_busy_ns"]


def test_nested_ranges_include_children():
    inst = analysed(GPU_MIX).instances.frame()
    steps = inst[inst["name"] == "step"]
    children = inst[inst["name"].isin(["forward", "backward", "optimizer"])]
    for _, step in steps.iterrows():
        inside = children[(children["start_ns"] >= step["start_ns"]) &
                          (children["end_ns"] <= step["end_ns"])]
        assert step["gpu_ops"] >= inside["gpu_ops"].sum() > 0


def test_summary_medians():
    a = analysed(GPU_MIX)
    expected = [p for p in reference.projection(GPU_MIX) if p["name"] == "gemm_fp32"]
    row = a.ranges[a.ranges["name"] == "gemm_fp32"].iloc[0]
    assert row["count"] == len(expected)
    assert row["gpu_busy_median_ns"] == statistics.median(p["busy"] for p in expected)
    assert row["cpu_median_ns"] == statistics.median(p["end"] - p["start"] for p in expected)


def test_no_cuda_report_keeps_cpu_analysis():
    a = analysed(GPU_NO_CUDA)
    assert len(a.ranges) > 0 and a.kernels.empty
    assert a.ranges["gpu_busy_median_ns"].isna().all()


@pytest.mark.parametrize("path", [DATA / "h100_torch_train.sqlite",
                                  DATA / "h200x2_ddp_straggler_one.sqlite"])
def test_steps_and_chunks_of_a_few_rows_give_the_same_analysis(path, monkeypatch):
    """The passes that bound their temporaries by working a step or a chunk at a time
    (launch lookups, the range search, packed medians, the summary's groups) give exactly
    what one step gives; the per-thread sums take pandas' path where float sums might not
    be exact."""
    from nsyswrap.analysis import summary
    from nsyswrap.read import chunks, loader

    def run():
        a = analyze(loader.load(path))
        return a.instances.frame(), a.ranges, a.kernels, a.processes

    whole = run()
    monkeypatch.setattr(chunks, "STEP_ROWS", 7)
    monkeypatch.setattr(chunks, "MIN_ROWS", 16)
    monkeypatch.setattr(chunks, "cores", lambda: 4)
    for a, b in zip(run(), whole, strict=True):
        pd.testing.assert_frame_equal(a, b)
    monkeypatch.setattr(summary, "EXACT_FLOAT_SUM", 0)
    pd.testing.assert_frame_equal(run()[3], whole[3])


@pytest.mark.parametrize("path", [DATA / "h100_torch_emit_nvtx.sqlite",
                                  DATA / "h100_torch_train.sqlite", GPU_NO_CUDA],
                         ids=lambda p: p.name)
def test_every_instance_column_is_what_its_spec_says(path):
    """analysis/columns.py is the one spec of the instance columns: the table has them in
    its order, and a range that saw no GPU work has each column's `no_work` value where
    the report traced CUDA, unknown (NaN) where it did not (its blocking calls and copies
    too). Fails if the engine fills a column otherwise than the spec says."""
    import numpy as np

    from nsyswrap.analysis.columns import COLUMNS, INSTANCE_COLUMNS

    a = analysed(path)
    inst = a.instances
    assert list(inst.columns)[:len(INSTANCE_COLUMNS)] == INSTANCE_COLUMNS
    unseen = np.isnan(inst.values("gpu_first_start_ns"))
    assert unseen.any()
    traced = a.info.has_gpu_activity
    for c in COLUMNS:
        values = inst.values(c.name)
        if c.made_from == "range":
            assert not np.isnan(values.astype("float64", copy=False)).any() \
                if values.dtype.kind in "iuf" else True
            continue
        if not traced:
            rows = unseen if c.made_from == "gpu" else slice(None)
            assert np.isnan(values[rows]).all(), c.name
        elif c.made_from != "calls":  # a range that launched nothing may still wait
            np.testing.assert_array_equal(values[unseen], np.full(unseen.sum(), c.no_work),
                                          err_msg=c.name)
    assert traced == (path != GPU_NO_CUDA)
