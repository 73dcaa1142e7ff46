"""Ranks side by side on the 2x H200 DDP fixtures (scripts/make_fixtures_multigpu.sh): a
straggler run (rank 1 spins 5 ms of host time in `forward`), a control run, and the
straggler run with both ranks in one report. Expected values come from SQL."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, sql

from nsyswrap.cli import main
from nsyswrap.multi import compare_ranks
from nsyswrap.multi.inputs import expand

STRAGGLER = [DATA / f"h200x2_ddp_straggler.rank{r}.sqlite" for r in (0, 1)]
CONTROL = [DATA / f"h200x2_ddp_control.rank{r}.sqlite" for r in (0, 1)]
ONE = DATA / "h200x2_ddp_straggler_one.sqlite"
ALLREDUCE = "ncclDevKernel_AllReduce%"


@pytest.fixture(scope="module")
def straggler():
    return compare_ranks(STRAGGLER, jobs=1)


@pytest.fixture(scope="module")
def control():
    return compare_ranks(CONTROL, jobs=1)


def _text(path, alias="e"):
    return f"coalesce({alias}.text, (SELECT value FROM StringIds WHERE id = {alias}.textId))"


def _range_times(path, name):
    return sql(path, f"SELECT start, \"end\" FROM NVTX_EVENTS AS e WHERE {_text(path)} = ? "
                     "ORDER BY start", (name,))


def _allreduce(path):
    """(start, end) of each all-reduce kernel in start order, and the session's UTC start."""
    rows = sql(path, "SELECT k.start, k.\"end\" FROM CUPTI_ACTIVITY_KIND_KERNEL AS k JOIN "
                     "StringIds AS s ON s.id = k.shortName WHERE s.value LIKE ? "
                     "ORDER BY k.start", (ALLREDUCE,))
    (utc,), = sql(path, "SELECT utcEpochNs FROM TARGET_INFO_SESSION_START_TIME")
    return np.array(rows, dtype="int64"), utc


def test_ranks_from_the_environment_nsys_recorded(straggler):
    for path, row in zip(STRAGGLER, straggler.table.itertuples(), strict=True):
        (value,), = sql(path, "SELECT value FROM META_DATA_CAPTURE WHERE value LIKE 'RANK=%'")
        assert row.rank == int(value.split("=")[1].strip('"'))
        assert "RANK=" in row.identified_by
        (device,), = sql(path, "SELECT DISTINCT deviceId FROM CUPTI_ACTIVITY_KIND_KERNEL")
        assert row.devices == [device]


def test_ranks_in_one_report_numbered_by_device():
    a = compare_ranks([ONE], jobs=1)
    rows = sql(ONE, "SELECT DISTINCT (globalPid >> 24) & 16777215, deviceId "
                    "FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY deviceId")
    assert [(r.pid, r.devices) for r in a.table.itertuples()] == [(p, [d]) for p, d in rows]
    assert list(a.table["rank"]) == [0, 1]
    assert all("on GPU" in how for how in a.table["identified_by"])


def test_collective_waits_match_sql(straggler):
    (k0, _), (k1, _) = (_allreduce(p) for p in STRAGGLER)
    assert len(k0) == len(k1)
    d = np.stack([k0[:, 1] - k0[:, 0], k1[:, 1] - k1[:, 0]])
    wait = d - d.min(axis=0)
    got = straggler.collectives
    got = got[got["name"].str.startswith("ncclDevKernel_AllReduce")]
    for rank in (0, 1):
        assert got[got["rank"] == rank]["wait_ns"].sum() == wait[rank].sum()
    # Rank 1 arrives last (spends least time) in nearly every all-reduce.
    assert (d[1] <= d[0]).mean() > 0.9


def test_clock_check_uses_the_capture_start(straggler):
    (k0, u0), (k1, u1) = (_allreduce(p) for p in STRAGGLER)
    skew = np.abs((k0[:, 1] + u0) - (k1[:, 1] + u1))
    # All collectives (all-reduce, broadcast, all-gather) are checked; all-reduces dominate.
    assert straggler.clock["checked"]
    assert straggler.clock["end_skew_median_ns"] == pytest.approx(np.median(skew), rel=0.25)
    assert straggler.clock["end_skew_median_ns"] < 100_000


def test_straggler_found_with_its_phase_and_cost(straggler):
    s = [f for f in straggler.findings if f.code == "STRAGGLER"]
    assert len(s) == 1
    f = s[0]
    assert f.severity == "warning" and f.evidence["rank"] == 1 and f.range == "forward"
    fwd = [np.array([e - b for b, e in _range_times(p, "forward")]) for p in STRAGGLER]
    # Rank 1's forward is host work (a spin), not blocked: its median is the SQL median
    # (first step left out, as the analysis does).
    assert f.evidence["by_rank_median_ns"][1] == pytest.approx(np.median(fwd[1][1:]), rel=0.02)
    # 5 ms planted: the excess is 4.5-5.5 ms and consistent.
    assert 4.5e6 < f.evidence["excess_median_ns"] < 5.5e6
    assert f.evidence["slower_share"] == 1.0
    # The cost: what rank 0 waits per step in collectives, about the planted 5 ms.
    assert 4.5e6 < f.evidence["others_wait_median_ns"][0] < 6.5e6
    codes = {x.code: x.severity for x in straggler.findings}
    assert codes["COMM_WAIT"] == "warning"


def test_control_has_no_straggler_and_no_comm_wait_warning(control):
    codes = [(f.code, f.severity) for f in control.findings]
    assert not [c for c in codes if c[0] == "STRAGGLER"]
    assert ("COMM_WAIT", "warning") not in codes


def test_one_report_finds_the_same_straggler():
    a = compare_ranks([ONE], jobs=1)
    s = [f for f in a.findings if f.code == "STRAGGLER"]
    assert [(f.evidence["rank"], f.range) for f in s] == [(1, "forward")]


def test_per_rank_steps_match_sql(straggler):
    for path, row in zip(STRAGGLER, straggler.table.itertuples(), strict=True):
        steps = np.array([e - b for b, e in _range_times(path, "train_step")])
        assert row.steps == len(steps) - 1  # the start-up step is left out
        assert row.step_median_ns == np.median(steps[1:])


def test_expand_folders_and_globs(tmp_path):
    assert expand([str(DATA / "h200x2_ddp_straggler.rank*.sqlite")]) == STRAGGLER
    (tmp_path / "b.sqlite").write_bytes(b"")
    (tmp_path / "a.sqlite").write_bytes(b"")
    assert [p.name for p in expand([tmp_path])] == ["a.sqlite", "b.sqlite"]


def _cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_cli_ranks_json_contract():
    r = _cli("compare", *STRAGGLER, "--format", "json", "-j", "1")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["schema"] == "nsyswrap.ranks/1"
    assert [d["schema"] for d in doc["reports"]] == ["nsyswrap.compare/1"] * 2
    assert [x["rank"] for x in doc["ranks"]] == [0, 1]
    assert {f["code"] for f in doc["findings"]} >= {"STRAGGLER", "COMM_WAIT"}


def test_cli_fail_on_cross_rank_codes():
    assert _cli("compare", *STRAGGLER, "--fail-on", "STRAGGLER", "-j", "1").exit_code == 3
    assert _cli("compare", *CONTROL, "--fail-on", "STRAGGLER", "-j", "1").exit_code == 0


def test_cli_csv_and_markdown_and_thresholds():
    r = _cli("compare", "--ranks", ONE, "--format", "csv", "--section", "collectives")
    assert r.exit_code == 0 and r.output.startswith("name,rank,count")
    r = _cli("compare", *STRAGGLER, "--format", "markdown", "-j", "1",
             "-t", "straggler_share=0.9")
    assert r.exit_code == 0 and "STRAGGLER" not in r.output  # 64% of the step < 90%


def test_reports_without_gpu_work_still_compare_host_times(tmp_path):
    path = DATA / "h100_torch_mix_nocuda.sqlite"
    copies = [tmp_path / "a.sqlite", tmp_path / "b.sqlite"]
    for c in copies:
        shutil.copyfile(path, c)
    a = compare_ranks(copies, jobs=1)  # the same report twice: two ranks, numbered
    assert list(a.table["rank"]) == [0, 1]
    assert set(a.table["identified_by"]) == {"order the reports were given (nothing in the "
                                             "report names its rank)"}
    family = a.step_family
    steps = np.array([e - b for b, e in _range_times(path, family)])
    kept = steps[1:] if len(steps) - 1 >= 4 else steps
    assert a.table["step_median_ns"].tolist() == [np.median(kept)] * 2
    assert a.table["compute_median_ns"].isna().all()  # unknown without CUDA trace, not 0
    assert not [f for f in a.findings if f.code == "STRAGGLER"]


def _subprocess(*args):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "nsyswrap", *map(str, args)],
                          capture_output=True, text=True)


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_one_unreadable_report_among_many_leaves_the_others_analysed(tmp_path, jobs):
    """Three good reports and a truncated one: the three analysed and written, the fourth
    named on standard error (one line) and in the output's notes, exit 2."""
    cut = tmp_path / "cut.rank1.sqlite"
    data = CONTROL[1].read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    good = [CONTROL[0], *STRAGGLER]
    r = _subprocess("compare", *good, cut, "--jobs", jobs, "--format", "json")
    assert r.returncode == 2
    doc = json.loads(r.stdout)
    assert sorted(x["source"] for x in doc["ranks"]) == sorted(map(str, good))
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert lines[0].startswith(f"nsyswrap: error: {cut} is truncated") and "left out" in lines[0]
    assert [n for n in doc["notes"] if str(cut) in n] == [
        f"left out, not analysed: {cut} is truncated ({len(data) // 2} of {len(data)} "
        "bytes): copy it again or re-export it from the .nsys-rep"]


def test_cli_unreadable_reports_only_is_one_line_error(tmp_path):
    bad = tmp_path / "x.rank0.sqlite"
    bad.write_text("not sqlite")
    worse = tmp_path / "x.rank1.sqlite"
    worse.write_bytes(b"")
    r = _subprocess("compare", bad, worse, "-j", "1")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "not a SQLite file" in r.stderr
    assert "and 1 more report(s) that could not be read" in r.stderr


def test_diff_with_an_unreadable_side_is_one_line_error(tmp_path):
    cut = tmp_path / "cut.sqlite"
    data = DATA.joinpath("h100_diff_base.sqlite").read_bytes()
    cut.write_bytes(data[: len(data) // 2])
    for jobs in ("1", "2"):
        r = _subprocess("diff", DATA / "h100_diff_base.sqlite", cut, "--jobs", jobs)
        assert r.returncode == 2 and r.stdout == ""
        assert r.stderr.count("\n") == 1 and f"{cut} is truncated" in r.stderr
