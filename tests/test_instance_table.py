"""InstanceTable keeps each instance column in fewer bytes and gives back the very values it
was given (bit for bit, same dtype); range_summary's grouped sums, minima and maxima over
it are pandas' own."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import nsyswrap.analysis.instance_table as instance_table
from nsyswrap.analysis.instance_table import InstanceTable
from nsyswrap.analysis.summary import _Grouped

N = 5_003


@pytest.fixture(params=[N, 97], ids=["one step", "steps of 97 rows"])
def small_steps(request, monkeypatch):
    """Pack and decode in steps of a few rows, as ten million rows are (chunks.steps)."""
    size = request.param
    monkeypatch.setattr(instance_table, "steps",
                        lambda n: [slice(lo, lo + size) for lo in range(0, n, size)])


def _columns(rng) -> dict[str, np.ndarray]:
    start = np.sort(rng.integers(10**9, 3 * 10**10, N))
    first = (start + rng.integers(0, 30_000, N)).astype("float64")
    first[::7] = np.nan  # ranges without GPU work
    halves = rng.integers(0, 9_000, N) / 2.0  # medians of an even count
    halves[3] = np.nan
    negative_zero = np.zeros(N)
    negative_zero[11] = np.copysign(0.0, -1.0)
    return {
        "start_ns": start,
        "gpu_first_start_ns": first,
        "launch_latency_ns": halves,
        "gaps": np.zeros(N),
        "streams": np.ones(N),
        "counts": rng.integers(0, 300, N).astype("float64"),
        "share": rng.random(N),  # fractions: kept as they are
        "signed_zero": negative_zero,  # -0.0 is not 0.0 to a writer
        "huge": np.full(N, 2.0**60),  # beyond exact integers in float64
        "unknown": np.full(N, np.nan),
        "pid": rng.integers(1000, 1010, N).astype("int32"),
        "copy_bytes": rng.integers(0, 2**40, N),
        "library": rng.random(N) < 0.5,
    }


def test_every_column_comes_back_bit_for_bit(small_steps):
    rng = np.random.default_rng(7)
    columns = _columns(rng)
    table = InstanceTable(N)
    for name, values in columns.items():
        table.set(name, values.copy(), relative_to="start_ns" if name.startswith("gpu_") else None)
    table["name"] = pd.Categorical(rng.choice(["step", "fwd", "bwd"], N))
    rows = rng.integers(0, N, 400)
    for name, want in columns.items():
        got = table.values(name)
        assert got.dtype == want.dtype, name
        assert np.array_equal(got, want, equal_nan=True), name
        assert np.array_equal(np.signbit(got), np.signbit(want)), name  # -0.0 kept
        assert np.array_equal(table.values(name, rows), want[rows], equal_nan=True), name
        assert np.array_equal(table.values(name, slice(13, 4_000)), want[13:4_000],
                              equal_nan=True), name
    frame = table.frame()
    assert list(frame.columns) == [*columns, "name"]
    assert isinstance(frame["name"].dtype, pd.CategoricalDtype)
    part = table.iloc[100:300]
    assert list(part.index) == list(range(100, 300))
    assert part["counts"].tolist() == columns["counts"][100:300].tolist()


def test_columns_take_fewer_bytes_where_their_values_allow(small_steps):
    columns = _columns(np.random.default_rng(3))
    table = InstanceTable(N)
    for name, values in columns.items():
        table.set(name, values, relative_to="start_ns" if name.startswith("gpu_") else None)
    size = {name: table._columns[name].nbytes for name in columns}
    assert size["gaps"] == size["streams"] == size["unknown"] == 0  # one value throughout
    assert size["counts"] == 2 * N  # 0..299 in 16 bits
    assert size["launch_latency_ns"] == 2 * N  # halves up to 4500, doubled, and a NaN
    assert size["gpu_first_start_ns"] == 2 * N  # within 30 µs of the start
    assert size["pid"] == N
    for kept in ("share", "signed_zero", "huge"):
        assert size[kept] == 8 * N, kept


def test_rows_written_later_are_packed_again(small_steps):
    table = InstanceTable(N)
    table["start_ns"] = np.arange(N, dtype="int64") * 1000
    table.set("gpu_last_end_ns", np.arange(N) * 1000.0 + 5, relative_to="start_ns")
    lost = np.array([4, 4_000])
    table.set_rows(["gpu_last_end_ns"], lost, np.nan)
    got = table.values("gpu_last_end_ns")
    assert np.isnan(got[lost]).all() and np.isnan(got).sum() == 2
    assert got[5] == 5_005.0


def test_a_column_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="3 values for 4 instances"):
        InstanceTable(4)["x"] = np.zeros(3)


@pytest.mark.parametrize("kind", ["whole", "with NaN", "integers", "huge", "fractions"])
def test_grouped_numbers_are_pandas_groupby(kind):
    rng = np.random.default_rng(11)
    n = 20_000
    group = pd.factorize(rng.integers(0, 40, n))[0]  # numbered in order of appearance
    values = {
        "whole": rng.integers(0, 10**6, n).astype("float64"),
        "with NaN": np.where(rng.random(n) < 0.3, np.nan, rng.integers(0, 10**6, n) * 1.0),
        "integers": rng.integers(-10**9, 10**9, n),
        "huge": rng.integers(0, 10**6, n) * 1.0 + 2.0**53,  # sums past exact integers
        "fractions": rng.random(n) * 1e6,
    }[kind]
    if kind == "with NaN":
        values[group == 5] = np.nan  # a group with nothing known
    grouped = _Grouped(group)
    want = pd.Series(values).groupby(group, sort=False)
    for how in ("sum", "min", "max"):
        expected = getattr(want, how)().to_numpy()
        got = grouped.aggregate(values, how)
        assert got.dtype == expected.dtype, how
        assert np.array_equal(got, expected, equal_nan=True), how
    assert np.array_equal(grouped.sizes(), want.size().to_numpy())
    assert np.array_equal(grouped.known(values), want.count().to_numpy())
