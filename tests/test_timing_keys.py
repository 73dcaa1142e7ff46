"""What tells the program's timed windows apart (analysis/timing_keys.py), on windows built
the way the runner records them: one helper for many workloads, a function per variant, a
sweep inside one function, an iteration counter passed in, a cold first window, two
processes. Expected groups and labels are written from the programs' shapes here."""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from nsyswrap.analysis.timing_keys import MAX_ARG_VALUES, MAX_SHAPES, identify


@dataclass
class _Process:
    pid: int
    sites: list
    contexts: list
    scopes: list = field(default_factory=list)


@dataclass
class _Events:
    processes: list
    records: pd.DataFrame


def _program(windows: list[dict], pid: int = 7, *, sites=None, contexts=None):
    """Windows as dicts: start/end site codes, start/end context codes, signature, grid.
    Returns (rows, events) as user_timings hands them to identify()."""
    recs, rows = [], []
    for i, w in enumerate(windows):
        recs += [{"context": w.get("ctx", 0)}, {"context": w.get("end_ctx", w.get("ctx", 0))}]
        rows.append({"pid": w.get("pid", pid), "start_record": 2 * i, "end_record": 2 * i + 1,
                     "elapsed_row": i, "start_site": w.get("site", 0),
                     "end_site": w.get("end_site", 1), "measured_at_ns": 1000 * i,
                     "start_time_ns": 1000 * i, "work_signature": w.get("sig", 1),
                     "main_grid": w.get("grid", "1×1×1"), "main_kernel": "k",
                     "work_ops": 1})
    procs = {}
    for w in rows:
        procs.setdefault(w["pid"], _Process(w["pid"], sites or [("bench.py", 19, "timed"),
                                                                ("bench.py", 21, "timed")],
                                            contexts or []))
    return pd.DataFrame(rows), _Events(list(procs.values()), pd.DataFrame(recs))


def _frame(function, line, **args):
    return ("bench.py", line, function, tuple((k, v) for k, v in args.items()))


def test_one_helper_for_many_workloads_gives_a_row_per_workload():
    names = ["uncovered", "sync", "graph", "launches", "gemm", "host_first"]
    contexts = [(_frame("timed", 17, name=repr(n), fn=n), _frame("<module>", 60))
                for n in names]
    windows = [{"ctx": c, "sig": 100 + c} for c in range(len(names)) for _ in range(5)]
    rows, events = _program(windows, contexts=contexts)
    out = identify(rows, events)
    assert out["key"].nunique() == len(names)
    labels = out.drop_duplicates("key")["label"].tolist()
    # name= alone tells them apart: fn= (the same thing again) is not shown
    assert labels == [f"timed(name={n!r}) at bench.py:19→21" for n in names]
    assert all(len(label) <= 60 for label in labels)


def test_a_function_per_variant_gives_a_row_per_variant_and_pair_of_lines():
    contexts = [(_frame("test", 36, variant=str(v)), _frame("<module>", 62))
                for v in (1, 2, 3)]
    sites = [("seed.py", 27, "test"), ("seed.py", 29, "test"), ("seed.py", 30, "test"),
             ("seed.py", 32, "test")]
    windows = [{"ctx": v, "site": a, "end_site": a + 1}
               for v in range(3) for _ in range(10) for a in (0, 2)]
    rows, events = _program(windows, sites=sites, contexts=contexts)
    out = identify(rows, events)
    assert out["key"].nunique() == 6
    assert set(out["label"]) == {f"test(variant={v}) at seed.py:{a}→{b}"
                                 for v in (1, 2, 3) for a, b in ((27, 29), (30, 32))}


def test_a_sweep_inside_one_function_splits_by_the_work():
    sizes = [512, 1024, 2048, 4096]
    windows = [{"sig": n, "grid": f"{n // 128}×1×1"} for n in sizes for _ in range(6)]
    rows, events = _program(windows, contexts=[(_frame("sweep", 20, sizes="[…]"),)])
    out = identify(rows, events)
    assert out["key"].nunique() == len(sizes)
    assert out.drop_duplicates("key")["label"].tolist() == [
        f"sweep at bench.py:19→21 (grid {n // 128}×1×1)" for n in sizes]


def test_a_cold_first_window_stays_with_its_group():
    # autotuning: the first window of each size ran other kernels
    windows = [{"sig": -n if i == 0 else n} for n in (1, 2) for i in range(6)]
    rows, events = _program(windows, contexts=[(_frame("sweep", 20),)])
    out = identify(rows, events)
    assert out.groupby("key").size().tolist() == [6, 6]


def test_two_threads_timing_two_sizes_at_once_are_no_sweep():
    # windows of two shapes interleaved in time (two threads): not told apart by the work
    windows = [{"sig": s} for s in (1, 2, 1, 1, 2, 1, 2, 1, 2, 2)]
    rows, events = _program(windows, contexts=[(_frame("work", 20),)])
    assert identify(rows, events)["key"].nunique() == 1


def test_work_that_varies_without_runs_is_one_row():
    # a training step with a new sequence length each time: no sweep
    windows = [{"sig": (i * 7) % 5} for i in range(40)]
    rows, events = _program(windows, contexts=[(_frame("step", 20),)])
    assert identify(rows, events)["key"].nunique() == 1
    windows = [{"sig": i} for i in range(MAX_SHAPES + 1) for _ in range(2)]
    rows, events = _program(windows, contexts=[(_frame("step", 20),)])
    assert identify(rows, events)["key"].nunique() == 1


def test_an_iteration_counter_is_not_a_variant():
    contexts = [(_frame("step", 30, i=str(i)), _frame("<module>", 70))
                for i in range(MAX_ARG_VALUES + 4)]
    windows = [{"ctx": c} for c in range(len(contexts))]
    rows, events = _program(windows, contexts=contexts)
    out = identify(rows, events)
    assert out["key"].nunique() == 1 and out["label"].iat[0] == "step at bench.py:19→21"
    # ... while a few values are variants
    rows, events = _program(windows[:3], contexts=contexts)
    assert identify(rows, events)["key"].nunique() == 3


def test_the_same_call_from_two_lines_is_told_apart_by_the_caller():
    contexts = [(_frame("timed", 17), _frame("<module>", line)) for line in (40, 41)]
    rows, events = _program([{"ctx": 0}, {"ctx": 1}], contexts=contexts)
    out = identify(rows, events)
    assert out["label"].tolist() == ["timed at bench.py:19→21 ← bench.py:40",
                                     "timed at bench.py:19→21 ← bench.py:41"]


def test_two_processes_timing_the_same_lines_are_two_rows_with_keys_that_do_not_name_pids():
    ctx = [(_frame("work", 12, n="2048"),)]
    a, events_a = _program([{"pid": 100}, {"pid": 200}, {"pid": 100}, {"pid": 200}],
                           contexts=ctx)
    b, events_b = _program([{"pid": 555}, {"pid": 556}, {"pid": 555}, {"pid": 556}],
                           contexts=ctx)
    out_a, out_b = identify(a, events_a), identify(b, events_b)
    assert out_a["key"].nunique() == 2
    assert list(out_a["key"]) == list(out_b["key"])  # stable across runs: no pid in it
    assert set(out_a["label"]) == {"work at bench.py:19→21 [process 1]",
                                   "work at bench.py:19→21 [process 2]"}


def test_reports_of_an_earlier_runner_group_by_lines_and_name_the_function():
    rows, events = _program([{"ctx": -1}] * 3, contexts=[])
    out = identify(rows, events)
    assert out["key"].nunique() == 1 and out["label"].iat[0] == "timed at bench.py:19→21"
