"""The call summaries (summaries.py) against NVIDIA's own numbers (nsys stats' cuda_api_sum,
osrt_sum, cuda_gpu_mem_time_sum and cuda_gpu_mem_size_sum of the fixtures, saved by
scripts/make_nsys_stats.sh with nsys 2022.4) and against direct SQL summed up with plain
Python; the program's marks against NVTX_EVENTS; the trace's launches against their runtime
calls; the same numbers from the streamed analysis; rows that do not pack; and the
sections in every output."""

from __future__ import annotations

import csv
import io
import json
import re
import statistics
import sys
from collections import defaultdict
from pathlib import Path

import pytest
from conftest import (
    CPU_2022,
    DATA,
    GPU_MIX,
    USER_SEED,
    analysed,
    compared,
    has_table,
    needs_nsys,
    sql,
)

import nsyswrap
from nsyswrap.analysis import analyze, analyze_streamed
from nsyswrap.read.database import open_report
from nsyswrap.read.loader import read_without_operations
from nsyswrap.read.operations import OperationStream
from nsyswrap.render import render

TRAIN = DATA / "h100_torch_train.sqlite"
HARNESS = DATA / "h100_harness_clock.sqlite"
DDP_ONE = DATA / "h200x2_ddp_straggler_one.sqlite"
GRAPH = DATA / "h100_torch_graph.sqlite"
RUNTIME = "CUPTI_ACTIVITY_KIND_RUNTIME"
MEMCPY, MEMSET = "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"
# CUPTI's copy kinds, as the export's own enum table names them (CUDA_MEMCPY_KIND_HTOD).
COPY_KIND_SQL = "SELECT id, name FROM ENUM_CUDA_MEMCPY_OPER"
NSYS_COPY_NAMES = {"Host-to-Device": "HtoD", "Device-to-Host": "DtoH",
                   "Device-to-Device": "DtoD", "Host-to-Host": "HtoH",
                   "Peer-to-Peer": "PtoP"}
GPU_REPORTS = [GPU_MIX, TRAIN, GRAPH, DDP_ONE, USER_SEED]


def base(name: str) -> str:
    """A CUDA API name without its version suffix (cudaMalloc_v3020 -> cudaMalloc)."""
    return re.sub(r"_v[0-9]+$", "", name)


def summed(values: dict[str, list[int]]) -> dict[str, dict]:
    """count, total, mean, median, min, max, sample std (0 for one value) and share of the
    total, per name: plain Python."""
    out = {}
    for name, v in values.items():
        out[name] = {"calls": len(v), "total": sum(v), "mean": statistics.fmean(v),
                     "median": statistics.median(v), "min": min(v), "max": max(v),
                     "std": statistics.stdev(v) if len(v) > 1 else 0.0}
    total = sum(r["total"] for r in out.values())
    for r in out.values():
        r["share"] = r["total"] / total
    return out


def calls_by_name(path: Path, table: str, where: str = "1", api: bool = False
                  ) -> dict[str, list[int]]:
    """Each name's call durations, from SQL (a name id StringIds lacks as
    '<unknown string N>'; calls that end before they start left out)."""
    out = defaultdict(list)
    for name_id, name, duration in sql(
            path, f'SELECT t.nameId, s.value, t."end" - t.start FROM {table} AS t '
                  f"LEFT JOIN StringIds AS s ON s.id = t.nameId WHERE {where}"):
        if duration < 0:
            continue
        label = f"<unknown string {name_id}>" if name is None else name
        out[base(label) if api else label].append(duration)
    return out


def memory_by_kind(path: Path) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """(durations, bytes) per 'memcpy KIND' and 'memset', from SQL."""
    kinds = dict(sql(path, COPY_KIND_SQL)) if has_table(path, "ENUM_CUDA_MEMCPY_OPER") else {}
    times, sizes = defaultdict(list), defaultdict(list)
    if has_table(path, MEMCPY):
        for kind, duration, size in sql(path, f'SELECT copyKind, "end" - start, bytes '
                                              f"FROM {MEMCPY}"):
            name = f"memcpy {short_copy_kind(kinds.get(kind, 'unknown'))}"
            times[name].append(duration)
            sizes[name].append(size)
    if has_table(path, MEMSET):
        for duration, size in sql(path, f'SELECT "end" - start, bytes FROM {MEMSET}'):
            times["memset"].append(duration)
            sizes["memset"].append(size)
    return times, sizes


def short_copy_kind(enum_name: str) -> str:
    """CUDA_MEMCPY_KIND_HTOD -> HtoD, CUDA_MEMCPY_KIND_UVM_DTOH -> UVM DtoH, ..._UNKNOWN ->
    unknown: the kinds as nsys stats' 2022.4 reports write them."""
    word = enum_name.removeprefix("CUDA_MEMCPY_KIND_")
    if word == "UNKNOWN":
        return "unknown"
    uvm = word.startswith("UVM_")
    word = word.removeprefix("UVM_")
    return ("UVM " if uvm else "") + word[0] + "to" + word[3:]


def assert_table(frame, expected: dict[str, dict], count: str = "calls",
                 suffix: str = "_ns") -> None:
    """A summary frame (one row per name, first column the name) against summed()."""
    assert list(frame.iloc[:, 0]) == sorted(expected, key=lambda n: (-expected[n]["total"],
                                                                     n))
    for row in frame.to_dict("records"):
        want = expected[row[frame.columns[0]]]
        assert row[count] == want["calls"]
        assert row[f"total{suffix}"] == want["total"]
        assert row[f"min{suffix}"] == want["min"] and row[f"max{suffix}"] == want["max"]
        assert row[f"median{suffix}"] == want["median"]
        assert row[f"mean{suffix}"] == pytest.approx(want["mean"], rel=1e-12)
        assert row[f"std{suffix}"] == pytest.approx(want["std"], rel=1e-9, abs=1e-6)


def nsys_stats(path: Path, report: str) -> list[dict]:
    csv_path = DATA / f"{path.stem}.nsys_stats_{report}.csv"
    with open(csv_path, newline="") as f:
        return list(csv.DictReader(f))


def whole(path: Path):
    return analysed(path)


# NVIDIA's numbers ------------------------------------------------------------------------

@pytest.mark.parametrize("path", [GPU_MIX, TRAIN], ids=lambda p: p.name)
def test_cuda_api_summary_is_nsys_stats_cuda_api_sum(path):
    """Each API as cuda_api_sum counts it: calls, total, min and max to the ns; average,
    median and standard deviation as nsys rounds them (0.1 ns); its share of the time.
    nsys keeps some version suffixes (cudaLaunchKernelExC_v11060): its rows that are one
    API without them add up to ours."""
    ours = whole(path).call_summaries.cuda_api.set_index("name")
    theirs = defaultdict(list)
    for r in nsys_stats(path, "cuda_api_sum"):
        theirs[base(r["Name"])].append(r)
    assert set(ours.index) == set(theirs)
    assert len(ours) >= 10
    for name, rows in theirs.items():
        row = ours.loc[name]
        assert row["calls"] == sum(int(r["Num Calls"]) for r in rows)
        assert row["total_ns"] == sum(int(r["Total Time (ns)"]) for r in rows)
        assert row["min_ns"] == min(int(r["Min (ns)"]) for r in rows)
        assert row["max_ns"] == max(int(r["Max (ns)"]) for r in rows)
        if len(rows) == 1:
            r = rows[0]
            for ours_key, theirs_key in (("mean_ns", "Avg (ns)"), ("median_ns", "Med (ns)"),
                                         ("std_ns", "StdDev (ns)")):
                assert abs(row[ours_key] - float(r[theirs_key])) <= 0.05 + 1e-6, name
            assert abs(row["share"] * 100 - float(r["Time (%)"])) <= 0.05 + 1e-9


@pytest.mark.parametrize("path", [CPU_2022, GPU_MIX], ids=lambda p: p.name)
def test_os_runtime_summary_is_nsys_stats_osrt_sum(path):
    ours = whole(path).call_summaries.os_runtime
    theirs = nsys_stats(path, "osrt_sum")
    assert list(ours["name"]) == [r["Name"] for r in theirs]
    for row, r in zip(ours.to_dict("records"), theirs, strict=True):
        assert row["calls"] == int(r["Num Calls"])
        assert row["total_ns"] == int(r["Total Time (ns)"])
        assert (row["min_ns"], row["max_ns"]) == (int(r["Min (ns)"]), int(r["Max (ns)"]))
        for ours_key, theirs_key in (("mean_ns", "Avg (ns)"), ("median_ns", "Med (ns)"),
                                     ("std_ns", "StdDev (ns)")):
            assert abs(row[ours_key] - float(r[theirs_key])) <= 0.05 + 1e-6
        assert abs(row["share"] * 100 - float(r["Time (%)"])) <= 0.05 + 1e-9


def nsys_operation(name: str) -> str:
    """'[CUDA memcpy HtoD]' (2022.4) or '[CUDA memcpy Host-to-Device]' -> 'memcpy HtoD'."""
    name = name.strip("[]").removeprefix("CUDA ")
    kind = name.removeprefix("memcpy ")
    return "memset" if name == "memset" else f"memcpy {NSYS_COPY_NAMES.get(kind, kind)}"


@pytest.mark.parametrize("path", [GPU_MIX, TRAIN], ids=lambda p: p.name)
def test_memory_ops_are_nsys_stats_gpu_mem_time_and_size_sums(path):
    ours = whole(path).call_summaries.memory_ops.set_index("operation")
    by_time = nsys_stats(path, "cuda_gpu_mem_time_sum")
    assert list(ours.index) == [nsys_operation(r["Operation"]) for r in by_time]
    for r in by_time:
        row = ours.loc[nsys_operation(r["Operation"])]
        assert row["count"] == int(r["Count"])
        assert row["total_ns"] == int(r["Total Time (ns)"])
        assert (row["min_ns"], row["max_ns"]) == (int(r["Min (ns)"]), int(r["Max (ns)"]))
        for ours_key, theirs_key in (("mean_ns", "Avg (ns)"), ("median_ns", "Med (ns)"),
                                     ("std_ns", "StdDev (ns)")):
            assert abs(row[ours_key] - float(r[theirs_key])) <= 0.05 + 1e-6
    by_size = nsys_stats(path, "cuda_gpu_mem_size_sum")
    assert sorted(ours.index) == sorted(nsys_operation(r["Operation"]) for r in by_size)
    for r in by_size:  # in MB (10^6 bytes), to three places
        row = ours.loc[nsys_operation(r["Operation"])]
        assert row["count"] == int(r["Count"])
        for ours_key, theirs_key in (("total_bytes", "Total (MB)"), ("mean_bytes", "Avg (MB)"),
                                     ("median_bytes", "Med (MB)"), ("min_bytes", "Min (MB)"),
                                     ("max_bytes", "Max (MB)"), ("std_bytes", "StdDev (MB)")):
            assert abs(row[ours_key] / 1e6 - float(r[theirs_key])) <= 0.0005 + 1e-9


# Direct SQL ------------------------------------------------------------------------------

@pytest.mark.parametrize("path", GPU_REPORTS, ids=lambda p: p.name)
def test_cuda_api_summary_is_sql(path):
    a = whole(path)
    expected = summed(calls_by_name(path, RUNTIME, api=True))
    assert_table(a.call_summaries.cuda_api, expected)
    shares = a.call_summaries.cuda_api.set_index("name")["share"]
    for name, want in expected.items():
        assert shares[name] == pytest.approx(want["share"], rel=1e-12)


@pytest.mark.parametrize("path", GPU_REPORTS, ids=lambda p: p.name)
def test_slowest_api_calls_are_sql(path):
    """The five longest runtime calls, slowest first (ties in export order), with their
    thread."""
    a = whole(path)
    got = a.call_summaries.slowest_api_calls
    want = sql(path, f"""SELECT s.value, r.start, r."end", r.globalTid FROM {RUNTIME} AS r
                         JOIN StringIds AS s ON s.id = r.nameId
                         ORDER BY r."end" - r.start DESC, r.rowid LIMIT 5""")
    threads = dict(sql(path, "SELECT t.globalTid, s.value FROM ThreadNames AS t "
                             "JOIN StringIds AS s ON s.id = t.nameId"))
    assert got.to_dict("records") == [
        {"name": base(n), "start_ns": s, "end_ns": e, "duration_ns": e - s,
         "pid": (t >> 24) & 0xFFFFFF, "tid": t & 0xFFFFFF, "thread_name": threads.get(t, "")}
        for n, s, e, t in want]


@pytest.mark.parametrize("path", [CPU_2022, GPU_MIX, DATA / "cpu2022_families.sqlite"],
                         ids=lambda p: p.name)
def test_os_runtime_summary_is_sql(path):
    """OS runtime calls (event class 27): the table's rows where tracing started and
    finished are not calls."""
    os_runtime = whole(path).call_summaries.os_runtime
    if not has_table(path, "OSRT_API"):
        assert os_runtime.empty
        return
    assert_table(os_runtime, summed(calls_by_name(path, "OSRT_API", "eventClass = 27")))
    assert sql(path, "SELECT count(*) FROM OSRT_API WHERE eventClass != 27")[0][0] > 0


@pytest.mark.parametrize("path", [GPU_MIX, TRAIN, GRAPH, DDP_ONE], ids=lambda p: p.name)
def test_memory_ops_are_sql(path):
    memory = whole(path).call_summaries.memory_ops
    times, sizes = memory_by_kind(path)
    assert_table(memory, summed(times), count="count")
    sized = summed(sizes)
    by_op = memory.set_index("operation")
    for name, want in sized.items():
        row = by_op.loc[name]
        assert (row["total_bytes"], row["min_bytes"], row["max_bytes"], row["median_bytes"]
                ) == (want["total"], want["min"], want["max"], want["median"])
        assert row["mean_bytes"] == pytest.approx(want["mean"], rel=1e-12)
        assert row["std_bytes"] == pytest.approx(want["std"], rel=1e-9, abs=1e-6)
        total_ns = sum(times[name])
        assert row["throughput_bytes_per_s"] == pytest.approx(want["total"] / total_ns * 1e9,
                                                              rel=1e-12)


def test_a_cpu_capture_has_no_cuda_or_memory_summary():
    calls = whole(CPU_2022).call_summaries
    assert calls.cuda_api.empty and calls.slowest_api_calls.empty and calls.memory_ops.empty
    assert len(calls.os_runtime) == 3


def test_rows_that_do_not_pack_are_read_again(report_copy):
    """A call longer than the packing's value bits, a name id past StringIds, a copy of
    more bytes than the bits hold: read again by rowid, counted like the others; a call
    that ends before it starts: left out, and said."""
    path = report_copy(GPU_MIX)
    import sqlite3

    max_id = sql(path, "SELECT max(id) FROM StringIds")[0][0]
    huge = 1 << (63 - max_id.bit_length())  # the first duration that does not pack
    con = sqlite3.connect(path)
    with con:
        rowids = [r for (r,) in con.execute(f"SELECT rowid FROM {RUNTIME} ORDER BY rowid")]
        con.execute(f'UPDATE {RUNTIME} SET "end" = start + ? WHERE rowid = ?', (huge, rowids[3]))
        con.execute(f"UPDATE {RUNTIME} SET nameId = ? WHERE rowid = ?", (max_id + 7, rowids[5]))
        con.execute(f'UPDATE {RUNTIME} SET "end" = start - 7 WHERE rowid = ?', (rowids[9],))
        con.execute(f"UPDATE {MEMCPY} SET bytes = ? WHERE rowid = (SELECT min(rowid) "
                    f"FROM {MEMCPY})", (1 << 62,))
    con.close()
    report = nsyswrap.load(path)
    a = analyze(report)
    calls = a.call_summaries
    assert_table(calls.cuda_api, summed(calls_by_name(path, RUNTIME, api=True)))
    assert f"<unknown string {max_id + 7}>" in set(calls.cuda_api["name"])
    assert calls.slowest_api_calls["duration_ns"].iloc[0] == huge
    assert "1 CUDA API call(s) end before they start (broken timestamps); left out of the " \
           "summary" in report.info.notes
    times, sizes = memory_by_kind(path)
    assert_table(calls.memory_ops, summed(times), count="count")
    by_op = calls.memory_ops.set_index("operation")
    assert {n: by_op.loc[n, "total_bytes"] for n in sizes} == {
        n: sum(v) for n, v in sizes.items()}
    assert max(by_op["max_bytes"]) == 1 << 62


@pytest.mark.parametrize("path", [GPU_MIX, DDP_ONE], ids=lambda p: p.name)
def test_the_streamed_analysis_has_the_same_summaries_and_marks(path):
    with open_report(path, stream_operations=True) as opened:
        report, rest = read_without_operations(opened)
        streamed = analyze_streamed(report, OperationStream(opened.db, opened.queries,
                                                            chunk_operations=97), rest)
    w = whole(path)
    import pandas as pd

    for name in ("cuda_api", "slowest_api_calls", "memory_ops", "os_runtime"):
        pd.testing.assert_frame_equal(getattr(streamed.call_summaries, name),
                                      getattr(w.call_summaries, name), obj=name)
    pd.testing.assert_frame_equal(streamed.marks, w.marks)


# Marks -----------------------------------------------------------------------------------

def marks_from_sql(path: Path) -> list[dict]:
    """NVTX marks (event type 34) with their domain's name, nsyswrap's own JSON marks left
    out."""
    domains = {(t >> 24, d): n for t, d, n in sql(
        path, "SELECT e.globalTid, e.domainId, coalesce(e.text, s.value) FROM NVTX_EVENTS e "
              "LEFT JOIN StringIds s ON s.id = e.textId WHERE e.eventType = 75")}
    text = "coalesce(e.text, s.value)" if "textId" in {
        r[1] for r in sql(path, "PRAGMA table_info(NVTX_EVENTS)")} else "e.text"
    join = "LEFT JOIN StringIds s ON s.id = e.textId" if text != "e.text" else ""
    rows = sql(path, f"SELECT e.start, e.globalTid, coalesce(e.domainId, 0), {text} "
                     f"FROM NVTX_EVENTS e {join} WHERE e.eventType = 34 ORDER BY e.start")
    return [{"time_ns": s, "pid": (t >> 24) & 0xFFFFFF, "tid": t & 0xFFFFFF,
             "domain": domains.get((t >> 24, d), ""), "text": x}
            for s, t, d, x in rows if not x.startswith('{"nsyswrap":')]


@pytest.mark.parametrize("path", [CPU_2022, GPU_MIX, HARNESS, USER_SEED],
                         ids=lambda p: p.name)
def test_marks_are_the_programs_own_from_sql(path):
    """Every NVTX mark but nsyswrap's own (the harness's benchmark documents, the
    runner's records and clock marks: JSON objects keyed "nsyswrap")."""
    want = marks_from_sql(path)
    assert whole(path).marks.to_dict("records") == want
    all_marks = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 34")[0][0]
    if path in (HARNESS, USER_SEED):
        assert want == [] and all_marks > 0  # only nsyswrap's own
    else:
        assert want


# The trace -------------------------------------------------------------------------------

@pytest.mark.parametrize("path", [GPU_MIX, GRAPH], ids=lambda p: p.name)
def test_each_launch_in_the_trace_lasts_as_long_as_its_runtime_call(path):
    """A launch slice per GPU operation, at its runtime call's start, as long as that call
    (end - start from SQL; the slice in µs to the ns, args.launch_ns exact)."""
    trace = json.loads(render(compared(path), "trace"))
    origin = trace["otherData"]["origin_ns"]
    got = sorted((round(e["ts"] * 1000) + origin, e["args"]["launch_ns"], e["tid"])
                 for e in trace["traceEvents"] if e.get("cat") == "cuda_launch")
    want = []
    for table in ("CUPTI_ACTIVITY_KIND_KERNEL", MEMCPY, MEMSET):
        if has_table(path, table):
            want += sql(path, f"""SELECT r.start, r."end" - r.start, r.globalTid & 16777215
                                  FROM {table} AS o JOIN {RUNTIME} AS r
                                    ON r.correlationId = o.correlationId
                                   AND r.globalTid >> 24 = o.globalPid >> 24""")
    assert got == sorted(want)
    assert any(duration > 0 for _, duration, _ in got)
    for e in trace["traceEvents"]:
        if e.get("cat") == "cuda_launch":
            assert abs(e["dur"] * 1000 - e["args"]["launch_ns"]) <= 1


# Outputs ---------------------------------------------------------------------------------

def test_json_document_holds_the_summaries_and_marks():
    c = compared(GPU_MIX)
    doc = json.loads(render(c, "json"))
    apis = doc["cuda_api"]["apis"]
    expected = summed(calls_by_name(GPU_MIX, RUNTIME, api=True))
    assert [r["name"] for r in apis] == list(c.analysis.call_summaries.cuda_api["name"])
    for r in apis:
        want = expected[r["name"]]
        assert (r["calls"], r["total_ns"], r["min_ns"], r["max_ns"]) == (
            want["calls"], want["total"], want["min"], want["max"])
        assert set(r) == {"name", "calls", "total_ns", "mean_ns", "median_ns", "min_ns",
                          "max_ns", "std_ns", "share"}
    assert len(doc["cuda_api"]["slowest_calls"]) == 5
    assert [r["operation"] for r in doc["memory_ops"]] == ["memcpy DtoH", "memcpy HtoD",
                                                           "memset"]
    assert len(doc["os_runtime"]) == len(summed(calls_by_name(GPU_MIX, "OSRT_API",
                                                              "eventClass = 27")))
    assert doc["marks"] == [{**m, "domain": m["domain"] or None}
                            for m in marks_from_sql(GPU_MIX)]


@pytest.mark.parametrize("section,count", [("cuda_api", None), ("cuda_api_slowest", 5),
                                           ("memory_ops", 3), ("os_runtime", None),
                                           ("marks", 1)])
def test_csv_sections_of_the_summaries(section, count):
    c = compared(GPU_MIX)
    rows = list(csv.DictReader(io.StringIO(render(c, "csv", section=section))))
    if count is None:
        table = RUNTIME if section == "cuda_api" else "OSRT_API"
        where = "1" if section == "cuda_api" else "eventClass = 27"
        count = len(calls_by_name(GPU_MIX, table, where, api=section == "cuda_api"))
    assert len(rows) == count
    if section == "marks":
        assert rows == [{"time_ns": str(m["time_ns"]), "pid": str(m["pid"]),
                         "tid": str(m["tid"]), "domain": m["domain"], "text": m["text"]}
                        for m in marks_from_sql(GPU_MIX)]


@pytest.mark.nsys
@needs_nsys
def test_a_run_shows_its_marks_and_os_runtime_calls(default_traces_run):
    """`nsyswrap run` traces the OS runtime by default: a small CPU program's calls and its
    `nsyswrap.mark("done")` reach the JSON document, as SQL on its own report has them."""
    out, proc = default_traces_run  # `run -o OUT --format json annotated.py`, no --trace
    doc = json.loads(proc.stdout)
    report = out / "annotated.sqlite"
    marks = marks_from_sql(report)
    assert [(m["text"], m["domain"]) for m in marks] == [("done", "e2e")]
    assert doc["marks"] == [{**m, "domain": m["domain"] or None} for m in marks]
    expected = summed(calls_by_name(report, "OSRT_API", "eventClass = 27"))
    assert len(expected) >= 3
    assert {r["name"]: (r["calls"], r["total_ns"]) for r in doc["os_runtime"]} == {
        n: (w["calls"], w["total"]) for n, w in expected.items()}


def test_slowest_calls_among_ties_in_many_slices(tmp_path, monkeypatch):
    """A replicated report holds every duration several times, in slices far apart: the
    slowest calls are the greatest durations, ties in export order, as one ORDER BY over
    the whole table has them, however the reads are sliced."""
    import subprocess

    from nsyswrap.read import database

    grown = tmp_path / "grown.sqlite"
    n = sql(GPU_MIX, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0]
    subprocess.run([sys.executable, str(Path(__file__).parents[1] / "scripts" /
                                        "make_big_report.py"), str(GPU_MIX), str(grown),
                    "--kernels", str(3 * n)], check=True, capture_output=True)
    want = sql(grown, f"""SELECT s.value, r.start, r."end" - r.start FROM {RUNTIME} AS r
                          JOIN StringIds AS s ON s.id = r.nameId
                          ORDER BY r."end" - r.start DESC, r.rowid LIMIT 5""")
    assert len({d for _, _, d in want}) < 5  # ties among them
    monkeypatch.setattr(database, "MAX_SLICE_ROWS", 300)
    monkeypatch.setattr(database, "SLICE_ROWS", 100)
    calls = whole(grown).call_summaries
    with database.Database(grown) as db:
        assert len(db.slice_conditions(f"SELECT 1 FROM {RUNTIME} WHERE {{rows}}")) > 10
    got = calls.slowest_api_calls
    assert list(zip(got["name"], got["start_ns"], got["duration_ns"], strict=True)) == [
        (base(n), s, d) for n, s, d in want]
    assert_table(calls.cuda_api, summed(calls_by_name(grown, RUNTIME, api=True)))


def test_markdown_shows_the_summaries_after_the_other_tables():
    from nsyswrap.common.units import fmt_ns, fmt_share

    md = render(compared(GPU_MIX), "markdown")
    apis = summed(calls_by_name(GPU_MIX, RUNTIME, api=True))
    osrt = summed(calls_by_name(GPU_MIX, "OSRT_API", "eventClass = 27"))
    titles = [line for line in md.splitlines() if line.startswith("### ")]
    assert titles[-5:] == [f"### CUDA API calls (top 10 of {len(apis)} by total time)",
                           "### Slowest CUDA API calls (5)",
                           "### GPU copies and memsets by kind",
                           f"### OS runtime calls (top 10 of {len(osrt)} by total time)",
                           "### NVTX marks (1)"]
    name, r = min(apis.items(), key=lambda item: -item[1]["total"])
    assert (f"| {name} | {r['calls']} | {fmt_ns(r['total'])} | {fmt_ns(r['mean'])} | "
            f"{fmt_ns(r['median'])} | {fmt_ns(r['min'])} | {fmt_ns(r['max'])} | "
            f"{fmt_ns(r['std'])} | {fmt_share(r['share'])} |") in md
    mark = marks_from_sql(GPU_MIX)[0]
    assert f"| {mark['text']} |" in md and f"| {mark['domain']} |" in md


@pytest.mark.parametrize("width", [80, 100, 120])
def test_terminal_shows_the_summaries_after_the_other_tables(width):
    """At 80, 100 and 120 columns: no line longer, the summaries after the ranges' table,
    each API's name whole on its row with its calls and total time (SQL)."""
    from nsyswrap.common.units import fmt_ns

    text = render(compared(GPU_MIX), "table", width=width)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    titles = ["NVTX ranges and the GPU work they launched", "CUDA API calls (top 10 of",
              "Slowest CUDA API calls (5)", "GPU copies and memsets by kind",
              "OS runtime calls (top 10 of", "NVTX marks (1)"]
    at = [next(i for i, line in enumerate(lines) if line.startswith(t)) for t in titles]
    assert at == sorted(at)
    apis = summed(calls_by_name(GPU_MIX, RUNTIME, api=True))
    table = lines[at[1]:at[2]]
    for name, r in sorted(apis.items(), key=lambda item: -item[1]["total"])[:10]:
        row = next(line for line in table if line.startswith(name + " "))
        assert row.split()[1:3] == [str(r["calls"]), *fmt_ns(r["total"]).split()[:1]]
    mark = marks_from_sql(GPU_MIX)[0]
    assert lines[at[5] + 3].split()[0] == mark["text"]


def test_html_page_has_a_table_of_each_summary_and_of_the_marks():
    page = render(compared(GPU_MIX), "html")
    section = page[page.index('<section id="calls">'):]
    section = section[:section.index("</section>")]
    assert '<a href="#calls">Calls and marks</a>' in page
    titles = re.findall(r"<h3>([^<]*)</h3>", section)
    assert [t.split(" (")[0] for t in titles] == [
        "CUDA API calls", "Slowest CUDA API calls", "GPU copies and memsets by kind",
        "OS runtime calls", "NVTX marks"]
    heaviest = max(summed(calls_by_name(GPU_MIX, RUNTIME, api=True)).items(),
                   key=lambda item: item[1]["total"])[0]
    assert f"<tr><td>{heaviest}</td>" in section
    assert "<tr><td>done</td>" in section


def test_a_marks_text_is_shown_harmlessly():
    """The hostile fixture's mark is markup: escaped in HTML and Markdown, as it is in
    JSON exactly."""
    c = nsyswrap.compare(DATA / "cpu2022_hostile.sqlite")
    text = marks_from_sql(DATA / "cpu2022_hostile.sqlite")[0]["text"]
    assert "<" in text
    assert json.loads(render(c, "json"))["marks"][0]["text"] == text
    page = render(c, "html")
    assert text not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    md = render(c, "markdown")
    assert text not in md and "&lt;img src=x onerror=alert(1)&gt;" in md


@pytest.mark.parametrize("path", [GPU_MIX, CPU_2022], ids=lambda p: p.name)
def test_marks_are_instants_on_their_threads_in_the_trace(path):
    """Each of the program's marks (SQL) once, at its time, on its thread; none before the
    trace's origin (nsys 2022.4 dates a CPU capture's start after its events)."""
    trace = json.loads(render(compared(path), "trace"))
    origin = trace["otherData"]["origin_ns"]
    got = [(round(e["ts"] * 1000) + origin, e["pid"], e["tid"], e["args"]["domain"] or "",
            e["name"]) for e in trace["traceEvents"] if e.get("cat") == "nvtx_mark"]
    assert got == [(m["time_ns"], m["pid"], m["tid"], m["domain"], m["text"])
                   for m in marks_from_sql(path)]
    assert all(e["ts"] >= 0 for e in trace["traceEvents"] if "ts" in e)


def test_a_marks_time_counts_from_the_reports_first_event():
    """nsys 2022.4 dates a CPU capture's session after its events: a mark's time is
    counted from the first NVTX range where that came earlier (SQL), never negative."""
    from nsyswrap.common.units import fmt_ns

    mark = marks_from_sql(CPU_2022)[0]
    (start,), = sql(CPU_2022, "SELECT min(startTime) FROM ANALYSIS_DETAILS")
    (first,), = sql(CPU_2022, "SELECT min(start) FROM NVTX_EVENTS WHERE eventType IN (59, 60)"
                              ' AND "end" IS NOT NULL')
    assert first < start  # the quirk, in this fixture
    lines = render(compared(CPU_2022), "table", width=100).splitlines()
    row = lines[next(i for i, line in enumerate(lines) if line.startswith("NVTX marks")) + 3]
    assert fmt_ns(mark["time_ns"] - min(start, first, mark["time_ns"])) in row
