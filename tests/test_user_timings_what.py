"""One row per thing the program timed, on GPU fixtures made through `nsyswrap run` from
timing code written as people write it (scripts/workloads/torch_user_*.py): the seed
article's three variants as one function `test(variant)`; one `timed(name, fn)` helper over
seven workloads; size sweeps (inside one function, and one call per size); a program that
uses nsyswrap's own harness beside its own events; two worker processes running the same
code. Each row's label and cause are checked against the trace (SQL: tests/reference.py),
never against nsyswrap's own numbers."""

from __future__ import annotations

import json
from pathlib import Path
from statistics import median

import pytest
from click.testing import CliRunner
from conftest import DATA, sql
from reference import do_bench_estimates, runner_documents, timed_windows

from nsyswrap.cli import main

WORKLOADS = Path(__file__).parents[1] / "scripts" / "workloads"


def _lines(script: str, statement: str) -> list[int]:
    """The lines of a workload that are `statement`, from its source."""
    source = (WORKLOADS / script).read_text().splitlines()
    return [i for i, line in enumerate(source, 1) if line.strip() == statement]


def _pair(script: str, start: str, end: str, nth: int = 0) -> str:
    return f"{script}:{_lines(script, start)[nth]}→{_lines(script, end)[nth]}"


def _fixture(name: str):
    found = sorted(DATA.glob(f"h*_user_{name}.sqlite"))
    return pytest.param(found[0] if found else None, id=name, marks=pytest.mark.skipif(
        not found, reason=f"no *_user_{name}.sqlite (scripts/make_fixtures_gpu.sh)"))


def _compare(path, *extra) -> dict:
    result = CliRunner().invoke(main, ["compare", str(path), "--format", "json", *extra])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _groups(doc: dict) -> dict[str, dict]:
    return {g["label"]: g for g in doc["user_timings"]["groups"]}


def _windows(path, doc: dict) -> dict[str, list[dict]]:
    """The trace's windows (reference.timed_windows), by the label nsyswrap gave each."""
    label = {(r["pid"], r["start_ns"], r["end_ns"]): r["label"]
             for r in doc["user_timing_instances"]}
    windows = timed_windows(path)
    estimates = {id(w) for w in do_bench_estimates(windows)}
    out: dict[str, list[dict]] = {}
    for w in windows:
        if id(w) not in estimates:
            out.setdefault(label[(w["pid"], w["start_ns"], w["end_ns"])], []).append(w)
    return out


def _codes(doc: dict, label: str) -> set[str]:
    return set(_groups(doc)[label]["codes"])


@pytest.mark.parametrize("path", [_fixture("variants")])
def test_one_function_with_a_variant_argument_gives_a_row_per_variant(path):
    doc = _compare(path, "--instances")
    groups = _groups(doc)
    script = "torch_user_variants.py"
    # the three record() pairs of test()
    pairs = [(_lines(script, f"events[i][{2 * k}].record()")[0],
              _lines(script, f"events[i][{2 * k + 1}].record()")[0]) for k in range(3)]
    assert set(groups) == {f"test(variant={v}) at {script}:{a}→{b}"
                           for v in (1, 2, 3) for a, b in pairs}
    assert all(g["instances"] == 10 for g in groups.values())
    windows = _windows(path, doc)

    def label(v, pair):
        return f"test(variant={v}) at {script}:{pairs[pair][0]}→{pairs[pair][1]}"

    # Variant 1's first window: the host, not the copies (which ended before the start
    # record), keeps the idle GPU waiting: far longer before the first launch than anywhere.
    first = windows[label(1, 0)]
    lead = median(w["host_lead_ns"] for w in first)
    others = [w["host_lead_ns"] for v in (2, 3) for p in range(3) for w in windows[label(v, p)]]
    assert lead > 100_000 and lead > 3 * median(others)
    assert "HOST_WORK_IN_WINDOW" in _codes(doc, label(1, 0))
    assert "LAUNCH_OVERHEAD" not in _codes(doc, label(1, 0))
    # The flushed variant's kernels are slower than the same kernels hot (variant 2): the
    # cache effect is found between them.
    flushed = median(w["busy_union_ns"] for p in range(3) for w in windows[label(3, p)])
    hot = median(w["busy_union_ns"] for p in range(3) for w in windows[label(2, p)])
    assert flushed > 1.05 * hot
    cache = [f for f in doc["findings"] if f["code"] == "CACHE_EFFECT"]
    assert cache and any("variant=3" in r for f in cache for r in f["ranges"])


TIMED = ["uncovered", "sync", "graph", "launches", "gemm", "host_first", "joined"]


@pytest.mark.parametrize("path", [_fixture("timed")])
def test_one_helper_over_seven_workloads_gives_each_its_row_and_its_cause(path):
    doc = _compare(path, "--instances")
    groups = _groups(doc)
    where = _pair("torch_user_timed.py", "start.record()", "end.record()")
    labels = {n: f"timed(name={n!r}) at {where}" for n in TIMED}
    assert set(groups) == set(labels.values())
    assert all(g["instances"] == 15 for g in groups.values())
    windows = {n: _windows(path, doc)[labels[n]] for n in TIMED}
    codes = {n: _codes(doc, labels[n]) for n in TIMED}
    # The side stream's work: the events do not wait for it.
    assert all(w["uncovered_ops"] for w in windows["uncovered"])
    assert "UNCOVERED_STREAM" in codes["uncovered"]
    # .item(): the host blocks on the GPU inside every window.
    assert all(any(api for api, _ in w["blocking"]) for w in windows["sync"])
    assert "SYNC_IN_WINDOW" in codes["sync"]
    # 2 ms of sleep before the launch.
    assert all(w["host_lead_ns"] >= 1_900_000 for w in windows["host_first"])
    assert "HOST_WORK_IN_WINDOW" in codes["host_first"]
    # 200 kernels, launched one at a time: the host sets the pace.
    assert all(len(w["own"]) == 200 for w in windows["launches"])
    assert median(w["value_ns"] for w in windows["launches"]) > 3 * median(
        w["busy_union_ns"] for w in windows["launches"])
    assert "LAUNCH_OVERHEAD" in codes["launches"]
    # Joined back with wait_stream: nothing missed, no sync; nor in the graph's or the
    # GEMM's windows.
    assert all(w["uncovered_ops"] == 0 and any(o["joined"] for o in w["other"])
               for w in windows["joined"])
    for name in ("joined", "graph", "gemm"):
        assert not codes[name] & {"UNCOVERED_STREAM", "SYNC_IN_WINDOW",
                                  "HOST_WORK_IN_WINDOW"}, name
    # Each row its own cause: no two workloads read the same set of codes but the healthy
    # ones (launch overhead at most, on an idle GPU).
    causes = {n: frozenset(c - {"CACHE_EFFECT", "COLD_START"}) for n, c in codes.items()}
    assert len({causes[n] for n in ("uncovered", "sync", "host_first", "launches")}) == 4


def _grids(path, w: dict) -> tuple:
    """The names and grids of the kernels a window holds (launched on its stream between
    its records), from SQL."""
    rows = sql(path, """
        SELECT k.demangledName, k.gridX, k.gridY, k.gridZ FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
         AND (r.globalTid >> 24) = (k.globalPid >> 24)
        WHERE k.streamId = ? AND r.start > ? AND r.start < ?
          AND ((k.globalPid >> 24) & 16777215) = ?
        ORDER BY r.start""", (w["stream"], w["start_ns"], w["end_ns"], w["pid"]))
    return tuple(rows)


@pytest.mark.parametrize("path", [_fixture("sweep")])
def test_a_sweep_gives_a_row_per_size(path):
    doc = _compare(path, "--instances")
    groups = _groups(doc)
    windows = _windows(path, doc)
    # One call per size: the argument tells them apart.
    bench = _pair("torch_user_sweep.py", "start.record()", "end.record()", 1)
    for n in (512, 1024, 2048, 4096):
        assert groups[f"bench(n={n}) at {bench}"]["instances"] == 6
    # A loop over sizes inside one function: the work tells them apart, one row per size,
    # each of one shape of kernels (by SQL) and no two rows alike.
    sweep = _pair("torch_user_sweep.py", "start.record()", "end.record()", 0)
    inside = {label: ws for label, ws in windows.items()
              if label.startswith(f"sweep at {sweep} ")}
    assert len(inside) == 4 and all(len(ws) == 6 for ws in inside.values())
    shapes = {label: {_grids(path, w) for w in ws} for label, ws in inside.items()}
    steady = {label: max(s, key=lambda g: sum(_grids(path, w) == g for w in inside[label]))
              for label, s in shapes.items()}
    assert len(set(steady.values())) == 4
    assert all("(grid " in label for label in inside)


@pytest.mark.parametrize("path", [_fixture("harness")])
def test_nsyswraps_own_harness_is_never_the_programs_timing(path):
    doc = _compare(path)
    groups = _groups(doc)
    assert not [label for label in groups if "at harness.py:" in label]
    own = _pair("torch_user_harness.py", "start.record()", "end.record()")
    assert list(groups) == [own]
    assert groups[own]["instances"] == 10
    assert {b["benchmark"] for b in doc["benchmarks"]} >= {"gemm2048", "scale"}
    (runner,) = runner_documents(path)
    assert runner["own_records"] > 0  # the harness's records were seen and left out


@pytest.mark.parametrize("path", [_fixture("two_procs")])
def test_two_processes_timing_the_same_code_give_a_row_each(path):
    doc = _compare(path, "--instances")
    groups = _groups(doc)
    where = _pair("torch_user_two_procs.py", "start.record()", "end.record()")
    assert set(groups) == {f"work at {where} [process {i}]" for i in (1, 2)}
    pids = {g["pid"] for g in groups.values()}
    assert len(pids) == 2 == len(runner_documents(path))
    windows = _windows(path, doc)
    for label, g in groups.items():
        assert {w["pid"] for w in windows[label]} == {g["pid"]}
        assert len(windows[label]) == g["instances"] == 10


@pytest.mark.parametrize("base,new", [(_fixture("sweep").values[0],
                                       _fixture("sweep_more").values[0])])
def test_diff_matches_rows_by_key_and_names_those_on_one_side(base, new):
    if base is None or new is None:
        pytest.skip("the two sweep fixtures")
    result = CliRunner().invoke(main, ["diff", str(base), str(new), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    out = json.loads(result.stdout)
    rows = [r for r in out["rows"] if r["kind"] == "timing"]
    base_keys = {g["key"]: g["label"] for g in _compare(base)["user_timings"]["groups"]}
    new_keys = {g["key"]: g["label"] for g in _compare(new)["user_timings"]["groups"]}
    bench = _pair("torch_user_sweep.py", "start.record()", "end.record()", 1)
    # bench(n) per size: the same four rows in both runs (the same keys), one more in the
    # second; sweep(sizes) was called with other sizes: another call, its rows another's.
    common = {k for k, label in base_keys.items() if label.startswith("bench(")}
    assert len(common) == 4 and common <= set(new_keys)
    assert {new_keys[k] for k in set(new_keys) - set(base_keys)
            if new_keys[k].startswith("bench(")} == {f"bench(n=8192) at {bench}"}
    verdict = {(r["key"], r["metric"]): r["verdict"] for r in rows}
    for k in common:
        assert verdict[(k, "busy_per_call")] not in ("added", "removed"), base_keys[k]
    for k in set(new_keys) - set(base_keys):
        assert verdict[(k, "busy_per_call")] == "added", new_keys[k]
    for k in set(base_keys) - set(new_keys):
        assert verdict[(k, "busy_per_call")] == "removed", base_keys[k]
