"""Numbers per run of timed windows, found for every run at once (analysis/per_run.py), give
what a step per run gave: each statistic against pandas on one run's rows, the benchmark
table against the run-by-run summary it replaced, and a report with a harness run in every
training step (thousands of runs) against the run-by-run rules and a count in SQL, with no
frame made per run."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import sql

import nsyswrap
from nsyswrap.analysis import per_run
from nsyswrap.analysis.grouped import median
from nsyswrap.analysis.per_run import PerRun
from nsyswrap.analysis.reconcile import BENCHMARK_COLUMNS, benchmark_summary

DATA = Path(__file__).parent / "data"
TRAIN = DATA / "h100_torch_train.sqlite"
GROW = Path(__file__).parents[1] / "scripts" / "make_big_report.py"


def _windows(seed: int = 1) -> pd.DataFrame:
    """Windows of 60 runs of 1 to 9 windows each, two benchmarks' runs interleaved and
    their rows shuffled, with NaN, whole and fractional values."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(1, 10, 60)
    run = np.repeat(np.arange(60), sizes)
    rows = rng.permutation(len(run))
    run = run[rows]
    n = len(run)
    busy = rng.integers(1_000, 50_000, n).astype("float64")
    busy[rng.random(n) < 0.15] = np.nan
    busy[np.isin(run, [3, 17])] = np.nan  # runs without GPU work
    first = rng.integers(10**12, 10**13, n).astype("float64")
    first[np.isnan(busy)] = np.nan
    return pd.DataFrame({
        "benchmark": np.where(run % 3 == 0, "b", "a"), "run": run,
        "calls": np.repeat(rng.integers(1, 4, 60), sizes)[rows],
        "cache": rng.choice(["flushed", "hot", "unknown"], n),
        "event_ns": rng.integers(1_000, 90_000, n) + rng.random(n),
        "gpu_busy_ns": busy, "gpu_span_ns": busy * 1.5, "overhead_ns": rng.random(n) * 1e4,
        "host_ns": rng.integers(0, 10**6, n), "syncs": rng.integers(0, 3, n),
        "gpu_first_start_ns": first, "gpu_last_end_ns": first + 5_000,
        "start_ns": rng.integers(10**12, 10**13, n), "end_ns": rng.integers(10**13, 10**14, n),
    })


def _run_by_run(windows: pd.DataFrame):
    return windows.groupby(["benchmark", "run"], sort=False, observed=True)


@pytest.mark.parametrize("few_runs", [0, 64], ids=["grouped passes", "run by run"])
def test_per_run_statistics_are_pandas_run_by_run(few_runs, monkeypatch):
    # Both ways a median and quartiles are taken: in grouped passes over all runs (many
    # runs), and by selection in each run's values (up to FEW_RUNS runs).
    monkeypatch.setattr(per_run, "FEW_RUNS", few_runs)
    w = _windows()
    per = PerRun(w)
    groups = list(_run_by_run(w))
    assert per.count == len(groups)
    for column in ("event_ns", "gpu_busy_ns", "host_ns"):
        values = w[column].to_numpy()
        medians, iqrs = per.median(values), per.iqr(values.astype("float64"))
        highest, lowest = per.maximum(values), per.minimum(values)
        hot = per.median(values, where=(w["cache"] == "hot").to_numpy())
        for k, ((name, run), g) in enumerate(groups):
            assert (per.first_of("benchmark")[k], per.first_of("run")[k]) == (name, run)
            assert list(per.rows(k)) == [w.index.get_loc(i) for i in g.index]
            np.testing.assert_array_equal(medians[k], g[column].median())
            np.testing.assert_array_equal(highest[k], g[column].max())
            np.testing.assert_array_equal(lowest[k], g[column].min())
            np.testing.assert_array_equal(hot[k], g.loc[g["cache"] == "hot", column].median())
            x = g[column].to_numpy("float64")
            x = x[~np.isnan(x)]
            iqr = float(np.quantile(x, 0.75) - np.quantile(x, 0.25)) if len(x) > 1 else 0.0
            assert iqrs[k] == iqr
    if few_runs:  # the same arrays as the grouped passes give, dtypes included
        statistics = [(column, how) for column in ("event_ns", "gpu_busy_ns", "host_ns", "syncs")
                      for how in ("median", "maximum", "minimum", "total", "iqr")]
        mine = [getattr(per, how)(w[column].to_numpy()) for column, how in statistics]
        monkeypatch.setattr(per_run, "FEW_RUNS", 0)
        theirs = [getattr(per, how)(w[column].to_numpy()) for column, how in statistics]
        monkeypatch.setattr(per_run, "FEW_RUNS", few_runs)
        for what, a, b in zip(statistics, mine, theirs, strict=True):
            assert a.dtype == b.dtype, what
            np.testing.assert_array_equal(a, b)
    synced = per.any_count(w["syncs"].to_numpy() > 0)
    totals = per.total(w["syncs"].to_numpy())
    for k, (_, g) in enumerate(groups):
        assert synced[k] == (g["syncs"] > 0).sum() and totals[k] == g["syncs"].sum()
        assert per.sizes[k] == len(g)


def _summary_run_by_run(it: pd.DataFrame, runs: list[dict], floors: dict) -> pd.DataFrame:
    """benchmark_summary as it was: numpy over each run's rows, one run at a time."""
    def iqr(x):
        return float(np.quantile(x, 0.75) - np.quantile(x, 0.25)) if len(x) > 1 else 0.0

    rows = []
    for (name, run_index), idx in it.groupby(["benchmark", "run"], sort=False,
                                             observed=True).indices.items():
        def c(column, idx=idx):
            return it[column].to_numpy()[idx].astype("float64", copy=False)

        calls = int(it["calls"].to_numpy()[idx[0]])
        event, busy = c("event_ns") / calls, c("gpu_busy_ns") / calls
        cache = it["cache"].to_numpy()[idx]
        flushed, hot = cache == "flushed", cache == "hot"
        config = runs[run_index].get("config", {})
        event_median = median(event)
        first_start, last_end = c("gpu_first_start_ns"), c("gpu_last_end_ns")
        has_gpu = bool((~np.isnan(first_start)).any())
        overhead = median(c("overhead_ns") / calls)
        rows.append({
            "benchmark": name, "run": run_index, "iterations": len(idx), "calls": calls,
            "flush_l2": config.get("flush_l2"), "backpressure": config.get("backpressure"),
            "cuda_graph": config.get("cuda_graph"), "warmup_iters": config.get("warmup_iters"),
            "event_median_ns": event_median, "event_iqr_ns": iqr(event[~np.isnan(event)]),
            "busy_median_ns": median(busy), "busy_iqr_ns": iqr(busy[~np.isnan(busy)]),
            "span_median_ns": median(c("gpu_span_ns") / calls),
            "overhead_median_ns": overhead,
            "overhead_share": overhead / event_median if event_median else np.nan,
            "floor_ns": floors[run_index] / calls if run_index in floors else np.nan,
            "host_median_ns": median(c("host_ns") / calls),
            "event_flushed_ns": median(event[flushed]), "event_hot_ns": median(event[hot]),
            "busy_flushed_ns": median(busy[flushed]), "busy_hot_ns": median(busy[hot]),
            "first_start_ns": int(np.nanmin(first_start) if has_gpu else c("start_ns").min()),
            "last_end_ns": int(np.nanmax(last_end) if has_gpu else c("end_ns").max()),
        })
    return pd.DataFrame(rows, columns=BENCHMARK_COLUMNS)


def test_benchmark_summary_is_the_run_by_run_summary():
    w = _windows(2)
    runs = [{"config": {"flush_l2": ["none", "always"][i % 2], "backpressure": i % 3 == 0,
                        "cuda_graph": i % 4, "warmup_iters": None if i == 5 else i}}
            for i in range(60)]
    floors = {i: 1_000.0 + i for i in range(0, 60, 7)}
    pd.testing.assert_frame_equal(benchmark_summary(w, runs, floors),
                                  _summary_run_by_run(w, runs, floors))
    for name in ("h200_user_harness", "h100_harness_clock"):
        a = nsyswrap.compare(DATA / f"{name}.sqlite").analysis
        pd.testing.assert_frame_equal(benchmark_summary(a.iterations, a.runs),
                                      _summary_run_by_run(a.iterations, a.runs, {}))


@pytest.fixture(scope="module")
def stepped(tmp_path_factory):
    """h100_torch_train grown to 200 copies, a harness run in every train_step: 2,400."""
    out = tmp_path_factory.mktemp("stepped") / "stepped.sqlite"
    n = sql(TRAIN, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    subprocess.run([sys.executable, str(GROW), str(TRAIN), str(out), "--kernels",
                    str(200 * n), "--step-marks"], check=True, capture_output=True)
    return out


def test_thousands_of_runs_without_a_frame_per_run(stepped, monkeypatch):
    """Every harness run is in the benchmark table (the marks, counted in SQL), the merged
    findings name the runs the run-by-run rules pick, and the checks make no frame per
    run (a groupby's iteration made one each: ~4.5 ms a run, minutes at 10 M kernels)."""
    from pandas.core.groupby import ops

    frames = []
    iterate = ops.BaseGrouper.get_iterator

    def counted(self, *args, **kwargs):
        for item in iterate(self, *args, **kwargs):
            frames.append(1)
            yield item

    monkeypatch.setattr(ops.BaseGrouper, "get_iterator", counted)
    c = nsyswrap.compare(stepped)
    monkeypatch.undo()
    marks = sql(stepped, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON "
                         "s.id = e.textId WHERE s.value LIKE '{\"nsyswrap\":\"nsyswrap."
                         "benchmark/1\"%'")[0][0]
    a = c.analysis
    assert marks > 2000 and len(a.benchmarks) == marks == a.benchmarks["run"].nunique()
    assert len(frames) < 100  # the user's range families, not one per run

    # The run-by-run rules of the window checks, one frame per run, against the findings.
    copied, synced = [], []
    for (name, _), g in _run_by_run(a.iterations):
        copied += [f"nsyswrap:{name}"] * int((g["copies"] > 0).mean() >= 0.5)
        synced += [f"nsyswrap:{name}"] * int((g["syncs"] > 0).mean() >= 0.5)
    by_code = {f.code: f for f in c.findings}
    # Each benchmark named once, its runs counted (all 2,400 runs are of one benchmark).
    assert copied and by_code["TRANSFER_IN_WINDOW"].ranges == list(dict.fromkeys(copied))
    assert by_code["TRANSFER_IN_WINDOW"].message.endswith(
        f"(in all {marks} runs)" if len(copied) == marks else
        f"(in {len(copied)} of {marks} runs)")
    assert "SYNC_IN_WINDOW" not in by_code and not synced
    pd.testing.assert_frame_equal(a.benchmarks,
                                  _summary_run_by_run(a.iterations, a.runs, {}))
    # A run is judged late launches or host work, not both.
    judged = [re.search(r"\(in (?:all )?(\d+)(?: of (\d+))? runs\)$", by_code[code].message)
              for code in ("HOST_WORK_IN_WINDOW", "LAUNCH_OVERHEAD")]
    assert all(judged) and all(int(m[2] or m[1]) == marks for m in judged)
    assert sum(int(m[1]) for m in judged) <= marks
