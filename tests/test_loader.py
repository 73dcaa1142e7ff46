"""The loader against direct SQL, across nsys 2022.4 and 2025.3 exports."""

from __future__ import annotations

import os

import pytest
from conftest import (
    ALL_REPORTS,
    CPU_2022,
    DATA,
    GPU_GRAPH_WHOLE,
    GPU_MIX,
    GPU_NO_CUDA,
    GPU_NO_NVTX,
    file_digest,
    has_table,
    sql,
)

import nsyswrap
from nsyswrap.common.errors import BadInputError


@pytest.mark.parametrize("path", ALL_REPORTS, ids=lambda p: p.name)
def test_counts_match_sql(path):
    r = nsyswrap.load(path)
    kernels = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")[0][0] if has_table(
        path, "CUPTI_ACTIVITY_KIND_KERNEL") else 0
    assert len(r.kernels) == kernels
    ranges = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                       "AND end IS NOT NULL")[0][0] if has_table(path, "NVTX_EVENTS") else 0
    assert len(r.ranges) == ranges
    memcpy = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMCPY")[0][0] if has_table(
        path, "CUPTI_ACTIVITY_KIND_MEMCPY") else 0
    assert (r.transfers["op"] == "memcpy").sum() == memcpy


def test_versions_and_metadata():
    new = nsyswrap.load(GPU_MIX).info
    assert new.nsys_version.startswith("2025.3")
    assert new.gpus and new.gpus[0].name == sql(GPU_MIX, "SELECT name FROM TARGET_INFO_GPU")[0][0]
    assert new.gpus[0].l2_bytes == sql(GPU_MIX, "SELECT l2CacheSize FROM TARGET_INFO_GPU")[0][0]
    old = nsyswrap.load(CPU_2022).info
    assert old.nsys_version.startswith("2022.4")  # read from EXPORT_META_DATA
    assert not old.has_cuda and old.has_nvtx


def test_nvtx_text_from_text_and_string_ids():
    r = nsyswrap.load(CPU_2022)
    # C ASCII messages (text column) and registered strings (textId -> StringIds) both resolve.
    expected = {n for (n,) in sql(CPU_2022, "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e "
                                           "LEFT JOIN StringIds s ON s.id = e.textId "
                                           "WHERE eventType IN (59, 60)")}
    assert set(r.ranges["name"]) == expected
    assert {"iteration", "step", "startend"} <= expected


@pytest.mark.parametrize("sliced", [False, True], ids=["one read", "slices"])
@pytest.mark.parametrize("name, repeat", [("h100_torch_train.sqlite", True),
                                          ("h100_torch_emit_nvtx.sqlite", False),
                                          ("cpu2022_families.sqlite", True)])
def test_range_names_that_repeat_are_codes_and_distinct_ones_text(name, repeat, sliced,
                                                                  monkeypatch):
    """Names that repeat (a step's, a layer's) load as a categorical, a code per range;
    names that are mostly distinct (emit_nvtx's, one per operator call) as text. Either
    way every range's name is its text in SQL, and the categories are sorted, so sorting
    and grouping by name go as for text. Each reader slice encodes its own names: read in
    many slices (a name in several of them, under different codes), the same names."""
    import pandas as pd

    from nsyswrap.read import database

    if sliced:
        monkeypatch.setattr(database, "SLICE_ROWS", 7)
        monkeypatch.setattr(database, "cores", lambda: 5)
    path = DATA / name
    r = nsyswrap.load(path)
    names = r.ranges["name"]
    assert isinstance(names.dtype, pd.CategoricalDtype) == repeat
    if repeat:
        categories = names.cat.categories.tolist()
        assert categories == sorted(categories)
        assert isinstance(r.ranges["domain"].dtype, pd.CategoricalDtype)
    # The loader's order: by start, ties in the table's order.
    expected = [n for (n,) in sql(path, """
        SELECT coalesce(e.text, s.value, '') FROM NVTX_EVENTS e
        LEFT JOIN StringIds s ON s.id = e.textId
        WHERE eventType IN (59, 60) AND e."end" IS NOT NULL AND e."end" >= e.start
        ORDER BY e.start, e.rowid""")]
    assert names.astype(str).tolist() == expected


def test_domains_named_from_domain_create_events():
    r = nsyswrap.load(GPU_MIX)
    (app_id,) = sql(GPU_MIX, "SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 "
                             "AND text = 'app'")[0]
    n_app = sql(GPU_MIX, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                         "AND domainId = ?", (app_id,))[0][0]
    assert (r.ranges["domain"] == "app").sum() == n_app
    n_default = sql(GPU_MIX, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                             "AND domainId = 0")[0][0]
    assert (r.ranges["domain"] == "").sum() == n_default


def test_launch_join_by_correlation_id():
    r = nsyswrap.load(GPU_MIX)
    expected = dict(sql(GPU_MIX, "SELECT k.correlationId, r.start "
                                 "FROM CUPTI_ACTIVITY_KIND_KERNEL k "
                                 "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r USING (correlationId)"))
    got = dict(zip(r.kernels["correlation_id"], r.kernels["launch_start_ns"], strict=True))
    assert got == expected


@pytest.mark.parametrize("path", [p for p in ALL_REPORTS
                                  if has_table(p, "CUPTI_ACTIVITY_KIND_KERNEL")],
                         ids=lambda p: p.name)
def test_kernel_columns_match_sql(path):
    """The kernel read packs ids two to a column; unpacked, every row is SQLite's."""
    r = nsyswrap.load(path)
    rows = sql(path, """SELECT k.start, k.deviceId, k.streamId, (k.globalPid >> 24) & 16777215,
                               k.correlationId, s.value, d.value
                        FROM CUPTI_ACTIVITY_KIND_KERNEL AS k
                        JOIN StringIds AS s ON s.id = k.shortName
                        JOIN StringIds AS d ON d.id = k.demangledName ORDER BY k.rowid""")
    got = list(zip(*(r.kernels[c].tolist() for c in (
        "start_ns", "device_id", "stream_id", "pid", "correlation_id", "short_name", "name")),
        strict=True))
    assert got == [tuple(row) for row in rows]


def test_reads_in_rowid_slices_give_the_same_rows_in_the_same_order(monkeypatch):
    """Big tables are read in rowid slices on several threads: the report does not depend
    on how many slices."""
    import pandas as pd

    from nsyswrap.read import database

    whole = nsyswrap.load(GPU_MIX)
    slices = []
    real = database.Database._slices
    monkeypatch.setattr(database.Database, "_slices",
                        lambda self, q: slices.append(real(self, q)) or slices[-1])
    monkeypatch.setattr(database, "SLICE_ROWS", 7)
    monkeypatch.setattr(database, "cores", lambda: 5)
    sliced = nsyswrap.load(GPU_MIX)
    # The kernels, launches, ranges: two slices per reader thread.
    assert max(len(s) for s in slices) == 5 * database.SLICES_PER_READER
    for name in ("kernels", "transfers", "api_calls", "ranges", "marks"):
        pd.testing.assert_frame_equal(getattr(sliced, name), getattr(whole, name))
    assert_same_summaries(sliced, whole)
    # One core, but slices of at most 50 rowids: more slices than two.
    slices.clear()
    monkeypatch.setattr(database, "cores", lambda: 1)
    monkeypatch.setattr(database, "MAX_SLICE_ROWS", 50)
    bounded = nsyswrap.load(GPU_MIX)
    # The biggest table read in slices: the OS runtime calls (the call summaries').
    rows = max(sql(GPU_MIX, f"SELECT max(rowid) - min(rowid) + 1 FROM {t}")[0][0]
               for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                         "OSRT_API"))
    assert max(len(s) for s in slices) == -(-rows // 50) > database.SLICES_PER_READER
    for name in ("kernels", "transfers", "api_calls", "ranges", "marks"):
        pd.testing.assert_frame_equal(getattr(bounded, name), getattr(whole, name))
    assert_same_summaries(bounded, whole)


def assert_same_summaries(report, whole):
    """The call summaries of two loads of one report (report.CallSummaries), frame by
    frame."""
    import pandas as pd

    for name in ("cuda_api", "slowest_api_calls", "memory_ops", "os_runtime"):
        pd.testing.assert_frame_equal(getattr(report.call_summaries, name),
                                      getattr(whole.call_summaries, name), obj=name)


def test_record_batches_of_any_size_give_the_same_report(monkeypatch):
    """The driver hands each read over in record batches of database.BATCH_ROWS rows: the
    report does not depend on their size (text columns of many batches are joined)."""
    import pandas as pd

    from nsyswrap.read import database

    whole = nsyswrap.load(GPU_MIX)
    chunks = []
    real = database.Database._fetch

    def fetch(self, sql, attempt=0):
        table = real(self, sql, attempt)
        chunks.append([len(c) for c in table.column(0).chunks])
        return table

    monkeypatch.setattr(database.Database, "_fetch", fetch)
    monkeypatch.setattr(database, "BATCH_ROWS", 3)
    batched = nsyswrap.load(GPU_MIX)
    # The option reached the driver: the big reads came in batches of 3 rows.
    assert max(len(c) for c in chunks) > 10 and max(max(c, default=0) for c in chunks) == 3
    for name in ("kernels", "transfers", "api_calls", "ranges", "marks"):
        pd.testing.assert_frame_equal(getattr(batched, name), getattr(whole, name))


def test_text_columns_do_not_keep_the_drivers_batches(monkeypatch):
    """A text column that pandas took over as it is (zero-copy) would keep every column of
    the driver's record batches alive (10 M NVTX ranges: 500 MB more): pandas_frame copies text
    read in several batches into buffers of its own, with the same values."""
    import sqlite3

    from nsyswrap.read import database
    from nsyswrap.read.queries import pandas_frame

    monkeypatch.setattr(database, "BATCH_ROWS", 1)  # the harness's two marks, two batches
    harness = DATA / "h100_harness_clock.sqlite"
    with database.open_report(harness) as opened:  # the marks' text: the harness's JSON
        table = opened.db.arrow(opened.queries.nvtx_marks)
        types = opened.queries.event_types
    names = table.column("text")
    assert names.num_chunks > 1
    # Held here, the read's buffers stay allocated: no address can be reused meanwhile.
    read_buffers = [b for chunk in names.chunks for b in chunk.buffers() if b is not None]
    del names
    frame = pandas_frame(table)
    del table
    text = frame["text"].array.__arrow_array__()
    own = {b.address for chunk in text.chunks for b in chunk.buffers() if b is not None}
    assert own and not own & {b.address for b in read_buffers}
    con = sqlite3.connect(harness)
    expected = sorted(str(v) for (v,) in con.execute(
        "SELECT coalesce(e.text, s.value) FROM NVTX_EVENTS e LEFT JOIN StringIds s "
        "ON e.textId = s.id WHERE e.eventType = ?", (types["NvtxMark"],)))
    assert sorted(frame["text"]) == expected


def test_a_table_without_rowid_is_read_whole(tmp_path, monkeypatch):
    """Rowid slices need a rowid; a table rebuilt WITHOUT ROWID (as a tool that rewrites
    exports may leave it) has none, so it is read in one query. (A view in a table's place
    is refused: tests/test_not_tables.py.)"""
    import shutil
    import sqlite3

    import pandas as pd

    from nsyswrap.read import database

    path = tmp_path / "without_rowid.sqlite"
    shutil.copyfile(GPU_MIX, path)
    con = sqlite3.connect(path)
    (create,), = con.execute("SELECT sql FROM sqlite_master "
                             "WHERE name = 'CUPTI_ACTIVITY_KIND_KERNEL'").fetchall()
    con.execute("ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME TO kernels_kept")
    # The same columns, keyed by start (the export's order) and launch: unique here.
    con.execute(create.rstrip().removesuffix(")")
                + ", PRIMARY KEY (start, globalPid, correlationId)) WITHOUT ROWID")
    con.execute("INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL SELECT * FROM kernels_kept")
    con.commit()
    con.close()
    with pytest.raises(sqlite3.OperationalError, match="no such column: rowid"):
        sql(path, "SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    monkeypatch.setattr(database, "SLICE_ROWS", 7)
    monkeypatch.setattr(database, "cores", lambda: 4)
    pd.testing.assert_frame_equal(nsyswrap.load(path).kernels, nsyswrap.load(GPU_MIX).kernels)


def test_blocking_calls_are_the_sync_apis():
    r = nsyswrap.load(GPU_MIX)
    expected = sql(GPU_MIX, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME r JOIN StringIds s "
                            "ON s.id = r.nameId WHERE s.value LIKE 'cudaDeviceSynchronize%' "
                            "OR s.value LIKE 'cudaStreamSynchronize%'")[0][0]
    assert len(r.api_calls) == expected > 0


def test_graph_level_trace_counts_as_gpu_work():
    r = nsyswrap.load(GPU_GRAPH_WHOLE)
    graphs = sql(GPU_GRAPH_WHOLE, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_GRAPH_TRACE")[0][0]
    assert (r.transfers["op"] == "graph").sum() == graphs > 0


def test_missing_trace_kinds_are_noted_not_fatal():
    no_nvtx = nsyswrap.load(GPU_NO_NVTX)
    assert no_nvtx.ranges.empty and len(no_nvtx.kernels) > 0
    assert any("NVTX" in n for n in no_nvtx.info.notes)
    no_cuda = nsyswrap.load(GPU_NO_CUDA)
    assert no_cuda.kernels.empty and len(no_cuda.ranges) > 0
    assert any("CUDA" in n for n in no_cuda.info.notes)


def test_opened_read_only(report_copy):
    path = report_copy(GPU_MIX)
    before = file_digest(path)
    mtime = path.stat().st_mtime_ns
    nsyswrap.load(path)
    assert file_digest(path) == before and path.stat().st_mtime_ns == mtime
    assert sorted(os.listdir(path.parent)) == [path.name]  # no -journal, -wal, -shm left


def test_read_only_file_loads(report_copy):
    path = report_copy(CPU_2022)
    path.chmod(0o444)
    assert len(nsyswrap.load(path).ranges) > 0


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"", "empty"), (b"hello, not a database\n" * 10, "not a SQLite file")],
)
def test_not_sqlite(tmp_path, content, words):
    p = tmp_path / "x.sqlite"
    p.write_bytes(content)
    with pytest.raises(BadInputError, match=words):
        nsyswrap.load(p)


def test_sqlite_but_not_nsys(tmp_path):
    import sqlite3

    p = tmp_path / "other.sqlite"
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE t (x)")
    con.commit()
    con.close()
    with pytest.raises(BadInputError, match="not an Nsight Systems export"):
        nsyswrap.load(p)


def test_truncated(tmp_path):
    data = GPU_MIX.read_bytes()
    p = tmp_path / "cut.sqlite"
    p.write_bytes(data[: len(data) // 2])
    with pytest.raises(BadInputError, match="truncated"):
        nsyswrap.load(p)


def test_missing_and_folder(tmp_path):
    with pytest.raises(BadInputError, match="no such file"):
        nsyswrap.load(tmp_path / "nope.sqlite")
    with pytest.raises(BadInputError, match="folder"):
        nsyswrap.load(tmp_path)


def test_launches_outside_the_name_filter_are_still_found(monkeypatch):
    """The runtime scan reads only launch-like calls; an operation launched by any other
    call is fetched again by correlation id, so the join loses nothing."""
    import re

    from nsyswrap.read import cuda_api

    columns = ["launch_start_ns", "thread"]
    expected = nsyswrap.load(GPU_MIX).kernels[columns].to_numpy()
    monkeypatch.setattr(cuda_api, "LAUNCH_API", re.compile(r"^no-such-api$"))
    got = nsyswrap.load(GPU_MIX).kernels[columns].to_numpy()
    assert (got == expected).all() and (got >= 0).all()


def test_records_that_end_before_they_start_are_left_out_and_noted(report_copy):
    """A real export with broken timestamps planted (as a tool that merges or edits reports
    can leave them): one kernel and one NVTX range end before they start."""
    import sqlite3

    path = report_copy(GPU_MIX)
    con = sqlite3.connect(path)
    con.execute("UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 5 WHERE rowid = "
                "(SELECT min(rowid) FROM CUPTI_ACTIVITY_KIND_KERNEL)")
    con.execute("UPDATE NVTX_EVENTS SET end = start - 7 WHERE rowid = (SELECT min(rowid) FROM "
                "NVTX_EVENTS WHERE eventType = 59 AND end IS NOT NULL)")
    con.commit()
    con.close()
    kernels = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL WHERE end >= start")
    ranges = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType IN (59, 60) "
                       "AND end >= start")
    report = nsyswrap.load(path)
    assert len(report.kernels) == kernels[0][0]
    assert len(report.ranges) == ranges[0][0]
    assert (report.kernels["end_ns"] >= report.kernels["start_ns"]).all()
    notes = " ".join(report.info.notes)
    assert "1 kernel(s) end before they start" in notes
    assert "1 NVTX range(s) end before they start" in notes
    assert not any("end before" in n for n in nsyswrap.load(GPU_MIX).info.notes)


def _hold_lock(path, seconds: float):
    """Another process takes an exclusive lock on the report (as a writer mid-transaction
    does) and holds it for `seconds`. Returns once the lock is held."""
    import subprocess
    import sys

    code = ("import sqlite3, sys, time\n"
            "con = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
            "con.execute('BEGIN EXCLUSIVE')\n"
            "print('locked', flush=True)\n"
            "time.sleep(float(sys.argv[2]))\n"
            "con.execute('ROLLBACK')\n")
    proc = subprocess.Popen([sys.executable, "-c", code, str(path), str(seconds)],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def test_locked_report_is_waited_for_then_named_locked(report_copy, monkeypatch):
    from nsyswrap.read import database

    monkeypatch.setattr(database, "LOCKED_WAIT_S", 0.25)  # a wait of 2.5 s, not 5
    path = report_copy(CPU_2022)
    holder = _hold_lock(path, 0.5)  # released within the wait: the load succeeds
    try:
        assert len(nsyswrap.load(path).ranges) > 0
    finally:
        holder.wait(timeout=30)
    holder = _hold_lock(path, 30.0)  # held past the wait: a one-line "locked" error
    try:
        with pytest.raises(BadInputError, match="locked by another process"):
            nsyswrap.load(path)
    finally:
        holder.kill()
        holder.wait()


def test_launch_lookup_in_chunks_matches_a_dictionary(monkeypatch):
    """Keys in no order, some without a call, looked up in chunks of a few rows on
    threads."""
    import numpy as np
    import pandas as pd

    from nsyswrap.read import chunks
    from nsyswrap.read.launches import sorted_launches

    rng = np.random.default_rng(3)
    calls = pd.DataFrame({"launch_key": rng.permutation(1000)[:600] * 3,
                          "start_ns": rng.integers(0, 10**9, 600),
                          "duration_ns": rng.integers(0, 10**5, 600),
                          "thread": rng.integers(1, 9, 600)})
    table = {k: (s, t, d) for k, s, d, t in calls.itertuples(index=False)}
    launches = sorted_launches(calls.copy())
    keys = rng.integers(0, 3000, 500)
    monkeypatch.setattr(chunks, "cores", lambda: 3)
    monkeypatch.setattr(chunks.even_bounds, "__defaults__", (7,))
    assert len(chunks.even_bounds(len(keys))) == 6
    start, thread, duration = launches.lookup(keys)
    want = [table.get(k, (-1, -1, -1)) for k in keys.tolist()]
    assert list(zip(start.tolist(), thread.tolist(), duration.tolist(), strict=True)) == want


def test_runtime_slices_split_and_merge_as_one_stable_sort():
    """Each reader thread sorts its slice's launches and sets its blocking calls apart
    (queries.RuntimeSlice); the merged launches are those of one stable sort of all the
    rows, equal keys (a call read twice, replicated reports) in rowid order."""
    import numpy as np
    import pyarrow as pa

    from nsyswrap.read.loader import _merged_launches
    from nsyswrap.read.queries import RuntimeSlice

    rng = np.random.default_rng(5)
    n = 400
    table = pa.table({"launch_key": rng.integers(0, 60, n), "start_ns": np.arange(n) * 10,
                      "thread": 2**40 + rng.integers(1, 6, n),
                      "end_ns": np.arange(n) * 10 + 5,
                      "name_id": rng.integers(0, 6, n)})
    cuts = [0, 90, 91, 250, n]
    parts = [RuntimeSlice.of(table.slice(a, b - a), blocking_ids=(2, 5))
             for a, b in zip(cuts, cuts[1:], strict=False)]
    merged = _merged_launches(parts)
    order = np.argsort(table["launch_key"].to_numpy(), kind="stable")
    assert merged.key.tolist() == table["launch_key"].to_numpy()[order].tolist()
    assert merged.start_ns.tolist() == table["start_ns"].to_numpy()[order].tolist()
    assert merged.thread_ids().tolist() == table["thread"].to_numpy()[order].tolist()
    blocking = pa.concat_tables([p.blocking for p in parts])
    assert blocking["start_ns"].to_pylist() == [
        s for s, i in zip(table["start_ns"].to_pylist(), table["name_id"].to_pylist(), strict=True)
        if i in (2, 5)]



def _without_not_null(path, table):
    """`table` rebuilt without its NOT NULL constraints (as a tool that edits or merges
    reports can leave it), the same rows in the same order."""
    import sqlite3

    con = sqlite3.connect(path)
    con.executescript(f"CREATE TABLE rebuilt AS SELECT * FROM {table} ORDER BY rowid;"
                      f"DROP TABLE {table}; ALTER TABLE rebuilt RENAME TO {table};")
    con.close()


def _edit(path, *statements):
    import sqlite3

    con = sqlite3.connect(path)
    for statement in statements:
        con.execute(statement)
    con.commit()
    con.close()


FIRST_ROWS = "rowid IN (SELECT rowid FROM {} ORDER BY rowid LIMIT {})"


@pytest.mark.parametrize("nulls", ["start and end", "end"])
def test_rows_without_times_are_left_out_and_counted(report_copy, monkeypatch, nulls):
    """Kernels with a NULL start and end, or a NULL end, and runtime calls with a NULL
    start: left out of every timing (the whole and the streamed analysis, the trace), a
    note for each table, no numpy warning."""
    import json
    import warnings

    from click.testing import CliRunner

    from nsyswrap.cli import main
    from nsyswrap.read import database

    kernel, runtime = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME"
    path = report_copy(GPU_MIX)
    _without_not_null(path, kernel)
    _without_not_null(path, runtime)
    cleared = "start = NULL, end = NULL" if nulls == "start and end" else "end = NULL"
    _edit(path, f"UPDATE {kernel} SET {cleared} WHERE {FIRST_ROWS.format(kernel, 3)}",
          f"UPDATE {runtime} SET start = NULL WHERE {FIRST_ROWS.format(runtime, 2)}")
    kept = "start IS NOT NULL AND end IS NOT NULL"
    (kernels, first_ns, last_ns), = sql(path, f"SELECT count(*), min(start), max(end) "
                                              f"FROM {kernel} WHERE {kept}")
    assert kernels == sql(GPU_MIX, f"SELECT count(*) FROM {kernel}")[0][0] - 3
    notes = [f"3 kernel(s) without a start or end time (NULL in {kernel}); left out",
             f"2 CUDA runtime call(s) without a start or end time (NULL in {runtime}); left out"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = nsyswrap.load(path)
        assert len(report.kernels) == kernels
        assert report.kernels["start_ns"].min() == first_ns
        assert report.kernels["end_ns"].max() == last_ns
        assert all(n in report.info.notes for n in notes)
        monkeypatch.setattr(database, "STREAM_MIN_OPERATIONS", 0)  # streamed below
        res = CliRunner().invoke(main, ["compare", str(path), "--format", "json"],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.stderr
        doc = json.loads(res.stdout)
        assert doc["report"]["counts"]["kernels"] == kernels
        assert all(n in doc["report"]["notes"] for n in notes)
        res = CliRunner().invoke(main, ["compare", str(path), "--format", "trace"],
                                 catch_exceptions=False)
        assert res.exit_code == 0, res.stderr
    trace = json.loads(res.stdout)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    times_us = [e["ts"] for e in events if "ts" in e]
    (duration_ns,), = sql(path, "SELECT max(stopTime) - min(startTime) FROM ANALYSIS_DETAILS")
    assert 0 <= min(times_us) and max(times_us) - min(times_us) <= duration_ns / 1e3


@pytest.mark.parametrize(("batch_rows", "rebuilt"), [(None, False), (16, False), (None, True)],
                         ids=["in the first batch", "later", "in a rebuilt table"])
def test_text_in_a_number_column_is_one_line(report_copy, monkeypatch, batch_rows, rebuilt):
    """`start = 'oops'` in a kernel: the driver reads the column as text (the value in its
    first record batch) or stops at it (later): either way a one-line error naming the
    table, the column, the value and its row, exit 2. Also where the table was rebuilt
    (its columns declared INT, not INTEGER)."""
    from click.testing import CliRunner

    from nsyswrap.cli import main
    from nsyswrap.read import database

    kernel = "CUPTI_ACTIVITY_KIND_KERNEL"
    path = report_copy(GPU_MIX)
    if rebuilt:
        _without_not_null(path, kernel)
    _edit(path, f"UPDATE {kernel} SET start = 'oops' WHERE rowid = "
                f"(SELECT rowid FROM {kernel} ORDER BY rowid LIMIT 1 OFFSET 100)")
    (row,), = sql(path, f"SELECT rowid FROM {kernel} WHERE typeof(start) = 'text'")
    if batch_rows:
        monkeypatch.setattr(database, "BATCH_ROWS", batch_rows)
    words = f"{kernel}.start holds 'oops' (row {row}) where a whole number belongs"
    with pytest.raises(BadInputError, match=words.replace("(", r"\(").replace(")", r"\)")):
        nsyswrap.load(path)
    res = CliRunner().invoke(main, ["compare", str(path)], catch_exceptions=False)
    assert res.exit_code == 2 and res.stderr.count("\n") == 1 and words in res.stderr


def test_without_runtime_calls_the_ranges_gpu_columns_are_unknown(report_copy):
    """GPU operations and ranges but no runtime call: which range launched what is unknown,
    and said so; the kernels' own numbers stand."""
    import json

    from click.testing import CliRunner

    from nsyswrap.cli import main

    path = report_copy(GPU_MIX)
    _edit(path, "DELETE FROM CUPTI_ACTIVITY_KIND_RUNTIME")
    res = CliRunner().invoke(main, ["compare", str(path), "--format", "json"],
                             catch_exceptions=False)
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    (kernels,), = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert sum(k["count"] for k in doc["kernels"]) == kernels
    assert doc["ranges"] and all(r["gpu_busy_median_ns"] is None and
                                 r["gpu_span_median_ns"] is None for r in doc["ranges"])
    assert any("no CUDA runtime calls" in n and "unknown, not 0" in n
               for n in doc["report"]["notes"])
    table = CliRunner().invoke(main, ["compare", str(path)], catch_exceptions=False).stdout
    # The ranges' table (the OS runtime calls' after it may show a single call's 0 ns).
    ranges = table[table.index("NVTX ranges and the GPU work"):].split("\n\n")[0]
    assert "no CUDA runtime calls" in table and " 0 ns " not in ranges


def test_null_ids_read_as_unknown_without_warnings(report_copy, monkeypatch):
    """NULL device, process or correlation ids (tables rebuilt without nsys's NOT NULL):
    the rows are kept, their launch unknown (-1), in the whole and the streamed analysis,
    and no numpy warning."""
    import warnings

    from click.testing import CliRunner

    from nsyswrap.cli import main
    from nsyswrap.read import database

    kernel, memcpy = "CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY"
    path = report_copy(GPU_MIX)
    for table in (kernel, memcpy):
        _without_not_null(path, table)
        _edit(path, f"UPDATE {table} SET deviceId = NULL, globalPid = NULL, "
                    f"correlationId = NULL WHERE {FIRST_ROWS.format(table, 1)}")
    (kernels,), = sql(path, f"SELECT count(*) FROM {kernel}")
    (first_kernel_ns,), = sql(path, f"SELECT start FROM {kernel} ORDER BY rowid LIMIT 1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        report = nsyswrap.load(path)
        assert len(report.kernels) == kernels
        (unknown,) = report.kernels.index[report.kernels["start_ns"] == first_kernel_ns]
        assert report.kernels.loc[unknown, "launch_start_ns"] == -1
        assert len(report.transfers) == sql(path, f"SELECT count(*) FROM {memcpy}")[0][0] + \
            sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_MEMSET")[0][0]
        monkeypatch.setattr(database, "STREAM_MIN_OPERATIONS", 0)
        for fmt in ("json", "trace"):
            res = CliRunner().invoke(main, ["compare", str(path), "--format", fmt],
                                     catch_exceptions=False)
            assert res.exit_code == 0, res.stderr
