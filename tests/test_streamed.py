"""The engine fed by the export's stream (operations.py, analysis/engine/sources.py)
against the same engine fed by the report loaded whole (loader.load + analysis.analyze)
on every fixture: every frame the outputs read, equal to the bit, with chunks small enough
that ranges, unions, device busy windows and launch windows all cross chunk boundaries;
and what makes the stream give up (StreamFallback) and fall back to the loaded report.
The loaded report's analysis is itself checked against SQL (test_attribution,
test_ranges, test_kernels); the operations the stream hands out are checked against SQL
here too."""

from __future__ import annotations

import dataclasses
import json
import sqlite3

import numpy as np
import pandas as pd
import pytest
from conftest import (
    ALL_REPORTS,
    DATA,
    DEMO,
    GPU_MIX,
    analysed,
    has_table,
    sql,
    threads_that_matter,
)

import nsyswrap
from nsyswrap.analysis import analyze, analyze_streamed
from nsyswrap.comparison.document import document
from nsyswrap.comparison.single import compare
from nsyswrap.diagnose import Thresholds, diagnose
from nsyswrap.read.database import open_report
from nsyswrap.read.loader import read_without_operations
from nsyswrap.read.operations import (
    CHUNK_OPERATIONS,
    LAUNCH_LAG_NS,
    OperationStream,
    StreamFallback,
)

DDP_ONE = DATA / "h200x2_ddp_straggler_one.sqlite"
# Every fixture streams, those holding `nsyswrap run`'s records of the program's own
# timings (h100_user_*) included.
STREAMABLE = list(ALL_REPORTS)
USER_REPORTS = [p for p in ALL_REPORTS if p.name.startswith("h100_user_")]
GPU_REPORTS = [p for p in STREAMABLE if p.name.startswith("h")]


# Where the thread rule and the summary per process can differ from the process rule.
MANY_THREADS = [p for p in GPU_REPORTS if len(threads_that_matter(p)) > 1]
# Operations per chunk in the tests: a few dozen chunks per fixture, each cut inside
# ranges, unions and device busy windows.
SMALL_CHUNK = 97


def streamed(path, *, chunk=CHUNK_OPERATIONS, lag_ns=LAUNCH_LAG_NS, **options):
    with open_report(path, stream_operations=True) as opened:
        report, rest = read_without_operations(opened)
        stream = OperationStream(opened.db, opened.queries, chunk_operations=chunk,
                                 lag_ns=lag_ns)
        return analyze_streamed(report, stream, rest, **options)


def findings_text(analysis) -> list[str]:
    """The findings under the default thresholds, as text: a NaN in the evidence (a median
    of nothing) equals itself there."""
    return [json.dumps(dataclasses.asdict(f), sort_keys=True, default=str)
            for f in diagnose(analysis, Thresholds())]


def assert_same_analysis(s, w, w_findings: list[str] | None = None):
    """Every frame and number the outputs read. `w_findings`: findings_text(w), where the
    caller has it already."""
    pd.testing.assert_frame_equal(s.instances.frame(), w.instances.frame(), obj="instances")
    for name in ("kernels", "ranges", "processes", "iterations", "benchmarks"):
        pd.testing.assert_frame_equal(getattr(s, name), getattr(w, name), obj=name)
    su, wu = s.user_timings, w.user_timings
    for name in ("intervals", "groups", "summary", "unmeasured", "unreconciled"):
        pd.testing.assert_frame_equal(getattr(su, name), getattr(wu, name), obj=name)
    assert (su.records, su.measured, su.notes) == (wu.records, wu.measured, wu.notes)
    sa, wa = s.attribution, w.attribution
    assert not sa.pairs_kept and wa.pairs_kept and len(sa.gpu_ops) == 0
    assert sa.operations == len(wa.gpu_ops)
    pd.testing.assert_frame_equal(sa.other_threads, wa.other_threads, obj="other_threads")
    pd.testing.assert_frame_equal(sa.blocking_calls, wa.blocking_calls, obj="blocking_calls")
    pd.testing.assert_frame_equal(sa.call_pairs, wa.call_pairs, obj="call_pairs")
    # Host copies: the same rows (gpu_ops' rows as index) and values; the categoricals'
    # category lists may differ.
    def plain(values: pd.Series) -> np.ndarray:
        values = np.asarray(values.to_numpy())
        return values.astype("int64") if values.dtype.kind in "iu" else values.astype(str)

    copies = [pd.DataFrame({c: plain(f[c]) for c in f.columns}, index=f.index)
              for f in (sa.host_copies, wa.host_copies)]
    pd.testing.assert_frame_equal(copies[0], copies[1], obj="host_copies",
                                  check_index_type=False)
    for field in ("notes", "alerts", "processes", "threads", "last_cuda_call_ns",
                  "gpu_trace_lost", "has_cuda", "has_nvtx"):
        assert getattr(s.info, field) == getattr(w.info, field), field
    assert findings_text(s) == (findings_text(w) if w_findings is None else w_findings)


# Fixtures also streamed in one chunk of every operation (as `compare` streams a small
# report), one of each kind: no CUDA trace, ranges only, the program's timings, the harness,
# lines, autograd under emit_nvtx, two ranks, the demo. Chunks of SMALL_CHUNK operations
# cut through everything a single chunk holds, on every fixture.
ONE_CHUNK = {"cpu2022_nvtx.sqlite", "h100_torch_mix.sqlite", "h100_user_seed.sqlite",
             "h100_harness_clock.sqlite", "h200_user_lines_train.sqlite",
             "h100_torch_emit_nvtx.sqlite", "h200x2_ddp_straggler_one.sqlite", DEMO.name}


@pytest.mark.parametrize("path", STREAMABLE + [DEMO], ids=lambda p: p.name)
def test_streamed_analysis_is_the_whole_one_chunk_by_chunk(path):
    """Process rule, chunks of SMALL_CHUNK operations (and, for ONE_CHUNK, of every
    operation at once)."""
    whole = analysed(path)
    expected = findings_text(whole)
    assert_same_analysis(streamed(path, chunk=SMALL_CHUNK), whole, expected)
    if path.name in ONE_CHUNK:
        assert_same_analysis(streamed(path), whole, expected)


@pytest.mark.parametrize("path", MANY_THREADS, ids=lambda p: p.name)
def test_streamed_analysis_under_nsys_rule_and_per_process(path):
    whole = analyze(nsyswrap.load(path), attribution="thread", by_process=True)
    assert_same_analysis(streamed(path, chunk=SMALL_CHUNK, attribution="thread",
                                  by_process=True), whole)


def max_launch_lag(path) -> int:
    """The longest any operation waited after its launching call, from SQL."""
    lags = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
                  "CUPTI_ACTIVITY_KIND_MEMSET"):
        lags += sql(path, f"""SELECT max(o.start - r.start) FROM {table} AS o
                              JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
                                ON r.correlationId = o.correlationId
                               AND r.globalTid >> 24 = o.globalPid >> 24""")
    return max(x for (x,) in lags if x is not None)


@pytest.mark.parametrize("path", [GPU_MIX, DDP_ONE], ids=lambda p: p.name)
def test_ranges_close_as_soon_as_the_launch_lag_allows(path):
    """With the lag bound just above the report's longest launch lag (SQL), ranges close
    (their median latency and streams are taken, their latencies pooled) a few chunks
    after they end: the same numbers. Just below it, the stream gives up."""
    lag = max_launch_lag(path)
    whole = analysed(path)
    assert_same_analysis(streamed(path, chunk=SMALL_CHUNK, lag_ns=lag + 1), whole)
    with pytest.raises(StreamFallback, match="long after its launch"):
        streamed(path, chunk=SMALL_CHUNK, lag_ns=lag - 1)


@pytest.mark.parametrize("path", [DDP_ONE, DATA / "h200x2_ddp_control.rank0.sqlite"],
                         ids=lambda p: p.name)
def test_closed_ranges_are_packed_in_batches_and_their_slots_reused(path, monkeypatch):
    """Ranges closed as early as the launch lag allows, each batch packed at once (a
    batch of one range and up), from a single slot at first: the numbers of ranges still
    open, those whose last end's device busy time is still to come and those packed in
    many small batches put together give the same analysis."""
    from nsyswrap.analysis.engine import slots, totals

    monkeypatch.setattr(totals, "CLOSE_BATCH", 1)
    monkeypatch.setattr(slots, "FIRST_SLOTS", 1)
    batches, most_open = [], []
    pack_closed = totals.RangeTotals._pack_closed

    def counted(self, rows):
        batches.append(len(rows))
        most_open.append(self.slots.capacity)
        pack_closed(self, rows)

    whole = analysed(path)  # packed in batches as large as the engine makes them
    monkeypatch.setattr(totals.RangeTotals, "_pack_closed", counted)
    assert_same_analysis(streamed(path, chunk=SMALL_CHUNK, lag_ns=max_launch_lag(path) + 1),
                         whole)
    assert sum(batches) == len(whole.instances) and len(batches) > 10
    # Slots were given back and taken again: never one per range.
    assert max(most_open) < len(whole.instances)


@pytest.mark.parametrize("path", [GPU_MIX, DDP_ONE], ids=lambda p: p.name)
def test_the_stream_hands_out_every_operation_once_in_start_order_with_its_launch(path):
    """Against SQL: every kernel, copy and memset with its launching call's start and
    thread (joined on process and correlation id), each once, in start order."""
    expected = []
    for table, source in (("CUPTI_ACTIVITY_KIND_KERNEL", 0), ("CUPTI_ACTIVITY_KIND_MEMCPY", 1),
                          ("CUPTI_ACTIVITY_KIND_MEMSET", 2)):
        expected += sql(path, f"""SELECT o.start, o.end, {source}, coalesce(r.start, -1),
                                         coalesce(r.globalTid, -1)
                                  FROM {table} AS o LEFT JOIN CUPTI_ACTIVITY_KIND_RUNTIME AS r
                                    ON r.correlationId = o.correlationId
                                   AND r.globalTid >> 24 = o.globalPid >> 24""")
    with open_report(path, stream_operations=True) as opened:
        chunks = list(OperationStream(opened.db, opened.queries, chunk_operations=SMALL_CHUNK))
    got = [tuple(int(x) for x in row) for c in chunks for row in zip(
        c["start_ns"], c["end_ns"], c["source"], c["launch_start_ns"], c["thread"],
        strict=True)]
    assert sorted(got) == sorted(expected)
    starts = [g[0] for g in got]
    assert starts == sorted(starts)
    # Chunks never split one start, and each says where the next begins.
    for c, nxt in zip(chunks, chunks[1:], strict=False):
        assert c["start_ns"][-1] < c.until_ns <= nxt["start_ns"][0]


@pytest.fixture
def stream_small_reports(monkeypatch):
    """open_report streams reports of any size (it streams from STREAM_MIN_OPERATIONS)."""
    from nsyswrap.read import database

    monkeypatch.setattr(database, "STREAM_MIN_OPERATIONS", 0)


def test_reports_stream_from_the_threshold_unless_range_heavy(monkeypatch):
    """open_report streams where a report's operations (SQL) reach STREAM_MIN_OPERATIONS and
    outnumber its NVTX events: a range-heavy report is loaded whatever its size."""
    from nsyswrap.read import database

    for path, streams_at_any_size in ((GPU_MIX, True), (DATA / "h100_torch_emit_nvtx.sqlite",
                                                         False)):
        operations = sum(sql(path, f"SELECT count(*) FROM {t}")[0][0] for t in (
            "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_GRAPH_TRACE")
            if has_table(path, t))
        events = sql(path, "SELECT count(*) FROM NVTX_EVENTS")[0][0]
        assert (operations >= events) == streams_at_any_size
        for limit, streams in ((0, streams_at_any_size), (operations + 1, False)):
            monkeypatch.setattr(database, "STREAM_MIN_OPERATIONS", limit)
            with open_report(path, stream_operations=True) as opened:
                assert opened.stream_operations == streams


def test_launches_outside_the_name_filter_are_looked_up_or_the_stream_gives_up(
        monkeypatch, stream_small_reports):
    """A launch the runtime read's name filter leaves out is looked up by correlation id
    (one query for a chunk that needs it); a stream that would need more than
    MAX_LAUNCH_LOOKUPS of them gives up, and compare analyses the report whole."""
    import re

    from nsyswrap.read import cuda_api

    whole = analysed(GPU_MIX)
    monkeypatch.setattr(cuda_api, "LAUNCH_API", re.compile(r"^no-such-api$"))
    assert_same_analysis(streamed(GPU_MIX), whole)
    with pytest.raises(StreamFallback, match="missing"):
        streamed(GPU_MIX, chunk=SMALL_CHUNK)
    assert (json.dumps(document(compare(GPU_MIX, operations=False)), default=str)
            == json.dumps(document(compare(GPU_MIX)), default=str))


def test_a_report_out_of_start_order_is_analysed_whole(report_copy, stream_small_reports):
    """nsys exports its tables in start order; a report rewritten in another order (here
    its kernels, newest first) cannot be streamed: compare(operations=False) falls back to
    the whole analysis, with the same document."""
    path = report_copy(GPU_MIX)
    con = sqlite3.connect(path)
    con.execute("CREATE TABLE k AS SELECT * FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY start DESC")
    con.execute("DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM k")
    con.execute("DROP TABLE k")
    con.commit()
    con.close()
    assert [s for (s,) in sql(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 2")][0] \
        > [s for (s,) in sql(path, "SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 2")][1]
    with pytest.raises(StreamFallback, match="start order"):
        streamed(path)
    streamed_doc = document(compare(path, operations=False))
    assert len(compare(path, operations=False).analysis.attribution.gpu_ops)
    assert (json.dumps(streamed_doc, default=str)
            == json.dumps(document(compare(path)), default=str))


def test_cli_json_streams_and_says_what_the_whole_analysis_says(tmp_path,
                                                               stream_small_reports):
    """The CLI's json (streamed) is the whole analysis's document, instances included."""
    from click.testing import CliRunner

    from nsyswrap.cli import main

    out = tmp_path / "a.json"
    result = CliRunner().invoke(main, ["compare", str(DDP_ONE), "--format", "json",
                                       "--instances", "-o", str(out)])
    assert result.exit_code == 0, result.output
    from nsyswrap.render.json import JsonRenderer

    whole = json.loads(JsonRenderer().render(compare(DDP_ONE), instances=True))
    got = json.loads(out.read_text())
    assert len(got["instances"]) == len(compare(DDP_ONE).analysis.instances) > 0
    for doc in (got, whole):
        doc.pop("tool", None)
    assert got == whole


def test_outputs_that_draw_every_operation_refuse_a_streamed_analysis(stream_small_reports):
    """The page's timeline and the trace need every operation: a streamed analysis (which
    keeps none) is refused with a message, not drawn empty."""
    from nsyswrap.render.html import HtmlRenderer
    from nsyswrap.render.trace import TraceRenderer

    c = compare(GPU_MIX, operations=False)
    assert not c.analysis.attribution.pairs_kept
    for renderer in (HtmlRenderer(), TraceRenderer()):
        with pytest.raises(ValueError, match="operations=True"):
            renderer.render(c)
    assert np.isfinite(c.analysis.instances["gpu_busy_ns"]).any()


@pytest.mark.parametrize(("families", "spread"), [(6, 10**9), (6, 10**12), (3000, 10**9)])
def test_pooled_counts_give_pandas_median_whatever_the_batches(families, spread):
    """PooledCounts (value counts per group, folded as batches come) against pandas'
    grouped median of all the values: ties, even and odd counts, negative values, a
    group with one value, batches small enough to fold many times; values that fit 32 bits
    and values that do not; a few groups and thousands (a range family per name)."""
    from nsyswrap.analysis.engine import open_values

    rng = np.random.default_rng(7)
    groups = rng.integers(-1, families, 20_000)
    groups[0] = families + 3  # a group of one value
    values = np.where(rng.random(20_000) < 0.5, rng.integers(-50, 400, 20_000),
                      rng.integers(-spread, spread, 20_000))  # ties, and values apart
    counts = open_values.PooledCounts()
    old_fold = open_values.FOLD_VALUES
    open_values.FOLD_VALUES = 64
    try:
        at = 0
        for size in rng.integers(1, 700, 200):
            counts.add(groups[at:at + size], values[at:at + size])
            at += size
        counts.add(groups[at:], values[at:])
    finally:
        open_values.FOLD_VALUES = old_fold
    keep = groups >= 0
    expected = pd.Series(values[keep]).groupby(groups[keep]).median()
    pd.testing.assert_series_equal(counts.medians(), expected, check_names=False,
                                   check_index_type=False)


def test_open_values_close_exactly_the_ranges_that_ended():
    """OpenValues hands back, at each close, every entry of the ranges that ended before
    the moment and only those, however the entries were added."""
    from nsyswrap.analysis.engine.open_values import OpenValues

    rng = np.random.default_rng(3)
    ends = rng.integers(0, 1000, 300)  # per range
    kept = OpenValues()
    entries = []
    for _ in range(100):
        rows = rng.integers(0, 300, 40)
        vals = rng.integers(0, 10**6, 40)
        kept.add(ends[rows], rows, vals)
        entries += list(zip(rows.tolist(), vals.tolist(), strict=True))
    closed = []
    for moment in (100, 100, 550, 999, 1000):
        rows, vals = kept.close(moment)
        assert all(ends[r] < moment for r in rows.tolist())
        closed += list(zip(rows.tolist(), vals.tolist(), strict=True))
    assert sorted(closed) == sorted(entries) and len(kept) == 0


def test_device_busy_answered_chunk_by_chunk_is_the_cover_of_every_operation():
    """B(hi) - B(lo) from DeviceBusy, fed a chunk of operations at a time (overlapping,
    touching, long intervals that reach over many chunks), against how much of each
    window the union of all of them covers (merged at once, clipped to the window), for
    windows answered in the chunk whose starts reach them."""
    from nsyswrap.analysis.union import DeviceBusy, merge_intervals

    rng = np.random.default_rng(11)
    start = np.sort(rng.integers(0, 100_000, 3000))
    end = start + rng.choice([0, 5, 50, 400, 20_000], 3000)
    windows = np.sort(rng.integers(-10, 130_000, (500, 2)), axis=1)
    ms, me = merge_intervals(start, end)
    expected = np.array([np.clip(np.minimum(me, hi) - np.maximum(ms, lo), 0, None).sum()
                         for lo, hi in windows.tolist()])
    busy = DeviceBusy()
    answers = {}
    cuts = np.unique(np.r_[0, np.sort(rng.choice(start, 40)), 2**62])
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        mine = (start >= lo) & (start < hi)
        busy.chunk_merged({0: merge_intervals(start[mine], end[mine])})
        for i, moment in enumerate(windows.ravel().tolist()):
            if (lo if lo > 0 else -2**62) <= moment < hi:
                answers[i] = int(busy.busy_before(0, np.array([moment]))[0])
    got = np.array([answers[2 * i + 1] - answers[2 * i] for i in range(len(windows))])
    assert (got == expected).all()


def test_compressed_sequences_give_back_every_value_in_order(monkeypatch):
    """The kernels' durations as the streamed analysis keeps them: arrays of uint32 and
    int64 (past 2**32) appended in any sizes, across compressed blocks and the pending
    tail, come back joined in order as int64; real durations (a fixture's) take fewer
    bytes than as uint32."""
    from nsyswrap.read import compressed as sequence

    monkeypatch.setattr(sequence, "BLOCK_VALUES", 100)
    rng = np.random.default_rng(7)
    parts = [rng.integers(0, 2**32, size=n, dtype=np.int64).astype(np.uint32)
             for n in (1, 99, 250, 3, 0, 180, 7)]
    parts.insert(3, rng.integers(2**32, 2**40, size=57, dtype=np.int64))
    kept = sequence.CompressedSequence()
    for p in parts:
        kept.add(p)
    assert len(kept.blocks) >= 3 and kept.pending
    out = kept.values()
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, np.concatenate([p.astype(np.int64) for p in parts]))
    assert kept.values().size == 0  # emptied

    monkeypatch.setattr(sequence, "BLOCK_VALUES", 1 << 16)
    durations = np.array([d for (d,) in sql(DDP_ONE, """SELECT end - start
        FROM CUPTI_ACTIVITY_KIND_KERNEL ORDER BY rowid""")], dtype=np.uint32)
    kept.add(durations)
    kept._compress()
    assert kept.nbytes < durations.nbytes
    np.testing.assert_array_equal(kept.values(), durations.astype(np.int64))


@pytest.mark.parametrize("path", USER_REPORTS, ids=lambda p: p.name)
def test_reports_with_the_runners_records_are_read_once(path, monkeypatch,
                                                        stream_small_reports):
    """The program's windows are measured in the stream's pass (engine/windows.py): no
    fallback, no second read of the report."""
    from nsyswrap.read.database import OpenReport

    def read_again(self):
        raise AssertionError("the report was read whole after the stream")

    import nsyswrap.analysis as analysis_package

    calls = []
    real = analysis_package.analyze_streamed

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(OpenReport, "read_whole", read_again)
    monkeypatch.setattr(analysis_package, "analyze_streamed", counted)
    streamed_once = compare(path, operations=False)
    loaded = compare(nsyswrap.load(path))
    assert calls == [1]
    for name in ("intervals", "groups", "summary"):
        pd.testing.assert_frame_equal(getattr(streamed_once.analysis.user_timings, name),
                                      getattr(loaded.analysis.user_timings, name), obj=name)
