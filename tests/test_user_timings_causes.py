"""The seed article's timings (tests/data/h100_user_seed.sqlite, made by `nsyswrap run` on
an H100 from its unmodified timing code): why t1, t2 and t3 read what they read, found by
SQL on the fixture and the runner's records decoded here, then checked against what
nsyswrap says. Not the analysis' own numbers: the trace's.

What the trace shows (and the article guessed otherwise: 'the copy is timed'):
- copied, t1: the host copies end milliseconds before start.record(), outside the window;
  then the host takes far longer than in any other window before it launches F.linear
  (no CUDA call in between), and the idle GPU waits: host work in the window.
- copied, t2 and t3: the GPU has finished t1's kernels when the next start is recorded, so
  the window holds the host's launch of F.linear: launch overhead.
- on_gpu: torch.rand's kernels are still queued on the stream when the start is recorded;
  the start event waits for them and the window holds the kernels (plus the events' own
  cost): the events agree, as long as that queue lasts.
- flushed: the same kernels take longer after the 40 MiB buffer was zeroed (a cold L2).
"""

from __future__ import annotations

import bisect
import json
from statistics import median

import pytest
from conftest import sql
from test_user_timings_render import SEED, event_groups, runner_doc

import nsyswrap

# One worker runs the module: its outputs are made once (module-scoped), not once per worker.
pytestmark = pytest.mark.xdist_group("user_timings_causes")

HOST_WORK_MIN_NS = 100_000  # the default host_work_min_ns threshold


@pytest.fixture(scope="module")
def trace() -> dict[str, list[dict]]:
    """Per group of the seed: each interval's script value, its kernels (by launch between
    the two record calls, on the stream), whether earlier work was still queued on the
    stream when the start was recorded, and the host's time before the first launch."""
    doc = runner_doc(SEED)
    marks = {text: start for text, start in sql(
        SEED, "SELECT text, start FROM NVTX_EVENTS WHERE text LIKE ?",
        ('{"nsyswrap":"nsyswrap.clock/1%',))}
    by_key = {json.loads(t)["key"]: s for t, s in marks.items()}
    offset = median(by_key[k] - (b + a) / 2 for b, a, k in doc["clock_marks"] if k in by_key)
    tid = doc["threads"][0]
    calls = sql(SEED, """
        SELECT r.start, r."end" FROM CUPTI_ACTIVITY_KIND_RUNTIME r
        JOIN StringIds n ON n.id = r.nameId
        WHERE n.value LIKE 'cudaEventRecord%' AND (r.globalTid & 16777215) = ?
        ORDER BY r.start""", (tid,))
    starts = [s for s, _ in calls]
    kernels = sql(SEED, """
        SELECT r.start, k.start, k."end", k.streamId FROM CUPTI_ACTIVITY_KIND_KERNEL k
        JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON r.correlationId = k.correlationId
         AND (r.globalTid >> 24) = (k.globalPid >> 24)
        ORDER BY r.start""")
    launches = [launch for launch, _, _, _ in kernels]
    copies_end = sorted(e for (e,) in sql(
        SEED, 'SELECT "end" FROM CUPTI_ACTIVITY_KIND_MEMCPY WHERE copyKind = 1'))

    def call(record):
        return calls[bisect.bisect_left(starts, record["before_ns"] + offset - 2_000)]

    out = {}
    for label, intervals in event_groups(SEED).items():
        rows = []
        for e in intervals:
            (s0, s1), (t0, _) = call(e["start"]), call(e["end"])
            lo, hi = bisect.bisect_right(launches, s0), bisect.bisect_left(launches, t0)
            inside = kernels[lo:hi]
            before = [k for k in kernels[:lo] if k[3] == inside[0][3]]
            last_copy = copies_end[bisect.bisect_right(copies_end, s0) - 1] \
                if copies_end and copies_end[0] < s0 else None
            rows.append({
                "value_ns": e["value_ms"] * 1e6,
                "kernels_ns": sum(end - start for _, start, end, _ in inside),
                "queued_ahead": bool(before) and before[-1][2] > s1 + 5_000,
                "host_lead_ns": inside[0][0] - s0,
                "copy_gap_ns": s0 - last_copy if last_copy else None,
            })
        out[label] = rows
    return out


@pytest.fixture(scope="module")
def result():
    return nsyswrap.compare(SEED)


def _codes(result, label) -> set[str]:
    row = result.user_timings.set_index("label").loc[label]
    return set(row["codes"])


def _label(variant: str, line: int, trace) -> str:
    return next(label for label in trace if label.startswith(f"{variant} at ")
                and f":{line}→" in label)


def test_copied_t1_is_host_work_before_the_launch_not_the_copy(trace, result):
    label = _label("copied", 37, trace)
    rows = trace[label]
    lead = median(r["host_lead_ns"] for r in rows)
    others = [r["host_lead_ns"] for other in (_label("copied", 40, trace),
                                              _label("on_gpu", 59, trace))
              for r in trace[other]]
    assert lead >= HOST_WORK_MIN_NS and lead > 3 * median(others)
    assert not any(r["queued_ahead"] for r in rows)
    # The copies ended before the start record: they are not in the window.
    assert all(r["copy_gap_ns"] and r["copy_gap_ns"] > 0 for r in rows)
    assert median(r["value_ns"] for r in rows) > 3 * median(r["kernels_ns"] for r in rows)
    assert "HOST_WORK_IN_WINDOW" in _codes(result, label)
    assert "copies" not in result.user_timings.set_index("label").loc[label, "verdict"]
    host = next(f for f in result.findings if f.code == "HOST_WORK_IN_WINDOW"
                and label in f.ranges)
    assert "not in the window" in host.message


@pytest.mark.parametrize("line", [40, 43])
def test_copied_t2_t3_time_the_launch_on_an_idle_gpu(trace, result, line):
    label = _label("copied", line, trace)
    rows = trace[label]
    assert not any(r["queued_ahead"] for r in rows)
    assert median(r["host_lead_ns"] for r in rows) < HOST_WORK_MIN_NS
    assert median(r["value_ns"] for r in rows) > 1.15 * median(r["kernels_ns"] for r in rows)
    assert "LAUNCH_OVERHEAD" in _codes(result, label)


def test_windows_behind_queued_work_agree(trace, result):
    """Wherever every window followed queued work, the events read the kernels plus about
    their own cost, and nsyswrap says they agree."""
    floor = float(result.user_timings["floor_ns"].iloc[0])
    behind = [label for label, rows in trace.items() if all(r["queued_ahead"] for r in rows)]
    assert len(behind) >= 2  # on_gpu's first windows
    for label in behind:
        rows = trace[label]
        excess = median(r["value_ns"] - r["kernels_ns"] for r in rows)
        assert excess < 2 * floor + 2_000
        assert not _codes(result, label) & {"LAUNCH_OVERHEAD", "HOST_WORK_IN_WINDOW"}
        assert "inflated" not in result.user_timings.set_index("label").loc[label, "verdict"]


def test_a_flushed_l2_slows_the_same_kernels(trace, result):
    flushed = median(r["kernels_ns"] for r in trace[_label("flushed", 91, trace)])
    hot = median(r["kernels_ns"] for r in trace[_label("on_gpu", 62, trace)])
    assert flushed > 1.05 * hot
    cache = [f for f in result.findings if f.code == "CACHE_EFFECT"]
    assert cache and any(label.startswith("flushed at ") for f in cache for label in f.ranges)
