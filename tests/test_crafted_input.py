"""Crafted input: reports and documents written to break the readers, each made from a copy
of a real fixture rewritten with sqlite3. Whatever they hold, nsyswrap analyses what it can
and says what it left out (exit 0), or refuses the input in one line (exit 2): never an
internal error (exit 1), a traceback, or memory and time out of proportion to the file.

Expected values come from the fixtures through sqlite3 and the standard library (zlib,
struct, json), not from nsyswrap."""

from __future__ import annotations

import base64
import json
import shutil
import sqlite3
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import CPU_2022, DATA, USER_SEED, runner_document_2, sql

from nsyswrap.cli import main

# A warning numpy or pandas prints is more lines on the command's standard error (a NaN
# cast to int64 warns, and gives the least int64): an error here.
pytestmark = pytest.mark.filterwarnings("error::RuntimeWarning")

DDP_RANK0 = DATA / "h200x2_ddp_control.rank0.sqlite"
HARNESS = DATA / "h100_diff_base.sqlite"
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
# The runner's document in a report's marks (nsyswrap/instrument/event_hooks.py writes it
# compactly).
RUNNER_MARK = '{"nsyswrap":"nsyswrap.user-events/1"%'
RECORD = struct.Struct("<qqHIIHq")


def _copy(src: Path, tmp_path: Path, name: str | None = None) -> Path:
    dst = tmp_path / (name or src.name)
    shutil.copy(src, dst)
    return dst


def _execute(path: Path, *statements: str) -> None:
    con = sqlite3.connect(path)
    try:
        for statement in statements:
            con.execute(statement)
        con.commit()
    finally:
        con.close()


def _runner_doc(path: Path) -> tuple[int, dict]:
    """(its NVTX_EVENTS rowid, the runner's document) of a report with one."""
    rowid, text = sql(path, "SELECT rowid, text FROM NVTX_EVENTS WHERE text LIKE ?",
                      (RUNNER_MARK,))[0]
    return rowid, json.loads(text)


def _write_runner_doc(path: Path, rowid: int, doc: dict, again: bool = False) -> None:
    """Put `doc` in place of the mark at `rowid`; `again`: also as a second mark."""
    text = json.dumps(doc, separators=(",", ":"))
    con = sqlite3.connect(path)
    try:
        con.execute("UPDATE NVTX_EVENTS SET text = ? WHERE rowid = ?", (text, rowid))
        if again:
            columns = ", ".join(f'"{r[1]}"' for r in con.execute("PRAGMA table_info(NVTX_EVENTS)"))
            con.execute(f"INSERT INTO NVTX_EVENTS ({columns}) SELECT {columns} FROM NVTX_EVENTS "
                        "WHERE rowid = ?", (rowid,))
        con.commit()
    finally:
        con.close()


def _seed_with(tmp_path: Path, edit=None, again: bool = False) -> Path:
    """The seed report with its runner's document edited by `edit` (in place)."""
    path = _copy(USER_SEED, tmp_path)
    rowid, doc = _runner_doc(path)
    if edit is not None:
        edit(doc)
    _write_runner_doc(path, rowid, doc, again)
    return path


def _packed_rows(doc: dict, name: str = "records") -> bytes:
    return zlib.decompress(base64.b64decode(doc[name]))


def _packed(raw: bytes) -> str:
    return base64.b64encode(zlib.compress(raw)).decode("ascii")


def _cli(*args) -> tuple[int, str]:
    """nsyswrap's exit code and standard error, in this process."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    return result.exit_code, result.stderr


def _compare(path: Path, tmp_path: Path) -> dict:
    """`compare --format json` of a report that must analyse (exit 0): its document."""
    out = tmp_path / "out.json"
    code, stderr = _cli("compare", path, "--format", "json", "-o", out)
    assert code == 0, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    return json.loads(out.read_text())


def _timing_notes(doc: dict) -> list[str]:
    return doc["user_timings"]["notes"]


def _refused(stderr: str) -> str:
    """The one line of a refusal (exit 2)."""
    assert len(stderr.splitlines()) == 1 and stderr.startswith("nsyswrap: error: "), stderr
    return stderr


# -- a runner's column that inflates without bound ----------------------------------

def _zeros_stream(size: int) -> bytes:
    """A valid zlib stream of `size` zero bytes (a multiple of 1 MiB, at least 2), made in
    milliseconds: after its first MiB, deflate's block for a MiB of zeros (which refers only
    to zeros just before it) repeats, and the checksum of n zeros is known (Adler-32:
    A = 1, B = n mod 65521)."""
    step = 1 << 20
    deflate = zlib.compressobj(9)
    head = deflate.compress(bytes(step)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    body = deflate.compress(bytes(step)) + deflate.flush(zlib.Z_SYNC_FLUSH)
    end = deflate.flush()[:-4]
    return (head + body * (size // step - 1) + end
            + (((size % 65521) << 16) | 1).to_bytes(4, "big"))


def test_the_zeros_stream_is_what_it_says():
    stream = _zeros_stream(4 << 20)
    assert zlib.decompress(stream) == bytes(4 << 20)


# Runs `python -m nsyswrap ...` and prints its wall time (s) and peak resident memory (KiB):
# the only child of a fresh process, so RUSAGE_CHILDREN's peak is its own.
_MEASURED = ("import resource, subprocess, sys, time\n"
             "t = time.perf_counter()\n"
             "code = subprocess.run(sys.argv[1:], capture_output=True).returncode\n"
             "print(time.perf_counter() - t, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, code)\n")


def _measured_compare(path: Path, out: Path) -> tuple[float, int]:
    proc = subprocess.run([sys.executable, "-c", _MEASURED, sys.executable, "-m", "nsyswrap",
                           "compare", str(path), "--format", "json", "-o", str(out)],
                          capture_output=True, text=True, timeout=300)
    seconds, peak_kib, code = proc.stdout.split()
    assert code == "0", proc.stderr
    return float(seconds), int(peak_kib) << 10


@pytest.fixture(scope="module")
def seed_cost(tmp_path_factory) -> tuple[float, int]:
    """The seed report's compare as it is: its time and peak memory."""
    folder = tmp_path_factory.mktemp("seed")
    return _measured_compare(_copy(USER_SEED, folder), folder / "out.json")


@pytest.mark.parametrize("states_rows", [True, False],
                         ids=["document-states-its-rows", "document-of-an-earlier-runner"])
def test_a_runner_column_that_inflates_to_a_gigabyte_is_refused_fast_in_bounded_memory(
        tmp_path, seed_cost, states_rows):
    """1 MB of base64 in the seed's runner document that inflates to 1 GiB (the probe's
    3.3 MB took 54 s and 10.4 GB, then an internal error). It is inflated no further than
    the rows the document says it holds (the runner writes records_rows), or, in a document
    of an earlier runner, than the most records it keeps (4 Mi of 36 bytes: 151 MB); then
    left out with a note, the rest of the report analysed."""
    rows = 0

    def bomb(doc):
        nonlocal rows
        rows = len(_packed_rows(doc)) // RECORD.size
        if states_rows:
            doc["records_rows"] = rows
        doc["records"] = base64.b64encode(_zeros_stream(1 << 30)).decode("ascii")

    path = _seed_with(tmp_path, bomb)
    assert rows > 0
    seconds, peak = _measured_compare(path, tmp_path / "out.json")
    base_seconds, base_peak = seed_cost
    inflated = rows * RECORD.size if states_rows else (4 << 20) * RECORD.size
    # What the bound lets through, and room for the steps' buffers (~17 MB each) and the
    # allocator; inflating the whole GiB costs more than 1 GiB.
    assert peak - base_peak < inflated + (64 << 20), (peak, base_peak)
    assert seconds < base_seconds + 10, (seconds, base_seconds)
    doc = json.loads((tmp_path / "out.json").read_text())
    notes = _timing_notes(doc)
    assert any(f"records inflates past {inflated} bytes" in n for n in notes), notes
    assert doc["user_timings"]["groups"] == []


def test_a_runner_column_with_more_rows_than_it_states_is_left_out(tmp_path):
    def fewer(doc):
        doc["records_rows"] = len(_packed_rows(doc)) // RECORD.size - 1

    notes = _timing_notes(_compare(_seed_with(tmp_path, fewer), tmp_path))
    assert any("records inflates past" in n for n in notes), notes


# -- crafted runner documents, left out with a note ---------------------------------

def _out_of_range_thread(doc):
    raw = bytearray(_packed_rows(doc))
    struct.pack_into("<H", raw, 16, len(doc["threads"]))  # row 0's thread code: one past
    doc["records"] = _packed(bytes(raw))


def _renamed_field(doc):
    doc["record_fields"] = ["thr" if f == "thread" else f for f in doc["record_fields"]]


def _text_for_a_number(doc):
    doc["hook_cost_ns"] = "947 ns"


def _pid_past_64_bits(doc):
    doc["pid"] = 1 << 70


def _scope_time_as_text(doc):
    doc["scopes"] = [{"kind": "pack", "before_ns": "x", "after_ns": 1, "thread": 0}]


def _out_of_range_context(doc):
    doc.update(runner_document_2(doc))
    raw = bytearray(_packed_rows(doc))
    struct.pack_into("<I", raw, 32, len(doc["contexts"]))  # row 0's context code: one past
    doc["records"] = _packed(bytes(raw))


def _argument_as_a_number(doc):
    doc.update(runner_document_2(doc))
    doc["contexts"][0][0][3] = [["size", 4096]]


def _scope_context_out_of_range(doc):
    doc.update(runner_document_2(doc))
    doc["scopes"] = [{"kind": "do_bench", "before_ns": 1, "after_ns": 2, "thread": 0,
                      "context": len(doc["contexts"])}]


@pytest.mark.parametrize("edit, problem", [
    (_out_of_range_thread, "records name a thread past the document's"),
    (_out_of_range_context, "records name a context past the document's"),
    (_argument_as_a_number, "contexts is not a list of contexts"),
    (_scope_context_out_of_range, "scope 0: its context is not one of the document's"),
    (_renamed_field, "not laid out as the runner's"),
    (_text_for_a_number, "hook_cost_ns is not a time"),
    (_pid_past_64_bits, "its pid is not a process id"),
    (_scope_time_as_text, "scope 0: before_ns and after_ns are not clock readings"),
], ids=["thread-index-out-of-range", "context-out-of-range", "argument-as-a-number",
        "scope-context-out-of-range", "renamed-field", "text-for-a-number", "pid-2^70",
        "scope-time-as-text"])
def test_a_crafted_runner_document_is_left_out_with_a_note(tmp_path, edit, problem):
    """Each was an internal error (IndexError, KeyError, TypeError, OverflowError), or passed
    text on as a number."""
    doc = _compare(_seed_with(tmp_path, edit), tmp_path)
    notes = _timing_notes(doc)
    assert any("cannot be read" in n and problem in n for n in notes), notes
    assert doc["user_timings"]["groups"] == []
    # The report's own tables are analysed as ever.
    assert doc["kernels"]


def test_the_same_runner_document_twice_is_read_once(tmp_path):
    """Was InvalidIndexError (each record twice in the index the intervals look up)."""
    path = _seed_with(tmp_path, again=True)
    _, original = _runner_doc(path)
    doc = _compare(path, tmp_path)
    assert any("a second document" in n for n in _timing_notes(doc))
    assert doc["user_timings"]["records"] == len(_packed_rows(original)) // RECORD.size
    assert doc["user_timings"]["groups"]


# -- crafted tables of the export ---------------------------------------------------

@pytest.mark.parametrize("table, what", [
    ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUDA API call"), ("OSRT_API", "OS runtime call")])
def test_calls_starting_at_the_least_int64_are_left_out_of_the_summaries(tmp_path, table,
                                                                         what):
    """end - start of such a call passes int64 (SQLite makes it a REAL): was OverflowError."""
    path = _copy(USER_SEED, tmp_path)
    _execute(path, f"UPDATE {table} SET start = {INT64_MIN} WHERE rowid % 50 = 0")
    broken = sql(path, f"SELECT count(*) FROM {table} WHERE start = ?", (INT64_MIN,))[0][0]
    assert broken
    doc = _compare(path, tmp_path)
    assert (f"{broken} {what}(s) last longer than 64 bits of ns hold (broken timestamps); "
            "left out of the summary") in doc["report"]["notes"]
    if table == "CUPTI_ACTIVITY_KIND_RUNTIME":
        kept = sql(path, f"SELECT count(*) FROM {table} WHERE start != ?", (INT64_MIN,))[0][0]
        assert sum(row["calls"] for row in doc["cuda_api"]["apis"]) == kept


def test_ranges_near_the_greatest_int64_analyse(tmp_path):
    """NVTX ranges moved to the end of int64's range: 19 of the 20 'backward' instances,
    which then launch no GPU work, so the rest's median GPU time is 0 and the first
    instance's ratio to it was a ZeroDivisionError (COLD_START)."""
    path = _copy(DDP_RANK0, tmp_path)
    _execute(path, f'UPDATE NVTX_EVENTS SET start = {INT64_MAX - 1000}, "end" = '
                   f"{INT64_MAX - 10} WHERE rowid % 5 = 0")
    moved = sql(path, "SELECT count(*), min(\"end\" - start) FROM NVTX_EVENTS AS e JOIN "
                      "StringIds AS s ON s.id = e.textId WHERE s.value = 'backward' AND start = ?",
                (INT64_MAX - 1000,))[0]
    assert moved == (19, 990)
    doc = _compare(path, tmp_path)
    cold = next(f for f in doc["findings"] if f["code"] == "COLD_START")
    backward = cold["evidence"]["by_range"]["nsyswrap:backward"]["metrics"]
    assert backward["gpu_busy_ns"]["median_rest_ns"] == 0
    assert backward["cpu_ns"]["median_rest_ns"] == 990


def test_a_null_global_tid_on_a_domain_names_no_range(tmp_path):
    """A domain created on no known thread (NULL globalTid): was ValueError (NaN to int).
    The other domain still names its ranges."""
    path = _copy(DDP_RANK0, tmp_path)
    _execute(path, "UPDATE NVTX_EVENTS SET globalTid = NULL WHERE eventType = 75 AND text = "
                   "'NCCL'")
    named = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 75 AND "
                      "globalTid IS NOT NULL AND text = 'nsyswrap'")[0][0]
    assert named == 1
    mine = sql(path, "SELECT count(*) FROM NVTX_EVENTS WHERE eventType = 59 AND domainId = "
                     "(SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = "
                     "'nsyswrap')")[0][0]
    doc = _compare(path, tmp_path)
    assert sum(r["count"] for r in doc["ranges"] if r["domain"] == "nsyswrap") == mine
    assert not any(r["domain"] == "NCCL" for r in doc["ranges"])


def test_null_threads_of_runtime_calls_are_unknown_threads(tmp_path):
    """NULL globalTid on runtime calls: was NaN cast to int64 (a warning, and the least
    int64 as the calls' thread and pid). The calls still count in the API summary."""
    path = _copy(USER_SEED, tmp_path)
    _execute(path, "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL WHERE rowid % 7 = 0")
    calls = sql(path, "SELECT count(*) FROM CUPTI_ACTIVITY_KIND_RUNTIME")[0][0]
    doc = _compare(path, tmp_path)
    assert sum(row["calls"] for row in doc["cuda_api"]["apis"]) == calls


def test_null_threads_of_marks_are_unknown_threads(tmp_path):
    """NULL globalTid on the marks: was NaN cast to int64. The runner's clock marks then
    belong to no process: its records cannot be placed in time, and that is said."""
    path = _copy(USER_SEED, tmp_path)
    _execute(path, "UPDATE NVTX_EVENTS SET globalTid = NULL WHERE eventType = 34")
    doc = _compare(path, tmp_path)
    assert any("none of the runner's clock marks is in the report" in n
               for n in _timing_notes(doc))


def test_a_process_without_a_pid_names_nothing(tmp_path):
    """NULL pid in PROCESSES: was TypeError (int(None))."""
    path = _copy(USER_SEED, tmp_path)
    _execute(path, "UPDATE PROCESSES SET pid = NULL")
    doc = _compare(path, tmp_path)
    assert doc["kernels"]


def test_a_gpu_without_a_minor_compute_capability_has_none(tmp_path):
    """NULL computeMinor: was '9.None', a ValueError in the FP32 GEMM check."""
    path = _copy(USER_SEED, tmp_path)
    _execute(path, "UPDATE TARGET_INFO_GPU SET computeMinor = NULL")
    names = [name for (name,) in sql(path, "SELECT DISTINCT name FROM TARGET_INFO_GPU")]
    doc = _compare(path, tmp_path)
    assert [g["name"] for g in doc["report"]["gpus"]] == names
    assert all(g["compute_capability"] is None for g in doc["report"]["gpus"])


# -- crafted harness marks ----------------------------------------------------------

def _set_string(path: Path, string_id: int, text: str) -> None:
    con = sqlite3.connect(path)
    try:
        con.execute("UPDATE StringIds SET value = ? WHERE id = ?", (text, string_id))
        con.commit()
    finally:
        con.close()


def _harness_mark(path: Path) -> tuple[int, dict]:
    """(StringIds id, document) of the first harness mark of a report."""
    sid, text = sql(path, "SELECT s.id, s.value FROM NVTX_EVENTS AS e JOIN StringIds AS s ON "
                          "s.id = e.textId WHERE s.value LIKE ? ORDER BY e.start",
                    ('{"nsyswrap":"nsyswrap.benchmark/1"%',))[0]
    return sid, json.loads(text)


def test_a_harness_mark_nested_past_the_recursion_limit_is_left_out(tmp_path):
    """Was RecursionError from json."""
    path = _copy(HARNESS, tmp_path)
    sid, mark = _harness_mark(path)
    deep = '{"nsyswrap":"nsyswrap.benchmark/1","x":' + "[" * 100_000 + "]" * 100_000 + "}"
    _set_string(path, sid, deep)
    doc = _compare(path, tmp_path)
    assert mark["name"] not in {b["benchmark"] for b in doc["benchmarks"]}
    assert doc["benchmarks"]


def test_a_harness_time_of_4300_digits_is_left_out_with_a_note(tmp_path):
    """Was OverflowError (math.isfinite of the integer)."""
    path = _copy(HARNESS, tmp_path)
    sid, mark = _harness_mark(path)
    mark["event_ns"][0] = int("9" * 4300)
    _set_string(path, sid, json.dumps(mark, separators=(",", ":")))
    doc = _compare(path, tmp_path)
    assert any(f"the harness mark '{mark['name']}'" in n and "event_ns" in n
               for n in doc["report"]["notes"]), doc["report"]["notes"]
    assert mark["name"] not in {b["benchmark"] for b in doc["benchmarks"]}


# -- diff of a crafted analysis.json --------------------------------------------------

@pytest.fixture(scope="module")
def analysis_json(tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("analysis") / "a.json"
    code, stderr = _cli("compare", CPU_2022, "--format", "json", "-o", out)
    assert code == 0, stderr
    return json.loads(out.read_text())


def _null_report(doc: dict) -> str:
    return json.dumps({**doc, "report": None})


def _nested(doc: dict) -> str:
    return json.dumps(doc)[:-1] + ',"x":' + "[" * 100_000 + "]" * 100_000 + "}"


def _digits(doc: dict) -> str:
    kernel = {"name": "k", "median_ns": int("9" * 4300), "count": 1}
    return json.dumps({**doc, "kernels": [kernel]})


def _count_as_text(doc: dict) -> str:
    ranges = [{**r, "count": "many"} for r in doc["ranges"]]
    return json.dumps({**doc, "ranges": ranges})


@pytest.mark.parametrize("crafted, problem", [
    (_null_report, "report is not an object"),
    (_nested, "not readable as JSON (JSON nested too deeply)"),
    (_digits, "kernels[0].median_ns is an integer past 64 bits"),
    (_count_as_text, "ranges[0].count is 'many'"),
], ids=["report-null", "100k-nesting-levels", "4300-digit-integer", "text-for-a-count"])
def test_diff_of_a_crafted_analysis_json_is_refused_in_one_line(tmp_path, analysis_json,
                                                                crafted, problem):
    """Each was an internal error (AttributeError, RecursionError, OverflowError,
    ValueError)."""
    assert analysis_json["ranges"]
    base, new = tmp_path / "base.json", tmp_path / "new.json"
    base.write_text(json.dumps(analysis_json))
    new.write_text(crafted(analysis_json))
    code, stderr = _cli("diff", base, new)
    assert code == 2
    assert problem in _refused(stderr)
