"""`nsyswrap diff` on the H100 diff fixtures (scripts/workloads/torch_diff.py): the same
workload twice, and once with mlp2 in fp32. Expected values come from SQL."""

from __future__ import annotations

import json
from statistics import median

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, sql

from nsyswrap.cli import main
from nsyswrap.multi import diff_reports
from nsyswrap.multi.stats import median_change_ci

BASE = DATA / "h100_diff_base.sqlite"
AGAIN = DATA / "h100_diff_base_again.sqlite"
SLOW = DATA / "h100_diff_slow.sqlite"


@pytest.fixture(scope="module")
def same():
    return diff_reports(BASE, AGAIN, jobs=1)


@pytest.fixture(scope="module")
def slow():
    return diff_reports(BASE, SLOW, jobs=1)


def _kernels(path):
    """demangled name -> durations, harness sleep (spin_kernel) left out."""
    out: dict[str, list[int]] = {}
    for name, short, d in sql(path, "SELECT n.value, s.value, k.\"end\" - k.start FROM "
                                    "CUPTI_ACTIVITY_KIND_KERNEL AS k "
                                    "JOIN StringIds AS n ON n.id = k.demangledName "
                                    "JOIN StringIds AS s ON s.id = k.shortName"):
        if short != "spin_kernel":
            out.setdefault(name, []).append(d)
    return out


def test_identical_builds_never_come_out_slower_or_faster(same):
    assert same.comparability["level"] == "comparable"
    assert not set(same.rows["verdict"]) & {"slower", "faster", "added", "removed"}
    assert same.regressions(1).empty


def test_kernel_medians_and_matching_from_sql(slow):
    base, new = _kernels(BASE), _kernels(SLOW)
    k = slow.rows[slow.rows["kind"] == "kernel"].set_index("name")
    for name in set(base) & set(new):
        assert k.loc[name, "base_median_ns"] == median(base[name])
        assert k.loc[name, "new_median_ns"] == median(new[name])
        assert k.loc[name, "base_count"] == len(base[name])
    assert set(k.index[k["verdict"] == "added"]) == set(new) - set(base)
    assert set(k.index[k["verdict"] == "removed"]) == set(base) - set(new)
    added = [n for n in set(new) - set(base) if "gemm" in n]
    assert added and all("f32" in n for n in added)  # mlp2's fp32 GEMM


def test_the_planted_change_is_what_got_slower(slow):
    r = slow.rows.set_index(["kind", "name", "metric"])
    assert r.loc[("benchmark", "mlp2", "busy_per_call"), "verdict"] == "slower"
    assert r.loc[("benchmark", "mlp1", "busy_per_call"), "verdict"] == "no significant change"
    assert r.loc[("range", "nsyswrap:step", "gpu_busy"), "verdict"] == "slower"
    # The biggest changes in total are the step, mlp2 and the fp32 GEMM added for it; what
    # else moved (neighbours' L2 and clock state) is two orders of magnitude smaller.
    significant = slow.rows[slow.rows["verdict"].isin(["slower", "added"])]
    top = significant.sort_values("total_change_ns", ascending=False).head(4)
    assert {n for n in top["name"]} >= {"nsyswrap:step", "mlp2"}
    biggest = significant["total_change_ns"].max()
    rest = significant[~significant["name"].isin(top["name"])]["total_change_ns"]
    assert (rest.abs() < biggest / 100).all()
    # mlp2 per call: the fp32 GEMM's own time from SQL dominates the new median.
    fp32 = [d for n, ds in _kernels(SLOW).items() if "f32f32" in n for d in ds]
    assert r.loc[("benchmark", "mlp2", "busy_per_call"), "new_median_ns"] > median(fp32)
    assert [f["code"] for f in slow.findings_appeared] == ["FP32_GEMM"]


def test_incomparable_runs_are_inconclusive():
    d = diff_reports(BASE, DATA / "h200x2_ddp_control.rank0.sqlite", jobs=1)
    assert d.comparability["level"] == "not comparable"
    assert any("different GPUs" in r for r in d.comparability["reasons"])
    both = d.rows[d.rows["base_count"].gt(0) & d.rows["new_count"].gt(0)]
    assert set(both["verdict"]) <= {"inconclusive"}


def test_bootstrap_interval_is_seeded_and_covers_a_known_shift():
    rng = np.random.default_rng(1)
    base = rng.normal(100, 2, 200)
    new = base * 1.10
    change, low, high = median_change_ci(base, new)
    assert change == pytest.approx(0.10)
    assert low <= 0.10 <= high
    assert median_change_ci(base, new) == (change, low, high)


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_cli_fail_on_regression_and_json():
    assert _cli("diff", BASE, AGAIN, "--fail-on-regression", "1", "-j", "1").exit_code == 0
    r = _cli("diff", BASE, SLOW, "--fail-on-regression", "50", "--format", "json", "-j", "1")
    assert r.exit_code == 3
    doc = json.loads(r.output[:r.output.rindex("}") + 1])
    assert doc["schema"] == "nsyswrap.diff/1"
    assert doc["comparability"]["method"].startswith("bootstrap")
    assert {"appeared", "disappeared"} <= set(doc["findings"])


def test_cli_diff_of_analysis_json(tmp_path):
    for name, path in (("a", BASE), ("b", AGAIN)):
        r = _cli("compare", path, "--format", "json", "--instances", "-o", tmp_path / name)
        assert r.exit_code == 0
    r = _cli("diff", tmp_path / "a", tmp_path / "b", "--format", "csv")
    assert r.exit_code == 2  # not .json: read as a report, and refused in one line
    (tmp_path / "a").rename(tmp_path / "a.json")
    (tmp_path / "b").rename(tmp_path / "b.json")
    r = _cli("diff", tmp_path / "a.json", tmp_path / "b.json", "--format", "csv")
    assert r.exit_code == 0
    assert ",slower," not in r.output and ",faster," not in r.output
    assert ",no significant change," in r.output


def test_cli_diff_bad_input(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    r = _cli("diff", bad, BASE)
    assert r.exit_code == 2 and "nsyswrap.compare/1" in r.output


# -- the program's own timings (nsyswrap run's records), by call sites ----------------------

def test_timings_of_a_run_against_itself_do_not_change():
    from test_user_timings_render import SEED, event_groups

    d = diff_reports(SEED, SEED, jobs=1)
    t = d.rows[d.rows["kind"] == "timing"].set_index(["name", "metric"])
    groups = event_groups(SEED)
    assert set(t.index) == {(label, m) for label in groups
                            for m in ("busy_per_call", "measured_per_call")}
    for label, intervals in groups.items():
        row = t.loc[(label, "measured_per_call")]
        assert row["base_count"] == row["new_count"] == len(intervals)
        assert row["base_median_ns"] == pytest.approx(
            median(e["value_ms"] * 1e6 for e in intervals))
    assert set(t["verdict"]) == {"no significant change"}


def test_timing_whose_kernels_took_longer_is_slower(tmp_path):
    """Base: a copy of the seed whose kernels in one timed place ran half as long (SQL);
    new: the seed. That place's kernels are slower, the program's own figures (the
    runner's records, unchanged) and the other places are not."""
    import shutil
    import sqlite3

    from test_user_timings_render import SEED, seed_interval_kernels

    changed = "torch_seed_timings.py:59→61 (on_gpu)"
    intervals = seed_interval_kernels()[changed]
    base = tmp_path / "seed_faster.sqlite"
    shutil.copy(SEED, base)
    base.chmod(0o644)
    con = sqlite3.connect(base)
    rowids = [rowid for kernels in intervals for rowid, _ in kernels]
    con.execute(f'UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET "end" = start + ("end" - start) / 2 '
                f'WHERE rowid IN ({",".join(map(str, rowids))})')
    con.commit()
    con.close()
    d = diff_reports(base, SEED, jobs=1)
    t = d.rows[d.rows["kind"] == "timing"].set_index(["name", "metric"])
    row = t.loc[(changed, "busy_per_call")]
    assert row["verdict"] == "slower"
    assert row["base_median_ns"] == median(sum(d // 2 for _, d in k) for k in intervals)
    assert row["new_median_ns"] == median(sum(d for _, d in k) for k in intervals)
    others = t.drop(index=(changed, "busy_per_call"))
    assert set(others["verdict"]) == {"no significant change"}
    assert list(d.rows["kind"].drop_duplicates())[:1] == ["timing"]  # first, no ranges here


def test_timings_from_analysis_json(tmp_path):
    from test_user_timings_render import SEED, event_groups

    runner = CliRunner()
    paths = {}
    for name, extra in (("full", ["--instances"]), ("summary", [])):
        paths[name] = tmp_path / f"{name}.json"
        result = runner.invoke(main, ["compare", str(SEED), "--format", "json",
                                      "-o", str(paths[name]), *extra])
        assert result.exit_code == 0, result.output
    groups = event_groups(SEED)
    # With the instances: the same samples as the report's.
    d = diff_reports(paths["full"], SEED, jobs=1)
    t = d.rows[d.rows["kind"] == "timing"]
    assert len(t) == 2 * len(groups) and set(t["verdict"]) == {"no significant change"}
    assert set(t["method"]) == {"bootstrap (percentile, ratio of medians)"}
    # Without them: medians and counts only, no verdict.
    d = diff_reports(paths["summary"], paths["summary"], jobs=1)
    t = d.rows[d.rows["kind"] == "timing"]
    assert len(t) == 2 * len(groups) and set(t["verdict"]) == {"inconclusive"}
    assert set(t["reason"]) == {"no per-instance samples (write analysis.json with "
                                "--instances)"}
    for fmt in ("table", "markdown", "csv", "html", "json"):
        out = runner.invoke(main, ["diff", str(paths["full"]), str(SEED), "--format", fmt])
        assert out.exit_code == 0, out.output
        assert "torch_seed_timings.py:37→39" in out.output.replace("\\_", "_"), fmt
