"""`nsyswrap diff` on the H100 diff fixtures (scripts/workloads/torch_diff.py): the same
workload twice, and once with mlp2 in fp32. Expected values come from SQL."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, needs_nsys, sql

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

    from test_user_timings_render import SEED, kernel_union_ns, seed_interval_kernels

    changed = "on_gpu at torch_seed_timings.py:59→61"
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
    # Busy time is the kernels' union (on one stream they may overlap a little).
    assert row["new_median_ns"] == median(kernel_union_ns(SEED, [r for r, _ in k])
                                          for k in intervals)
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
    assert set(t["reason"]) == {"no per-instance samples (a run's analysis.json has them; "
                                "compare --format json needs --instances)"}
    for fmt in ("table", "markdown", "csv", "html", "json"):
        out = runner.invoke(main, ["diff", str(paths["full"]), str(SEED), "--format", fmt])
        assert out.exit_code == 0, out.output
        assert "torch_seed_timings.py:37→39" in out.output.replace("\\_", "_"), fmt


# -- runs of different lengths: 30 steps against 40, and each run's analysis.json ----------

def _fewer_steps(dst, keep: int, drop_every_other: str | None = None):
    """A copy of BASE as if the loop had stopped after `keep` steps: the later steps' NVTX
    ranges, their runtime calls and the GPU work those launched deleted (SQL). With
    `drop_every_other`, that kernel's launches in every other remaining step go too: a
    kernel called a different number of times per step."""
    import shutil
    import sqlite3

    shutil.copy(BASE, dst)
    dst.chmod(0o644)
    con = sqlite3.connect(dst)
    steps = con.execute("SELECT e.start, e.end, e.globalTid FROM NVTX_EVENTS e JOIN StringIds "
                        "s ON s.id = e.textId WHERE s.value = 'step' AND e.eventType = 59 "
                        "ORDER BY e.start").fetchall()
    tid = steps[0][2]
    windows = [(steps[keep][0], steps[-1][1])]
    if drop_every_other:
        windows += [(s, e) for s, e, _ in steps[:keep:2]]
    for lo, hi in windows:
        calls = ("SELECT correlationId FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ? "
                 "AND start BETWEEN ? AND ?")
        if (lo, hi) != windows[0]:  # a step kept, but without that kernel
            con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE correlationId IN "
                        f"({calls}) AND demangledName IN (SELECT id FROM StringIds WHERE "
                        "value = ?)", (tid, lo, hi, drop_every_other))
            continue
        for table in ("KERNEL", "MEMCPY", "MEMSET", "SYNCHRONIZATION", "CUDA_EVENT"):
            con.execute(f"DELETE FROM CUPTI_ACTIVITY_KIND_{table} WHERE correlationId IN "
                        f"({calls})", (tid, lo, hi))
        con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME WHERE globalTid = ? AND start "
                    "BETWEEN ? AND ?", (tid, lo, hi))
        con.execute("DELETE FROM NVTX_EVENTS WHERE globalTid = ? AND eventType IN (59, 60) "
                    "AND start BETWEEN ? AND ?", (tid, lo, hi))
    con.commit()
    con.close()
    return dst


def test_more_steps_of_the_same_work_get_verdicts(tmp_path):
    """30 steps against the same run's 40: every range and kernel is compared instance by
    instance (the old rule called a count change of more than 10% different work)."""
    short = _fewer_steps(tmp_path / "short.sqlite", 30)
    d = diff_reports(short, BASE, jobs=1)
    steps = sql(short, "SELECT count(*) FROM NVTX_EVENTS e JOIN StringIds s ON s.id = "
                       "e.textId WHERE s.value = 'step'")[0][0]
    assert steps == 30
    r = d.rows.set_index(["kind", "name"])
    assert r.loc[("range", "nsyswrap:step"), ["base_count", "new_count"]].tolist() == [30, 40]
    # The kernels' counts changed by up to the steps' 30 → 40, some by less (launched
    # outside the steps too): each gets a verdict.
    kernels = d.rows[d.rows["kind"] == "kernel"]
    base, new = _kernels(short), _kernels(BASE)
    assert any(len(new[n]) / len(base[n]) > 1.25 for n in base)
    assert not kernels["reason"].str.startswith("count changed").any()
    assert set(d.rows["verdict"]) <= {"no significant change", "inconclusive"}
    assert set(d.rows.loc[d.rows["verdict"] == "inconclusive", "reason"]) == {"too few samples"}
    assert d.comparability["repetitions"]["high"] == pytest.approx(40 / 30)


def test_a_kernel_called_a_different_number_of_times_per_step_is_inconclusive(tmp_path):
    softmax = next(n for n in _kernels(BASE) if "softmax_warp_forward" in n)
    fewer = _fewer_steps(tmp_path / "fewer.sqlite", 30, drop_every_other=softmax)
    base_count = len(_kernels(fewer)[softmax])
    assert base_count == 15  # in half of the 30 steps
    d = diff_reports(fewer, BASE, jobs=1)
    r = d.rows.set_index(["kind", "name"])
    assert r.loc[("kernel", softmax), "verdict"] == "inconclusive"
    assert r.loc[("kernel", softmax), "reason"] == (
        f"count changed {base_count} → 40, unlike the ranges' (nsyswrap:step 30 → 40, "
        "nsyswrap:embed 30 → 40): called a different number of times per repetition")
    # The step itself is compared, and says that its steps ran other work.
    assert r.loc[("range", "nsyswrap:step"), "verdict"] != "inconclusive"


def test_two_analysis_json_diff_as_their_reports(tmp_path):
    """What run writes (pipeline.analysis_json) carries the samples: its diff has the
    reports' verdicts, kernels apart (summary numbers there)."""
    from nsyswrap.capture.pipeline import analysis_json
    from nsyswrap.common.files import atomic_write
    from nsyswrap.comparison.single import compare

    short = _fewer_steps(tmp_path / "short.sqlite", 30)
    docs = []
    for path in (short, SLOW):
        doc = tmp_path / f"{path.stem}.json"
        atomic_write(doc, analysis_json(compare(path)))
        docs.append(doc)
    samples = json.loads(docs[0].read_text())["samples"]
    step = next(s for s in samples if s["name"] == "nsyswrap:step")
    busy = sorted(v for v in step["values_ns"])
    assert step["count"] == len(busy) == 30 and step["median_ns"] == median(busy)
    from_json = diff_reports(*docs, jobs=1).rows
    from_reports = diff_reports(short, SLOW, jobs=1).rows
    not_kernels = from_reports[from_reports["kind"] != "kernel"].reset_index(drop=True)
    assert len(not_kernels) and not_kernels.equals(
        from_json[from_json["kind"] != "kernel"].reset_index(drop=True))
    r = from_json.set_index(["kind", "name", "metric"])
    assert r.loc[("range", "nsyswrap:step", "gpu_busy"), "verdict"] == "slower"
    assert r.loc[("benchmark", "mlp2", "busy_per_call"), "verdict"] == "slower"


@pytest.mark.nsys
@needs_nsys
def test_two_runs_of_different_lengths_diff_from_their_analysis_json(tmp_path):
    """`nsyswrap run` twice under nsys 2022.4 (CPU): 12 steps, then 13 with `compute` ten
    times as long. Their analysis.json files diff with verdicts, as the reports do. Twelve
    samples a side: a loaded machine now and then stretches a 4 ms sleep past 40 ms, and
    such outliers in the base pull the bootstrap interval across 0 ("no significant
    change") once the resamples' median is one in 2.5% of them: with four samples one
    outlier did, with eight two (a CI run: 218 and 63 ms among eight); with twelve, two
    are a median in 0.8% of the resamples."""
    import subprocess
    import sys

    workload = Path(__file__).parent / "workloads" / "steps.py"
    runs = {}
    for name, args in (("a", ["12"]), ("b", ["13", "--slow"])):
        proc = subprocess.run([sys.executable, "-m", "nsyswrap", "run", "-o", tmp_path / name,
                               "--format", "json", "--trace", "nvtx", workload, *args],
                              capture_output=True, text=True, timeout=180)
        assert proc.returncode == 0, proc.stderr
        runs[name] = tmp_path / name
    d = diff_reports(runs["a"] / "analysis.json", runs["b"] / "analysis.json", jobs=1)
    r = d.rows.set_index("name")
    assert r["base_count"].tolist() == [12] * 3 and r["new_count"].tolist() == [13] * 3
    assert "inconclusive" not in set(r["verdict"])
    for name in ("compute", "load"):
        lengths = {k: [e - s for s, e in sql(runs[k] / "steps.sqlite",
                                             "SELECT e.start, e.end FROM NVTX_EVENTS e JOIN "
                                             "StringIds s ON s.id = e.textId WHERE s.value = ?",
                                             (name,))] for k in runs}
        assert r.loc[f"e2e:{name}", "base_median_ns"] == median(lengths["a"])
        assert r.loc[f"e2e:{name}", "new_median_ns"] == median(lengths["b"])
    assert r.loc["e2e:compute", "verdict"] == "slower" and r.loc["e2e:compute", "change"] > 0.8
    assert r.loc["e2e:step", "verdict"] == "slower"
    reports = diff_reports(runs["a"] / "steps.sqlite", runs["b"] / "steps.sqlite", jobs=1)
    assert reports.rows.equals(d.rows)


def test_a_step_that_runs_other_work_says_so(slow):
    """mlp2 in fp32 adds casts to every step: the step is slower, and its row says how many
    GPU operations a step ran before and after (SQL: operations launched inside each)."""
    def ops_per_step(path):
        return median(n for (n,) in sql(path, """
            SELECT (SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r
                    WHERE r.globalTid = e.globalTid AND r.start BETWEEN e.start AND e.end
                    AND r.correlationId IN (SELECT correlationId FROM CUPTI_ACTIVITY_KIND_KERNEL
                                            UNION ALL SELECT correlationId
                                            FROM CUPTI_ACTIVITY_KIND_MEMCPY
                                            UNION ALL SELECT correlationId
                                            FROM CUPTI_ACTIVITY_KIND_MEMSET))
            FROM NVTX_EVENTS e JOIN StringIds s ON s.id = e.textId
            WHERE s.value = 'step' AND e.eventType = 59"""))
    before, after = ops_per_step(BASE), ops_per_step(SLOW)
    assert before < after
    row = slow.rows.set_index(["kind", "name"]).loc[("range", "nsyswrap:step")]
    assert row["verdict"] == "slower"
    assert row["reason"] == f"GPU operations per instance {before:.3g} → {after:.3g}"
