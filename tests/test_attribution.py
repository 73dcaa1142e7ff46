"""Range attribution across threads on a real training loop (h100_torch_train.sqlite, made by
scripts/make_fixtures_gpu.sh from scripts/workloads/torch_train.py on an H100).

Expected values come from direct SQL on the export: which thread launched each GPU op (the
runtime call with the same correlation id) and when, against the NVTX ranges of the main
thread. No nsyswrap code computes them."""

from __future__ import annotations

import json

import pytest
import reference
from click.testing import CliRunner
from conftest import DATA, sql

import nsyswrap
from nsyswrap.analysis import analyze
from nsyswrap.cli import main

TRAIN = DATA / "h100_torch_train.sqlite"

# GPU ops (kernels, copies, memsets) with the thread and time of the call that launched them.
OPS = """
SELECT o.start, o.end, r.globalTid AS tid, r.start AS launch FROM (
    SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_KERNEL
    UNION ALL SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMCPY
    UNION ALL SELECT start, end, correlationId, globalPid FROM CUPTI_ACTIVITY_KIND_MEMSET) o
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = o.correlationId AND (r.globalTid >> 24) = (o.globalPid >> 24)
"""
RANGES = """
SELECT e.start, e.end, e.globalTid FROM NVTX_EVENTS e LEFT JOIN StringIds s ON s.id = e.textId
WHERE coalesce(e.text, s.value) = ? AND e.eventType = 59 AND e.end IS NOT NULL ORDER BY e.start
"""


def _ops() -> list[tuple[int, int, int, int]]:
    return sql(TRAIN, OPS)


def _instances(name: str) -> list[tuple[int, int, int]]:
    return sql(TRAIN, RANGES, (name,))


def _launched_in(rng, ops, same_thread: bool):
    start, end, tid = rng
    return [o for o in ops if start <= o[3] <= end and (o[2] == tid) == same_thread]


@pytest.fixture(scope="module")
def by_rule():
    report = nsyswrap.load(TRAIN)
    return {rule: analyze(report, attribution=rule) for rule in ("process", "thread")}


def _rows(analysis, name):
    inst = analysis.instances
    return inst[inst["name"] == name].sort_values("start_ns").to_dict("records")


def test_backward_owns_the_autograd_threads_kernels(by_rule):
    """backward's kernels are launched by PyTorch's autograd thread: under the process rule
    the range owns them; under nsys's rule it keeps only its own thread's few ops."""
    ops = _ops()
    autograd = {tid for (tid,) in sql(
        TRAIN, "SELECT t.globalTid FROM ThreadNames t JOIN StringIds s ON s.id = t.nameId "
               "WHERE s.value = 'pt_autograd_0'")}
    assert len(autograd) == 1
    steps = _instances("backward")
    assert len(steps) == 12
    process, thread = _rows(by_rule["process"], "backward"), _rows(by_rule["thread"], "backward")
    for rng, got, nsys_rule in zip(steps, process, thread, strict=True):
        own = _launched_in(rng, ops, same_thread=True)
        other = _launched_in(rng, ops, same_thread=False)
        assert other and {o[2] for o in other} == autograd  # only autograd's, and some
        busy = reference.union_length([(o[0], o[1]) for o in own + other])
        own_busy = reference.union_length([(o[0], o[1]) for o in own])
        assert got["gpu_ops"] == len(own) + len(other)
        assert got["gpu_busy_ns"] == busy
        assert got["gpu_busy_other_threads_ns"] == busy - own_busy
        assert nsys_rule["gpu_ops"] == len(own)
        assert nsys_rule["gpu_busy_ns"] == own_busy
        assert nsys_rule["gpu_busy_other_threads_ns"] == 0
    # The point of the rule: most of backward's GPU time was launched by the autograd thread.
    warm = process[1:]
    assert sum(r["gpu_busy_other_threads_ns"] for r in warm) > 0.9 * sum(
        r["gpu_busy_ns"] for r in warm)


def test_outer_range_owns_its_children_work(by_rule):
    """train_step contains backward: it owns the autograd work too, counted once."""
    ops = _ops()
    for rng, got in zip(_instances("train_step"), _rows(by_rule["process"], "train_step"),
                        strict=True):
        mine = _launched_in(rng, ops, True) + _launched_in(rng, ops, False)
        assert got["gpu_ops"] == len(mine)
        assert got["gpu_busy_ns"] == reference.union_length([(o[0], o[1]) for o in mine])


@pytest.mark.parametrize(("name", "helper_ops"), [
    ("main_waits", 8),           # the helper thread holds no range: its work is main's
    ("main_beside_library", 8),  # the helper holds only NCCL's range: no ownership
    ("main_beside_worker", 0),   # the helper holds worker_own: its work stays there
])
def test_helper_thread_work(by_rule, name, helper_ops):
    ops = _ops()
    instances = _instances(name)
    assert len(instances) == 3
    for rng, got, nsys_rule in zip(instances, _rows(by_rule["process"], name),
                                   _rows(by_rule["thread"], name), strict=True):
        other = _launched_in(rng, ops, same_thread=False)
        assert len(other) == 8  # the helper launched its 8 matmuls while the range was open
        assert got["kernels"] == helper_ops
        assert nsys_rule["kernels"] == 0


def test_helper_work_is_not_counted_twice(by_rule):
    """worker_own keeps its 8 kernels under both rules; main_beside_worker gets none of them."""
    for rule in ("process", "thread"):
        rows = _rows(by_rule[rule], "worker_own")
        assert [r["kernels"] for r in rows] == [8, 8, 8]
        assert all(r["gpu_busy_other_threads_ns"] == 0 for r in rows)


def test_library_range_on_helper_thread_still_sees_its_own_work(by_rule):
    """NCCL's range is no ownership for others, but it is a range: its own thread's work is in
    it (nsys's rule), and it takes nothing from other threads."""
    rows = _rows(by_rule["process"], "ncclAllReduce")
    assert [r["kernels"] for r in rows] == [8, 8, 8]
    assert all(r["gpu_busy_other_threads_ns"] == 0 for r in rows)


def test_json_says_which_rule_and_what_it_added():
    runner = CliRunner()
    docs = {}
    for rule in ("process", "thread"):
        res = runner.invoke(main, ["compare", str(TRAIN), "--format", "json",
                                   "--attribution", rule])
        assert res.exit_code == 0, res.output
        docs[rule] = json.loads(res.output)
    process, thread = docs["process"], docs["thread"]
    assert process["report"]["attribution"] == "process"
    assert thread["report"]["attribution"] == "thread"
    assert thread["report"]["other_threads"] == []
    # Per thread, the distinct ops attributed to another thread's range, counted by SQL:
    # autograd's are those launched inside a train_step (the outermost range), the helpers'
    # those inside main_waits and main_beside_library (worker_own's helper owns its work).
    ops = _ops()
    added = {t["name"] or t["tid"]: t["gpu_ops"] for t in process["report"]["other_threads"]}
    autograd = {o for r in _instances("train_step") for o in _launched_in(r, ops, False)}
    helpers = {o for name in ("main_waits", "main_beside_library")
               for r in _instances(name) for o in _launched_in(r, ops, False)}
    assert added.pop("pt_autograd_0") == len(autograd)
    assert sum(added.values()) == len(helpers) == 6 * 8
    backward = next(r for r in process["ranges"] if r["name"] == "backward")
    assert backward["gpu_busy_other_threads_median_ns"] > 0
    backward_thread = next(r for r in thread["ranges"] if r["name"] == "backward")
    assert backward_thread["gpu_busy_other_threads_median_ns"] == 0


def test_text_says_it_once():
    res = CliRunner().invoke(main, ["compare", str(TRAIN)], terminal_width=120)
    assert res.exit_code == 0, res.output
    assert res.output.count("other threads of their process") == 1
    assert "pt_autograd_0" in res.output
    res = CliRunner().invoke(main, ["compare", str(TRAIN), "--attribution", "thread"],
                             terminal_width=120)
    assert "other threads of their process" not in res.output


@pytest.mark.parametrize("name", ["main_waits", "main_beside_library", "worker_own"])
def test_host_bound_ranges_leave_out_each_familys_first_instance(by_rule, name):
    """HOST_BOUND on a user range reads the instances after the family's first (a warm-up)
    that launched GPU work: their count and the median of their busy time (the union of
    the kernels launched inside them, under the process rule) from SQL. Fails when the
    first instance is kept."""
    from statistics import median

    from nsyswrap.diagnose import Thresholds, host_bound

    ops = _ops()
    busy = []
    for rng in _instances(name)[1:]:
        start, end, tid = rng
        helpers = ([] if name == "worker_own"
                   else [o for o in _launched_in(rng, ops, False) if o[2] >> 24 == tid >> 24])
        mine = _launched_in(rng, ops, True) + helpers
        if mine:
            busy.append(reference.union_length([(o[0], o[1]) for o in mine]))
    found = [f for f in host_bound.check(by_rule["process"], Thresholds())
             if f.range == f"nsyswrap:{name}"]
    assert len(found) == 1
    assert found[0].evidence["instances"] == len(busy) == 2
    assert found[0].evidence["gpu_busy_median_ns"] == median(busy)


def test_user_rows_by_start_sort_only_when_out_of_order(by_rule):
    """The loader's instances are in start order: given as they are (the same values, and
    writing to them leaves the analysis's frame alone); out of order, sorted by start with
    ties in row order (a stable sort)."""
    import pandas as pd

    from nsyswrap.analysis.instance_table import InstanceTable

    a = by_rule["process"]
    columns = ["family_id", "start_ns", "cpu_ns"]
    mine = a.user_instances(columns)
    got = a.instances.rows(a.user_rows(by_start=True), columns)
    assert got["start_ns"].is_monotonic_increasing
    pd.testing.assert_frame_equal(got, mine)
    before = a.instances["cpu_ns"].copy()
    got.loc[got.index[0], "cpu_ns"] = -1
    pd.testing.assert_series_equal(a.instances["cpu_ns"], before)
    shuffled = a.instances.frame().iloc[::-1].reset_index(drop=True)
    shuffled.loc[shuffled.index[:40], "start_ns"] = 7  # ties, in row order
    b = type(a)(**{**a.__dict__, "instances": InstanceTable.of(shuffled)})
    want = b.user_instances(columns).sort_values("start_ns", kind="stable")
    pd.testing.assert_frame_equal(b.instances.rows(b.user_rows(by_start=True), columns), want)
    user = b.user_instances(columns).index
    tied = [i for i in shuffled.index[:40] if i in user]  # the user's, in row order
    assert len(tied) >= 2 and list(want.index[:len(tied)]) == tied


def test_operations_keep_their_launching_threads(monkeypatch):
    """gpu_ops holds each operation's launching thread as a categorical (a few threads,
    millions of operations): its ids are SQL's, operation for operation (the thread of the
    runtime call with the same correlation id), when the codes are made a few rows at a
    time. Fails if a code points at another thread's id."""
    from collections import Counter

    import pandas as pd

    from nsyswrap.analysis.gpu_ops import gpu_ops
    from nsyswrap.read import chunks

    monkeypatch.setattr(chunks, "STEP_ROWS", 7)
    ops = gpu_ops(nsyswrap.load(TRAIN))
    assert isinstance(ops["thread"].dtype, pd.CategoricalDtype)
    got = ops["thread"].to_numpy()
    assert got.dtype.kind == "i"
    mine = Counter((s, e, t) for s, e, t in zip(ops["start_ns"].tolist(),
                                                  ops["end_ns"].tolist(), got.tolist(),
                                                  strict=True) if t >= 0)
    assert mine == Counter((s, e, tid) for s, e, tid, _ in _ops())
    assert len(mine) > 500 and len({t for _, _, t in mine}) > 1


def test_innermost_of_takes_each_events_innermost_pair():
    """innermost_of (the innermost range of a few events among millions of pairs sorted
    by event) against a dictionary: events with no pair, with one, with several (the
    innermost first, in the middle, last), probes wider than the pairs' 32-bit events."""
    import numpy as np
    import pandas as pd

    from nsyswrap.analysis.attribution import innermost_of

    rng = np.random.default_rng(7)
    event, range_id, innermost, expected = [], [], [], {}
    for e in range(0, 3000, 3):  # every third event has pairs
        k = int(rng.integers(1, 6))
        inner = int(rng.integers(0, k))
        ids = rng.choice(10_000, size=k, replace=False)
        event += [e] * k
        range_id += ids.tolist()
        innermost += [i == inner for i in range(k)]
        expected[e] = int(ids[inner])
    pairs = pd.DataFrame({"range_id": np.array(range_id, "int32"),
                          "event": np.array(event, "int32"), "innermost": innermost})
    probe = np.r_[rng.permutation(3100), 2**40].astype("int64")
    want = [expected.get(int(e), -1) for e in probe]
    np.testing.assert_array_equal(innermost_of(pairs, probe), want)
    assert (innermost_of(pairs.iloc[:0], probe) == -1).all()


KERNEL_LAUNCHES = """
SELECT k.start, r.start, r.globalTid FROM CUPTI_ACTIVITY_KIND_KERNEL k
JOIN CUPTI_ACTIVITY_KIND_RUNTIME r
  ON r.correlationId = k.correlationId AND (r.globalTid >> 24) = (k.globalPid >> 24)
"""


def test_family_launch_latency_pools_every_kernel_of_its_instances(monkeypatch):
    """The range summary's launch latency of a family is the median over every kernel
    launched inside any of its instances (backward: the main thread's and autograd's, under
    the process rule), from SQL; the same by selection per family (the usual few families)
    as by the packed sort that many families take. Fails if a family's latencies are
    mixed with another's, or one instance's are left out."""
    from statistics import median

    import pandas as pd

    from nsyswrap.analysis import summary

    kernels = sql(TRAIN, KERNEL_LAUNCHES)
    expected = median(start - launch for rng in _instances("backward")
                      for start, launch, tid in kernels
                      if rng[0] <= launch <= rng[1] and tid >> 24 == rng[2] >> 24)
    few = analyze(nsyswrap.load(TRAIN)).ranges
    got = few.set_index("name").loc["backward", "launch_latency_median_ns"]
    assert got == expected
    monkeypatch.setattr(summary, "FEW_GROUPS", 0)
    pd.testing.assert_frame_equal(analyze(nsyswrap.load(TRAIN)).ranges, few)
