"""Exports that were not used while developing the analyses (tests/data/holdout, made by
the same scripts from workloads written after the code): `nsyswrap compare --format json`
must agree with direct SQL on kernel counts and totals, per-range GPU busy, range counts."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter

import pytest
import reference
from conftest import DATA, sql

HOLDOUT = sorted((DATA / "holdout").glob("*.sqlite"))


def _compare_json(path, *options):
    proc = subprocess.run([sys.executable, "-m", "nsyswrap", "compare", str(path), "--format",
                           "json", "--instances", *options], capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)


@pytest.fixture(scope="module", params=HOLDOUT, ids=lambda p: p.name)
def holdout(request):
    return request.param, _compare_json(request.param)


def test_kernel_counts_and_totals(holdout):
    path, doc = holdout
    expected = reference.kernel_totals(path)
    got = {k["name"]: k for k in doc["kernels"]}
    assert set(got) == set(expected)
    for name, e in expected.items():
        assert (got[name]["count"], got[name]["total_ns"]) == (e["count"], e["total"])


def test_range_counts_equal_nvtx_events(holdout):
    path, doc = holdout
    rows = sql(path, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
                     "ON s.id = e.textId WHERE e.eventType IN (59, 60) AND e.end IS NOT NULL")
    expected = Counter(name for (name,) in rows)
    assert Counter(r["name"] for r in doc["instances"]) == expected
    # The summary lists the user's ranges; the harness's own iterations are the benchmarks.
    for r in doc["ranges"]:
        assert r["count"] == expected[r["name"]]
    for b in doc["benchmarks"]:
        assert b["iterations"] <= expected[b["benchmark"]]


@pytest.mark.parametrize("rule", ["process", "thread"])
def test_per_range_gpu_busy_equals_kernels_launched_inside(holdout, rule):
    path, doc = holdout
    if rule != "process":  # the default
        doc = _compare_json(path, "--attribution", rule)
    assert doc["report"]["attribution"] == rule
    expected = reference.projection(path, rule)
    instances = sorted(doc["instances"], key=lambda r: (r["start_ns"], r["range_id"]))
    assert len(instances) == len(expected)
    for got, exp in zip(instances, expected, strict=True):
        assert got["name"] == exp["name"]
        if doc["report"]["traced"]["cuda"]:
            assert (got["gpu_busy_ns"], got["gpu_ops"], got["kernels"]) == (
                exp["busy"], exp["ops"], exp["kernels"])
        else:
            assert got["gpu_busy_ns"] is None
